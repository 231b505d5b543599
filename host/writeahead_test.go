package host_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/badgerstore"
)

// appendLog is a journal.Store that remembers every entry made durable: the
// entries of every durable batch, and of the batches before it.
type appendLog struct {
	journal.Store
	mu sync.Mutex
	// written holds every committed entry; durable the prefix of it that
	// a durable commit covered.
	written, durable []*journal.Entry
}

func (a *appendLog) Commit(ctx context.Context, b *journal.Batch) error {
	if err := a.Store.Commit(ctx, b); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range b.Records {
		e, err := journal.DecodeEntry(r.Entry)
		if err != nil {
			return err
		}
		a.written = append(a.written, e)
	}
	if b.Durable {
		a.durable = a.written
	}
	return nil
}

// durableKey reports whether an executing entry with idempotency key k,
// and its intent, are durable, and every entry before them.
func (a *appendLog) durableKey(k string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, e := range a.durable {
		if e.Phase == journal.PhaseExecuting && e.Key == k {
			if i == 0 || a.durable[i-1].Phase != journal.PhaseIntent || a.durable[i-1].Step != e.Step {
				return fmt.Errorf("executing entry of %s is not preceded by its intent", k)
			}
			for j, d := range a.durable[:i] {
				if d.Seq != uint64(j) {
					return fmt.Errorf("durable entries are not a prefix of the journal")
				}
			}
			return nil
		}
	}
	return fmt.Errorf("the effect with key %q was dispatched before its executing entry was durable", k)
}

// TestWriteAheadEffectsDispatchOnlyAfterTheirIntentIsDurable defends the
// write-ahead invariant: when an effect reaches the outside world, its
// intent and executing entries and everything before them are durable.
func TestWriteAheadEffectsDispatchOnlyAfterTheirIntentIsDurable(t *testing.T) {
	st, err := badgerstore.Open(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	log := &appendLog{Store: st}
	var mu sync.Mutex
	var violations []string
	seen := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		seen++
		if err := log.durableKey(r.Header.Get(host.IdempotencyHeader)); err != nil {
			violations = append(violations, err.Error())
		}
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()
	_, key, _ := ed25519.GenerateKey(nil)
	h, err := host.New(testutil.SharedEngine(t), host.Deps{Store: log, KV: st, Key: key}, host.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	for i := range 5 {
		steps = append(steps, fmt.Sprintf(`{"op":"http","url":"%s/%d"}`, srv.URL, i), `{"op":"kv.get","key":"x"}`, `{"op":"clock"}`)
	}
	res, err := h.Run(context.Background(), host.RunSpec{Code: testutil.BuildGo(t, "host/testdata/agents/probe"),
		Grant: probeGrant(strings.TrimPrefix(srv.URL, "http://")), Input: []byte("[" + strings.Join(steps, ",") + "]")})
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("run: %v %+v", err, res)
	}
	if seen != 5 || len(violations) > 0 {
		t.Fatalf("%d requests; violations: %v", seen, violations)
	}
}
