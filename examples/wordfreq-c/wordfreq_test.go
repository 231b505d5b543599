package wordfreq_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/internal/wasmbuild"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/replay"
)

// The input exercises the rules of main.c: case folding, punctuation as a
// separator (doesn't is two words), a non-ASCII word kept whole, ties broken
// by byte order, and a cut at ten entries (t, the eleventh, is left out).
const input = "The quick brown fox jumps over the lazy dog. The dog sleeps; the fox doesn't. Grüße!"

const top = `[["the",4],["dog",2],["fox",2],["brown",1],["doesn",1],["grüße",1],["jumps",1],["lazy",1],["over",1],["quick",1]]`

func build(t *testing.T) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "wordfreq.wasm")
	if err := wasmbuild.C(context.Background(), ".", out); err != nil {
		var te *wasmbuild.ToolchainError
		if errors.As(err, &te) {
			t.Fatalf("%v\nhint: %s", err, te.Hint)
		}
		t.Fatal(err)
	}
	code, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return code
}

func grant(t *testing.T) *host.Grant {
	t.Helper()
	g, err := host.LoadGrant("grant.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// seed is fixed so that runs on different stores can be compared.
var seed = bytes.Repeat([]byte{7}, 32)

func run(t *testing.T, env *testutil.Env, code []byte) *host.Result {
	t.Helper()
	res, err := env.Host.Run(context.Background(), host.RunSpec{Code: code, Name: "wordfreq.wasm", Input: []byte(input), Grant: grant(t), Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != journal.StatusCompleted {
		t.Fatalf("run %s: %v", res.Status, res.Err)
	}
	return res
}

// call is what a journal records of one import call, minus what differs
// between any two runs (run id, times, chain links, signatures).
type call struct {
	Phase                 journal.Phase
	Step                  uint64
	Op                    string
	InputHash, OutputHash string
	Status                uint32
}

func calls(t *testing.T, st journal.Store, run journal.RunID) []call {
	t.Helper()
	var out []call
	err := journal.ReadEntries(context.Background(), st, run, func(e *journal.Entry, _ *journal.Record) error {
		if e.Step > 0 {
			out = append(out, call{e.Phase, e.Step, e.Op, string(e.InputHash), string(e.OutputHash), e.Status})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestWordfreq(t *testing.T) {
	code := build(t)
	var logs []string
	env := testutil.NewEnv(t, host.Deps{Sink: func(e host.Event) {
		if e.Kind == host.EventRunLog {
			logs = append(logs, string(e.Data))
		}
	}}, host.Config{})

	first := run(t, env, code)
	want := `{"words":17,"distinct":12,"top":` + top + `,"total_words":17}`
	if string(first.Output) != want {
		t.Fatalf("first run output\n%s\nwant\n%s", first.Output, want)
	}
	// The second run finds the first one's total in kv.
	second := run(t, env, code)
	want = `{"words":17,"distinct":12,"top":` + top + `,"total_words":34}`
	if string(second.Output) != want {
		t.Fatalf("second run output\n%s\nwant\n%s", second.Output, want)
	}
	wantLogs := []string{"counted 17 words (12 distinct); 17 in total", "counted 17 words (12 distinct); 34 in total"}
	if !slices.Equal(logs, wantLogs) {
		t.Errorf("logs %q, want %q", logs, wantLogs)
	}

	// The journal holds exactly the calls main.c makes, the kv.put as an
	// effect (intent and executing before its completion), and the first
	// run's kv.get as failed (not found).
	type opPhase struct {
		op    string
		phase journal.Phase
	}
	var got []opPhase
	for _, c := range calls(t, env.Store, first.Run) {
		got = append(got, opPhase{c.Op, c.Phase})
	}
	wantCalls := []opPhase{
		{"run.input", journal.PhaseCompleted},
		{"kv.get", journal.PhaseFailed},
		{"kv.put", journal.PhaseIntent}, {"kv.put", journal.PhaseExecuting}, {"kv.put", journal.PhaseCompleted},
		{"run.log", journal.PhaseCompleted},
		{"run.set_output", journal.PhaseCompleted},
	}
	if !slices.Equal(got, wantCalls) {
		t.Errorf("journaled calls\n%v\nwant\n%v", got, wantCalls)
	}

	// Replay re-executes each run against its journal and must end with
	// the recorded output after the recorded number of calls.
	trust := journal.TrustKeys(env.Key.Public().(ed25519.PublicKey))
	for _, res := range []*host.Result{first, second} {
		j, err := replay.Load(context.Background(), env.Store, res.Run, trust)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := j.Replay(context.Background(), env.Engine, code, replay.Options{})
		if err != nil {
			t.Fatalf("replay of %s: %v", res.Run, err)
		}
		if !bytes.Equal(rep.Output, res.Output) || uint64(rep.Calls) != res.Steps {
			t.Errorf("replay of %s: output %s after %d calls; the run: %s after %d", res.Run, rep.Output, rep.Calls, res.Output, res.Steps)
		}
	}

	// Determinism: the same module, input and seed on a fresh store make
	// the same calls with the same requests and responses, entry by entry.
	other := testutil.NewEnv(t, host.Deps{}, host.Config{})
	again := run(t, other, code)
	a, b := calls(t, env.Store, first.Run), calls(t, other.Store, again.Run)
	if len(a) == 0 || !slices.Equal(a, b) {
		t.Errorf("two runs with the same seed journaled different calls:\n%+v\n%+v", a, b)
	}
	if !strings.Contains(string(again.Output), `"total_words":17}`) {
		t.Errorf("a fresh store's first run output %s, want total_words 17", again.Output)
	}
}
