//go:build wasmtime && cgo

package wordfreq_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"testing"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/replay"
)

// TestAcrossEngines records the Rust agent on each engine and replays the
// journal, verified against the cell's key, on the other (invariant 8): the
// replays end with the recorded output, and the two engines journaled the
// same calls with the same bytes.
func TestAcrossEngines(t *testing.T) {
	code := buildRust(t)
	engines := map[string]*host.Engine{
		host.EngineWazero:   testutil.NewEngine(t, host.EngineWazero),
		host.EngineWasmtime: testutil.NewEngine(t, host.EngineWasmtime),
	}
	ctx := context.Background()
	var journals [][]*journal.Entry
	for _, pair := range [][2]string{{host.EngineWazero, host.EngineWasmtime}, {host.EngineWasmtime, host.EngineWazero}} {
		rec, rep := pair[0], pair[1]
		env := testutil.NewEnvOn(t, engines[rec], host.Deps{}, host.Config{})
		res := run(t, env, code, "grant.yaml", input)
		if res.Status != journal.StatusCompleted {
			t.Fatalf("run on %s: %s %v", rec, res.Status, res.Err)
		}
		j, err := replay.Load(ctx, env.Store, res.Run, journal.TrustKeys(env.Key.Public().(ed25519.PublicKey)))
		if err != nil {
			t.Fatalf("recorded on %s: %v", rec, err)
		}
		r, err := j.Replay(ctx, engines[rep], code, replay.Options{})
		if err != nil {
			t.Fatalf("recorded on %s, replayed on %s: %v", rec, rep, err)
		}
		if !bytes.Equal(r.Output, res.Output) || uint64(r.Calls) != res.Steps {
			t.Fatalf("recorded on %s, replayed on %s: output %s after %d calls, recorded %s after %d", rec, rep, r.Output, r.Calls, res.Output, res.Steps)
		}
		journals = append(journals, entries(t, env.Store, res.Run))
	}
	a, b := journals[0], journals[1]
	if len(a) != len(b) {
		t.Fatalf("wazero journaled %d entries, wasmtime %d", len(a), len(b))
	}
	for i := range a {
		if d := diff(a[i], b[i]); d != "" {
			t.Errorf("entry %d (%s %s): wazero and wasmtime differ: %s", i, a[i].Op, a[i].Phase, d)
		}
	}
}
