package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/agentrt/agentrt/host/budget"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentrt/agentrt/abi"
	hostcell "github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/fakellm"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/badgerstore"
)

// modelCall is one llm.complete of a run, as its journal records it.
type modelCall struct {
	step uint64
	// turn is the script's turn that answers the call: the number of
	// the model's answers the request holds (the fake matches in order).
	turn   int
	stream bool
	// answered: the journal holds the whole answer (a non-streamed
	// call's completed entry, or a stream's last batch).
	answered bool
	// ended: the call has an outcome, an answer or an error, in the
	// journal; a call dispatched without one is in doubt.
	ended bool
	usage abi.LLMUsage
	// reserved is the call's worst case, which its intent reserved.
	reserved budget.Amounts
}

// modelCalls reads the model calls of run from the store of data, which
// no process holds, in the order they were made.
func modelCalls(t *testing.T, data, run string) []*modelCall {
	t.Helper()
	st, err := badgerstore.Open(hostcell.StoreDir(data))
	if err != nil {
		t.Fatalf("the store does not open: %v", err)
	}
	defer st.Close()
	ctx := context.Background()
	id, err := journal.ParseRunID(run)
	if err != nil {
		t.Fatal(err)
	}
	var calls []*modelCall
	byStep := map[uint64]*modelCall{}
	err = journal.ReadEntries(ctx, st, id, func(e *journal.Entry, _ *journal.Record) error {
		if e.Op != "llm.complete" && e.Op != "llm.next" {
			return nil
		}
		g, err := journal.ForGuest(ctx, st, e)
		if err != nil {
			return fmt.Errorf("entry %d: %w", e.Seq, err)
		}
		if e.Op == "llm.complete" && e.Phase == journal.PhaseIntent {
			// A request in blob form is the guest's once resolved.
			raw, err := journal.ResolvePayload(ctx, st, e.Request, e.InputHash, 64<<20)
			if err != nil {
				return fmt.Errorf("entry %d: llm.complete request: %w", e.Seq, err)
			}
			var req abi.LLMRequest
			if err := abi.Unmarshal(raw, &req); err != nil {
				return fmt.Errorf("entry %d: llm.complete request: %w", e.Seq, err)
			}
			c := &modelCall{step: e.Step, stream: req.Stream}
			if len(e.Budget) > 0 {
				ops, err := budget.DecodeRecord(e.Budget)
				if err != nil {
					return fmt.Errorf("entry %d: budget: %w", e.Seq, err)
				}
				for _, o := range ops {
					if o.Kind == budget.OpReserve && o.Step == e.Step {
						c.reserved = o.Amounts
					}
				}
			}
			for _, m := range req.Messages {
				if m.Role == abi.RoleAssistant {
					c.turn++
				}
			}
			calls = append(calls, c)
			byStep[e.Step] = c
			return nil
		}
		switch e.Phase {
		case journal.PhaseFailed:
			if c := callOf(byStep, e, g); c != nil {
				c.ended = true
			}
		case journal.PhaseCompleted:
			c := callOf(byStep, e, g)
			if c == nil {
				return fmt.Errorf("entry %d: %s of no model call", e.Seq, e.Op)
			}
			// A streamed call answers batches, an unstreamed one the
			// whole answer.
			var b abi.LLMBatch
			if e.Op == "llm.complete" && !c.stream {
				var r abi.LLMResponse
				if err := abi.Unmarshal(g.Response, &r); err != nil {
					return fmt.Errorf("entry %d: %s response: %w", e.Seq, e.Op, err)
				}
				b.Response = &r
			} else if err := abi.Unmarshal(g.Response, &b); err != nil {
				return fmt.Errorf("entry %d: %s batch: %w", e.Seq, e.Op, err)
			}
			if b.Response != nil {
				c.answered, c.ended, c.usage = true, true, b.Response.Usage
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reading the journal: %v", err)
	}
	return calls
}

// callOf is the model call an entry belongs to: its own step for
// llm.complete, the step its request names for llm.next.
func callOf(byStep map[uint64]*modelCall, e, g *journal.Entry) *modelCall {
	if e.Op == "llm.complete" {
		return byStep[e.Step]
	}
	var next abi.LLMNextRequest
	if abi.Unmarshal(e.Request, &next) != nil {
		return nil
	}
	return byStep[next.Step]
}

// runStatus is the status `agentrt runs --json` gives the cell's one run.
func runStatus(t *testing.T, c *cell) (id, status string) {
	t.Helper()
	var r struct {
		Run    string `json:"run_id"`
		Status string `json:"status"`
	}
	out := c.run("runs", "--json")
	if len(strings.TrimSpace(string(out))) == 0 {
		return "", ""
	}
	if err := json.Unmarshal(lastLine(out), &r); err != nil {
		t.Fatalf("runs --json: %q: %v", out, err)
	}
	return r.Run, r.Status
}

// TestResearchAgentSurvivesKills kills a real `agentrt run` of the agent
// (streamed answers, slowed so that a kill lands inside one) with SIGKILL
// at 31 points: as each of the five model calls arrives at the provider
// and twice inside its stream, the moment the provider has written each
// whole answer, while each page fetch is in flight, and at times spread
// over the run. Then `agentrt resume` finishes the run.
// It asserts that the run completes with the uninterrupted run's
// output; that no call the journal had answered was sent to the provider
// again; and that the model usage the journal records equals what the
// provider counted, but for the one attempt a kill can leave unrecorded.
func TestResearchAgentSurvivesKills(t *testing.T) {
	mod := module(t)
	cache := testutil.CompileCache()
	baseline, span := uninterrupted(t, mod, cache)

	type point struct {
		call     int           // kill after model call call arrived, plus after
		answered int           // or as the fake has written the whole answer of this call
		fetch    int           // or while page fetch fetch is in flight
		after    time.Duration // or after the first model call arrived
	}
	var points []point
	for k := 1; k <= 5; k++ {
		for _, d := range []time.Duration{0, 2 * chunkDelay, 5 * chunkDelay} {
			points = append(points, point{call: k, after: d})
		}
	}
	// The provider has sent the whole answer, and the cell may not have
	// journaled it yet: the one attempt whose cost a kill can hide.
	for k := 1; k <= 5; k++ {
		points = append(points, point{answered: k})
	}
	for j := 1; j <= 3; j++ {
		points = append(points, point{fetch: j})
	}
	for i := 1; i <= 8; i++ {
		points = append(points, point{after: span * time.Duration(i) / 9})
	}
	if testing.Short() {
		points = []point{points[1], points[7], points[15], points[20]}
	}
	for _, p := range points {
		name := fmt.Sprintf("after-%v", p.after)
		switch {
		case p.call > 0:
			name = fmt.Sprintf("call-%d+%v", p.call, p.after)
		case p.answered > 0:
			name = fmt.Sprintf("answered-%d", p.answered)
		case p.fetch > 0:
			name = fmt.Sprintf("fetch-%d", p.fetch)
		}
		t.Run(name, func(t *testing.T) {
			site := startSite(t)
			fake := startFake(t, loadScript(t, site.URL, slow))
			trigger := make(chan struct{})
			var once sync.Once
			fire := func() { once.Do(func() { close(trigger) }) }
			var kill func()
			fake.arrived = func(n int, _ *http.Request) {
				if p.call == n || (p.call == 0 && p.answered == 0 && p.fetch == 0) {
					fire()
				}
			}
			fake.answered = func(n int) {
				if p.answered == n {
					kill() // at once, from the handler: the cell has the bytes, perhaps not the record
					fire()
				}
			}
			fetches := 0
			site.hold = func(r *http.Request) {
				site.mu.Lock()
				fetches++
				n := fetches
				site.mu.Unlock()
				if n == p.fetch {
					fire()
					<-r.Context().Done() // the client dies with the request open
				}
			}
			c := newCell(t, fake, "openai-chat", fake.Script.APIKey, cache)
			cmd := c.cmd("run", mod, "--grant", exampleFile("grant.yaml"), "-q", "--json", "--input", input(site.URL, true))
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			kill = func() { cmd.Process.Signal(syscall.SIGKILL) }
			select {
			case <-trigger:
				time.Sleep(p.after)
			case <-time.After(60 * time.Second):
				cmd.Process.Kill()
				t.Fatal("the run never reached its kill point")
			}
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			site.mu.Lock()
			site.hold = nil
			site.mu.Unlock()

			run, status := runStatus(t, c)
			if run == "" {
				t.Fatal("a run killed after its first model call left no journal")
			}
			before := modelCalls(t, c.data, run)
			sent := len(fake.settledStats(t).Requests)
			if status != "completed" {
				res, _ := parseRun(t, c.run("resume", run, "--json"))
				if res.Status != "completed" {
					t.Fatalf("resumed run: %s %s", res.Status, res.Error)
				}
			}
			checkResumed(t, c, fake, site.URL, run, before, sent, baseline)
		})
	}
}

// chunkDelay slows the fake's streams so that a kill lands inside one.
const chunkDelay = 12 * time.Millisecond

func slow(sc *fakellm.Script) {
	for i := range sc.Turns {
		sc.Turns[i].Reply.ChunkDelay = fakellm.Duration(chunkDelay)
	}
}

// uninterrupted runs the agent, streamed and slowed, to its end: its
// output, with the site's address written SITE, and how long it takes
// from its first model call.
func uninterrupted(t *testing.T, mod, cache string) (string, time.Duration) {
	t.Helper()
	site := startSite(t)
	fake := startFake(t, loadScript(t, site.URL, slow))
	var first time.Time
	var once sync.Once
	fake.arrived = func(int, *http.Request) { once.Do(func() { first = time.Now() }) }
	c := newCell(t, fake, "openai-chat", fake.Script.APIKey, cache)
	res, _ := parseRun(t, c.run("run", mod, "--grant", exampleFile("grant.yaml"), "-q", "--json", "--input", input(site.URL, true)))
	span := time.Since(first)
	if res.Status != "completed" {
		t.Fatalf("uninterrupted run: %s %s", res.Status, res.Error)
	}
	return strings.ReplaceAll(string(res.Output), site.URL, "SITE"), span
}

// checkResumed checks a run that was killed and then finished: before
// are its model calls as the kill left them, sent the requests the fake
// had got by then. The run's output is the uninterrupted one; no call the
// journal had answered was sent to the provider again; and the model
// usage the journal records equals what the provider counted, but for the
// one answer a kill can leave unrecorded.
func checkResumed(t *testing.T, c *cell, fake *fakeServer, siteURL, run string, before []*modelCall, sent int, baseline string) {
	t.Helper()
	var final string
	{
		var r struct {
			Output json.RawMessage `json:"output"`
		}
		json.Unmarshal(lastLine(c.run("runs", "--json")), &r)
		final = strings.ReplaceAll(string(r.Output), siteURL, "SITE")
	}
	if final != baseline {
		t.Fatalf("the resumed run output\n%s\nwant the uninterrupted run's\n%s", final, baseline)
	}

	st := fake.settledStats(t)
	answeredBefore := map[int]bool{}
	for _, mc := range before {
		answeredBefore[mc.turn] = answeredBefore[mc.turn] || mc.answered
	}
	for _, r := range st.Requests[sent:] {
		if answeredBefore[r.Turn] {
			t.Fatalf("model call %d (turn %s), answered in the journal before the kill, was sent again after it: %+v", r.Turn+1, r.TurnName, r)
		}
	}
	// A call sent again after the provider had answered it whole
	// is the one a kill cut between the provider's last byte
	// and the journal's record of it: at most one, and one the
	// journal had not answered.
	again := st.ResentAfterCompletion()
	if len(again) > 1 {
		t.Fatalf("%d calls sent again after a complete answer: %+v", len(again), again)
	}
	for _, r := range again {
		if answeredBefore[r.Turn] {
			t.Fatalf("turn %d was answered in the journal and sent again: %+v", r.Turn, r)
		}
	}

	after := modelCalls(t, c.data, run)
	var journaled abi.LLMUsage
	for _, mc := range after {
		if mc.answered {
			journaled = journaled.Add(mc.usage)
		}
	}
	// The usage of an answer the provider wrote whole but the
	// killed cell never journaled (the answered-k points make
	// it happen): the journal holds the call's intent and
	// executing entries, perhaps batches, but no answer, so no
	// usage. On resume the host sends a call with no batch again
	// (it is in doubt), and a stream cut after a batch fails
	// stream_interrupted, which the agent asks again: either way
	// one request repeats an answered one, and its first
	// answer's cost is known to the provider alone. The
	// journaled usage is then the fake's sum less exactly that
	// answer's.
	var lost fakellm.Usage
	for _, r := range again {
		for _, q := range st.Requests {
			if q.MatchKey == r.MatchKey && q.Outcome == fakellm.OutcomeCompleted && q.Seq < r.Seq && q.Usage != nil {
				lost = *q.Usage
				break
			}
		}
	}
	want := st.Usage
	want.InputTokens -= lost.InputTokens
	want.OutputTokens -= lost.OutputTokens
	want.CacheReadTokens -= lost.CacheReadTokens
	want.CacheWriteTokens -= lost.CacheWriteTokens
	if journaled.Input != uint64(want.InputTokens) || journaled.Output != uint64(want.OutputTokens) ||
		journaled.CacheRead != uint64(want.CacheReadTokens) || journaled.CacheWrite != uint64(want.CacheWriteTokens) {
		t.Fatalf("the journal records usage %+v; the fake counted %+v, of which %+v for an answer no journal holds", journaled, st.Usage, lost)
	}
	// The ledger (agentrt budget) charges every answered call its
	// usage, cached input in its input tokens, and a call that ended
	// without an answer (a stream the kill cut, which the provider
	// cannot resume) its worst case, which its intent reserved: the
	// provider may have generated the whole answer. Nothing is left
	// reserved once the run has ended.
	var wantLedger budget.Amounts
	for _, mc := range after {
		switch {
		case mc.answered:
			wantLedger[budget.ModelCalls]++
			wantLedger[budget.InputTokens] += mc.usage.Input + mc.usage.CacheRead + mc.usage.CacheWrite
			wantLedger[budget.OutputTokens] += mc.usage.Output
		case mc.ended:
			for _, d := range []budget.Dim{budget.ModelCalls, budget.InputTokens, budget.OutputTokens} {
				wantLedger[d] += mc.reserved[d]
			}
		}
	}
	var rep struct {
		Dimensions []struct {
			Dimension string `json:"dimension"`
			Reserved  uint64 `json:"reserved"`
			Spent     uint64 `json:"spent"`
		} `json:"dimensions"`
	}
	if err := json.Unmarshal(c.run("budget", run, "--json"), &rep); err != nil {
		t.Fatalf("agentrt budget --json: %v", err)
	}
	for _, d := range rep.Dimensions {
		for _, dim := range []budget.Dim{budget.ModelCalls, budget.InputTokens, budget.OutputTokens} {
			if d.Dimension == dim.String() && (d.Spent != wantLedger[dim] || d.Reserved != 0) {
				t.Fatalf("the ledger's %s: spent %d, reserved %d; want %d spent (the answered calls' usage, and the worst case of %d calls cut without an answer) and none reserved",
					d.Dimension, d.Spent, d.Reserved, wantLedger[dim], countCut(after))
			}
		}
	}
	t.Logf("killed with %d model calls journaled (%d answered, %d cut), %d requests before the kill, %d after; %d sent again after a complete answer",
		len(before), countAnswered(before), countCut(after), sent, len(st.Requests)-sent, len(again))
}

// countCut counts the calls that ended without an answer.
func countCut(calls []*modelCall) int {
	n := 0
	for _, c := range calls {
		if c.ended && !c.answered {
			n++
		}
	}
	return n
}

func countAnswered(calls []*modelCall) int {
	n := 0
	for _, c := range calls {
		if c.answered {
			n++
		}
	}
	return n
}

// TestResearchAgentSurvivesDaemonKills kills a real `agentrt cell serve`
// running the agent with SIGKILL inside the stream of each of the five
// model calls, and starts the daemon again, which resumes the run on its
// own: the run completes as in TestResearchAgentSurvivesKills, with the
// same checks.
func TestResearchAgentSurvivesDaemonKills(t *testing.T) {
	mod := module(t)
	cache := testutil.CompileCache()
	baseline, _ := uninterrupted(t, mod, cache)
	calls := []int{1, 2, 3, 4, 5}
	if testing.Short() {
		calls = []int{3}
	}
	for _, k := range calls {
		t.Run(fmt.Sprintf("call-%d", k), func(t *testing.T) {
			site := startSite(t)
			fake := startFake(t, loadScript(t, site.URL, slow))
			trigger := make(chan struct{})
			var once sync.Once
			fake.arrived = func(n int, _ *http.Request) {
				if n == k {
					once.Do(func() { close(trigger) })
				}
			}
			c := newCell(t, fake, "openai-chat", fake.Script.APIKey, cache)
			d := startDaemon(t, c)
			client := c.cmd("run", mod, "--grant", exampleFile("grant.yaml"), "-q", "--json", "--input", input(site.URL, true),
				"--cell", "unix:"+hostcell.SocketPath(c.data))
			if err := client.Start(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-trigger:
				time.Sleep(2 * chunkDelay)
			case <-time.After(60 * time.Second):
				t.Fatal("the run never reached its kill point")
			}
			d.kill()
			client.Wait() // it follows the run, and loses its daemon

			run, status := runStatus(t, c)
			if run == "" {
				t.Fatal("the daemon killed during a model call left no run")
			}
			if status == "completed" {
				t.Fatalf("the run completed before the kill inside call %d", k)
			}
			before := modelCalls(t, c.data, run)
			sent := len(fake.settledStats(t).Requests)

			d = startDaemon(t, c) // resumes the run it owned
			deadline := time.Now().Add(60 * time.Second)
			for status != "completed" {
				if time.Now().After(deadline) {
					t.Fatalf("the restarted daemon did not finish the run: %s\n%s", status, d.log.Bytes())
				}
				time.Sleep(50 * time.Millisecond)
				_, status = runStatus(t, c)
			}
			d.stop(t)
			checkResumed(t, c, fake, site.URL, run, before, sent, baseline)
		})
	}
}

// daemon is an `agentrt cell serve` of a test's cell.
type daemon struct {
	cmd    *exec.Cmd
	log    *bytes.Buffer
	exited chan error
}

// startDaemon starts cell serve on c and waits until its API answers.
func startDaemon(t *testing.T, c *cell) *daemon {
	t.Helper()
	d := &daemon{cmd: c.cmd("cell", "serve"), log: &bytes.Buffer{}, exited: make(chan error, 1)}
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.exited <- d.cmd.Wait() }()
	t.Cleanup(func() { d.cmd.Process.Kill() })
	waitForDaemon(t, c.data, d.exited)
	return d
}

func (d *daemon) kill() {
	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.exited
}

// stop drains the daemon with SIGTERM and waits for it to exit.
func (d *daemon) stop(t *testing.T) {
	t.Helper()
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.exited:
		if err != nil {
			t.Fatalf("cell serve: %v\n%s", err, d.log.Bytes())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("cell serve did not exit on SIGTERM")
	}
}
