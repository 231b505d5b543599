package journal_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/journal"
)

// Fuzz targets for every decoder of the format. Their seeds are the
// records of the vectors, so plain `go test` runs each target over every
// vector; `go test -fuzz=FuzzX` explores from there.

// vectorRecords returns every distinct record of the vectors.
func vectorRecords(tb testing.TB) [][]byte {
	seen := map[string]bool{}
	var out [][]byte
	for _, v := range loadVectors(tb) {
		for _, r := range v.records {
			if !seen[string(r)] {
				seen[string(r)] = true
				out = append(out, r)
			}
		}
	}
	return out
}

func FuzzDecodeRecord(f *testing.F) {
	for _, r := range vectorRecords(f) {
		f.Add(r)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := journal.DecodeRecord(b)
		if err != nil {
			return
		}
		if r.Seal != nil && (len(r.Seal.Cell) != ed25519.PublicKeySize || len(r.Seal.Sig) != ed25519.SignatureSize) {
			t.Fatalf("accepted a seal with a %d-byte key and a %d-byte signature", len(r.Seal.Cell), len(r.Seal.Sig))
		}
		again, err := journal.EncodeRecord(r)
		if err != nil {
			t.Fatalf("decoded record does not encode: %v", err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("decode then encode changed the bytes:\n in  %x\n out %x", b, again)
		}
	})
}

func FuzzDecodeEntry(f *testing.F) {
	for _, r := range vectorRecords(f) {
		if rec, err := journal.DecodeRecord(r); err == nil {
			f.Add(rec.Entry)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := journal.DecodeEntry(b)
		if err != nil {
			return
		}
		switch {
		case e.Version != journal.FormatVersion:
			t.Fatalf("accepted format version %d", e.Version)
		case !e.Phase.Valid():
			t.Fatalf("accepted phase %d", e.Phase)
		case len(e.Prev) != journal.HashSize || len(e.Cell) != ed25519.PublicKeySize:
			t.Fatalf("accepted a %d-byte prev and a %d-byte cell", len(e.Prev), len(e.Cell))
		case (e.Seq == 0) != (e.Phase == journal.PhaseStart) || (e.Header != nil) != (e.Phase == journal.PhaseStart):
			t.Fatalf("accepted a %s entry at seq %d with header %v", e.Phase, e.Seq, e.Header != nil)
		}
		again, err := journal.EncodeEntry(e)
		if err != nil {
			t.Fatalf("decoded entry does not encode: %v", err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("decode then encode changed the bytes:\n in  %x\n out %x", b, again)
		}
	})
}

// frame joins records as the FuzzVerifier input: each one prefixed with its
// length as two big-endian bytes.
func frame(records [][]byte) []byte {
	var b []byte
	for _, r := range records {
		b = binary.BigEndian.AppendUint16(b, uint16(len(r)))
		b = append(b, r...)
	}
	return b
}

// unframe splits a FuzzVerifier input into records. A length that runs past
// the end takes what is left.
func unframe(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		if len(b) < 2 {
			return append(out, b)
		}
		n := int(binary.BigEndian.Uint16(b))
		b = b[2:]
		n = min(n, len(b))
		out = append(out, b[:n])
		b = b[n:]
	}
	return out
}

func FuzzVerifier(f *testing.F) {
	for _, v := range loadVectors(f) {
		f.Add(frame(v.records))
	}
	trusted := []ed25519.PublicKey{pub(cellA), pub(cellB)}
	f.Fuzz(func(t *testing.T, in []byte) {
		records := unframe(in)
		v := journal.NewVerifier(journal.TrustKeys(trusted...))
		var err error
		for _, r := range records {
			if err = v.Add(r); err != nil {
				break
			}
		}
		var sum *journal.Summary
		if err == nil {
			sum, err = v.Finish()
		}
		if err != nil {
			var verr *journal.VerifyError
			if !errors.As(err, &verr) {
				t.Fatalf("error is not a *VerifyError: %v", err)
			}
			if !knownClass(verr.Class) {
				t.Fatalf("error of unknown class %v: %v", verr.Class, err)
			}
			if verr.Seq > uint64(len(records)) {
				t.Fatalf("error names entry %d of %d records: %v", verr.Seq, len(records), err)
			}
			return
		}
		checkAccepted(t, records, sum, trusted)
	})
}

func knownClass(c error) bool {
	for _, k := range classes {
		if c == k {
			return true
		}
	}
	return false
}

// checkAccepted re-derives, independently of the Verifier, what an accepted
// journal must satisfy: every record and entry decodes, seqs count from 0,
// each prev is the hash of the entry before, the last record is sealed and
// every seal verifies under the entry's cell, which is trusted.
func checkAccepted(t *testing.T, records [][]byte, sum *journal.Summary, trusted []ed25519.PublicKey) {
	t.Helper()
	if sum.Entries != uint64(len(records)) || len(records) == 0 {
		t.Fatalf("accepted %d records, summary counts %d entries", len(records), sum.Entries)
	}
	prev := make([]byte, journal.HashSize)
	var last *journal.Record
	for i, raw := range records {
		r, err := journal.DecodeRecord(raw)
		if err != nil {
			t.Fatalf("accepted a journal whose record %d does not decode: %v", i, err)
		}
		e, err := journal.DecodeEntry(r.Entry)
		if err != nil {
			t.Fatalf("accepted a journal whose entry %d does not decode: %v", i, err)
		}
		if e.Seq != uint64(i) || e.Run != sum.Run || !bytes.Equal(e.Prev, prev) {
			t.Fatalf("accepted entry %d with seq %d, run %s, prev %x (want prev %x)", i, e.Seq, e.Run, e.Prev, prev)
		}
		prev = journal.Sum(r.Entry)
		if r.Seal != nil {
			// A seal of one commit is checked here from first principles; a
			// round seal's Merkle proof through the library's VerifySeal.
			ok := ed25519.Verify(r.Seal.Cell, journal.SealMessage(e.Run, e.Seq, prev), r.Seal.Sig)
			if r.Seal.Size > 0 {
				ok = journal.VerifySeal(r.Seal, e.Run, e.Seq, prev) == nil
			}
			if !ok || !bytes.Equal(r.Seal.Cell, e.Cell) || !journal.TrustKeys(trusted...)(r.Seal.Cell) {
				t.Fatalf("accepted entry %d with a seal that is bad, foreign or untrusted", i)
			}
		}
		last = r
	}
	if last.Seal == nil {
		t.Fatalf("accepted a journal whose last entry carries no seal")
	}
	if !bytes.Equal(sum.Head, prev) {
		t.Fatalf("summary head %x, want %x", sum.Head, prev)
	}
}

// TestFrame checks the FuzzVerifier input format against itself, so that
// the seeds really are the vectors' records.
func TestFrame(t *testing.T) {
	recs := [][]byte{{0x82, 0x40, 0xf6}, {}, bytes.Repeat([]byte{7}, 300)}
	got := unframe(frame(recs))
	if len(got) != len(recs) {
		t.Fatalf("got %d records, want %d", len(got), len(recs))
	}
	for i := range recs {
		if !bytes.Equal(got[i], recs[i]) {
			t.Errorf("record %d: got %x, want %x", i, got[i], recs[i])
		}
	}
	if got := unframe([]byte{0x00, 0x05, 0x01}); len(got) != 1 || !bytes.Equal(got[0], []byte{0x01}) {
		t.Errorf("a short last frame: got %x, want one record 01", got)
	}
}

// TestBugLinkWritesUndecodableEntry shows that Chain.Link accepts an entry
// whose canonical bytes DecodeEntry rejects: a text field (here the end
// record's error message, which the host fills from the guest's failure)
// that is not valid UTF-8 is encoded as a CBOR text string as it is, and the
// decoder, which rejects invalid UTF-8, then refuses it. A run whose journal
// holds such an entry can never verify. Link should refuse the entry.
// TestLinkNeverWritesUndecodableEntry: Link refuses what DecodeEntry would
// reject (here, invalid UTF-8 in a text field), so no run is sealed that can
// never be verified.
func TestLinkNeverWritesUndecodableEntry(t *testing.T) {
	c := journal.NewChain(runX, cellA)
	if _, err := c.Link(startEntry(t)); err != nil {
		t.Fatal(err)
	}
	end := &journal.Entry{Phase: journal.PhaseEnd, Time: t0.UnixNano(),
		End: &journal.End{Status: journal.StatusFailed, Error: "guest trapped: \xff"}}
	r, err := c.Link(end)
	if err != nil && strings.Contains(err.Error(), "UTF-8") {
		return // Link refused the entry, as it should
	}
	if err != nil {
		t.Fatalf("Link refused the entry for another reason: %v", err)
	}
	if _, err := journal.DecodeEntry(r.Entry); err != nil {
		t.Fatalf("Link wrote entry %d, which DecodeEntry rejects: %v", end.Seq, err)
	}
}
