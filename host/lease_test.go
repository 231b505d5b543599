package host_test

import (
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

// TestHolderStopsWhenItsLeaseIsTaken runs a probe on the badger store
// with a lease of one second, and while its HTTP request hangs, another
// cell takes the run's lease (as a peer does once it judges the lease
// expired by its own clock). The holder learns it at its next background
// renewal, before it writes or sends anything more: its request is
// cancelled, Execute returns the lost lease, the journal ends where it was
// when the lease was taken, the index still says running (for the new
// holder to go on), and the lease stays the other cell's.
func TestHolderStopsWhenItsLeaseIsTaken(t *testing.T) {
	ctx := context.Background()
	env := testutil.NewEnv(t, host.Deps{}, host.Config{LeaseTTL: time.Second})
	entered, cancelled := make(chan struct{}), make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hang" {
			close(entered)
			select {
			case <-r.Context().Done():
				close(cancelled)
			case <-release:
			}
			return
		}
		fmt.Fprint(w, "served "+r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	code := testutil.BuildGo(t, "host/testdata/agents/probe")
	steps := fmt.Sprintf(`[{"op":"http","url":"%s/a"},{"op":"http","url":"%s/hang"},{"op":"kv.put","key":"k","size":3}]`, srv.URL, srv.URL)
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
	before := len(entries(t, env, st.Run))
	peer, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	var leases journal.Leases = env.Store
	taken, err := leases.Acquire(ctx, st.Run, peer, time.Now().Add(time.Hour), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	err = <-done
	if !errors.Is(err, journal.ErrLeaseLost) || !errors.Is(err, host.ErrInterrupted) {
		t.Fatalf("Execute returned %v, want the lease lost and the run interrupted", err)
	}
	select { // the server hears of the cancelled request a moment later
	case <-cancelled:
	case <-time.After(time.Minute):
		t.Fatal("the request in flight was not cancelled when the run stopped")
	}
	if n := len(entries(t, env, st.Run)); n != before {
		t.Fatalf("the deposed holder wrote %d entries after its lease was taken", n-before)
	}
	if m, err := env.Store.Meta(ctx, st.Run); err != nil || m.Status != journal.StatusRunning {
		t.Fatalf("index after the lease was taken: %v %v, want running", m.Status, err)
	}
	if _, err := leases.Acquire(ctx, st.Run, env.Key.Public().(ed25519.PublicKey), time.Now(), time.Second); err == nil {
		t.Fatalf("the deposed holder's cell acquired the lease: the holder released the other cell's (epoch %d)", taken.Epoch)
	}
}
