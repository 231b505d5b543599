package wordfreq_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
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

// The input of examples/wordfreq-c's test: case folding, punctuation as a
// separator (doesn't is two words), a non-ASCII word kept whole, ties
// broken by byte order, and a cut at ten entries (t, the eleventh, is left
// out).
const input = "The quick brown fox jumps over the lazy dog. The dog sleeps; the fox doesn't. Grüße!"

const top = `[["the",4],["dog",2],["fox",2],["brown",1],["doesn",1],["grüße",1],["jumps",1],["lazy",1],["over",1],["quick",1]]`

func TestMain(m *testing.M) {
	// cargo's target directory outside the repository, for the test
	// binary: nothing is left in the source tree.
	dir, err := os.MkdirTemp("", "agentrt-wordfreq-rust-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("CARGO_TARGET_DIR", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func buildWith(t *testing.T, build func(context.Context, string, string) error, dir string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "wordfreq.wasm")
	if err := build(context.Background(), dir, out); err != nil {
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

func buildRust(t *testing.T) []byte { return buildWith(t, wasmbuild.Rust, ".") }

func buildC(t *testing.T) []byte { return buildWith(t, wasmbuild.C, filepath.Join("..", "wordfreq-c")) }

func grant(t *testing.T, file string) *host.Grant {
	t.Helper()
	g, err := host.LoadGrant(file)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// seed and wall are fixed so that runs on different stores can be
// compared.
var seed = bytes.Repeat([]byte{7}, 32)

const wall = int64(1_750_000_000_000_000_000)

func run(t *testing.T, env *testutil.Env, code []byte, grantFile, in string) *host.Result {
	t.Helper()
	res, err := env.Host.Run(context.Background(), host.RunSpec{Code: code, Name: "wordfreq.wasm", Input: []byte(in), Grant: grant(t, grantFile),
		Seed: seed, WallBase: wall})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func entries(t *testing.T, st journal.Store, run journal.RunID) []*journal.Entry {
	t.Helper()
	var out []*journal.Entry
	err := journal.ReadEntries(context.Background(), st, run, func(e *journal.Entry, _ *journal.Record) error {
		out = append(out, e)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestWordfreq(t *testing.T) {
	code := buildRust(t)
	var logs []string
	env := testutil.NewEnv(t, host.Deps{Sink: func(e host.Event) {
		if e.Kind == host.EventRunLog {
			logs = append(logs, string(e.Data))
		}
	}}, host.Config{})

	first := run(t, env, code, "grant.yaml", input)
	want := `{"words":17,"distinct":12,"top":` + top + `,"total_words":17}`
	if first.Status != journal.StatusCompleted || string(first.Output) != want {
		t.Fatalf("first run: %s %v, output\n%s\nwant\n%s", first.Status, first.Err, first.Output, want)
	}
	// The second run finds the first one's total in kv.
	second := run(t, env, code, "grant.yaml", input)
	want = `{"words":17,"distinct":12,"top":` + top + `,"total_words":34}`
	if second.Status != journal.StatusCompleted || string(second.Output) != want {
		t.Fatalf("second run: %s %v, output\n%s\nwant\n%s", second.Status, second.Err, second.Output, want)
	}
	wantLogs := []string{"counted 17 words (12 distinct); 17 in total", "counted 17 words (12 distinct); 34 in total"}
	if !slices.Equal(logs, wantLogs) {
		t.Errorf("logs %q, want %q", logs, wantLogs)
	}

	// The journal holds exactly the calls main.rs makes, the kv.put as an
	// effect (intent and executing before its completion), and the first
	// run's kv.get as failed (not found).
	var got []string
	for _, e := range entries(t, env.Store, first.Run) {
		if e.Step > 0 {
			got = append(got, fmt.Sprint(e.Op, " ", e.Phase))
		}
	}
	wantCalls := []string{"run.input completed", "kv.get failed", "kv.put intent", "kv.put executing", "kv.put completed",
		"run.log completed", "run.set_output completed"}
	if !slices.Equal(got, wantCalls) {
		t.Errorf("journaled calls\n%q\nwant\n%q", got, wantCalls)
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
}

// TestSameJournalAsC runs the C and the Rust agent on fresh stores, twice
// each with the same input and seed (the second run reads the first's
// total), and once with input that is not UTF-8: the journals must be the
// same entry by entry, wherever the two agents make the same calls, which
// is everywhere. What may differ is what differs between any two runs (run
// id, times, chain links, the cell, idempotency keys' run id) and the
// module (its hash in the header).
func TestSameJournalAsC(t *testing.T) {
	agents := []struct {
		lang, grant string
		code        []byte
	}{
		{"c", filepath.Join("..", "wordfreq-c", "grant.yaml"), buildC(t)},
		{"rust", "grant.yaml", buildRust(t)},
	}
	inputs := []string{input, input, "caf\xe9 au lait"} // the last is Latin-1, not UTF-8
	var journals [2][][]*journal.Entry
	for i, a := range agents {
		env := testutil.NewEnv(t, host.Deps{}, host.Config{})
		for _, in := range inputs {
			res := run(t, env, a.code, a.grant, in)
			journals[i] = append(journals[i], entries(t, env.Store, res.Run))
		}
	}
	for r, in := range inputs {
		c, rust := journals[0][r], journals[1][r]
		if len(c) != len(rust) {
			t.Errorf("run %d (%q): the C agent journaled %d entries, the Rust agent %d", r+1, in, len(c), len(rust))
		}
		calls := 0
		for i := range min(len(c), len(rust)) {
			if d := diff(c[i], rust[i]); d != "" {
				t.Errorf("run %d (%q), entry %d (%s %s): %s", r+1, in, i, c[i].Op, c[i].Phase, d)
			}
			if c[i].Step > 0 {
				calls++
			}
		}
		if calls == 0 {
			t.Errorf("run %d: no calls compared", r+1)
		}
	}
	// The runs did what they are for: totals 17 and 34, then a failure.
	last := func(js [][]*journal.Entry, r int) *journal.End { return js[r][len(js[r])-1].End }
	if e := last(journals[1], 1); e == nil || !strings.HasSuffix(string(e.Output), `"total_words":34}`) {
		t.Errorf("the Rust agent's second run ended %+v", e)
	}
	if e := last(journals[1], 2); e == nil || e.Status != journal.StatusFailed {
		t.Errorf("the Rust agent's run on Latin-1 input ended %+v, want failed", e)
	}
}

// diff says how two entries of the same call differ, "" when they do not.
func diff(a, b *journal.Entry) string {
	var d []string
	field := func(name string, x, y any) {
		if fmt.Sprint(x) != fmt.Sprint(y) {
			d = append(d, fmt.Sprintf("%s %v != %v", name, x, y))
		}
	}
	field("seq", a.Seq, b.Seq)
	field("phase", a.Phase, b.Phase)
	field("step", a.Step, b.Step)
	field("op", a.Op, b.Op)
	field("status", a.Status, b.Status)
	field("epoch", a.Epoch, b.Epoch)
	for _, f := range []struct {
		name string
		x, y []byte
	}{
		{"input hash", a.InputHash, b.InputHash}, {"request", a.Request, b.Request},
		{"output hash", a.OutputHash, b.OutputHash}, {"response", a.Response, b.Response}, {"gate", a.Gate, b.Gate},
	} {
		if !bytes.Equal(f.x, f.y) {
			d = append(d, fmt.Sprintf("%s %x != %x", f.name, f.x, f.y))
		}
	}
	// The idempotency key is <run id>-<step>: the step must agree.
	_, ka, _ := strings.Cut(a.Key, "-")
	_, kb, _ := strings.Cut(b.Key, "-")
	field("idempotency key's step", ka, kb)
	if (a.Header == nil) != (b.Header == nil) || (a.End == nil) != (b.End == nil) {
		return "one is a start or end entry and the other not"
	}
	if a.Header != nil {
		field("header input", fmt.Sprintf("%x", a.Header.Input), fmt.Sprintf("%x", b.Header.Input))
		field("header seed", fmt.Sprintf("%x", a.Header.Seed), fmt.Sprintf("%x", b.Header.Seed))
		field("header grant", fmt.Sprintf("%x", a.Header.Grant), fmt.Sprintf("%x", b.Header.Grant))
		field("header wall base", a.Header.WallBase, b.Header.WallBase)
		field("header abi", a.Header.ABI, b.Header.ABI)
		field("header module name", a.Header.ModuleName, b.Header.ModuleName)
	}
	if a.End != nil {
		field("end", fmt.Sprintf("%s %q %q %d", a.End.Status, a.End.Output, a.End.Error, a.End.Steps),
			fmt.Sprintf("%s %q %q %d", b.End.Status, b.End.Output, b.End.Error, b.End.Steps))
	}
	return strings.Join(d, "; ")
}

// TestReproducibleBuild builds the agent twice, in two cargo target
// directories: the same bytes, so the same module hash in run headers.
func TestReproducibleBuild(t *testing.T) {
	first := buildRust(t)
	t.Setenv("CARGO_TARGET_DIR", filepath.Join(t.TempDir(), "target"))
	second := buildRust(t)
	if !bytes.Equal(first, second) {
		t.Fatalf("two builds differ: %d and %d bytes", len(first), len(second))
	}
}
