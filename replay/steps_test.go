package replay_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"testing"
	"time"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/replay"
)

// TestReplayAcceptsTheStepsOfEarlierHosts: hosts before journal/SPEC.md's
// rule for end.steps counted a call the guest faulted on before it was
// journaled, so a run whose only call faulted ended with steps 1. Such a
// journal replays (the re-executed guest faults at the same call, and
// counts 0); an end two above is a divergence.
func TestReplayAcceptsTheStepsOfEarlierHosts(t *testing.T) {
	env := testutil.NewEnv(t, host.Deps{}, host.Config{})
	ctx := context.Background()
	code := testutil.BuildWAT(t, "host/testdata/wat/badptr.wat")
	res, err := env.Host.Run(ctx, host.RunSpec{Code: code})
	if err != nil || res.Status != journal.StatusFailed || res.Steps != 0 {
		t.Fatalf("run: %v %+v", err, res)
	}
	var hdr *journal.Header
	var end *journal.End
	if err := journal.ReadEntries(ctx, env.Store, res.Run, func(e *journal.Entry, _ *journal.Record) error {
		if e.Header != nil {
			hdr = e.Header
		}
		if e.End != nil {
			end = e.End
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	trust := journal.TrustKeys(env.Key.Public().(ed25519.PublicKey))
	for _, c := range []struct {
		steps uint64
		ok    bool
	}{{1, true}, {2, false}} {
		// The journal an earlier host wrote: a start and the failed end.
		now := time.Now()
		run := journal.NewRunID(now)
		w := journal.NewWriter(env.Store, journal.NewChain(run, env.Key))
		legacy := *end
		legacy.Steps = c.steps
		if err := errors.Join(
			w.Add(&journal.Entry{Phase: journal.PhaseStart, Header: hdr, Time: now.UnixNano()}),
			w.Add(&journal.Entry{Phase: journal.PhaseEnd, End: &legacy, Time: now.UnixNano()})); err != nil {
			t.Fatal(err)
		}
		if err := w.Commit(ctx, &journal.RunMeta{ID: run, Status: journal.StatusFailed, ModuleSHA256: hdr.ModuleSHA256, Started: now.UnixNano()}, true); err != nil {
			t.Fatal(err)
		}
		j, err := replay.Load(ctx, env.Store, run, trust)
		if err != nil {
			t.Fatal(err)
		}
		_, err = j.Replay(ctx, env.Engine, code, replay.Options{})
		var div *replay.DivergenceError
		if c.ok && err != nil || !c.ok && !errors.As(err, &div) {
			t.Fatalf("replay of an end with steps %d: %v", c.steps, err)
		}
	}
}
