package bench

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/agentrt/agentrt/host"
	agentcell "github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/journal"
)

// Figure 17: daemon start latency. A cell daemon in process serving its
// API on its unix socket, as agentrt cell serve does; a client submits
// runs of a module it pushed before (POST /v1/modules), by its hash, one
// at a time: the time from the request to the run's start journaled (the
// 201 answer), and to the run's first call. The floor is the same start
// without the API: Host.Start of the same module by hash, in process.

// byBytesSamples is how many submissions carrying the whole Go agent
// (base64 JSON, as before modules were kept by hash) 17b times, for
// comparison.
const byBytesSamples = 20

func (h *harness) daemonStart(ctx context.Context) ([]Figure, error) {
	n := h.cfg.DaemonStarts
	data := dir(h.root, "daemon-start")
	c, err := agentcell.Open(ctx, data, agentcell.Options{NoCache: true})
	if err != nil {
		return nil, err
	}
	ends := make(chan ended, 1)
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
	waitEnd := func(id string) error {
		select {
		case e := <-ends:
			switch {
			case e.run.String() != id:
				return fmt.Errorf("bench: run %s ended while run %s was timed", e.run, id)
			case e.err != nil:
				return fmt.Errorf("bench: run %s stopped: %w", id, e.err)
			case e.res.Status != journal.StatusCompleted:
				return fmt.Errorf("bench: run %s ended %s (%v)", id, e.res.Status, e.res.Err)
			}
			return nil
		case <-time.After(time.Minute):
			return fmt.Errorf("bench: run %s did not end in a minute", id)
		}
	}
	// firstCall is the host time of run's first call entry.
	firstCall := func(run journal.RunID) (time.Time, error) {
		var at int64
		stop := errors.New("found")
		err := c.Store.Records(ctx, run, 0, func(_ uint64, b []byte) error {
			r, err := journal.DecodeRecord(b)
			if err != nil {
				return err
			}
			e, err := journal.DecodeEntry(r.Entry)
			if err != nil {
				return err
			}
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

	type guest struct {
		id, name string
		code     []byte
		input    []byte
	}
	guests := []guest{{"17a", "testdata/loop.wat (2 pure calls)", h.guests.Loop, countInput(1)}}
	if h.guests.Echo != nil {
		guests = append(guests, guest{"17b", fmt.Sprintf("the Go agent testdata/agents/echo (%d KiB)", len(h.guests.Echo)>>10), h.guests.Echo, []byte(`{}`)})
	}
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
		submit := func() (time.Duration, time.Duration, error) {
			t0 := time.Now()
			id, err := cl.Submit(ctx, sub)
			resp := time.Since(t0)
			if err != nil {
				return 0, 0, err
			}
			if err := waitEnd(id); err != nil {
				return 0, 0, err
			}
			run, err := journal.ParseRunID(id)
			if err != nil {
				return 0, 0, err
			}
			at, err := firstCall(run)
			return resp, at.Sub(t0), err
		}
		if _, _, err := submit(); err != nil { // the warm-up
			return nil, err
		}
		before := c.Engine.Stats()
		var p50, p99, c50, c99, f50, f99 []float64
		for r := range h.cfg.Reps {
			var resp, call, floor []time.Duration
			for range n {
				rt, ct, err := submit()
				if err != nil {
					return nil, err
				}
				resp, call = append(resp, rt), append(call, ct)
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
			p50, p99 = append(p50, ms(percentile(resp, 50))), append(p99, ms(percentile(resp, 99)))
			c50, c99 = append(c50, ms(percentile(call, 50))), append(c99, ms(percentile(call, 99)))
			f50, f99 = append(f50, ms(percentile(floor, 50))), append(f99, ms(percentile(floor, 99)))
			h.logf("%s rep %d: start journaled p50 %.2f p99 %.2f ms, first call p50 %.2f p99 %.2f ms (in process: %.2f/%.2f)",
				g.id, r, p50[r], p99[r], c50[r], c99[r], f50[r], f99[r])
		}
		after := c.Engine.Stats()
		if after.Compiles != before.Compiles {
			return nil, fmt.Errorf("bench: %s was compiled %d times while timed: the daemon did not keep it", g.name, after.Compiles-before.Compiles)
		}
		extra := map[string]float64{"p99 ms": median(p99), "first call p50 ms": median(c50), "first call p99 ms": median(c99),
			"floor p99 ms": median(f99), "runs per repetition": float64(n)}
		if g.id == "17b" {
			var bytes []time.Duration
			full := agentcell.Submission{Module: g.code, Name: g.id, Input: g.input}
			for range byBytesSamples {
				t0 := time.Now()
				id, err := cl.Submit(ctx, full)
				if err != nil {
					return nil, err
				}
				bytes = append(bytes, time.Since(t0))
				if err := waitEnd(id); err != nil {
					return nil, err
				}
			}
			extra["by bytes p50 ms"] = ms(percentile(bytes, 50))
			h.logf("17b submitted with its bytes: start journaled p50 %.2f ms", extra["by bytes p50 ms"])
		}
		figs = append(figs, Figure{
			ID: g.id, Name: "daemon start latency, known module by hash: request to start journaled, p50", Unit: "ms", Better: "lower",
			Value: median(p50), Samples: p50, Goal: &Goal{Text: "p50 <= 5 ms", MaxValue: ptr(5)},
			Measures: fmt.Sprintf("a cell daemon in process (cell.Open, cell.NewServer, its API on the unix socket DATA/agentrt.sock, as agentrt cell serve) "+
				"and a client (cell.Dial) that pushed %s once (POST /v1/modules: stored, compiled, kept in memory) and warmed it with one run; then, one at a time, "+
				"POST /v1/runs naming the module by module_sha256, timed from before the request to its 201 answer, which comes once the run's start is "+
				"journaled (token issued, grant checked, the compiled module found, start and lease entries committed); each run is waited for to its end before "+
				"the next. In extra: the p99, and the time to the host time of the run's first call entry (instantiated and running). The harness fails if the "+
				"module is compiled again while timed. Percentiles over %d runs, medians over %d repetitions.", g.name, n, h.cfg.Reps),
			Floor: &Floor{Name: "Host.Start of the same module by hash, in process, p50", Unit: "ms", Value: median(f50), Samples: f50,
				Measures: "the same start without the API (no HTTP, no JSON): Host.Start with RunSpec.ModuleSHA256 on the daemon's host, timed to its return, then executed to its end before the next"},
			Extra: extra,
		})
	}
	return figs, nil
}
