package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
)

// TestAgentCannotDriveItsOwnDaemon is the review's critical finding, end
// to end: a real `agentrt cell serve --listen 127.0.0.1:PORT`, and a run
// submitted to it with the crawler's grant (http: {hosts: ["127.0.0.1"]})
// whose agent POSTs a submission of its own to the daemon's TCP API, with
// a grant that would run a shell, and reaches for the routes of votes,
// tasks, triggers and webhooks. The daemon refuses the connection at
// dial (the API is the cell's own listener), the agent's call is denied
// naming it, and no second run exists.
func TestAgentCannotDriveItsOwnDaemon(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "agentrt")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	data := t.TempDir()
	log := &lockedLog{}
	cmd := exec.Command(bin, "--data", data, "--cache", filepath.Join(t.TempDir(), "cache"), "cell", "serve", "--listen", "127.0.0.1:0")
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	client, err := cell.Dial("unix:" + cell.SocketPath(data))
	if err != nil {
		t.Fatal(err)
	}
	addr := regexp.MustCompile(`and on http://(127\.0\.0\.1:\d+)`)
	var api string
	for deadline := time.Now().Add(60 * time.Second); api == ""; time.Sleep(20 * time.Millisecond) {
		if m := addr.FindStringSubmatch(log.String()); m != nil && strings.Contains(log.String(), "recovered ") {
			api = m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon did not come up:\n%s", log.String())
		}
	}
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
		{"method": "POST", "url": "http://" + api + "/v1/runs/00000000000000000000000000000000/votes", "body": "{}"},
		{"method": "POST", "url": "http://" + api + "/v1/tasks", "body": string(evil)},
		{"method": "POST", "url": "http://" + api + "/v1/triggers", "body": `{"name":"t","on":"webhook"}`},
		{"method": "POST", "url": "http://" + api + "/v1/hooks/t", "body": "{}"},
	})
	ctx := context.Background()
	run, err := client.Submit(ctx, cell.Submission{Module: code, Name: "egress.wasm", Input: in,
		Grant: "capabilities: {run: {}, http: {hosts: [\"127.0.0.1\"]}}"})
	if err != nil {
		t.Fatal(err)
	}
	var ri cell.RunInfo
	for deadline := time.Now().Add(60 * time.Second); ri.Status != journal.StatusCompleted; time.Sleep(20 * time.Millisecond) {
		if ri, err = client.Run(ctx, run); err != nil || (ri.Status != journal.StatusRunning && ri.Status != journal.StatusCompleted) {
			t.Fatalf("run %s: %v %+v\n%s", run, err, ri, log.String())
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run did not end: %+v", ri)
		}
	}
	var lines []string
	if err := json.Unmarshal(ri.Output, &lines); err != nil || len(lines) != 7 {
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

// lockedLog is a daemon's stderr, read while it is written.
type lockedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
