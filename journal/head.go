package journal

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Head is a journal's head record, which a store that implements Heads
// writes with every commit: the number of entries the journal holds and
// the hash of its last entry. Every read of the journal must reach it
// (Reaches), so that a lost suffix reads as damage, never as a shorter
// journal.
type Head struct {
	// Len is the number of entries.
	Len uint64
	// Last is the entry hash of the last entry; nil in a head record of
	// the first format, which carried the length only.
	Last []byte
}

// EncodeHead returns the bytes of the head record of a journal of n
// entries whose last entry hashes to last: n in 8 bytes, big-endian, then
// last.
func EncodeHead(n uint64, last []byte) []byte {
	return append(binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(last)), n), last...)
}

// DecodeHead decodes the head record v of run: 8 bytes, or 8 and a hash.
func DecodeHead(run RunID, v []byte) (Head, error) {
	if len(v) != 8 && len(v) != 8+HashSize {
		return Head{}, fmt.Errorf("%w: the head record of %s is %d bytes, not 8 or %d", ErrIncomplete, run, len(v), 8+HashSize)
	}
	h := Head{Len: binary.BigEndian.Uint64(v)}
	if len(v) > 8 {
		h.Last = bytes.Clone(v[8:])
	}
	return h, nil
}

// Gap reports the entries of run from on missing from a journal of head h.
func (h Head) Gap(run RunID, from uint64, why string) *GapError {
	return &GapError{Run: run, From: from, To: max(h.Len, from+1), Length: h.Len, Reason: why}
}

// Reaches checks that a read of run's records that ended before entry
// next, whose last record is last, read the whole journal h describes;
// found says whether the store holds a head record for run at all, and
// where says where the records are ("stored", "on the stream") in the
// errors. A read short of the head is a *GapError; one past it, or whose
// last entry is not the one the head names, is ErrIncomplete.
func (h Head) Reaches(run RunID, found bool, next uint64, last []byte, where string) error {
	switch {
	case !found && next > 0:
		return fmt.Errorf("%w: run %s has %d entries %s but no head record (its index is damaged)", ErrIncomplete, run, next, where)
	case next < h.Len:
		why := fmt.Sprintf("the records %s end after entry %d", where, int64(next)-1)
		if next == 0 {
			why = "no record of it is " + where
		}
		return h.Gap(run, next, why)
	case next > h.Len:
		return fmt.Errorf("%w: run %s has %d entries %s, and its head record names %d (the head record is stale: damage)",
			ErrIncomplete, run, next, where, h.Len)
	case h.Last != nil && next > 0:
		rec, err := DecodeRecord(last)
		if err != nil {
			return nil // the verifier names an undecodable record
		}
		if got := Sum(rec.Entry); !bytes.Equal(got, h.Last) {
			return fmt.Errorf("%w: run %s: the last entry %s, %d, hashes to %x; its head record names %x (damage)",
				ErrIncomplete, run, where, next-1, got[:8], h.Last[:8])
		}
	}
	return nil
}
