package badgerstore_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/internal/synthconv"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/badgerstore"
)

// conversationRun writes a run of conv's calls as effects whose requests
// and responses are in blob form, each call one commit with its blobs, and
// returns the run and the key that sealed it.
func conversationRun(t *testing.T, st *badgerstore.Store, conv *synthconv.Conversation) (journal.RunID, ed25519.PrivateKey) {
	t.Helper()
	ctx := context.Background()
	_, key, _ := ed25519.GenerateKey(nil)
	run := journal.NewRunID(time.Now())
	w := journal.NewWriter(st, journal.NewChain(run, key))
	add := func(e *journal.Entry) {
		if err := w.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	add(&journal.Entry{Phase: journal.PhaseStart, Header: &journal.Header{ModuleSHA256: make([]byte, 32), ABI: 1, Seed: make([]byte, 32)}})
	for i := range conv.Calls() {
		req, resp := conv.Request(i), conv.Response(i)
		p, err := journal.EncodeConversation(req, "messages", 1024)
		if err != nil {
			t.Fatal(err)
		}
		rp := journal.Externalize(resp, 1024)
		step, in := uint64(i+1), journal.Sum(req)
		add(&journal.Entry{Phase: journal.PhaseIntent, Step: step, Op: "test.chat", InputHash: in, Request: p.Stored})
		add(&journal.Entry{Phase: journal.PhaseExecuting, Step: step, Op: "test.chat", InputHash: in, Key: "k"})
		w.AddBlobs(p.Blobs...)
		if err := w.Commit(ctx, nil, true); err != nil {
			t.Fatal(err)
		}
		add(&journal.Entry{Phase: journal.PhaseCompleted, Step: step, Op: "test.chat", InputHash: in, OutputHash: journal.Sum(resp), Response: rp.Stored})
		w.AddBlobs(rp.Blobs...)
	}
	add(&journal.Entry{Phase: journal.PhaseEnd, End: &journal.End{Status: journal.StatusCompleted, Steps: uint64(conv.Calls())}})
	if err := w.Commit(ctx, &journal.RunMeta{ID: run, Status: journal.StatusCompleted, Cell: key.Public().(ed25519.PublicKey)}, true); err != nil {
		t.Fatal(err)
	}
	return run, key
}

// TestChangedBlobIsABlobError: a blob whose stored bytes were changed is
// a *BlobError naming it (committing and reading blobs is in the
// conformance suite).
func TestChangedBlobIsABlobError(t *testing.T) {
	ctx := context.Background()
	st := open(t)
	run := journal.NewRunID(time.Now())
	blob := journal.NewBlob(bytes.Repeat([]byte("payload "), 300))
	if err := st.Commit(ctx, &journal.Batch{Run: run, Records: chainOf(t, run, 2), Blobs: []journal.Blob{blob}}); err != nil {
		t.Fatal(err)
	}
	if err := st.RewriteBlob(blob.Sum, func(b []byte) []byte { b[7] ^= 1; return b }); err != nil {
		t.Fatal(err)
	}
	_, err := st.Blob(ctx, blob.Sum)
	var be *journal.BlobError
	if !errors.As(err, &be) || be.Missing || !bytes.Equal(be.Sum, blob.Sum) || !strings.Contains(err.Error(), journal.SumHex(blob.Sum)) {
		t.Fatalf("a changed blob: %v", err)
	}
}

// TestChangedBlobInAStore: one byte of a real blob changed in a real
// badger store makes the run's verification (replay, export and store
// check read through it) fail with class blob naming the blob and the
// entry that references it first; store check reports the blob and the
// run; salvage copies the runs that verify with their blobs, and the
// copies verify in the new store.
func TestChangedBlobInAStore(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "store")
	st, err := badgerstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	conv := synthconv.New(8, 16000, 3)
	run, _ := conversationRun(t, st, conv)
	other, _ := conversationRun(t, st, synthconv.New(3, 6000, 4))
	sum, err := journal.VerifyStore(ctx, st, run, journal.TrustAny)
	if err != nil {
		t.Fatal(err)
	}
	if sum.BlobRefs == 0 {
		t.Fatal("the run's verification resolved no blob")
	}
	text, _ := synthconvText(conv.Users[5])
	target := journal.Sum(text)
	if err := st.RewriteBlob(target, func(b []byte) []byte { b[len(b)/3] ^= 0x01; return b }); err != nil {
		t.Fatal(err)
	}
	_, err = journal.VerifyStore(ctx, st, run, journal.TrustAny)
	var ve *journal.VerifyError
	var be *journal.BlobError
	if !errors.As(err, &ve) || !errors.Is(err, journal.ErrBlob) || !errors.As(ve.Err, &be) {
		t.Fatalf("verify after the change: %v", err)
	}
	// Call 5 (step 6) is the first whose request holds user message 5:
	// its intent is entry 1 + 3*5.
	if ve.Seq != 16 || ve.Step != 6 || be.Missing || !bytes.Equal(be.Sum, target) {
		t.Fatalf("the failure names entry %d, step %d, blob %x; want entry 16, step 6, blob %x", ve.Seq, ve.Step, be.Sum, target)
	}
	if _, err := journal.VerifyStore(ctx, st, other, journal.TrustAny); err != nil {
		t.Fatalf("the other run shares no changed blob: %v", err)
	}
	st.Close()

	rep, err := badgerstore.Check(ctx, dir, badgerstore.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || len(rep.BadBlobs) != 1 || rep.BadBlobs[0].Sum != journal.SumHex(target) || rep.Blobs == 0 {
		t.Fatalf("check: ok %v, %d blobs, bad %+v", rep.OK, rep.Blobs, rep.BadBlobs)
	}
	for _, r := range rep.Runs {
		switch r.Run {
		case run.String():
			if r.OK || !strings.Contains(r.Problem, journal.SumHex(target)) || !strings.Contains(r.Problem, "entry 16") {
				t.Errorf("check of the run: %+v", r)
			}
		case other.String():
			if !r.OK {
				t.Errorf("check of the other run: %+v", r)
			}
		}
	}

	out := filepath.Join(t.TempDir(), "salvaged")
	srep, err := badgerstore.Salvage(ctx, dir, out, badgerstore.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = srep
	st2, err := badgerstore.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	if _, err := journal.VerifyStore(ctx, st2, other, journal.TrustAny); err != nil {
		t.Fatalf("the salvaged run: %v", err)
	}
	if _, err := journal.VerifyStore(ctx, st2, run, journal.TrustAny); !errors.Is(err, journal.ErrIncomplete) {
		t.Fatalf("the damaged run, salvaged short: %v, want incomplete", err)
	}
}

// synthconvText is the encoding of a message's text, the blob it is.
func synthconvText(s string) ([]byte, error) { return abi.Marshal(s) }
