package bench

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/agentrt/agentrt/host"
	agentcell "github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/journal"
)

// Figure 17: daemon start latency. A cell daemon in process serving its
// API on its unix socket, as agentrt cell serve does; a client submits
// runs of a module it pushed before (POST /v1/modules), by its hash: one
// at a time (17a, 17b), or 16 at once (17c). Each is timed from before
// its request to the 201 answer, which comes once the run's first journal
// entries are committed, and in extra to the host time the first entry
// carries and to the run's first call. The floor of 17a
// and 17b is the same start without the API: Host.Start of the same
// module by hash, in process.

// byBytesSamples is how many submissions carrying the whole module
// (base64 JSON, as before modules were kept by hash) 17b and 17c time,
// for comparison.
const byBytesSamples = 32

// burst is how many submissions figure 17c makes at once: the 16
// concurrent agents of the comparison with DBOS.
const burst = 16

func (h *harness) daemonStart(ctx context.Context) ([]Figure, error) {
	n := h.cfg.DaemonStarts
	data := dir(h.root, "daemon-start")
	c, err := agentcell.Open(ctx, data, agentcell.Options{NoCache: true})
	if err != nil {
		return nil, err
	}
	ends := make(chan ended, burst)
	srv := agentcell.NewServer(c, agentcell.ServerOptions{Logf: func(string, ...any) {}})
	srv.OnEnd(func(run journal.RunID, res *host.Result, err error) { ends <- ended{run, res, err} })
	c.AddSink(srv.Sink)
	ln, err := agentcell.ListenSocket(agentcell.SocketPath(data))
	if err != nil {
		c.Close(ctx)
		return nil, err
	}
	hs, err := srv.Endpoint(ln)
	if err != nil {
		ln.Close()
		c.Close(ctx)
		return nil, err
	}
	go hs.Serve(ln)
	defer func() {
		hs.Close()
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		srv.Shutdown(sctx)
		c.Close(sctx)
	}()
	cl, err := agentcell.Dial("unix:" + agentcell.SocketPath(data))
	if err != nil {
		return nil, err
	}
	// waitEnds waits for the runs ids, started together, to end
	// completed.
	waitEnds := func(ids ...string) error {
		left := map[string]bool{}
		for _, id := range ids {
			left[id] = true
		}
		for len(left) > 0 {
			select {
			case e := <-ends:
				id := e.run.String()
				switch {
				case !left[id]:
					return fmt.Errorf("bench: run %s ended while runs %v were timed", id, ids)
				case e.err != nil:
					return fmt.Errorf("bench: run %s stopped: %w", id, e.err)
				case e.res.Status != journal.StatusCompleted:
					return fmt.Errorf("bench: run %s ended %s (%v)", id, e.res.Status, e.res.Err)
				}
				delete(left, id)
			case <-time.After(time.Minute):
				return fmt.Errorf("bench: runs %v did not end in a minute", ids)
			}
		}
		return nil
	}
	// entryTimes returns the host times of run's first journal entry
	// (its start) and of its first call entry.
	entryTimes := func(run journal.RunID) (first, call time.Time, err error) {
		stop := errors.New("found")
		err = c.Store.Records(ctx, run, 0, func(_ uint64, b []byte) error {
			r, err := journal.DecodeRecord(b)
			if err != nil {
				return err
			}
			e, err := journal.DecodeEntry(r.Entry)
			if err != nil {
				return err
			}
			if e.Seq == 0 {
				first = time.Unix(0, e.Time)
			}
			if e.Step > 0 {
				call = time.Unix(0, e.Time)
				return stop
			}
			return nil
		})
		if first.IsZero() || call.IsZero() {
			return first, call, fmt.Errorf("bench: run %s has no start or no call entry (%v)", run, err)
		}
		return first, call, nil
	}
	// timed is one submission's times from before its request: to the
	// host time its run's first journal entry carries (taken as Host.Start
	// begins, before the module is found, the lease taken and the entry
	// committed), to the answer (the entry committed), to its first call
	// entry.
	type timed struct{ stamp, answer, call time.Duration }
	// submitAll submits subs at once, each from its own goroutine, and
	// waits for their runs' ends.
	submitAll := func(subs ...agentcell.Submission) ([]timed, error) {
		ids, t0s, answers, errs := make([]string, len(subs)), make([]time.Time, len(subs)), make([]time.Duration, len(subs)), make([]error, len(subs))
		var wg sync.WaitGroup
		for i, sub := range subs {
			wg.Go(func() {
				t0s[i] = time.Now()
				ids[i], errs[i] = cl.Submit(ctx, sub)
				answers[i] = time.Since(t0s[i])
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
		if err := waitEnds(ids...); err != nil {
			return nil, err
		}
		out := make([]timed, len(subs))
		for i, id := range ids {
			run, err := journal.ParseRunID(id)
			if err != nil {
				return nil, err
			}
			first, call, err := entryTimes(run)
			if err != nil {
				return nil, err
			}
			out[i] = timed{stamp: first.Sub(t0s[i]), answer: answers[i], call: call.Sub(t0s[i])}
		}
		return out, nil
	}

	type guest struct {
		id, name string
		code     []byte
		input    []byte
	}
	loop := guest{"17a", "testdata/loop.wat (2 pure calls)", h.guests.Loop, countInput(1)}
	guests := []guest{loop}
	// 17c submits the Go agent, as the 16 concurrent agents
	// were; the quick harness, which builds no Go agent, submits loop.
	together := loop
	if h.guests.Echo != nil {
		echo := guest{"17b", fmt.Sprintf("the Go agent testdata/agents/echo (%d KiB)", len(h.guests.Echo)>>10), h.guests.Echo, []byte(`{}`)}
		guests, together = append(guests, echo), echo
	}
	together.id = "17c"
	guests = append(guests, together)
	var figs []Figure
	for _, g := range guests {
		mi, err := cl.PushModule(ctx, g.code)
		if err != nil {
			return nil, fmt.Errorf("bench: push %s: %w", g.name, err)
		}
		sum, err := hex.DecodeString(mi.SHA256)
		if err != nil {
			return nil, err
		}
		sub := agentcell.Submission{ModuleSHA256: mi.SHA256, Name: g.id, Input: g.input}
		size := 1
		if g.id == "17c" {
			size = burst
		}
		subs := slices.Repeat([]agentcell.Submission{sub}, size)
		if _, err := submitAll(subs...); err != nil { // the warm-up
			return nil, err
		}
		before := c.Engine.Stats()
		var p50, p99, s50, s99, c50, c99, f50, f99 []float64
		for r := range h.cfg.Reps {
			var stamp, answer, call, floor []time.Duration
			for range max(1, n/size) {
				ts, err := submitAll(subs...)
				if err != nil {
					return nil, err
				}
				for _, t := range ts {
					stamp, answer, call = append(stamp, t.stamp), append(answer, t.answer), append(call, t.call)
				}
				if size > 1 {
					continue
				}
				t0 := time.Now()
				st, err := c.Host.Start(ctx, host.RunSpec{ModuleSHA256: sum, Name: g.id, Input: g.input})
				if err != nil {
					return nil, err
				}
				floor = append(floor, time.Since(t0))
				if res, err := st.Execute(ctx); err != nil || res.Status != journal.StatusCompleted {
					return nil, fmt.Errorf("bench: the floor's run of %s: %v %+v", g.name, err, res)
				}
			}
			p50, p99 = append(p50, ms(percentile(answer, 50))), append(p99, ms(percentile(answer, 99)))
			s50, s99 = append(s50, ms(percentile(stamp, 50))), append(s99, ms(percentile(stamp, 99)))
			c50, c99 = append(c50, ms(percentile(call, 50))), append(c99, ms(percentile(call, 99)))
			if size == 1 {
				f50, f99 = append(f50, ms(percentile(floor, 50))), append(f99, ms(percentile(floor, 99)))
			}
			h.logf("%s rep %d: start journaled p50 %.2f p99 %.2f ms, start stamped p50 %.2f p99 %.2f ms, first call p50 %.2f p99 %.2f ms",
				g.id, r, p50[r], p99[r], s50[r], s99[r], c50[r], c99[r])
		}
		after := c.Engine.Stats()
		if after.Compiles != before.Compiles {
			return nil, fmt.Errorf("bench: %s was compiled %d times while timed: the daemon did not keep it", g.name, after.Compiles-before.Compiles)
		}
		extra := map[string]float64{"p99 ms": median(p99), "start stamped p50 ms": median(s50), "start stamped p99 ms": median(s99),
			"first call p50 ms": median(c50), "first call p99 ms": median(c99), "runs per repetition": float64(max(1, n/size) * size)}
		if g.id != "17a" {
			// The same submissions carrying the module's bytes (base64
			// in JSON, as before modules were kept by hash): the wait
			// the issue measured was their decoding.
			var answer []time.Duration
			full := agentcell.Submission{Module: g.code, Name: g.id, Input: g.input}
			for range max(1, byBytesSamples/size) {
				ts, err := submitAll(slices.Repeat([]agentcell.Submission{full}, size)...)
				if err != nil {
					return nil, err
				}
				for _, t := range ts {
					answer = append(answer, t.answer)
				}
			}
			extra["by bytes p50 ms"], extra["by bytes p99 ms"] = ms(percentile(answer, 50)), ms(percentile(answer, 99))
			h.logf("%s submitted with its bytes: start journaled p50 %.2f p99 %.2f ms", g.id, extra["by bytes p50 ms"], extra["by bytes p99 ms"])
		}
		fig := Figure{
			ID: g.id, Name: "daemon start latency, known module by hash: request to start journaled, p50", Unit: "ms", Better: "lower",
			Value: median(p50), Samples: p50, Goal: &Goal{Text: "p50 <= 5 ms", MaxValue: ptr(5)},
			Measures: fmt.Sprintf("a cell daemon in process (cell.Open, cell.NewServer, its API on the unix socket DATA/agentrt.sock, as agentrt cell serve) "+
				"and a client (cell.Dial) that pushed %s once (POST /v1/modules: stored, compiled, kept in memory) and warmed it; then, one at a time, "+
				"POST /v1/runs naming the module by module_sha256, timed from before the request to its 201 answer, which comes once the run's first journal entries "+
				"are committed (token issued, grant checked, the compiled module found, start and lease entries committed, the run admitted and handed to a worker); "+
				"each run is waited for to its end before the next. In extra: the p99; the host time the start entry carries (stamped as Host.Start begins, before "+
				"the module is found and the entry committed: the API's own share); and the run's first call entry (instantiated and running). "+
				"The harness fails if the module is compiled again while timed. Percentiles over %d runs, medians over %d repetitions.", g.name, max(1, n/size)*size, h.cfg.Reps),
			Extra: extra,
		}
		if size == 1 {
			extra["floor p99 ms"] = median(f99)
			fig.Floor = &Floor{Name: "Host.Start of the same module by hash, in process, p50", Unit: "ms", Value: median(f50), Samples: f50,
				Measures: "the same start without the API (no HTTP, no JSON): Host.Start with RunSpec.ModuleSHA256 on the daemon's host, timed to its return, then executed to its end before the next"}
		} else {
			fig.Name = fmt.Sprintf("daemon start latency, %d submissions at once, known module by hash: request to start journaled, p50", size)
			fig.Measures = fmt.Sprintf("the daemon and client of 17a; the client pushed %s once and warmed it; then bursts of %d POST /v1/runs naming it by module_sha256, "+
				"each from its own goroutine at once (the issue's 16 concurrent agents), each timed from before its request to its 201 answer (the run's start committed); "+
				"every run of a burst is waited for to its end before the next burst. In extra: the p99, the times to the start entry's host time and to the first call entry, "+
				"and the same bursts submitting the module's bytes (base64 in JSON) instead of its hash (by bytes: %d runs). The harness fails if the module is "+
				"compiled again while timed. Percentiles over %d runs, medians over %d repetitions.", g.name, size, max(1, byBytesSamples/size)*size, max(1, n/size)*size, h.cfg.Reps)
		}
		figs = append(figs, fig)
	}
	return figs, nil
}
