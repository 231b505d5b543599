//go:build wasmtime && cgo

package host_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/examples/crawler/site"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/internal/wasmbuild"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/replay"
)

// Invariant 8, engine neutrality: a run recorded under one engine replays
// and verifies under the other, both ways, for every example agent, the
// probe agent (every capability) and the checkpointing agent.

// engines returns a wazero and a wasmtime engine.
func engines(t *testing.T) map[string]*host.Engine {
	return map[string]*host.Engine{
		host.EngineWazero:   testutil.NewEngine(t, host.EngineWazero),
		host.EngineWasmtime: testutil.NewEngine(t, host.EngineWasmtime),
	}
}

// crossRun is a run to record on one engine and replay on the other.
// worldly marks a run whose output carries what differs between any two
// runs (the real clock, real randomness, its run id): its outputs are not
// compared across engines, only with their own replays.
type crossRun struct {
	code    []byte
	spec    func(t *testing.T) host.RunSpec
	check   func(t *testing.T, env *testutil.Env, res *host.Result)
	worldly bool
}

// crossEngines records r under each engine and replays the journal under
// the other, after checking that both engines' runs journaled the same
// calls with the same inputs and outputs and ended with the same output.
func crossEngines(t *testing.T, r crossRun) {
	t.Helper()
	ctx := context.Background()
	engs := engines(t)
	var traces [2][]string
	var outputs [2][]byte
	for i, pair := range [][2]string{{host.EngineWazero, host.EngineWasmtime}, {host.EngineWasmtime, host.EngineWazero}} {
		rec, rep := pair[0], pair[1]
		env := testutil.NewEnvOn(t, engs[rec], host.Deps{}, host.Config{})
		res, err := env.Host.Run(ctx, r.spec(t))
		if err != nil {
			t.Fatalf("run on %s: %v", rec, err)
		}
		if res.Status != journal.StatusCompleted {
			t.Fatalf("run on %s: %s: %v", rec, res.Status, res.Err)
		}
		if r.check != nil {
			r.check(t, env, res)
		}
		j, err := replay.Load(ctx, env.Store, res.Run, journal.TrustKeys(env.Key.Public().(ed25519.PublicKey)))
		if err != nil {
			t.Fatal(err)
		}
		report, err := j.Replay(ctx, engs[rep], r.code, replay.Options{})
		if err != nil {
			t.Fatalf("recorded on %s, replayed on %s: %v", rec, rep, err)
		}
		if !bytes.Equal(report.Output, res.Output) {
			t.Fatalf("recorded on %s, replayed on %s: output %q, recorded %q", rec, rep, report.Output, res.Output)
		}
		traces[i] = trace(t, env, res.Run, r.worldly)
		outputs[i] = res.Output
	}
	if strings.Join(traces[0], "\n") != strings.Join(traces[1], "\n") {
		t.Fatalf("the engines journaled different calls:\nwazero:\n%s\nwasmtime:\n%s", strings.Join(traces[0], "\n"), strings.Join(traces[1], "\n"))
	}
	if !r.worldly && !bytes.Equal(outputs[0], outputs[1]) {
		t.Fatalf("outputs differ: wazero %q, wasmtime %q", outputs[0], outputs[1])
	}
}

// trace is what a run journaled of its calls, without what differs
// between any two runs (run ids, times, chain links, idempotency keys): the
// output of calls to the real world and of run.checkpoint (which names the
// run's start entry) is left out, but a checkpoint's virtual clock is in.
func trace(t *testing.T, env *testutil.Env, run journal.RunID, worldly bool) []string {
	var out []string
	for _, e := range entries(t, env, run) {
		if e.Step == 0 {
			continue
		}
		switch {
		case e.Op == "run.checkpoint" && e.Phase == journal.PhaseCompleted:
			var r abi.CheckpointResponse
			if err := abi.Unmarshal(e.Response, &r); err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%d %s %s %x segment %d clock %d", e.Step, e.Op, e.Phase, e.InputHash, r.Segment, r.Clock))
		case e.Op == "run.set_output" && worldly:
			out = append(out, fmt.Sprintf("%d %s %s", e.Step, e.Op, e.Phase))
		case e.Op == "clock.now", e.Op == "random.bytes", e.Op == "run.introspect", e.Op == "http.request":
			out = append(out, fmt.Sprintf("%d %s %s %x", e.Step, e.Op, e.Phase, e.InputHash[:min(len(e.InputHash), 8)]))
		default:
			out = append(out, fmt.Sprintf("%d %s %s %x %x", e.Step, e.Op, e.Phase, e.InputHash[:min(len(e.InputHash), 8)], e.OutputHash))
		}
	}
	return out
}

var crossSeed = bytes.Repeat([]byte{9}, 32)

const crossWall = int64(1_750_000_000_000_000_000)

func TestCrossEngineProbe(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Date"] = nil
		fmt.Fprint(w, strings.Repeat("y", 50_000)) // more than the SDK's buffer: take
	}))
	defer srv.Close()
	steps := fmt.Sprintf(`[{"op":"kv.put","key":"a","size":3000},{"op":"kv.get","key":"a"},{"op":"kv.get","key":"none"},
		{"op":"http","url":%q},{"op":"http","url":"http://example.com/"},{"op":"clock"},{"op":"random","n":16},
		{"op":"virtual-clock"},{"op":"sleep"},{"op":"virtual-clock"},{"op":"introspect"},{"op":"random","n":100000},
		{"op":"kv.put","key":"big","size":2000000}]`, srv.URL+"/x")
	code := testutil.BuildGo(t, "host/testdata/agents/probe")
	crossEngines(t, crossRun{code: code, worldly: true,
		spec: func(t *testing.T) host.RunSpec {
			return host.RunSpec{Code: code, Name: "probe", Input: []byte(steps), Grant: probeGrant(strings.TrimPrefix(srv.URL, "http://")),
				Seed: crossSeed, WallBase: crossWall}
		},
		check: func(t *testing.T, _ *testutil.Env, res *host.Result) {
			var lines []string
			if err := json.Unmarshal(res.Output, &lines); err != nil {
				t.Fatal(err)
			}
			if len(lines) != 13 || !strings.HasPrefix(lines[3], "http 200 50000") || lines[8] != "sleep 1h0m0s" ||
				!strings.Contains(lines[4], "denied") || !strings.Contains(lines[11], "too_large") {
				t.Fatalf("probe output %q", lines)
			}
		}})
}

func TestCrossEngineSegments(t *testing.T) {
	code := testutil.BuildGo(t, "host/testdata/agents/segments")
	crossEngines(t, crossRun{code: code,
		spec: func(*testing.T) host.RunSpec { return segmentsSpec(code, 2500, 1000) },
		check: func(t *testing.T, env *testutil.Env, res *host.Result) {
			var out segmentsOut
			if err := json.Unmarshal(res.Output, &out); err != nil {
				t.Fatal(err)
			}
			if want, _ := segmentsModel(2500, 1000); out.I != 2500 || !equal(out.Segments, want) || len(out.Draws) != 3 {
				t.Fatalf("segments output %+v", out)
			}
		}})
}

func TestCrossEngineCrawler(t *testing.T) {
	code := testutil.BuildGo(t, "examples/crawler")
	srv := httptest.NewServer(site.Handler())
	defer srv.Close()
	g, err := host.LoadGrant(filepath.Join(testutil.RepoRoot(), "examples/crawler/grant.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crossEngines(t, crossRun{code: code,
		spec: func(*testing.T) host.RunSpec {
			return host.RunSpec{Code: code, Name: "crawler.wasm", Input: []byte(`{"start":"` + srv.URL + `/"}`), Grant: g, Seed: crossSeed, WallBase: crossWall}
		},
		check: func(t *testing.T, _ *testutil.Env, res *host.Result) {
			if res.Steps < 20 || !bytes.Contains(res.Output, []byte(`"journal"`)) {
				t.Fatalf("crawl made %d calls, output %s", res.Steps, res.Output)
			}
		}})
}

func TestCrossEngineWordfreqC(t *testing.T) {
	out := filepath.Join(t.TempDir(), "wordfreq.wasm")
	if err := wasmbuild.C(context.Background(), filepath.Join(testutil.RepoRoot(), "examples/wordfreq-c"), out); err != nil {
		t.Fatal(err)
	}
	code, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	g, err := host.LoadGrant(filepath.Join(testutil.RepoRoot(), "examples/wordfreq-c/grant.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crossEngines(t, crossRun{code: code,
		spec: func(*testing.T) host.RunSpec {
			return host.RunSpec{Code: code, Name: "wordfreq.wasm", Input: []byte("The quick brown fox jumps over the lazy dog. The dog sleeps."),
				Grant: g, Seed: crossSeed, WallBase: crossWall}
		},
		check: func(t *testing.T, _ *testutil.Env, res *host.Result) {
			if !bytes.Contains(res.Output, []byte(`"top":[["the",3],["dog",2]`)) {
				t.Fatalf("wordfreq output %s", res.Output)
			}
		}})
}

// TestCrossEngineDivergence replays a wazero run with a changed module
// under wasmtime: the divergence is caught at the step where it happens
// and names the guest function from wasmtime's stack trace.
func TestCrossEngineDivergence(t *testing.T) {
	engs := engines(t)
	ctx := context.Background()
	code := testutil.BuildGo(t, "host/testdata/agents/smoke")
	env := testutil.NewEnvOn(t, engs[host.EngineWazero], host.Deps{}, host.Config{})
	res, err := env.Host.Run(ctx, host.RunSpec{Code: code, Name: "smoke", Grant: probeGrant(), Seed: crossSeed, WallBase: crossWall})
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("run: %v %+v", err, res)
	}
	changed := testutil.BuildVariant(t, "host/testdata/agents/smoke", `agent.KVGet("k2")`, `agent.KVGet("k3")`)
	j, err := replay.Load(ctx, env.Store, res.Run, journal.TrustKeys(env.Key.Public().(ed25519.PublicKey)))
	if err != nil {
		t.Fatal(err)
	}
	var divs []*replay.DivergenceError
	for _, name := range []string{host.EngineWazero, host.EngineWasmtime} {
		_, err := j.Replay(ctx, engs[name], code, replay.Options{Code: changed})
		var div *replay.DivergenceError
		if !errors.As(err, &div) {
			t.Fatalf("%s: got %v, want a divergence", name, err)
		}
		if div.Op != "kv.get" || !strings.HasPrefix(div.Func, "main.main") || !strings.Contains(div.Reason, "k3") {
			t.Fatalf("%s: divergence at step %d (%s) in %q: %v", name, div.Step, div.Op, div.Func, err)
		}
		divs = append(divs, div)
	}
	if a, b := divs[0], divs[1]; a.Step != b.Step || a.Func != b.Func || a.Reason != b.Reason {
		t.Fatalf("the engines report the divergence differently:\nwazero:   %v\nwasmtime: %v", a, b)
	}
}

// TestWasmtimeGuestFailures checks that wasmtime ends a guest as wazero
// does: a non-zero exit, a trap, a buffer outside memory.
func TestWasmtimeGuestFailures(t *testing.T) {
	eng := testutil.NewEngine(t, host.EngineWasmtime)
	env := testutil.NewEnvOn(t, eng, host.Deps{}, host.Config{})
	code := testutil.BuildWAT(t, "host/testdata/wat/badptr.wat")
	res, err := env.Host.Run(context.Background(), host.RunSpec{Code: code, Grant: host.DefaultGrant()})
	if err != nil {
		t.Fatal(err)
	}
	var ge *host.GuestError
	if res.Status != journal.StatusFailed || !errors.As(res.Err, &ge) || !strings.Contains(ge.Trap, "outside guest memory") {
		t.Fatalf("bad pointer: %s %v", res.Status, res.Err)
	}
}
