package host_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/replay"
)

// TestConcurrentRunsShareRoundsAndVerify runs many agents on one store at
// once: their durable commits are written in shared rounds, sealed by one
// signature per round, and every journal still verifies and replays.
func TestConcurrentRunsShareRoundsAndVerify(t *testing.T) {
	env := testutil.NewEnv(t, host.Deps{}, host.Config{})
	ctx := context.Background()
	code := testutil.BuildWAT(t, "host/testdata/wat/kvput.wat")
	const n = 16
	runs := make([]journal.RunID, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			g := &host.Grant{KV: &host.KVGrant{Namespace: fmt.Sprint("ns", i)}}
			res, err := env.Host.Run(ctx, host.RunSpec{Code: code, Grant: g})
			if err == nil && res.Status != journal.StatusCompleted {
				err = fmt.Errorf("run %d: %v", i, res.Err)
			}
			if err == nil {
				runs[i] = res.Run
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	trust := journal.TrustKeys(env.Key.Public().(ed25519.PublicKey))
	roundSeals := 0
	for _, run := range runs {
		j, err := replay.Load(ctx, env.Store, run, trust)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := j.Replay(ctx, env.Engine, code, replay.Options{}); err != nil {
			t.Fatal(err)
		}
		env.Store.Records(ctx, run, 0, func(_ uint64, raw []byte) error {
			if r, err := journal.DecodeRecord(raw); err == nil && r.Seal != nil && r.Seal.Size > 1 {
				roundSeals++
			}
			return nil
		})
	}
	// 16 runs of 50 durable commits each, each commit waiting for an
	// fsync: commits arriving during one round's fsync share the next.
	if roundSeals == 0 {
		t.Fatalf("no commit of %d concurrent runs shared a round", n)
	}
	t.Logf("%d of %d commits sealed in shared rounds", roundSeals, n*52)
}

// TestInstantiationsBounded: runs started together instantiate their
// modules at most GOMAXPROCS at a time, and every one of them completes.
// Many large instantiations at once shared the cores with each other and
// with the daemon's API, and every run started late (bench figure 17c).
func TestInstantiationsBounded(t *testing.T) {
	ctx := context.Background()
	eng, err := host.NewEngine(ctx, host.EngineConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close(ctx)
	peak := host.CountInstantiations(eng)
	env := testutil.NewEnvOn(t, eng, host.Deps{}, host.Config{})
	code := testutil.BuildWAT(t, "host/testdata/wat/loop.wat")
	n := 4 * runtime.GOMAXPROCS(0)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			res, err := env.Host.Run(ctx, host.RunSpec{Code: code})
			if err == nil && res.Status != journal.StatusCompleted {
				err = fmt.Errorf("run %s ended %s: %v", res.Run, res.Status, res.Err)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if got := peak(); got < 1 || got > runtime.GOMAXPROCS(0) {
		t.Fatalf("%d instantiations at once; want 1 to GOMAXPROCS (%d)", got, runtime.GOMAXPROCS(0))
	}
}
