package main

import (
	"context"
	"encoding/json"
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
// tasks, triggers, webhooks and modules. The daemon refuses the connection at
// dial (the API is the cell's own listener), the agent's call is denied
// naming it, and no second run exists.
func TestAgentCannotDriveItsOwnDaemon(t *testing.T) {
	d := serveDaemon(t, buildCLI(t), t.TempDir(), t.TempDir(), "--listen", "127.0.0.1:0")
	client, api := d.client, d.tcpAddr(t)
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
	})
	ctx := context.Background()
	run, err := client.Submit(ctx, cell.Submission{Module: code, Name: "egress.wasm", Input: in,
		Grant: "capabilities: {run: {}, http: {hosts: [\"127.0.0.1\"]}}"})
	if err != nil {
		t.Fatal(err)
	}
	ri := d.completed(t, run)
	var lines []string
	if err := json.Unmarshal(ri.Output, &lines); err != nil || len(lines) != 9 {
		t.Fatalf("output %s: %v", ri.Output, err)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "denied: http.request: "+api+" is the cell's own listener (the cell API on "+api+"): no grant reaches it") {
			t.Errorf("the agent's call to its daemon: %q, want it denied as the cell's own listener", l)
		}
	}
	runs, err := client.Runs(ctx)
	if err != nil || len(runs) != 1 {
		t.Fatalf("the daemon has %d runs (%v), want only the agent's own", len(runs), err)
	}
}
