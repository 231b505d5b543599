package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/rogpeppe/go-internal/testscript"
)

func TestMain(m *testing.M) {
	testscript.Main(removingPrograms{m}, map[string]func(){
		"agentrt": func() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
	})
}

// removingPrograms runs the tests, then removes the binaries that
// testutil.BuildProgram built for them (buildCLI's agentrt).
type removingPrograms struct{ m *testing.M }

func (r removingPrograms) Run() int {
	defer testutil.RemovePrograms()
	return r.m.Run()
}

// TestScripts runs the CLI scripts in testdata/script. The agents they run
// are built once, here, and found through $MODULES.
func TestScripts(t *testing.T) {
	modules := t.TempDir()
	for name, dir := range map[string]string{"smoke": "host/testdata/agents/smoke", "probe": "host/testdata/agents/probe", "tools": "host/testdata/agents/tools"} {
		if err := os.WriteFile(filepath.Join(modules, name+".wasm"), testutil.BuildGo(t, dir), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(modules, "taskprobe.wasm"), testutil.BuildC(t, "host/testdata/agents/taskprobe"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The smoke agent rebuilt with one changed line: a different kv key.
	v2 := testutil.BuildVariant(t, "host/testdata/agents/smoke", `agent.KVGet("k2")`, `agent.KVGet("k3")`)
	if err := os.WriteFile(filepath.Join(modules, "smoke-v2.wasm"), v2, 0o644); err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir:  "testdata/script",
		Cmds: scriptCmds(),
		Setup: func(env *testscript.Env) error {
			env.Setenv("MODULES", modules)
			env.Setenv("AGENTRT_DATA", filepath.Join(env.WorkDir, "data"))
			// One compilation cache for every script: each agent is
			// compiled once, not by every cell of every script.
			env.Setenv("AGENTRT_CACHE", testutil.CompileCache())
			return nil
		},
		// [wasmtime]: this test binary has the wasmtime engine.
		Condition: func(cond string) (bool, error) {
			if cond == "wasmtime" {
				return host.EngineAvailable(host.EngineWasmtime), nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
	})
}
