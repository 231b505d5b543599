// Package bench is agentrt's benchmark harness. Each figure is measured in
// the same process and the same run as its floor, the bare layer below it
// (a plain wazero host function, a plain badger database with SyncWrites,
// a plain decode loop), and is reported with the ratio between the two and
// the goal it is held to. A missed goal is reported as missed.
//
// The harness writes only under temporary directories it removes; the
// command agentrt-bench writes the report. It must never change what it
// measures to meet a goal.
package bench

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/journal"
)

// Config sizes a harness run.
type Config struct {
	// Reps is how often each figure and its floor are measured; figures
	// are medians.
	Reps int `json:"reps"`
	// RoundTripCalls is the loop count of figure 1.
	RoundTripCalls int `json:"round_trip_calls"`
	// PureCalls is the loop count of figure 2; its last run is the
	// recorded run that figure 5 replays.
	PureCalls int `json:"pure_calls"`
	// DurableCalls is the number of kv.put calls of figure 3.
	DurableCalls int `json:"durable_calls"`
	// Agents and AgentCalls size figure 4: Agents concurrent runs of
	// AgentCalls kv.put calls each.
	Agents     int `json:"agents"`
	AgentCalls int `json:"agent_calls"`
	// ColdReps is the number of repetitions of each cold start.
	ColdReps int `json:"cold_reps"`
	// GoAgent builds and cold-starts the Go agent (figure 6a, 6b).
	GoAgent bool `json:"go_agent"`
	// ScaleEntries is the number of journal entries of the run figure 11
	// exports and verifies.
	ScaleEntries int `json:"scale_entries"`
	// BudgetCalls is the number of reserve + settle pairs of figure 12.
	BudgetCalls int `json:"budget_calls"`
	// LLMCalls is the number of streamed model calls of figure 14, per
	// repetition.
	LLMCalls int `json:"llm_calls"`
	// ParkedRuns is the number of runs figure 16a parks in one daemon.
	ParkedRuns int `json:"parked_runs"`
	// WakeSamples is the number of wakes of each kind (a vote, a timer)
	// figures 16b and 16c time per repetition, and of bare resumes of
	// their floors.
	WakeSamples int `json:"wake_samples"`
	// DaemonStarts is the number of runs figure 17 submits to a daemon
	// per repetition, for each of its modules.
	DaemonStarts int `json:"daemon_starts"`
	// MCPCalls is the number of MCP tool calls of figure 18, per
	// repetition.
	MCPCalls int `json:"mcp_calls"`
	// Takeovers is the number of cells figure 19 kills, each while it
	// holds a run a peer then takes over.
	Takeovers int `json:"takeovers"`
	// ClusterAppends is the number of fenced appends of figures 19c and
	// 19d (and of bare publishes of their floors), per repetition.
	ClusterAppends int `json:"cluster_appends"`
	// ClusterCalls is the number of kv.put calls of figure 19e's run, on
	// JetStream and on badger, per repetition.
	ClusterCalls int `json:"cluster_calls"`
	// UIPages is the number of dashboard pages figure 20c times per
	// repetition.
	UIPages int `json:"ui_pages"`
	// SpawnSamples is how many children figures 21a and 21b time, one
	// parent each; Admissions how many submissions 21d times per rep.
	SpawnSamples int `json:"spawn_samples"`
	Admissions   int `json:"admissions"`
	// Only, when set, names the figure groups (1 to 21) to measure.
	Only []int `json:"only,omitempty"`

	// TempDir is where the harness makes its temporary directory; empty:
	// os.TempDir().
	TempDir string `json:"-"`
	// Log receives progress lines; nil: none.
	Log io.Writer `json:"-"`
}

// DefaultConfig is the configuration of make bench.
func DefaultConfig() Config {
	return Config{Reps: 5, RoundTripCalls: 1_000_000, PureCalls: 100_000, DurableCalls: 2000,
		Agents: 64, AgentCalls: 250, ColdReps: 3, GoAgent: true, ScaleEntries: 10_000_000, BudgetCalls: 1_000_000, LLMCalls: 200,
		ParkedRuns: 10_000, WakeSamples: 200, DaemonStarts: 200, MCPCalls: 200,
		Takeovers: 24, ClusterAppends: 300, ClusterCalls: 500, UIPages: 100,
		SpawnSamples: 200, Admissions: 2000}
}

// QuickConfig runs every path with tiny sizes: a check that the harness
// works, not a measurement.
func QuickConfig() Config {
	return Config{Reps: 1, RoundTripCalls: 2000, PureCalls: 2000, DurableCalls: 20,
		Agents: 8, AgentCalls: 5, ColdReps: 1, ScaleEntries: 20_000, BudgetCalls: 2000, LLMCalls: 10,
		ParkedRuns: 1000, WakeSamples: 10, DaemonStarts: 10, MCPCalls: 10,
		Takeovers: 2, ClusterAppends: 50, ClusterCalls: 20, UIPages: 10,
		SpawnSamples: 10, Admissions: 50}
}

// Run measures every figure.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	start := time.Now()
	root, err := os.MkdirTemp(cfg.TempDir, "agentrt-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(root)
	h := &harness{cfg: cfg, root: root, log: cfg.Log}
	if h.log == nil {
		h.log = io.Discard
	}
	rep := &Report{Schema: "agentrt-bench/v1", Started: start.UTC().Format(time.RFC3339), Config: cfg,
		Machine: Machine{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, CPUs: runtime.NumCPU(),
			GOMAXPROCS: runtime.GOMAXPROCS(0), Go: runtime.Version(), LoadAvg: loadAvg()}}
	if rep.Machine.FsyncUS, err = fsyncMicros(root); err != nil {
		return nil, err
	}
	h.logf("fsync on %s: %.0f us", root, rep.Machine.FsyncUS)
	if h.guests, err = BuildGuests(ctx, dir(root, "guests"), cfg.GoAgent); err != nil {
		return nil, err
	}
	if h.engine, err = host.NewEngine(ctx, host.EngineConfig{}); err != nil {
		return nil, err
	}
	defer h.engine.Close(ctx)

	steps := []func(context.Context) ([]Figure, error){
		h.roundTrip, h.pureCalls, h.durable, h.groupCommit, h.replay, h.coldStart, h.resume, h.gate,
		h.interrupt, h.memory, h.scale, h.budget, h.conversation, h.llmOverhead, h.llmConversation, h.parked,
		h.daemonStart, h.mcpOverhead, h.cluster, h.observability, h.subAgents,
	}
	defer h.closeRecorded()
	var noisy []string
	measure := func(step func(context.Context) ([]Figure, error)) error {
		runtime.GC()
		la := loadAvg()
		m := startMeter()
		figs, err := step(ctx)
		if err != nil {
			return err
		}
		r := m.stop()
		for i := range figs {
			figs[i].LoadAvg = la
			if r.Others >= 0 {
				figs[i].OtherCPUs = r.Others.Seconds() / r.Wall.Seconds()
				if figs[i].OtherCPUs > noiseCPUs {
					noisy = append(noisy, fmt.Sprintf("%s (%.2f)", figs[i].ID, figs[i].OtherCPUs))
				}
			}
			figs[i].settle()
		}
		rep.Figures = append(rep.Figures, figs...)
		return nil
	}
	for i, step := range steps {
		if len(cfg.Only) > 0 && !slices.Contains(cfg.Only, i+1) {
			continue
		}
		if err := measure(step); err != nil {
			return nil, fmt.Errorf("step %d of %d (%s): %w", i+1, len(steps), stepName(step), err)
		}
	}
	if len(noisy) > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("WARNING: other processes used more than %.2f of this machine's %d CPUs while these figures were measured (CPUs used by others in parentheses): %s. Those figures are slower and noisier than on an idle machine, and disk contention does not show in this count; rerun on an idle machine before drawing conclusions from them.", noiseCPUs, rep.Machine.CPUs, strings.Join(noisy, ", ")))
	}
	rep.DurationS = time.Since(start).Seconds()
	return rep, nil
}

// stepName is the name of the harness method step is, for an error.
func stepName(step func(context.Context) ([]Figure, error)) string {
	name := runtime.FuncForPC(reflect.ValueOf(step).Pointer()).Name()
	name = name[strings.LastIndexByte(name, '.')+1:]
	return strings.TrimSuffix(name, "-fm")
}

// harness holds what the figures share.
type harness struct {
	cfg    Config
	root   string
	log    io.Writer
	guests *Guests
	engine *host.Engine
	// roundTripNS is figure 1's value, the floor of figure 2.
	roundTripNS float64
	// fig4Rate is figure 4a's value once measured, for figure 21c.
	fig4Rate float64
	// recorded is the cell and run of figure 2's last repetition, which
	// figure 5 replays.
	recorded    *cell
	recordedRun journal.RunID
}

func (h *harness) logf(format string, args ...any) {
	fmt.Fprintf(h.log, "bench: "+format+"\n", args...)
}

func (h *harness) closeRecorded() {
	if h.recorded != nil {
		h.recorded.close()
		h.recorded = nil
	}
}

func dir(root, name string) string {
	d := filepath.Join(root, name)
	if err := os.MkdirAll(d, 0o700); err != nil {
		panic(err)
	}
	return d
}

// perLoopCall times runs of n loop calls and runs of none, the fastest
// of three each, and returns the difference per call in ns: what a loop
// call costs, without a run's fixed cost (instantiation, the first call).
// The fastest of three leaves out the machine's jitter, which at the
// quick harness's sizes can be more than the loop itself; a loop that
// still comes out no slower than none is timed again, a few times, and
// is then an error.
func perLoopCall(run func(k int) (time.Duration, error), n int) (float64, error) {
	fastest := func(k int) (time.Duration, error) {
		best := time.Duration(1 << 62)
		for range 3 {
			d, err := run(k)
			if err != nil {
				return 0, err
			}
			best = min(best, d)
		}
		return best, nil
	}
	for range 5 {
		base, err := fastest(0)
		if err != nil {
			return 0, err
		}
		d, err := fastest(n)
		if err != nil {
			return 0, err
		}
		if d > base {
			return float64(d-base) / float64(n), nil
		}
	}
	return 0, fmt.Errorf("bench: a run of %d loop calls took no longer than a run of none, five times: the machine's jitter is larger than the loop (give more calls)", n)
}

// Figure 1: the import round trip with journaling off.
func (h *harness) roundTrip(ctx context.Context) ([]Figure, error) {
	n := h.cfg.RoundTripCalls
	bare, err := newBareRuntime(ctx, "")
	if err != nil {
		return nil, err
	}
	defer bare.close(ctx)
	cm, err := bare.rt.CompileModule(ctx, h.guests.Loop)
	if err != nil {
		return nil, err
	}
	ours := func(k int) (time.Duration, error) {
		return execute(ctx, h.engine, h.guests.Loop, countInput(k), uint64(k)+1)
	}
	floor := func(k int) (time.Duration, error) {
		return bare.run(ctx, cm, countInput(k), uint64(k)+1)
	}
	perCall := func(f func(int) (time.Duration, error)) (float64, error) { return perLoopCall(f, n) }
	if _, err := ours(n / 10); err != nil {
		return nil, err
	}
	if _, err := floor(n / 10); err != nil {
		return nil, err
	}
	var o, fl []float64
	for r := range h.cfg.Reps {
		a, err := perCall(ours)
		if err != nil {
			return nil, err
		}
		b, err := perCall(floor)
		if err != nil {
			return nil, err
		}
		o, fl = append(o, a), append(fl, b)
		h.logf("1 round trip rep %d: ours %.0f ns/call, floor %.0f ns/call", r, a, b)
	}
	h.roundTripNS = median(o)
	return []Figure{{
		ID: "1", Name: "import round trip, journaling off", Unit: "ns/call", Better: "lower",
		Value: median(o), Samples: o,
		Measures: fmt.Sprintf("host.Engine.Execute of testdata/loop.wat (imports agentrt:run call/take only, default grant) making %d run.input calls, each a 1-byte request and a 16-byte response, served by a host.Source that returns a fixed response: the host's call path with no journal (session lookup, op table, request read in place, Call, Source, response write; the input hash is computed only when something needs it). Per call = (fastest of 3 runs with %d calls - fastest of 3 runs with 0 calls) / %d.", n, n, n),
		Floor: &Floor{Name: "bare wazero host fn", Unit: "ns/call", Value: median(fl), Samples: fl,
			Measures: "the same module and loop on a plain wazero runtime (same compiler config) whose agentrt:run call is one GoModuleFunc with the (i32,i32,i32,i32,i32)->i64 signature that reads the request from memory and writes the same 16-byte response; timed the same way."},
		Goal: &Goal{Text: "ratio <= 1.3", MaxRatio: ptr(1.3)},
	}}, nil
}

// Figure 2: journaled pure calls, buffered into group commits.
func (h *harness) pureCalls(ctx context.Context) ([]Figure, error) {
	n := h.cfg.PureCalls
	var o, commits, cpu, cores []float64
	for r := range h.cfg.Reps {
		c, err := openCell(dir(h.root, fmt.Sprintf("pure-%d", r)), h.engine)
		if err != nil {
			return nil, err
		}
		if r == 0 {
			if _, err := c.run(ctx, h.guests.Loop, countInput(100), host.DefaultGrant(), 101); err != nil {
				c.close()
				return nil, err
			}
		}
		m := startMeter()
		res, err := c.run(ctx, h.guests.Loop, countInput(n), host.DefaultGrant(), uint64(n)+1)
		rd := m.stop()
		d := rd.Wall
		if err != nil {
			c.close()
			return nil, err
		}
		o = append(o, float64(d.Nanoseconds())/float64(n+1)/1000)
		cpu = append(cpu, us(rd.CPU)/float64(n+1))
		cores = append(cores, rd.CPU.Seconds()/d.Seconds())
		commits = append(commits, float64(n+1)/256)
		h.logf("2 pure calls rep %d: %.2f us/call", r, o[len(o)-1])
		if r == h.cfg.Reps-1 {
			h.recorded, h.recordedRun = c, res.Run
		} else if err := c.close(); err != nil {
			return nil, err
		}
	}
	return []Figure{{
		ID: "2", Name: "journaled pure call, buffered", Unit: "us/call", Better: "lower",
		Value: median(o), Samples: o,
		Measures: fmt.Sprintf("host.Host.Run of testdata/loop.wat on a fresh badgerstore in a temporary directory, %d+1 run.input calls, GroupCommit 256 (default): wall time of the whole Run / calls, so it includes the run's start and end commits and one group commit per 256 entries (one ed25519 seal and one badger transaction, not synced: a group of pure calls need not be durable before the next effect or the end, which are).", n),
		Floor: &Floor{Name: "figure 1, no journal", Unit: "us/call", Value: h.roundTripNS / 1000,
			Measures: "figure 1's value: the same call through host.Engine.Execute with no journal (for context; the goal is absolute)."},
		Goal: &Goal{Text: "<= 2 us/call", MaxValue: ptr(2)},
		Extra: map[string]float64{"group commits per run": median(commits),
			"process CPU us/call": median(cpu), "process CPU cores busy": median(cores)},
	}}, nil
}

// Figure 3: durable effectful calls of one agent.
func (h *harness) durable(ctx context.Context) ([]Figure, error) {
	n := h.cfg.DurableCalls
	c, err := openCell(dir(h.root, "durable"), h.engine)
	if err != nil {
		return nil, err
	}
	defer c.close()
	db, err := openBareBadger(dir(h.root, "durable-floor"))
	if err != nil {
		return nil, err
	}
	defer db.Close()
	if _, err := c.run(ctx, h.guests.KVPut, countInput(20), kvGrant("warmup"), 21); err != nil {
		return nil, err
	}
	if _, err := bareCommits(db, "warmup/", 20); err != nil {
		return nil, err
	}
	var rate, p50, p99, cycle, cpu, frate, fp50, fp99, fcpu, rrate, rp50, rsize []float64
	for r := range h.cfg.Reps {
		m := startMeter()
		res, err := c.run(ctx, h.guests.KVPut, countInput(n), kvGrant(fmt.Sprintf("r%d", r)), uint64(n)+1)
		rd := m.stop()
		d := rd.Wall
		if err != nil {
			return nil, err
		}
		cpu = append(cpu, us(rd.CPU)/float64(n))
		lat, err := effectLatencies(ctx, c.store, res.Run)
		if err != nil {
			return nil, err
		}
		if len(lat) != n {
			return nil, fmt.Errorf("bench: run %s has %d completed effects, want %d", res.Run, len(lat), n)
		}
		rate = append(rate, float64(n)/d.Seconds())
		cycle = append(cycle, us(d)/float64(n))
		p50, p99 = append(p50, us(percentile(lat, 50))), append(p99, us(percentile(lat, 99)))

		m = startMeter()
		flat, err := bareCommits(db, fmt.Sprintf("r%d/", r), n)
		frd := m.stop()
		fd := frd.Wall
		if err != nil {
			return nil, err
		}
		fcpu = append(fcpu, us(frd.CPU)/float64(n))
		frate = append(frate, float64(n)/fd.Seconds())
		fp50, fp99 = append(fp50, us(percentile(flat, 50))), append(fp99, us(percentile(flat, 99)))

		// The raw floor writes records as large as a call's round: its
		// entries as stored, and the kv write's key and value.
		size, err := recordBytes(ctx, c.store, res.Run)
		if err != nil {
			return nil, err
		}
		size = size/int64(n) + 128
		rsize = append(rsize, float64(size))
		start := time.Now()
		rlat, err := rawSyncs(dir(h.root, "durable-raw"), n, int(size))
		rd2 := time.Since(start)
		if err != nil {
			return nil, err
		}
		rrate = append(rrate, float64(n)/rd2.Seconds())
		rp50 = append(rp50, us(percentile(rlat, 50)))
		h.logf("3 durable rep %d: ours %.0f calls/s p50 %.0f us; raw fdatasync of %d bytes %.0f/s p50 %.0f us; bare badger %.0f commits/s p50 %.0f us", r, rate[r], p50[r], size, rrate[r], rp50[r], frate[r], fp50[r])
	}
	return []Figure{{
		ID: "3a", Name: "durable effectful call, one agent: rate", Unit: "calls/s", Better: "higher",
		Value: median(rate), Samples: rate,
		Measures: fmt.Sprintf("host.Host.Run of testdata/kvput.wat on a badgerstore in a temporary directory (same disk): %d kv.put calls (123-byte request, 100-byte value, distinct keys), each committing its intent, executing and completed entries and the kv write in one durable commit (one badger transaction, unsynced, and one record of the journal's log, fdatasynced; one seal); calls / wall time of the whole Run.", n),
		Floor: &Floor{Name: "raw fdatasync", Unit: "syncs/s", Value: median(rrate), Samples: rrate,
			Measures: fmt.Sprintf("%d writes, one after another, of a record as large as a call's round (its entries as stored + 128 bytes; \"record bytes\" in extra) into a 16 MiB sparse file on the same disk, each followed by fdatasync: what the journal's log does, with nothing around it (issue 18: >= 0.9x raw fdatasync once the journal has a log of its own). Bare badger with SyncWrites (Set+Commit, one goroutine) in extra.", n)},
		Goal: &Goal{Text: "ratio >= 0.9", MinRatio: ptr(0.9)},
		Extra: map[string]float64{"mean cycle us/call": median(cycle),
			"process CPU us/call": median(cpu), "record bytes": median(rsize),
			"bare badger SyncWrites commits/s": median(frate), "ratio to bare badger": median(rate) / median(frate),
			"bare badger process CPU us/commit": median(fcpu)},
	}, {
		ID: "3b", Name: "durable effectful call, one agent: p50 latency", Unit: "us", Better: "lower",
		Value: median(p50), Samples: p50,
		Measures: "the median over the calls of figure 3a of the host time from a call's intent entry to the first entry of the guest's next call (journal.Entry.Time, read back from the store): building and linking the call's entries, the durable commit (badger write, fsync, seal) and the guest's turn to its next call (well under 1 us, figure 1); the guest cannot time itself, since its clock is virtual.",
		Floor: &Floor{Name: "raw fdatasync p50", Unit: "us", Value: median(rp50), Samples: rp50,
			Measures: "the median latency of one write and fdatasync of the floor of 3a (for context)."},
		Goal: &Goal{Text: "<= 400 us", MaxValue: ptr(400)},
		Extra: map[string]float64{"p99 us": median(p99), "bare badger SyncWrites p50 us": median(fp50),
			"bare badger SyncWrites p99 us": median(fp99)},
	}}, nil
}

// Figure 4: group commit under 64 concurrent agents on one store.
func (h *harness) groupCommit(ctx context.Context) ([]Figure, error) {
	agents, m := h.cfg.Agents, h.cfg.AgentCalls
	c, err := openCell(dir(h.root, "group"), h.engine)
	if err != nil {
		return nil, err
	}
	defer c.close()
	db, err := openBareBadger(dir(h.root, "group-floor"))
	if err != nil {
		return nil, err
	}
	defer db.Close()
	// One run first, so that the module is compiled and stored before the
	// timed runs start; its journal, as long as one agent's, is what the
	// signed group-commit floor writes again.
	tmpl, err := c.run(ctx, h.guests.KVPut, countInput(m), kvGrant("warmup"), uint64(m)+1)
	if err != nil {
		return nil, err
	}
	commits, err := recordCommits(ctx, c.store, tmpl.Run)
	if err != nil {
		return nil, err
	}
	jc, err := openCell(dir(h.root, "group-journal"), h.engine)
	if err != nil {
		return nil, err
	}
	defer jc.close()
	var rate, p50, p99, cpu, cores, frate, fp50, fp99, fcpu, jrate, jp50, jp99, jcpu []float64
	for r := range h.cfg.Reps {
		runs := make([]journal.RunID, agents)
		mt := startMeter()
		d, err := concurrently(agents, func(i int) error {
			res, err := c.run(ctx, h.guests.KVPut, countInput(m), kvGrant(fmt.Sprintf("a%d-r%d", i, r)), uint64(m)+1)
			if err == nil {
				runs[i] = res.Run
			}
			return err
		})
		rd := mt.stop()
		if err != nil {
			return nil, err
		}
		cpu = append(cpu, us(rd.CPU)/float64(agents*m))
		cores = append(cores, rd.CPU.Seconds()/rd.Wall.Seconds())
		var lat []time.Duration
		for _, run := range runs {
			l, err := effectLatencies(ctx, c.store, run)
			if err != nil {
				return nil, err
			}
			lat = append(lat, l...)
		}
		if len(lat) != agents*m {
			return nil, fmt.Errorf("bench: %d completed effects, want %d", len(lat), agents*m)
		}
		rate = append(rate, float64(agents*m)/d.Seconds())
		p50, p99 = append(p50, us(percentile(lat, 50))), append(p99, us(percentile(lat, 99)))

		jlats := make([][]time.Duration, agents)
		jm := startMeter()
		jd, err := concurrently(agents, func(i int) error {
			var err error
			jlats[i], err = commits.replayCommits(ctx, jc.store, jc.key, fmt.Sprintf("a%d-r%d", i, r))
			return err
		})
		jrd := jm.stop()
		if err != nil {
			return nil, err
		}
		jlat := slices.Concat(jlats...)
		jcpu = append(jcpu, us(jrd.CPU)/float64(len(jlat)))
		jrate = append(jrate, float64(len(jlat))/jd.Seconds())
		jp50, jp99 = append(jp50, us(percentile(jlat, 50))), append(jp99, us(percentile(jlat, 99)))

		flats := make([][]time.Duration, agents)
		fm := startMeter()
		fd, err := concurrently(agents, func(i int) error {
			var err error
			flats[i], err = bareCommits(db, fmt.Sprintf("r%d/a%d/", r, i), m)
			return err
		})
		frd := fm.stop()
		if err != nil {
			return nil, err
		}
		fcpu = append(fcpu, us(frd.CPU)/float64(agents*m))
		flat := slices.Concat(flats...)
		frate = append(frate, float64(agents*m)/fd.Seconds())
		fp50, fp99 = append(fp50, us(percentile(flat, 50))), append(fp99, us(percentile(flat, 99)))
		h.logf("4 group commit rep %d: ours %.0f calls/s p99 %.0f us, signed group-commit floor %.0f calls/s p99 %.0f us, bare badger %.0f commits/s p99 %.0f us", r, rate[r], p99[r], jrate[r], jp99[r], frate[r], fp99[r])
	}
	h.fig4Rate = median(rate)
	return []Figure{{
		ID: "4a", Name: fmt.Sprintf("group commit, %d agents: durable calls/s", agents), Unit: "calls/s", Better: "higher",
		Value: median(rate), Samples: rate,
		Measures: fmt.Sprintf("%d goroutines each running host.Host.Run of testdata/kvput.wat (%d kv.put calls, own kv namespace) on one shared host and badgerstore: total kv.put calls / wall time until the last run ends (run start and end commits included).", agents, m),
		Floor: &Floor{Name: "signed group commit, journal alone", Unit: "calls/s", Value: median(jrate), Samples: jrate,
			Measures: fmt.Sprintf("the journal without the host: %d goroutines each writing again, as a new run on one shared badgerstore, the entries of one agent's run of the same module (recorded before timing), each linked into the run's chain (encoded, checked, hashed) and committed where the host committed them (the start with its index record; each kv.put's three entries with its write, durably; the end with its index record, durably), through the store's group commit and round seals: kv.put commits / wall time. What the host adds over it is the guest, the gate and the call path.", agents)},
		Goal: &Goal{Text: ">= 50000 calls/s and ratio >= 0.8", MinValue: ptr(50000), MinRatio: ptr(0.8)},
		Extra: map[string]float64{
			"p50 us":                            median(p50),
			"process CPU us/call":               median(cpu),
			"process CPU cores busy":            median(cores),
			"floor p50 us":                      median(jp50),
			"floor p99 us":                      median(jp99),
			"floor process CPU us/call":         median(jcpu),
			"bare badger SyncWrites commits/s":  median(frate),
			"bare badger process CPU us/commit": median(fcpu),
		},
	}, {
		ID: "4b", Name: fmt.Sprintf("group commit, %d agents: p99 latency", agents), Unit: "us", Better: "lower",
		Value: median(p99), Samples: p99,
		Measures: "the 99th percentile over every call of figure 4a of the host time from a call's intent entry to the guest's next call, as in 3b.",
		Floor: &Floor{Name: "bare badger SyncWrites p99", Unit: "us", Value: median(fp99), Samples: fp99,
			Measures: fmt.Sprintf("the 99th percentile latency of one Set+Commit of %d goroutines each doing %d Set+Commit on one plain badger database with SyncWrites=true (for context).", agents, m)},
		Goal:  &Goal{Text: "<= 5000 us", MaxValue: ptr(5000)},
		Extra: map[string]float64{"floor p50 us": median(fp50)},
	}}, nil
}

// Figure 5: replay of the run recorded by figure 2.
func (h *harness) replay(ctx context.Context) ([]Figure, error) {
	// Nothing after this step reads the recorded cell: its store (some
	// 300 000 entries, its memtables and caches, its compactions) closes
	// now, so that the figures after are not measured beside it.
	defer h.closeRecorded()
	st, run := h.recorded.store, h.recordedRun
	trust := journal.TrustKeys(h.recorded.key.Public().(ed25519.PublicKey))
	var full, load, exec, floor []float64
	var entries uint64
	for r := range h.cfg.Reps {
		start := time.Now()
		n, err := decodeAll(ctx, st, run)
		fd := time.Since(start)
		if err != nil {
			return nil, err
		}
		l, x, e, err := loadAndReplay(ctx, st, h.engine, run, h.guests.Loop, trust)
		if err != nil {
			return nil, err
		}
		if e != n {
			return nil, fmt.Errorf("bench: replay saw %d entries, the floor %d", e, n)
		}
		entries = e
		full = append(full, float64(e)/(l+x).Seconds())
		load = append(load, float64(e)/l.Seconds())
		exec = append(exec, float64(e)/x.Seconds())
		floor = append(floor, float64(n)/fd.Seconds())
		h.logf("5 replay rep %d: load+replay %.0f entries/s, load %.0f, floor %.0f", r, full[r], load[r], floor[r])
	}
	audit, err := h.auditVerify(ctx)
	if err != nil {
		return nil, err
	}
	figs := []Figure{audit}
	// The same re-execution on wasmtime, when this harness was built with
	// it (go run -tags wasmtime; make bench does when cgo works).
	if wt, err := host.NewEngine(ctx, host.EngineConfig{Kind: host.EngineWasmtime}); err == nil {
		var wexec []float64
		for r := range h.cfg.Reps {
			_, x, e, err := loadAndReplay(ctx, st, wt, run, h.guests.Loop, trust)
			if err != nil {
				wt.Close(ctx)
				return nil, err
			}
			wexec = append(wexec, float64(e)/x.Seconds())
			h.logf("5 replay on wasmtime rep %d: re-execution %.0f entries/s", r, wexec[r])
		}
		wt.Close(ctx)
		figs = append(figs, Figure{
			ID: "5d", Name: "replay: re-execution on wasmtime", Unit: "entries/s", Better: "higher",
			Value: median(wexec), Samples: wexec,
			Measures: fmt.Sprintf("Journal.Replay of figure 2's run (%d entries) on the wasmtime engine (wasmtime-go, build tag wasmtime), the module compiled before timing: entries / Replay time. The same recording and Source as 5a.", entries),
			Floor: &Floor{Name: "re-execution on wazero", Unit: "entries/s", Value: median(exec), Samples: exec,
				Measures: "5a's re-execution alone (Journal.Replay on the default wazero engine), same run."},
		})
	} else {
		h.logf("5d skipped: %v", err)
	}
	fl := &Floor{Name: "bare iterate+decode", Unit: "entries/s", Value: median(floor), Samples: floor,
		Measures: "badgerstore Store.Records over the same run with journal.DecodeRecord and journal.DecodeEntry of every record, nothing checked beyond decoding."}
	goal := func() *Goal {
		return &Goal{Text: ">= 300000 entries/s and ratio >= 0.75", MinValue: ptr(300000), MinRatio: ptr(0.75)}
	}
	return append([]Figure{{
		ID: "5a", Name: "replay: verify + re-execute", Unit: "entries/s", Better: "higher",
		Value: median(full), Samples: full, Floor: fl, Goal: goal(),
		Measures: fmt.Sprintf("replay.Load (decode, sequence, chain, input and output hashes, seals against the trusted cell key) then Journal.Replay (re-execution of testdata/loop.wat on the engine, every call checked against the journal) of figure 2's recorded run, %d entries: entries / (Load time + Replay time).", entries),
		Extra:    map[string]float64{"re-execution alone entries/s": median(exec)},
	}, {
		ID: "5b", Name: "replay: verify only (Load)", Unit: "entries/s", Better: "higher",
		Value: median(load), Samples: load, Floor: fl, Goal: goal(),
		Measures: "replay.Load alone of the same run: entries / Load time.",
	}}, figs...), nil
}

// Figure 6: cold start.
func (h *harness) coldStart(ctx context.Context) ([]Figure, error) {
	var figs []Figure
	measure := func(id, name string, code []byte, warm bool) error {
		var oursDir, bareDir string
		if warm {
			oursDir, bareDir = dir(h.root, "cache-ours-"+id), dir(h.root, "cache-bare-"+id)
			if err := warmCache(ctx, code, oursDir, false); err != nil {
				return err
			}
			if err := warmCache(ctx, code, bareDir, true); err != nil {
				return err
			}
		}
		var o, b []coldStart
		for range h.cfg.ColdReps {
			runtime.GC()
			c, err := coldStartOurs(ctx, code, oursDir)
			if err != nil {
				return err
			}
			runtime.GC()
			f, err := coldStartBare(ctx, code, bareDir)
			if err != nil {
				return err
			}
			o, b = append(o, c), append(b, f)
		}
		total := func(cs []coldStart) []float64 {
			var v []float64
			for _, c := range cs {
				v = append(v, ms(c.total()))
			}
			return v
		}
		part := func(cs []coldStart, f func(coldStart) time.Duration) float64 {
			var v []float64
			for _, c := range cs {
				v = append(v, ms(f(c)))
			}
			return median(v)
		}
		cache := "no compilation cache"
		if warm {
			cache = "a compilation cache directory filled by an earlier engine"
		}
		figs = append(figs, Figure{
			ID: id, Name: name, Unit: "ms", Better: "lower", Value: median(total(o)), Samples: total(o),
			Measures: fmt.Sprintf("host.NewEngine (%s) + Engine.Compile + the first Engine.Execute (instantiate and run _start to its end, calls answered by a fixed host.Source) of a %s module.", cache, size(len(code))),
			Floor: &Floor{Name: "bare wazero", Unit: "ms", Value: median(total(b)), Samples: total(b),
				Measures: "the same on a plain wazero runtime (wazero.NewRuntimeWithConfig with the same cache setting, WASI and a one-function agentrt:run module) + CompileModule + InstantiateModule and _start."},
			Extra: map[string]float64{
				"engine ms":          part(o, func(c coldStart) time.Duration { return c.engine }),
				"compile ms":         part(o, func(c coldStart) time.Duration { return c.compile }),
				"first run ms":       part(o, func(c coldStart) time.Duration { return c.first }),
				"floor runtime ms":   part(b, func(c coldStart) time.Duration { return c.engine }),
				"floor compile ms":   part(b, func(c coldStart) time.Duration { return c.compile }),
				"floor first run ms": part(b, func(c coldStart) time.Duration { return c.first }),
			},
			Notes: "No goal; for reference, the ABI spike measured about 900 ms to compile a 2-3 MB Go guest, 80 ms from a warm cache and 7 ms to instantiate.",
		})
		h.logf("6 cold start %s: ours %.1f ms, floor %.1f ms", id, median(total(o)), median(total(b)))
		return nil
	}
	if h.guests.Echo != nil {
		if err := measure("6a", "cold start, Go agent, no cache", h.guests.Echo, false); err != nil {
			return nil, err
		}
		if err := measure("6b", "cold start, Go agent, warm cache", h.guests.Echo, true); err != nil {
			return nil, err
		}
	}
	if err := measure("6c", "cold start, WAT guest, no cache", h.guests.Loop, false); err != nil {
		return nil, err
	}
	return figs, nil
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// size formats a byte count.
func size(n int) string {
	if n < 10<<10 {
		return fmt.Sprintf("%d-byte", n)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// noiseCPUs is how much CPU other processes may use during a figure before
// the report warns that it was measured on a busy machine.
const noiseCPUs = 0.15
