package bench

import (
	"bytes"
	"context"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/host"
	agentcell "github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/clock"
	"github.com/agentrt/agentrt/journal"
)

// TestParkGuestWritesWhatItClaims checks park.wat's hand-assembled requests
// against the ABI: timer.sleep's {"for": ns} with the input's duration,
// approval.request's action and group, and, once woken, run.log's "woke",
// each the canonical CBOR the ABI's types encode to; and that the run parks
// on each and completes once resumed.
func TestParkGuestWritesWhatItClaims(t *testing.T) {
	g := guests(t, false)
	ctx := context.Background()
	appr, err := newParkApprover()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := appr.install(dir); err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	sink := newWakeSink()
	c, err := agentcell.Open(ctx, dir, agentcell.Options{Clock: clk, Sink: sink.sink})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	sleep := time.Hour + 7*time.Millisecond
	w, err := parkBare(ctx, c.Host, g.Park, 1)
	if err != nil {
		t.Fatal(err)
	}
	if want := clk.Now().Add(time.Hour + time.Millisecond); !w.until[0].Equal(want) {
		t.Fatalf("the timer run waits until %v, want %v", w.until[0], want)
	}
	// One more timer run with a duration of its own, to check the copy of
	// the input into the request.
	res, err := c.Host.Run(ctx, host.RunSpec{Code: g.Park, Input: parkInput(sleep), Grant: parkGrant()})
	if err != nil || res.Status != journal.StatusParked || res.Wait.Kind != journal.WaitTimer {
		t.Fatalf("the timer run: %+v, %v", res, err)
	}
	if got := time.Unix(0, res.Wait.Until).Sub(clk.Now()); got != sleep {
		t.Fatalf("the run sleeps for %v, want %v", got, sleep)
	}
	if err := appr.vote(c.Book, w.approvals[0], w.approvalSteps[0]); err != nil {
		t.Fatal(err)
	}
	clk.Set(time.Unix(0, res.Wait.Until))
	want := map[string][]byte{}
	want["timer.sleep"], _ = abi.Marshal(&abi.TimerSleepRequest{For: int64(sleep)})
	want["approval.request"], _ = abi.Marshal(&abi.ApprovalRequest{Action: "bench", Group: parkGroup})
	want["run.log"], _ = abi.Marshal(&abi.LogRequest{Level: 1, Message: "woke"})
	for _, run := range []journal.RunID{w.approvals[0], res.Run} {
		st, err := c.Host.Reopen(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		end, err := st.Execute(ctx)
		if err != nil || end.Status != journal.StatusCompleted {
			t.Fatalf("run %s resumed: %+v, %v", run, end, err)
		}
		if _, err := sink.next(run); err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		err = journal.ReadEntries(ctx, c.Store, run, func(e *journal.Entry, _ *journal.Record) error {
			if w, ok := want[e.Op]; ok && (e.Phase == journal.PhaseIntent || e.Op == "run.log") {
				if !bytes.Equal(e.Request, w) {
					t.Errorf("run %s: %s request %x, want %x", run, e.Op, e.Request, w)
				}
				seen[e.Op] = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !seen["run.log"] || !seen["timer.sleep"] && !seen["approval.request"] {
			t.Errorf("run %s journaled %v", run, seen)
		}
	}
}

// TestParkedFigures runs figure 16 alone, at quick sizes, and checks what
// must hold whatever the machine: every run parked with one timer each (the
// harness fails otherwise), a Go heap per parked run well under the goal,
// floors measured, p50 no later than p99.
func TestParkedFigures(t *testing.T) {
	g := guests(t, false)
	cfg := QuickConfig()
	h := &harness{cfg: cfg, root: t.TempDir(), log: io.Discard, engine: engine(t), guests: g}
	figs, err := h.parked(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	byID := map[string]Figure{}
	for _, f := range figs {
		f.settle()
		ids = append(ids, f.ID)
		byID[f.ID] = f
		if f.Measures == "" || f.Goal == nil || f.Met == nil || len(f.Samples) != cfg.Reps {
			t.Errorf("figure %s: %+v", f.ID, f)
		}
	}
	want := "16b 16c"
	if runtime.GOOS == "linux" {
		want = "16a " + want
	}
	if strings.Join(ids, " ") != want {
		t.Fatalf("figures %v, want %s", ids, want)
	}
	if f, ok := byID["16a"]; ok {
		if f.Extra["runs parked"] != float64(cfg.ParkedRuns) || f.Extra["timers armed"] != float64(cfg.ParkedRuns) {
			t.Errorf("16a: %v", f.Extra)
		}
		if heap := f.Extra["Go heap B/run"]; heap <= 0 || heap > 4096 {
			t.Errorf("16a: the Go heap grew %v bytes per parked run when Recover armed their timers", heap)
		}
	}
	for _, id := range []string{"16b", "16c"} {
		f := byID[id]
		if f.Value <= 0 || f.Extra["p50 ms"] <= 0 || f.Extra["p50 ms"] > f.Value || f.Floor == nil || f.Floor.Value <= 0 || f.Ratio <= 0 {
			t.Errorf("figure %s: value %v, extra %v, floor %+v", id, f.Value, f.Extra, f.Floor)
		}
	}
}
