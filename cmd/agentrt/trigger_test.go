package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/host/cell/trigger"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/badgerstore"
)

// waitTriggers waits until the daemon d has started its triggers.
func (d *guestDaemon) waitTriggers(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(d.log.String(), "triggers: ") {
		if time.Now().After(deadline) {
			t.Fatalf("the daemon did not start its triggers\n%s", d.log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTriggerScheduleExactlyOnceAcrossSIGKILL runs a real `agentrt cell
// serve` with an every-second schedule and kills it with SIGKILL five
// times, each at another point after a firing (0 to 900 ms in: before the
// claim, between the claim and the start, between the start and the mark,
// while the run executes), restarting it each time. Afterwards, no moment
// has more than one run, every started firing names the run whose origin
// is its moment, and a firing left claimed has no run.
func TestTriggerScheduleExactlyOnceAcrossSIGKILL(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the test drains the daemon with SIGTERM at the end")
	}
	bin := buildCLI(t)
	data, cache, files := t.TempDir(), t.TempDir(), t.TempDir()
	module := filepath.Join(files, "loop.wasm")
	grant := filepath.Join(files, "grant.yaml")
	os.WriteFile(module, testutil.BuildWAT(t, "host/testdata/wat/loop.wat"), 0o600)
	os.WriteFile(grant, []byte("capabilities: {run: {}}\n"), 0o600)
	d := startGuestDaemon(t, bin, data, cache)
	d.waitTriggers(t)
	out, err := exec.Command(bin, "--data", data, "trigger", "add", "tick", "--module", module, "--grant", grant,
		"--on", "schedule:@every 1s", "--misfire", "all:2", "--overlap", "allow").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "trigger tick added") {
		t.Fatalf("trigger add: %v\n%s", err, out)
	}
	ctx := context.Background()
	// newest waits until the log has a firing past seq, and returns the
	// newest seq.
	newest := func(d *guestDaemon, past uint64) uint64 {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			log, err := d.client.TriggerLog(ctx, "tick", 1)
			if err == nil && len(log) == 1 && log[0].Seq > past {
				return log[0].Seq
			}
			if time.Now().After(deadline) {
				t.Fatalf("no firing past %d: %+v %v\n%s", past, log, err, d.log.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	var seq uint64
	var logs strings.Builder
	for _, at := range []time.Duration{0, 150 * time.Millisecond, 400 * time.Millisecond, 650 * time.Millisecond, 900 * time.Millisecond} {
		seq = newest(d, seq)
		time.Sleep(at)
		d.kill()
		logs.WriteString(d.log.String())
		d = startGuestDaemon(t, bin, data, cache)
		d.waitTriggers(t)
	}
	seq = newest(d, seq)
	newest(d, seq)
	d.cmd.Process.Signal(syscall.SIGTERM)
	if err := <-d.exited; err != nil {
		t.Fatalf("the daemon's drain: %v\n%s", err, d.log.String())
	}
	logs.WriteString(d.log.String())

	st, err := badgerstore.Open(cell.StoreDir(data))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	metas, err := st.Runs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	runs := map[uint64][]journal.RunID{}
	for _, m := range metas {
		if o := m.Origin; o != nil && o.Kind == cell.OriginTrigger && o.ID == "tick" {
			runs[o.Seq] = append(runs[o.Seq], m.ID)
		}
	}
	var started, claimed int
	err = st.CellList("trigger-firings", "tick\x00", func(_ string, v []byte) error {
		var f cell.Firing
		if err := json.Unmarshal(v, &f); err != nil {
			return err
		}
		switch f.State {
		case cell.FiringStarted:
			started++
			if ids := runs[f.Seq]; len(ids) != 1 || ids[0].String() != f.Run {
				t.Errorf("firing %d names run %s; the runs of its moment: %v", f.Seq, f.Run, ids)
			}
		case cell.FiringClaimed:
			claimed++
			if len(runs[f.Seq]) != 0 {
				t.Errorf("firing %d is left claimed, and has runs %v", f.Seq, runs[f.Seq])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for s, ids := range runs {
		if len(ids) != 1 {
			t.Errorf("moment %d has %d runs: %v", s, len(ids), ids)
		}
	}
	if started < 3 {
		t.Fatalf("only %d firings started", started)
	}
	t.Logf("%d firings started, %d left claimed, %d runs; resolved after a kill: %d started before it, %d started after it",
		started, claimed, len(runs), strings.Count(logs.String(), "before the restart"), strings.Count(logs.String(), "starting it"))
}

// TestAgentCannotFireAWebhook: an agent granted http to 127.0.0.1 POSTs a
// correctly signed webhook to its own daemon's TCP listener; the call is
// denied at dial (the listener is the cell's own), and the trigger does not
// fire. The same request sent from outside the cell fires it.
func TestAgentCannotFireAWebhook(t *testing.T) {
	d := serveDaemon(t, buildCLI(t), t.TempDir(), t.TempDir(), "--listen", "127.0.0.1:0")
	client, api := d.client, d.tcpAddr(t)
	ctx := context.Background()
	ti, err := client.AddTrigger(ctx, cell.TriggerSpec{Name: "deploy", On: "webhook", Module: testutil.BuildWAT(t, "host/testdata/wat/loop.wat"),
		Grant: "capabilities: {run: {}}"})
	if err != nil {
		t.Fatal(err)
	}
	body := `{"ref":"main"}`
	now := time.Now()
	headers := map[string]string{"Content-Type": "application/json", trigger.HeaderTimestamp: strconv.FormatInt(now.Unix(), 10),
		trigger.HeaderSignature: trigger.Sign(ti.Secret, now, []byte(body))}
	url := "http://" + api + cell.HookPrefix + "deploy"
	in, _ := json.Marshal([]map[string]any{{"method": "POST", "url": url, "headers": headers, "body": body}})
	run, err := client.Submit(ctx, cell.Submission{Module: testutil.BuildGo(t, "host/testdata/agents/egress"), Name: "egress.wasm", Input: in,
		Grant: "capabilities: {run: {}, http: {hosts: [\"127.0.0.1\"]}}"})
	if err != nil {
		t.Fatal(err)
	}
	ri := d.completed(t, run)
	var lines []string
	if err := json.Unmarshal(ri.Output, &lines); err != nil || len(lines) != 1 {
		t.Fatalf("output %s: %v", ri.Output, err)
	}
	if !strings.HasPrefix(lines[0], "denied: http.request: "+api+" is the cell's own listener") {
		t.Fatalf("the agent's webhook: %q, want it denied as the cell's own listener", lines[0])
	}
	if fired, err := client.TriggerLog(ctx, "deploy", 0); err != nil || len(fired) != 0 {
		t.Fatalf("the trigger's log: %+v %v, want it empty", fired, err)
	}
	req, _ := http.NewRequest("POST", url, bytes.NewReader([]byte(body)))
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("the same webhook from outside: %s", resp.Status)
	}
}
