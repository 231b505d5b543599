package main

import (
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host/cell"
)

// TestTaskShowSaysWhatTheRunWaitsFor writes a task whose current run is
// parked on an approval, with a call waiting for an answer: task show names
// the wait (kind, step, op, group, digest, expiry) and the call, with the
// command that answers it, and escapes what the guest chose.
func TestTaskShowSaysWhatTheRunWaitsFor(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	exp := at.Add(time.Hour)
	run := strings.Repeat("ab", 16)
	tk := cell.Task{ID: strings.Repeat("cd", 16), State: cell.TaskRunning, Objective: "ship it\x1b[2J", Module: "agent.wasm",
		ModuleSHA256: strings.Repeat("ef", 32), Retries: 2, Backoff: "10s", MaxBackoff: "1m",
		Caps: capability.Budget{Steps: capability.Limit(100), MicroUSD: capability.Limit(2_500_000)}, Spent: map[string]uint64{"steps": 7},
		Created: at,
		Attempts: []cell.Attempt{
			{Seq: 1, Run: strings.Repeat("01", 16), Status: "failed", Started: at, Ended: &at, Steps: 7, Spent: map[string]uint64{"steps": 7}, Error: "guest exited with status 1"},
			{Seq: 2, Run: run, Status: "parked", Started: at,
				Wait:    &cell.WaitInfo{Kind: "approval", Step: 4, Op: "http.request", Group: "ops", Digest: "00ff", Until: &exp},
				Waiting: []cell.ApprovalInfo{{RunID: run, Step: 4, Op: "http.request", Resource: "example.com\x07"}}},
		}}
	var b strings.Builder
	if err := writeTask(&b, tk); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"task " + tk.ID + " running\n",
		"retries: 2, waiting min(10s·2^(n-1), 1m) after attempt n\n",
		"caps: steps=100 micro_usd=$2.5; spent: steps=7\n",
		"run " + run + " waits for approval at step 4 (http.request), group ops, action digest 00ff, expiring ",
		"run " + run + " step 4 waits for approval: http.request \"example.com\\a\" (agentrt approve " + run + " --step 4)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("task show lacks %q:\n%s", want, out)
		}
	}
	if strings.ContainsAny(out, "\x1b\x07") {
		t.Errorf("task show passes control characters to the terminal:\n%q", out)
	}
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "1 ") || strings.HasPrefix(l, "2 ") {
			lines = append(lines, strings.Join(strings.Fields(l), " "))
		}
	}
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "1 "+strings.Repeat("01", 16)+" failed 7 steps=7 ") ||
		!strings.HasPrefix(lines[1], "2 "+run+" parked - none ") {
		t.Errorf("attempt rows %q", lines)
	}
}
