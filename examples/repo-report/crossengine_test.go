//go:build wasmtime && cgo

package main_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/replay"
)

// TestRepoReportAcrossEngines records the agent, which runs native tools,
// on each engine and replays the journal on the other: the outputs agree,
// and the replay answers every tool call from the journal.
func TestRepoReportAcrossEngines(t *testing.T) {
	repo := makeRepo(t)
	code := testutil.BuildGo(t, "examples/repo-report")
	engines := map[string]*host.Engine{
		host.EngineWazero:   testutil.NewEngine(t, host.EngineWazero),
		host.EngineWasmtime: testutil.NewEngine(t, host.EngineWasmtime),
	}
	ctx := context.Background()
	input, _ := json.Marshal(map[string]string{"repo": repo})
	var outputs []string
	for _, pair := range [][2]string{{host.EngineWazero, host.EngineWasmtime}, {host.EngineWasmtime, host.EngineWazero}} {
		rec, rep := pair[0], pair[1]
		env := testutil.NewEnvOn(t, engines[rec], host.Deps{Tools: host.ToolDeps{Workspaces: filepath.Join(t.TempDir(), "work")}}, host.Config{})
		res, err := env.Host.Run(ctx, host.RunSpec{Code: code, Input: input, Grant: grantFor(t, repo)})
		if err != nil || res.Status != journal.StatusCompleted {
			t.Fatalf("run on %s: %v %+v", rec, err, res)
		}
		j, err := replay.Load(ctx, env.Store, res.Run, journal.TrustKeys(env.Key.Public().(ed25519.PublicKey)))
		if err != nil {
			t.Fatal(err)
		}
		r, err := j.Replay(ctx, engines[rep], code, replay.Options{})
		if err != nil {
			t.Fatalf("recorded on %s, replayed on %s: %v", rec, rep, err)
		}
		if string(r.Output) != string(res.Output) {
			t.Fatalf("recorded on %s, replayed on %s: output %s, recorded %s", rec, rep, r.Output, res.Output)
		}
		outputs = append(outputs, string(res.Output))
	}
	// The report's hash names the run's workspace path only through the
	// report's text, which holds no path: both engines wrote the same.
	if outputs[0] != outputs[1] {
		t.Fatalf("the engines' runs differ:\n%s\n%s", outputs[0], outputs[1])
	}
}
