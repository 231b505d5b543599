package host_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
)

// TestYieldStopsAtAStepBoundaryAndKeepsTheLease runs a probe whose second
// HTTP request hangs, and yields the run while the request is in flight:
// the request completes and is journaled first (nothing in doubt), the run
// stops before its third call, stays running in the index, and Yield
// returns the journal's tail and the lease, still this cell's and not
// released, which a third cell cannot take. Handed back to the cell's own
// resume, the run continues under the next epoch and completes with each
// call made once.
func TestYieldStopsAtAStepBoundaryAndKeepsTheLease(t *testing.T) {
	ctx := context.Background()
	env := testutil.NewEnv(t, host.Deps{}, host.Config{LeaseTTL: 10 * time.Second})
	entered, release := make(chan struct{}), make(chan struct{})
	calls := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls[r.URL.Path]++
		if r.URL.Path == "/slow" && calls[r.URL.Path] == 1 {
			close(entered)
			<-release
		}
		fmt.Fprint(w, "served "+r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	code := testutil.BuildGo(t, "host/testdata/agents/probe")
	steps := fmt.Sprintf(`[{"op":"http","url":"%s/a"},{"op":"http","url":"%s/slow"},{"op":"kv.put","key":"k","size":3}]`, srv.URL, srv.URL)
	st, err := env.Host.Start(ctx, host.RunSpec{Code: code, Grant: probeGrant(strings.TrimPrefix(srv.URL, "http://")), Input: []byte(steps)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := st.Execute(ctx)
		done <- err
	}()
	<-entered
	yielded := make(chan *host.Yielded, 1)
	go func() {
		y, err := env.Host.Yield(ctx, st.Run)
		if err != nil {
			t.Error(err)
		}
		yielded <- y
	}()
	waitStopping(t, env.Host, st.Run)
	close(release)
	y := <-yielded
	if err := <-done; !errors.Is(err, host.ErrHandingOff) {
		t.Fatalf("Execute returned %v, want ErrHandingOff", err)
	}
	if y == nil {
		t.FailNow()
	}
	es := entries(t, env, st.Run)
	last := es[len(es)-1]
	if y.Entries != uint64(len(es)) || last.Phase != journal.PhaseCompleted || last.Op != "http.request" {
		t.Fatalf("yielded at %d entries, the journal has %d, ending with %v %s", y.Entries, len(es), last.Phase, last.Op)
	}
	sum, err := journal.VerifyStore(ctx, env.Store, st.Run, journal.TrustAny)
	if err != nil || !bytes.Equal(sum.Head, y.Head) || len(y.Token) == 0 {
		t.Fatalf("yielded head %x, the journal's %x (%v); token of %d bytes", y.Head, sum.Head, err, len(y.Token))
	}
	if m, err := env.Store.Meta(ctx, st.Run); err != nil || m.Status != journal.StatusRunning {
		t.Fatalf("index after the yield: %v %v, want running", m.Status, err)
	}
	self := env.Key.Public().(ed25519.PublicKey)
	if !bytes.Equal(y.Lease.Owner, self) || y.Lease.Expires <= time.Now().UnixNano() {
		t.Fatalf("yielded lease %+v: not this cell's, or released", y.Lease)
	}
	peer, _, _ := ed25519.GenerateKey(nil)
	var held *journal.HeldError
	if _, err := env.Store.Acquire(ctx, st.Run, peer, time.Now(), time.Second); !errors.As(err, &held) {
		t.Fatalf("another cell acquired a yielded lease: %v", err)
	}
	res, err := env.Host.Resume(ctx, st.Run)
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("resume after the yield: %+v %v", res, err)
	}
	if calls["/a"] != 1 || calls["/slow"] != 1 {
		t.Fatalf("calls %v, want each once", calls)
	}
}

// waitStopping waits until run was asked to stop.
func waitStopping(t *testing.T, h *host.Host, run journal.RunID) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !h.Stopping(run) {
		if time.Now().After(deadline) {
			t.Fatal("the run was never asked to stop")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
