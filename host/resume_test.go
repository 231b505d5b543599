package host_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
)

// interruptedRun starts the probe with steps, cancels it while the request
// to /cut is in flight, and returns the run, the environment and how many
// times the server saw each path.
func interruptedRun(t *testing.T, idempotentHTTP bool) (*testutil.Env, journal.RunID, []byte, func(string) int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	seen := map[string]int{}
	keys := map[string]bool{}
	cut := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path]++
		keys[r.URL.Path+" "+r.Header.Get(host.IdempotencyHeader)] = true
		first := cut && r.URL.Path == "/cut"
		if first {
			cut = false
		}
		mu.Unlock()
		if first {
			cancel() // the run goes away while this request is served
			<-r.Context().Done()
			return
		}
		fmt.Fprint(w, "served "+r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	env := testutil.NewEnv(t, host.Deps{}, host.Config{})
	g := probeGrant(strings.TrimPrefix(srv.URL, "http://"))
	g.HTTP.Idempotent = idempotentHTTP
	code := testutil.BuildGo(t, "host/testdata/agents/probe")
	steps := fmt.Sprintf(`[{"op":"http","url":"%s/a"},{"op":"kv.put","key":"k","size":3},{"op":"http","url":"%s/cut"},{"op":"clock"},{"op":"kv.get","key":"k"}]`, srv.URL, srv.URL)
	res, err := env.Host.Run(ctx, host.RunSpec{Code: code, Grant: g, Input: []byte(steps)})
	if !errors.Is(err, host.ErrInterrupted) {
		t.Fatalf("run: %v, want ErrInterrupted", err)
	}
	count := func(path string) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for k := range keys {
			if strings.HasPrefix(k, path+" ") {
				n++
			}
		}
		if n > 1 {
			t.Fatalf("%s was sent with %d different idempotency keys: %v", path, n, keys)
		}
		return seen[path]
	}
	return env, res.Run, code, count
}

func resumeAndCheck(t *testing.T, env *testutil.Env, run journal.RunID, code []byte) []string {
	t.Helper()
	ctx := context.Background()
	res, err := env.Host.Resume(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != journal.StatusCompleted || res.Run != run {
		t.Fatalf("resumed run %s ended %s: %v", res.Run, res.Status, res.Err)
	}
	var lines []string
	if err := jsonLines(res.Output, &lines); err != nil {
		t.Fatal(err)
	}
	// The whole journal, before and after the resume, verifies and replays.
	replaysTo(t, env, run, code, res.Output)
	if _, err := env.Host.Resume(ctx, run); !errors.Is(err, host.ErrFinished) {
		t.Fatalf("a second resume of the finished run: %v, want ErrFinished", err)
	}
	return lines
}

func TestResumeTellsTheGuestANonIdempotentEffectIsInDoubt(t *testing.T) {
	env, run, code, count := interruptedRun(t, false)
	lines := resumeAndCheck(t, env, run, code)
	if !strings.HasPrefix(lines[2], "http in_doubt: http.request of step 4 was in flight") {
		t.Fatalf("the effect in doubt answered %q", lines[2])
	}
	if count("/a") != 1 || count("/cut") != 1 {
		t.Fatalf("served /a %d times and /cut %d times; each must be sent once", count("/a"), count("/cut"))
	}
	if lines[4] != "kv.get 3 <nil>" || !strings.HasPrefix(lines[3], "clock ") {
		t.Fatalf("the run did not go on live after the decision: %q", lines)
	}
}

func TestResumeSendsAnIdempotentEffectAgainWithItsKey(t *testing.T) {
	env, run, code, count := interruptedRun(t, true)
	lines := resumeAndCheck(t, env, run, code)
	if lines[2] != "http 200 11 served /cut" {
		t.Fatalf("the re-sent effect answered %q", lines[2])
	}
	if count("/a") != 1 || count("/cut") != 2 {
		t.Fatalf("served /a %d times and /cut %d times; want /a once and /cut again", count("/a"), count("/cut"))
	}
}

func TestResumeTakesTheLeaseWithTheNextEpoch(t *testing.T) {
	env, run, code, _ := interruptedRun(t, false)
	ctx := context.Background()
	// Another cell holds the run: resume is refused, and nothing is written.
	before := len(entries(t, env, run))
	other, err := env.Store.Acquire(ctx, run, []byte("another cell key, 32 bytes long!"), time.Now(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var held *journal.HeldError
	if _, err := env.Host.Resume(ctx, run); !errors.As(err, &held) || held.Lease.Epoch != other.Epoch {
		t.Fatalf("resume of a run another cell holds: %v, want a HeldError", err)
	}
	if n := len(entries(t, env, run)); n != before {
		t.Fatalf("a refused resume wrote %d entries", n-before)
	}
	if err := env.Store.Release(ctx, other); err != nil {
		t.Fatal(err)
	}
	resumeAndCheck(t, env, run, code)
	var epochs []uint64
	for _, e := range entries(t, env, run) {
		if e.Phase == journal.PhaseLease {
			epochs = append(epochs, e.Epoch)
		}
	}
	// Epoch 1 for the first run, 2 for the other cell's (which wrote
	// nothing), 3 for the resume.
	if fmt.Sprint(epochs) != "[1 3]" {
		t.Fatalf("lease entries with epochs %v, want [1 3]", epochs)
	}
}
