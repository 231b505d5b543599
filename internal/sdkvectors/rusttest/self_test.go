package rusttest

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/budget"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/replay"
)

// TestSelfFromRust runs a Rust agent (guest-sdk/rust/testdata/selfagent),
// granted run alone, that asks a real host every call of the run.self
// family through the crate and writes what it decoded: who it is, what it
// may do, whether kv.get would pass the gate, its budget, its mode, a page
// of its own journal, a page over the host's cap, and run.self once more
// undecoded. Each answer must be the host's own view of the run, and the
// run must replay to the same output.
func TestSelfFromRust(t *testing.T) {
	ctx := context.Background()
	code := build(t, filepath.Join(crateDir, "testdata", "selfagent"))
	env := testutil.NewEnv(t, host.Deps{}, host.Config{})
	res, err := env.Host.Run(ctx, host.RunSpec{Code: code, Grant: host.DefaultGrant()})
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("run: %v %+v\n%s", err, res, env.Stderr(t, res.Run))
	}
	lines := strings.Split(strings.TrimSuffix(string(res.Output), "\n"), "\n")
	if len(lines) != 8 {
		t.Fatalf("the agent wrote %d lines, want 8:\n%s", len(lines), res.Output)
	}
	sum := sha256.Sum256(code)
	cellID := fmt.Sprintf("%x", env.Key.Public().(ed25519.PublicKey)[:8])
	// The journal as the host wrote it: the completed entries before the
	// agent's own run.self_journal call, which it asks for.
	var completed []string
	err = journal.ReadEntries(ctx, env.Store, res.Run, func(e *journal.Entry, _ *journal.Record) error {
		if e.Op == "run.self_journal" {
			return errStop
		}
		if e.Phase == journal.PhaseCompleted {
			completed = append(completed, fmt.Sprintf("%s@%d", e.Op, e.Seq))
		}
		return nil
	})
	if err != nil && err != errStop {
		t.Fatal(err)
	}
	want := []string{
		fmt.Sprintf("whoami abi=%d run=%s cell=%s depth=0 parent= task= attempt=0 sha=%x", abi.Version, res.Run, cellID, sum),
		"caps run budget=",
		fmt.Sprintf("may kv.get decision=deny stage=capability status=%d reason=", abi.StatusDenied),
		// run.input, run.self, run.self_caps, run.self_may, then this call:
		// the fifth step.
		fmt.Sprintf("budget dims=%d first=steps steps.spent=5 steps.limited=false", len(budget.DimNames())),
		"mode unattended modes=false rules=0",
		"journal next=0 " + strings.Join(completed, ","),
		"over the cap: bad_request: run.self_journal: limit 101 is above the host's cap of 100",
		"raw run.self ",
	}
	for i, w := range want {
		got := lines[i]
		if i == 1 {
			// The claims' JSON has a length, not a fixed text.
			got = got[:strings.LastIndex(got, " json=")]
			if strings.HasSuffix(lines[i], " json=0") {
				t.Errorf("run.self_caps: no claims: %q", lines[i])
			}
		}
		if i == 2 || i == 6 || i == 7 {
			if !strings.HasPrefix(got, w) {
				t.Errorf("line %d:\n got %q\nwant %q...", i, got, w)
			}
			continue
		}
		if got != w {
			t.Errorf("line %d:\n got %q\nwant %q", i, got, w)
		}
	}
	if len(completed) < 5 {
		t.Errorf("the host's journal holds %d completed calls before run.self_journal: %v", len(completed), completed)
	}
	j, err := replay.Load(ctx, env.Store, res.Run, journal.TrustKeys(env.Key.Public().(ed25519.PublicKey)))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := j.Replay(ctx, env.Engine, code, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if string(rep.Output) != string(res.Output) {
		t.Fatalf("the replay wrote\n%s\nthe run\n%s", rep.Output, res.Output)
	}
}

var errStop = fmt.Errorf("stop")
