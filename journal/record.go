package journal

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"unicode/utf8"
)

// Seal is a cell's signature over a chain head: the hash of the newest entry
// of a commit, which commits to every entry before it.
//
// A round seal (Size >= 2) is one signature over the root of an RFC 6962
// Merkle tree whose leaves are the heads of the commits a store wrote in one
// round; Index and Path prove this head's leaf (see round.go).
type Seal struct {
	Cell []byte `cbor:"1,keyasint"`
	Sig  []byte `cbor:"2,keyasint"`
	// Index, Size and Path are set in round seals only.
	Index uint64   `cbor:"3,keyasint,omitempty"`
	Size  uint64   `cbor:"4,keyasint,omitempty"`
	Path  [][]byte `cbor:"5,keyasint,omitempty"`
}

// Record is what a Store keeps for one entry: the entry's canonical bytes
// and, when the entry was the head of a commit, the seal over it.
type Record struct {
	_     struct{} `cbor:",toarray"`
	Entry []byte
	Seal  *Seal
}

// sealContext separates journal head signatures from every other use of a
// cell key.
const sealContext = "agentrt/journal/v1 head\x00"

// SealMessage returns the bytes a cell signs to seal the head at seq of run,
// whose entry hash is head.
func SealMessage(run RunID, seq uint64, head []byte) []byte {
	m := make([]byte, 0, len(sealContext)+len(run)+8+len(head))
	m = append(m, sealContext...)
	m = append(m, run[:]...)
	m = binary.BigEndian.AppendUint64(m, seq)
	return append(m, head...)
}

// EncodeEntry returns the canonical CBOR of e, the bytes abi.Marshal(e)
// returns. The error is always nil; it stays for callers written against
// abi.Marshal.
func EncodeEntry(e *Entry) ([]byte, error) {
	return appendEntry(make([]byte, 0, entrySize(e)), e), nil
}

// DecodeEntry decodes canonical CBOR into an entry and checks its shape.
//
// It accepts and rejects exactly what abi.Unmarshal does, with the same
// errors. The canonical encoding is read by a parser that knows the format
// (codec.go); anything else goes to the strict decoder, so that it is
// refused with the error abi.Unmarshal gives it.
func DecodeEntry(b []byte) (*Entry, error) { return decodeEntry(b, false) }

// decodeEntry is DecodeEntry; owned says the caller gives b up, so the
// entry's byte fields may point into it instead of into a copy.
func decodeEntry(b []byte, owned bool) (*Entry, error) {
	e := new(Entry)
	if err := decodeEntryInto(b, owned, e); err != nil {
		return nil, err
	}
	return e, nil
}

// decodeEntryInto is decodeEntry into a zero e.
func decodeEntryInto(b []byte, owned bool, e *Entry) error {
	if len(b) == 0 {
		return fmt.Errorf("empty entry")
	}
	parse := parseEntry
	if owned {
		parse = parseEntryOwned
	}
	if !parse(b, e) {
		*e = Entry{} // the strict decoder fills what it finds, over what the parser left
		if err := decodeStrict(b, e); err != nil {
			return err
		}
	}
	return e.check()
}

func (e *Entry) check() error {
	switch {
	case e.Version != FormatVersion:
		return fmt.Errorf("unknown format version %d", e.Version)
	case !e.Phase.Valid():
		return fmt.Errorf("unknown phase %d", e.Phase)
	case len(e.Prev) != HashSize:
		return fmt.Errorf("prev is %d bytes, want %d", len(e.Prev), HashSize)
	case len(e.Cell) != ed25519.PublicKeySize:
		return fmt.Errorf("cell key is %d bytes, want %d", len(e.Cell), ed25519.PublicKeySize)
	case (e.Phase == PhaseStart) != (e.Header != nil):
		return fmt.Errorf("a header belongs to the start entry and only there")
	case (e.Phase == PhaseEnd) != (e.End != nil):
		return fmt.Errorf("an end record belongs to the end entry and only there")
	case e.Phase == PhaseStart && e.Seq != 0, e.Phase != PhaseStart && e.Seq == 0:
		return fmt.Errorf("the start entry is seq 0 and only seq 0 is a start entry")
	case e.Header != nil && e.Header.Fork != nil && (e.Header.Fork.Parent.IsZero() || len(e.Header.Fork.Entry) != HashSize):
		return fmt.Errorf("the header's fork names no parent run or no %d-byte entry hash", HashSize)
	case e.Header != nil && e.Header.Origin != nil && (e.Header.Origin.Kind == "" || e.Header.Origin.ID == ""):
		return fmt.Errorf("the header's origin has no kind or no id")
	case e.Header != nil && e.Header.Trace != nil && !e.Header.Trace.Valid():
		return fmt.Errorf("the header's trace names no 16-byte trace id or no 8-byte span id (all-zero ids are invalid)")
	}
	if !utf8.ValidString(e.Op) || !utf8.ValidString(e.Key) ||
		(e.Header != nil && !utf8.ValidString(e.Header.ModuleName)) ||
		(e.Header != nil && e.Header.Fork != nil && (!utf8.ValidString(e.Header.Fork.Provider) || !utf8.ValidString(e.Header.Fork.Model))) ||
		(e.Header != nil && e.Header.Origin != nil && (!utf8.ValidString(e.Header.Origin.Kind) || !utf8.ValidString(e.Header.Origin.ID))) ||
		(e.End != nil && (!utf8.ValidString(e.End.Error) || !utf8.ValidString(string(e.End.Status)))) {
		return fmt.Errorf("a text field is not valid UTF-8")
	}
	switch e.Phase {
	case PhaseLease:
		if e.Epoch == 0 || e.Step != 0 || e.Op != "" {
			return fmt.Errorf("a lease entry has an epoch and no step or op")
		}
	case PhaseIntent, PhaseExecuting, PhaseCompleted, PhaseFailed:
		if e.Step == 0 || e.Op == "" {
			return fmt.Errorf("%s entry without step or op", e.Phase)
		}
		if len(e.InputHash) != HashSize {
			return fmt.Errorf("%s entry without a %d-byte input hash", e.Phase, HashSize)
		}
	}
	if e.Phase == PhaseCompleted || e.Phase == PhaseFailed {
		if len(e.OutputHash) != HashSize {
			return fmt.Errorf("%s entry without a %d-byte output hash", e.Phase, HashSize)
		}
	}
	if len(e.Gate) > 0 && e.Phase != PhaseIntent && e.Phase != PhaseCompleted && e.Phase != PhaseFailed {
		return fmt.Errorf("a gate record belongs to a call's intent or its one outcome entry, not to the %s entry", e.Phase)
	}
	if len(e.Approval) > 0 && e.Phase != PhaseIntent && e.Phase != PhaseExecuting && e.Phase != PhaseCompleted && e.Phase != PhaseFailed {
		return fmt.Errorf("an approval record belongs to a call's entries, not to the %s entry", e.Phase)
	}
	if len(e.Budget) > 0 && (e.Phase == PhaseStart || e.Phase == PhaseLease) {
		return fmt.Errorf("budget records belong to a call's entries or the end, not to the %s entry", e.Phase)
	}
	return nil
}

// AppendRecord appends the canonical CBOR of r to dst, and RecordSize is
// its length: a store packing many records into one value encodes each
// straight into place.
func AppendRecord(dst []byte, r *Record) []byte { return appendRecord(dst, r) }

// RecordSize returns the length of the canonical CBOR of r.
func RecordSize(r *Record) int { return recordSize(r) }

// EncodeRecord returns the canonical CBOR of r, the bytes abi.Marshal(r)
// returns. The error is always nil, as for EncodeEntry.
func EncodeRecord(r *Record) ([]byte, error) {
	return appendRecord(make([]byte, 0, recordSize(r)), r), nil
}

// DecodeRecord decodes a stored record. It checks the record's shape, not the
// entry inside it; see DecodeEntry and Verify.
func DecodeRecord(b []byte) (*Record, error) { return decodeRecord(b, false) }

// decodeRecord is DecodeRecord; owned says the caller gives b up.
func decodeRecord(b []byte, owned bool) (*Record, error) {
	r := new(Record)
	if err := decodeRecordInto(b, owned, r); err != nil {
		return nil, err
	}
	return r, nil
}

// decodeRecordInto is decodeRecord into a zero r.
func decodeRecordInto(b []byte, owned bool, r *Record) error {
	if len(b) == 0 {
		return fmt.Errorf("empty record")
	}
	parse := parseRecord
	if owned {
		parse = parseRecordOwned
	}
	if !parse(b, r) {
		*r = Record{} // as in DecodeEntry
		if err := decodeStrict(b, r); err != nil {
			return err
		}
	}
	return r.Seal.check()
}

// check applies the shape rules of a seal (nil is no seal, and fine).
func (s *Seal) check() error {
	if s == nil {
		return nil
	}
	if len(s.Cell) != ed25519.PublicKeySize || len(s.Sig) != ed25519.SignatureSize {
		return fmt.Errorf("seal has a %d-byte key and a %d-byte signature", len(s.Cell), len(s.Sig))
	}
	if s.Size == 1 || s.Index >= max(s.Size, 1) || len(s.Path) > 64 || (s.Size == 0 && len(s.Path) > 0) {
		return fmt.Errorf("seal has round index %d of %d with %d proof hashes", s.Index, s.Size, len(s.Path))
	}
	for _, h := range s.Path {
		if len(h) != HashSize {
			return fmt.Errorf("seal's round proof holds a %d-byte hash", len(h))
		}
	}
	return nil
}

// emptySum is the SHA-256 of nothing, the hash of every empty payload.
var emptySum = Sum(nil)

// hashOK reports whether sum is the SHA-256 of data.
func hashOK(sum, data []byte) bool {
	if len(data) == 0 {
		return bytes.Equal(sum, emptySum)
	}
	h := sha256.Sum256(data)
	return bytes.Equal(sum, h[:])
}
