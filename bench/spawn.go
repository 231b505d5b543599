package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/host"
	agentcell "github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/clock"
	"github.com/agentrt/agentrt/journal"
)

// Figure 21: sub-agents and the scheduler. A cell daemon in process (its
// server, scheduler and sub-agents, without the socket) runs parents of
// testdata/spawner.wat, which spawn children of testdata/kvput.wat.
//   - 21a, 21b: spawn-to-first-call latency of a child, p50 and p99: the
//     host time from the parent's agent.spawn intent entry to the child's
//     first call entry (its run.input). One parent per sample, each
//     spawning one child, one at a time: an idle daemon.
//   - 21c: one parent spawns the 64 children of figure 4 (each 250
//     kv.put calls, durable): kv.put calls per second from the first
//     spawn's intent to the last child's end; its floor is the same
//     workload as 64 runs submitted to the same daemon (Launch), with
//     figure 4a (64 runs on a bare host, no daemon) in Extra when measured
//     in the same invocation.
//   - 21d: the scheduler's admission per submission (the policy decision,
//     the run-budget check, the queue check), from the scheduler's own
//     clock over many submissions; its floor is Host.Start of the same
//     submission, which admission follows.

// spawnInput is the input of testdata/spawner.wat: req, its length, n.
func spawnInput(req []byte, n int) []byte {
	in := append([]byte{}, req...)
	in = binary.LittleEndian.AppendUint32(in, uint32(len(req)))
	return binary.LittleEndian.AppendUint64(in, uint64(n))
}

// spawnerGrant lets a parent spawn up to max children that use kv
// namespace ns.
func spawnerGrant(ns string, max int) *host.Grant {
	g, err := host.ParseGrant(fmt.Appendf(nil, "capabilities:\n  run: {}\n  kv: {namespace: %s}\n  agent: {max_children: %d, max_depth: 1}\n", ns, max))
	if err != nil {
		panic(err)
	}
	return g
}

func (h *harness) subAgents(ctx context.Context) ([]Figure, error) {
	d, err := openDaemon(ctx, dir(h.root, "sub-agents"), clock.Real, nil)
	if err != nil {
		return nil, err
	}
	defer d.close()
	// Every run's end arrives here; the harness waits for the ones it
	// names.
	// A run may end before the harness names it (it learns a child's id
	// only from the store): an end nobody waits for yet is kept.
	var mu sync.Mutex
	waiting := map[journal.RunID]chan ended{}
	early := map[journal.RunID]ended{}
	go func() {
		for e := range d.ends {
			mu.Lock()
			ch := waiting[e.run]
			delete(waiting, e.run)
			if ch == nil {
				early[e.run] = e
			}
			mu.Unlock()
			if ch != nil {
				ch <- e
			}
		}
	}()
	expect := func(run journal.RunID) chan ended {
		ch := make(chan ended, 1)
		mu.Lock()
		defer mu.Unlock()
		if e, ok := early[run]; ok {
			delete(early, run)
			ch <- e
			return ch
		}
		waiting[run] = ch
		return ch
	}
	awaitEnd := func(run journal.RunID, ch chan ended) error {
		select {
		case e := <-ch:
			switch {
			case e.err != nil:
				return fmt.Errorf("bench: run %s stopped: %w", run, e.err)
			case e.res.Status != journal.StatusCompleted:
				return fmt.Errorf("bench: run %s ended %s (%v)", run, e.res.Status, e.res.Err)
			}
			return nil
		case <-time.After(2 * time.Minute):
			return fmt.Errorf("bench: run %s did not end within 2 minutes", run)
		}
	}
	launch := func(code, input []byte, grant *host.Grant) (journal.RunID, chan ended, error) {
		run, err := d.srv.Launch(ctx, host.RunSpec{Code: code, Name: "bench", Input: input, Grant: grant}, "started")
		if err != nil {
			return run, nil, err
		}
		return run, expect(run), nil
	}
	// The child module, stored and compiled once.
	warm, ch, err := launch(h.guests.KVPut, countInput(1), kvGrant("k21"))
	if err != nil {
		return nil, err
	}
	if err := awaitEnd(warm, ch); err != nil {
		return nil, err
	}
	m, err := d.cell.Store.Meta(ctx, warm)
	if err != nil {
		return nil, err
	}
	childReq := func(calls int) ([]byte, error) {
		return abi.Marshal(&abi.SpawnRequest{Module: m.ModuleSHA256, Input: countInput(calls), Caps: "{run: {}, kv: {namespace: k21}}"})
	}

	// children returns the children of parent, once it has ended.
	children := func(parent journal.RunID) ([]journal.RunMeta, error) {
		runs, err := d.cell.Store.Runs(ctx)
		if err != nil {
			return nil, err
		}
		var out []journal.RunMeta
		for _, r := range runs {
			if o := r.Origin; o != nil && o.Kind == agentcell.OriginSpawn && o.ID == parent.String() {
				out = append(out, r)
			}
		}
		return out, nil
	}
	// spawnIntents returns the host times of parent's agent.spawn intents.
	spawnIntents := func(parent journal.RunID) ([]time.Time, error) {
		var out []time.Time
		err := journal.ReadEntries(ctx, d.cell.Store, parent, func(e *journal.Entry, _ *journal.Record) error {
			if e.Op == "agent.spawn" && e.Phase == journal.PhaseIntent {
				out = append(out, time.Unix(0, e.Time))
			}
			return nil
		})
		return out, err
	}
	firstCall := func(run journal.RunID) (time.Time, error) {
		var at int64
		stop := errors.New("found")
		err := journal.ReadEntries(ctx, d.cell.Store, run, func(e *journal.Entry, _ *journal.Record) error {
			if e.Step > 0 {
				at = e.Time
				return stop
			}
			return nil
		})
		if at == 0 {
			return time.Time{}, fmt.Errorf("bench: run %s has no call entry (%v)", run, err)
		}
		return time.Unix(0, at), nil
	}

	// 21a, 21b.
	req1, err := childReq(1)
	if err != nil {
		return nil, err
	}
	var lat []time.Duration
	for i := range h.cfg.SpawnSamples + 1 {
		parent, ch, err := launch(h.guests.Spawner, spawnInput(req1, 1), spawnerGrant("k21", 1))
		if err != nil {
			return nil, err
		}
		if err := awaitEnd(parent, ch); err != nil {
			return nil, err
		}
		kids, err := children(parent)
		if err != nil || len(kids) != 1 {
			return nil, fmt.Errorf("bench: parent %s has %d children (%v), want 1", parent, len(kids), err)
		}
		if err := awaitEnd(kids[0].ID, expect(kids[0].ID)); err != nil {
			return nil, err
		}
		at, err := spawnIntents(parent)
		if err != nil || len(at) != 1 {
			return nil, fmt.Errorf("bench: parent %s journaled %d spawns (%v)", parent, len(at), err)
		}
		first, err := firstCall(kids[0].ID)
		if err != nil {
			return nil, err
		}
		if i > 0 { // the first is the warm-up (the spawner's compilation)
			lat = append(lat, first.Sub(at[0]))
		}
	}
	h.logf("21 spawn-to-first-call: p50 %.0f us, p99 %.0f us over %d children", us(percentile(lat, 50)), us(percentile(lat, 99)), len(lat))
	samples := make([]float64, len(lat))
	for i, l := range lat {
		samples[i] = us(l)
	}

	// 21c.
	agents, calls := h.cfg.Agents, h.cfg.AgentCalls
	reqN, err := childReq(calls)
	if err != nil {
		return nil, err
	}
	var rate, frate []float64
	for r := range h.cfg.Reps {
		parent, ch, err := launch(h.guests.Spawner, spawnInput(reqN, agents), spawnerGrant("k21", agents))
		if err != nil {
			return nil, err
		}
		if err := awaitEnd(parent, ch); err != nil {
			return nil, err
		}
		kids, err := children(parent)
		if err != nil || len(kids) != agents {
			return nil, fmt.Errorf("bench: parent %s has %d children (%v), want %d", parent, len(kids), err, agents)
		}
		var last time.Time
		for _, k := range kids {
			if err := awaitEnd(k.ID, expect(k.ID)); err != nil {
				return nil, err
			}
			km, err := d.cell.Store.Meta(ctx, k.ID)
			if err != nil {
				return nil, err
			}
			if km.Steps != uint64(calls)+1 {
				return nil, fmt.Errorf("bench: child %s made %d calls, want %d", k.ID, km.Steps, calls+1)
			}
			if t := time.Unix(0, km.Ended); t.After(last) {
				last = t
			}
		}
		at, err := spawnIntents(parent)
		if err != nil || len(at) != agents {
			return nil, fmt.Errorf("bench: parent %s journaled %d spawns (%v)", parent, len(at), err)
		}
		rate = append(rate, float64(agents*calls)/last.Sub(at[0]).Seconds())

		// The floor: the same 64 children's work as submitted runs.
		t0 := time.Now()
		_, err = concurrently(agents, func(i int) error {
			run, ch, err := launch(h.guests.KVPut, countInput(calls), kvGrant("k21"))
			if err != nil {
				return err
			}
			return awaitEnd(run, ch)
		})
		if err != nil {
			return nil, err
		}
		frate = append(frate, float64(agents*calls)/time.Since(t0).Seconds())
		h.logf("21 %d children rep %d: %.0f calls/s; as %d submitted runs: %.0f calls/s", agents, r, rate[r], agents, frate[r])
	}

	// 21d.
	n := h.cfg.Admissions
	var admit, whole []float64
	for r := range h.cfg.Reps {
		before := d.srv.SchedulerStats()
		runs := make([]journal.RunID, 0, n)
		chans := make([]chan ended, 0, n)
		t0 := time.Now()
		for range n {
			run, ch, err := launch(h.guests.KVPut, countInput(0), kvGrant("k21"))
			if err != nil {
				return nil, err
			}
			runs, chans = append(runs, run), append(chans, ch)
		}
		wall := time.Since(t0)
		after := d.srv.SchedulerStats()
		for i, run := range runs {
			if err := awaitEnd(run, chans[i]); err != nil {
				return nil, err
			}
		}
		decided := (after.Admitted - before.Admitted) + (sumRefused(after) - sumRefused(before))
		if decided != uint64(n) {
			return nil, fmt.Errorf("bench: %d admissions decided for %d submissions", decided, n)
		}
		admit = append(admit, us(after.AdmitTime-before.AdmitTime)/float64(n))
		whole = append(whole, us(wall)/float64(n))
		h.logf("21 admission rep %d: %.2f us per submission, of %.0f us per Launch", r, admit[r], whole[r])
	}

	return []Figure{{
		ID: "21a", Name: "spawn-to-first-call latency of a child, p50", Unit: "us", Better: "lower",
		Value: us(percentile(lat, 50)), Samples: samples,
		Measures: fmt.Sprintf("%d parents of testdata/spawner.wat, one at a time, on a cell daemon in process (its server, scheduler with the default workers, and sub-agents; no socket), each spawning one child of testdata/kvput.wat: the host time from the parent's agent.spawn intent entry to the child's first call entry (the child's token issued, its start journaled, its admission, a worker, its instance, its run.input). The median over the children; the first parent, a warm-up, is not counted.", len(lat)),
		Goal:     &Goal{Text: "<= 20000 us", MaxValue: ptr(20000)},
	}, {
		ID: "21b", Name: "spawn-to-first-call latency of a child, p99", Unit: "us", Better: "lower",
		Value: us(percentile(lat, 99)), Samples: samples,
		Measures: "the 99th percentile over the children of figure 21a.",
	}, {
		ID: "21c", Name: fmt.Sprintf("%d concurrent children doing durable calls: calls/s", agents), Unit: "calls/s", Better: "higher",
		Value: median(rate), Samples: rate,
		Measures: fmt.Sprintf("one parent of testdata/spawner.wat spawns %d children of testdata/kvput.wat (%d kv.put calls each, one shared kv namespace) on the daemon of 21a: total kv.put calls / host time from the first spawn's intent entry to the last child's end. Figure 4a is the same workload as runs on a bare host (no daemon, own namespaces).", agents, calls),
		Floor: &Floor{Name: fmt.Sprintf("the same %d runs submitted to the daemon", agents), Unit: "calls/s", Value: median(frate), Samples: frate,
			Measures: fmt.Sprintf("%d runs of testdata/kvput.wat (%d kv.put calls each) launched at once on the same daemon (Server.Launch, no parent): kv.put calls / wall time until the last ends (for context: the cost of spawning over submitting).", agents, calls)},
		Extra: h.fig4Extra(),
	}, {
		ID: "21d", Name: "scheduler admission cost per submission", Unit: "us", Better: "lower",
		Value: median(admit), Samples: admit,
		Measures: fmt.Sprintf("%d submissions of testdata/kvput.wat (Server.Launch) per rep on the daemon of 21a: the scheduler's own clock around each admission (the platform policy's decision on agent.spawn for the run, the queue bound; no --run-budget), summed and divided by the submissions.", n),
		Floor: &Floor{Name: "the whole submission (Server.Launch)", Unit: "us", Value: median(whole), Samples: whole,
			Measures: "wall time per Launch of the same submissions: token issued and verified, module found by hash, start journaled, admission, a worker (for context: the share admission takes)."},
		Goal: &Goal{Text: "<= 50 us", MaxValue: ptr(50)},
	}}, nil
}

// sumRefused totals the refused admissions of st.
func sumRefused(st agentcell.SchedulerStats) uint64 {
	var n uint64
	for _, v := range st.Refused {
		n += v
	}
	return n
}

// fig4Extra is figure 4a's value, for 21c's comparison, when this
// invocation measured it.
func (h *harness) fig4Extra() map[string]float64 {
	if h.fig4Rate == 0 {
		return nil
	}
	return map[string]float64{"figure 4a calls/s (same invocation)": h.fig4Rate}
}
