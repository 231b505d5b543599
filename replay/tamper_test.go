package replay_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/examples/crawler/site"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/badgerstore"
	"github.com/agentrt/agentrt/replay"
)

// crawl records one run of the crawler example on a fresh store.
func crawl(t *testing.T) (*testutil.Env, journal.RunID, []byte) {
	t.Helper()
	code := testutil.BuildGo(t, "examples/crawler")
	srv := httptest.NewServer(site.Handler())
	t.Cleanup(srv.Close)
	g, err := host.LoadGrant(filepath.Join(testutil.RepoRoot(), "examples/crawler/grant.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	env := testutil.NewEnv(t, host.Deps{}, host.Config{})
	res, err := env.Host.Run(context.Background(), host.RunSpec{Code: code, Grant: g, Input: []byte(`{"start":"` + srv.URL + `/"}`)})
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("crawl: %v %+v", err, res)
	}
	return env, res.Run, code
}

func replayRun(env *testutil.Env, run journal.RunID, code, newCode []byte) error {
	ctx := context.Background()
	j, err := replay.Load(ctx, env.Store, run, journal.TrustKeys(env.Key.Public().(ed25519.PublicKey)))
	if err != nil {
		return err
	}
	_, err = j.Replay(ctx, env.Engine, code, replay.Options{Code: newCode})
	return err
}

// editRecord decodes, changes and writes back the stored record seq of run.
func editRecord(t *testing.T, st *badgerstore.Store, run journal.RunID, seq uint64, edit func(*journal.Record, *journal.Entry)) {
	t.Helper()
	err := st.RewriteJournal(run, func(recs [][]byte) [][]byte {
		rec, err := journal.DecodeRecord(recs[seq])
		if err != nil {
			t.Fatal(err)
		}
		e, err := journal.DecodeEntry(rec.Entry)
		if err != nil {
			t.Fatal(err)
		}
		edit(rec, e)
		if recs[seq], err = journal.EncodeRecord(rec); err != nil {
			t.Fatal(err)
		}
		return recs
	})
	if err != nil {
		t.Fatal(err)
	}
}

// find returns the seq of the first entry for which match holds.
func find(t *testing.T, env *testutil.Env, run journal.RunID, match func(*journal.Record, *journal.Entry) bool) (uint64, *journal.Entry) {
	t.Helper()
	var seq uint64
	var found *journal.Entry
	errFound := errors.New("found")
	err := env.Store.Records(context.Background(), run, 0, func(s uint64, raw []byte) error {
		rec, _ := journal.DecodeRecord(raw)
		e, _ := journal.DecodeEntry(rec.Entry)
		if match(rec, e) {
			seq, found = s, e
			return errFound
		}
		return nil
	})
	if !errors.Is(err, errFound) {
		t.Fatal("no entry matches")
	}
	return seq, found
}

func wantVerifyError(t *testing.T, err error, class error, seq uint64, step uint64) {
	t.Helper()
	var ve *journal.VerifyError
	if !errors.As(err, &ve) || !errors.Is(err, class) {
		t.Fatalf("got %v, want a %v error", err, class)
	}
	if ve.Seq != seq || ve.Step != step {
		t.Fatalf("error names entry %d step %d, want entry %d step %d: %v", ve.Seq, ve.Step, seq, step, err)
	}
	if step > 0 && !strings.Contains(err.Error(), "step ") {
		t.Fatalf("error does not name the step: %v", err)
	}
}

func isFetch(_ *journal.Record, e *journal.Entry) bool {
	return e.Op == "http.request" && e.Phase == journal.PhaseCompleted
}

func TestTamperAlteredResponse(t *testing.T) {
	env, run, code := crawl(t)
	seq, e := find(t, env, run, isFetch)
	editRecord(t, env.Store, run, seq, func(r *journal.Record, e *journal.Entry) {
		var resp abi.HTTPResponse
		if err := abi.Unmarshal(e.Response, &resp); err != nil {
			t.Fatal(err)
		}
		resp.Body = []byte(strings.Replace(string(resp.Body), "Welcome", "Welc0me", 1))
		e.Response, _ = abi.Marshal(&resp)
		r.Entry, _ = journal.EncodeEntry(e)
	})
	wantVerifyError(t, replayRun(env, run, code, nil), journal.ErrHash, seq, e.Step)
}

func TestTamperAlteredResponseWithItsHash(t *testing.T) {
	env, run, code := crawl(t)
	seq, e := find(t, env, run, func(r *journal.Record, e *journal.Entry) bool { return isFetch(r, e) && r.Seal == nil })
	editRecord(t, env.Store, run, seq, func(r *journal.Record, e *journal.Entry) {
		e.Response = append([]byte(nil), e.Response...)
		e.Response[len(e.Response)-3] ^= 1
		e.OutputHash = journal.Sum(e.Response)
		r.Entry, _ = journal.EncodeEntry(e)
	})
	// The entry itself is consistent now; the next entry's link is not.
	err := replayRun(env, run, code, nil)
	var ve *journal.VerifyError
	if !errors.Is(err, journal.ErrChain) || !errors.As(err, &ve) || ve.Seq != seq+1 {
		t.Fatalf("got %v, want a chain error at entry %d (after step %d)", err, seq+1, e.Step)
	}
}

func TestTamperDeletedEntry(t *testing.T) {
	env, run, code := crawl(t)
	seq, _ := find(t, env, run, isFetch)
	err := env.Store.RewriteJournal(run, func(recs [][]byte) [][]byte { return slices.Delete(recs, int(seq), int(seq)+1) })
	if err != nil {
		t.Fatal(err)
	}
	_, next := find(t, env, run, func(_ *journal.Record, e *journal.Entry) bool { return e.Seq == seq+1 })
	wantVerifyError(t, replayRun(env, run, code, nil), journal.ErrSequence, seq, next.Step)
}

func TestTamperFlippedSignatureByte(t *testing.T) {
	env, run, code := crawl(t)
	seq, e := find(t, env, run, func(r *journal.Record, e *journal.Entry) bool { return r.Seal != nil && e.Step > 0 })
	editRecord(t, env.Store, run, seq, func(r *journal.Record, _ *journal.Entry) { r.Seal.Sig[17] ^= 0x20 })
	wantVerifyError(t, replayRun(env, run, code, nil), journal.ErrSignature, seq, e.Step)
}

func TestReplayOfChangedModuleNamesStepAndFunction(t *testing.T) {
	env, run, code := crawl(t)
	// The crawler rebuilt with one changed line: the kv key of a page.
	newCode := testutil.BuildVariant(t, "examples/crawler", `key := "page/" + u`, `key := "pages/" + u`)

	err := replayRun(env, run, code, newCode)
	var div *replay.DivergenceError
	if !errors.As(err, &div) {
		t.Fatalf("got %v, want a *DivergenceError", err)
	}
	// Step 1 is run.input; step 2 is the first kv.get of a page.
	if div.Step != 2 || div.Op != "kv.get" || div.Func != "main.visit" {
		t.Fatalf("divergence at step %d op %s in %q, want step 2, kv.get, main.visit: %v", div.Step, div.Op, div.Func, err)
	}
	for _, want := range []string{"step 2", "kv.get", "page/", "pages/", "main.visit"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("divergence message lacks %q: %v", want, err)
		}
	}
	// The same module replays cleanly.
	if err := replayRun(env, run, code, nil); err != nil {
		t.Fatal(err)
	}
}
