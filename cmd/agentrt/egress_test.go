package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/testutil"
)

// TestAgentCannotDriveItsOwnDaemon is the review's critical finding, end
// to end: a real `agentrt cell serve --listen 127.0.0.1:PORT`, and a run
// submitted to it with the crawler's grant (http: {hosts: ["127.0.0.1"]})
// whose agent POSTs a submission of its own to the daemon's TCP API, with
// a grant that would run a shell, and reaches for the routes of votes,
// tasks, triggers, webhooks and modules, and for the daemon's Prometheus
// metrics (--metrics). The daemon refuses each connection at dial (the API
// and the metrics are the cell's own listeners), the agent's call is
// denied naming it, and no second run exists.
func TestAgentCannotDriveItsOwnDaemon(t *testing.T) {
	d := serveDaemon(t, buildCLI(t), t.TempDir(), t.TempDir(), "--listen", "127.0.0.1:0", "--metrics", "127.0.0.1:0")
	client, api := d.client, d.tcpAddr(t)
	m := regexp.MustCompile(`metrics on http://(127\.0\.0\.1:[0-9]+)/metrics`).FindStringSubmatch(d.logText())
	if m == nil {
		t.Fatalf("the daemon named no metrics address:\n%s", d.logText())
	}
	metrics := m[1]
	code := testutil.BuildGo(t, "host/testdata/agents/egress")
	// The submission's module is the smallest there is: a request of the
	// agent's is at most 1 MiB, and the daemon never gets to read it.
	evil, _ := json.Marshal(cell.Submission{Module: []byte("\x00asm\x01\x00\x00\x00"), Name: "evil.wasm",
		Grant: "capabilities: {run: {}, tool: {tools: [{name: sh, exec: /bin/sh, read: [/usr, /bin, /lib, /lib64, /etc], workspace: true}]}}"})
	in, _ := json.Marshal([]map[string]any{
		{"method": "POST", "url": "http://" + api + "/v1/runs", "headers": map[string]string{"Content-Type": "application/json"}, "body": string(evil)},
		{"method": "GET", "url": "http://" + api + "/v1/cell"},
		// The routes of approvals, tasks and triggers: a vote, a task or a
		// trigger of the agent's own would be a power it was not granted;
		// a webhook, though open to the world without the API token, would
		// let it start runs.
		{"method": "GET", "url": "http://" + api + "/v1/approvals"},
		// The event stream of the cell's runs.
		{"method": "GET", "url": "http://" + api + "/v1/runs/00000000000000000000000000000000/stream"},
		{"method": "POST", "url": "http://" + api + "/v1/runs/00000000000000000000000000000000/votes", "body": "{}"},
		{"method": "POST", "url": "http://" + api + "/v1/tasks", "body": string(evil)},
		{"method": "POST", "url": "http://" + api + "/v1/triggers", "body": `{"name":"t","on":"webhook"}`},
		{"method": "POST", "url": "http://" + api + "/v1/hooks/t", "body": "{}"},
		// A module pushed into the cell's library, for a submission by
		// hash to name later.
		{"method": "POST", "url": "http://" + api + "/v1/modules", "body": "\x00asm\x01\x00\x00\x00"},
		// The metrics: what runs the cell has and what they spend.
		{"method": "GET", "url": "http://" + metrics + "/metrics"},
	})
	ctx := context.Background()
	run, err := client.Submit(ctx, cell.Submission{Module: code, Name: "egress.wasm", Input: in,
		Grant: "capabilities: {run: {}, http: {hosts: [\"127.0.0.1\"]}}"})
	if err != nil {
		t.Fatal(err)
	}
	ri := d.completed(t, run)
	var lines []string
	if err := json.Unmarshal(ri.Output, &lines); err != nil || len(lines) != 10 {
		t.Fatalf("output %s: %v", ri.Output, err)
	}
	for i, l := range lines {
		want := "denied: http.request: " + api + " is the cell's own listener (the cell API on " + api + "): no grant reaches it"
		if i == len(lines)-1 {
			want = "denied: http.request: " + metrics + " is the cell's own listener (the cell's metrics on " + metrics + "): no grant reaches it"
		}
		if !strings.HasPrefix(l, want) {
			t.Errorf("the agent's call to its daemon: %q, want %q", l, want)
		}
	}
	runs, err := client.Runs(ctx)
	if err != nil || len(runs) != 1 {
		t.Fatalf("the daemon has %d runs (%v), want only the agent's own", len(runs), err)
	}
}
