//go:build linux

package tool_test

import (
	"context"
	"crypto/ed25519"
	"testing"

	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/replay"
)

// replaysTo replays run from its journal with code and requires output
// (as host/probe_test.go does for the host suite).
func replaysTo(t *testing.T, env *testutil.Env, run journal.RunID, code, output []byte) {
	t.Helper()
	ctx := context.Background()
	j, err := replay.Load(ctx, env.Store, run, journal.TrustKeys(env.Key.Public().(ed25519.PublicKey)))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := j.Replay(ctx, env.Engine, code, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if string(rep.Output) != string(output) {
		t.Fatalf("replay output %s, run output %s", rep.Output, output)
	}
}

// entries reads the journal of run.
func entries(t *testing.T, env *testutil.Env, run journal.RunID) []*journal.Entry {
	t.Helper()
	var out []*journal.Entry
	err := journal.ReadEntries(context.Background(), env.Store, run, func(e *journal.Entry, _ *journal.Record) error {
		out = append(out, e)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// noRuns requires the store to hold no run.
func noRuns(t *testing.T, env *testutil.Env) {
	t.Helper()
	runs, err := env.Store.Runs(context.Background())
	if err != nil || len(runs) != 0 {
		t.Fatalf("the store holds %d runs (%v), want none", len(runs), err)
	}
}
