package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
)

// TestDaemonKilledWithQueuedRuns kills `agentrt cell serve --workers 1`
// with SIGKILL while one run holds the worker inside an HTTP request and
// three wait in the queue at priorities 2, 8 and 5. The restarted daemon
// queues them again and executes each once, by priority; `agentrt cell
// status` showed the queue before the kill, and `agentrt replay` verifies
// every queued run's journal.
func TestDaemonKilledWithQueuedRuns(t *testing.T) {
	bin, cache, data := buildCLI(t), testutil.CompileCache(), t.TempDir()
	code := testutil.BuildC(t, "host/testdata/agents/waiter")

	var mu sync.Mutex
	var seen []string
	held := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if string(body) != "before" {
			fmt.Fprint(w, "ok")
			return
		}
		mu.Lock()
		seen = append(seen, r.URL.Path)
		mu.Unlock()
		if r.URL.Path == "/hold" {
			held <- struct{}{}
			<-r.Context().Done()
			return
		}
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()
	grant := fmt.Sprintf("capabilities:\n  run: {}\n  kv: {namespace: waiter}\n  timer: {}\n  approval: {groups: [release]}\n  http: {hosts: [%q]}\n",
		strings.TrimPrefix(srv.URL, "http://"))
	submit := func(d *daemon, path string, prio int) string {
		t.Helper()
		in, _ := json.Marshal(map[string]any{"hits": srv.URL + path})
		run, err := d.client.Submit(context.Background(), cell.Submission{Module: code, Name: "waiter.wasm", Grant: grant, Input: in, Priority: prio})
		if err != nil {
			t.Fatal(err)
		}
		return run
	}

	d := serveDaemon(t, bin, cache, data, "--workers", "1")
	submit(d, "/hold", 0)
	select {
	case <-held:
	case <-time.After(60 * time.Second):
		t.Fatalf("the first run never made its request\n%s", d.logText())
	}
	queued := map[string]string{}
	for _, q := range []struct {
		path string
		prio int
	}{{"/p2", 2}, {"/p8", 8}, {"/p5", 5}} {
		queued[q.path] = submit(d, q.path, q.prio)
	}
	ci, err := d.client.Cell(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s := ci.Scheduler; s == nil || s.Workers != 1 || s.Busy != 1 || s.Queued != 3 || s.QueuedByPriority[8] != 1 {
		t.Fatalf("before the kill the scheduler is %+v", ci.Scheduler)
	}
	out, err := exec.Command(bin, "--data", data, "--cache", cache, "cell", "status").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "workers   1 busy of 1") || !strings.Contains(string(out), "queued    3 of at most 10000 (priority 8: 1, priority 5: 1, priority 2: 1)") {
		t.Fatalf("agentrt cell status: %v\n%s", err, out)
	}
	out, err = exec.Command(bin, "--data", data, "--cache", cache, "runs").CombinedOutput()
	if err != nil || strings.Count(string(out), "queued (priority ") != 3 {
		t.Fatalf("agentrt runs: %v\n%s", err, out)
	}
	d.kill()

	d = serveDaemon(t, bin, cache, data, "--workers", "1")
	for path, run := range queued {
		if ri := d.waitEnd(t, run); ri.Status != journal.StatusCompleted {
			t.Fatalf("queued run %s (%s) ended %s: %s\n%s", run, path, ri.Status, ri.Error, d.logText())
		}
	}
	mu.Lock()
	got := slices.Clone(seen)
	mu.Unlock()
	var order []string
	for _, p := range got {
		if p != "/hold" {
			order = append(order, p)
		}
	}
	if strings.Join(order, " ") != "/p8 /p5 /p2" {
		t.Fatalf("the queued runs posted %v after the restart: want each once, by priority", got)
	}
	if err := d.term(t); err != nil {
		t.Fatalf("the daemon exited with %v after SIGTERM\n%s", err, d.logText())
	}
	for _, run := range queued {
		if out, err := exec.Command(bin, "--data", data, "--cache", cache, "replay", run).CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "verified ") {
			t.Fatalf("replay of run %s: %v\n%s", run, err, out)
		}
	}
}
