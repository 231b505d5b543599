package journal_test

import (
	"context"
	"crypto/ed25519"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/badgerstore"
)

// TestInspectMarksWhatNoValidSealCovers: a seal covers the entries before
// it through intact links only. With entry 3 altered (so entry 4's link to
// it breaks) and the seal on entry 4 broken, the seal on entry 6 still
// covers 4..6, and nothing valid covers 2 and 3; Inspect goes on past both
// faults and marks exactly those.
func TestInspectMarksWhatNoValidSealCovers(t *testing.T) {
	st, err := badgerstore.Open(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	_, key, _ := ed25519.GenerateKey(nil)
	run := journal.NewRunID(time.Now())
	c := journal.NewChain(run, key)
	var recs []journal.Record
	for i := range 7 {
		e := &journal.Entry{Phase: journal.PhaseStart, Header: &journal.Header{ModuleSHA256: make([]byte, 32), ABI: 1, Seed: make([]byte, 32)}}
		if i > 0 {
			req := []byte{byte(i)}
			e = &journal.Entry{Phase: journal.PhaseCompleted, Step: uint64(i), Op: "run.log", Request: req, InputHash: journal.Sum(req), OutputHash: journal.Sum(nil)}
		}
		r, err := c.Link(e)
		if err != nil {
			t.Fatal(err)
		}
		if i == 1 || i == 4 || i == 6 { // commits: 0-1, 2-4, 5-6
			r.Seal = c.Seal()
		}
		recs = append(recs, r)
	}
	recs[4].Seal.Sig[0] ^= 1
	e3, err := journal.DecodeEntry(recs[3].Entry)
	if err != nil {
		t.Fatal(err)
	}
	e3.Time++
	if recs[3].Entry, err = journal.EncodeEntry(e3); err != nil {
		t.Fatal(err)
	}
	if err := st.Commit(ctx, &journal.Batch{Run: run, Records: recs}); err != nil {
		t.Fatal(err)
	}
	got, err := journal.Inspect(ctx, st, run, journal.TrustKeys(key.Public().(ed25519.PublicKey)))
	if err != nil {
		t.Fatal(err)
	}
	want := []bool{true, true, false, false, true, true, true}
	for i, in := range got {
		if in.Err != nil || in.SigOK != want[i] {
			t.Errorf("entry %d: sig_ok %v (err %v), want %v", i, in.SigOK, in.Err, want[i])
		}
	}
	if !got[4].Sealed || got[4].SealOK || !got[6].SealOK || got[4].LinkOK || !got[3].LinkOK {
		t.Errorf("entry 4: sealed %v, seal ok %v, link ok %v; entry 3 link ok %v; entry 6 seal ok %v",
			got[4].Sealed, got[4].SealOK, got[4].LinkOK, got[3].LinkOK, got[6].SealOK)
	}
}
