package bench

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/agentrt/agentrt/host"
	agentcell "github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/uibench"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/badgerstore"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Figure 20: what observing runs costs (issue 17). 20a and 20b are the
// overhead of tracing and of the Prometheus metrics on figures 3 and 4;
// 20c is the time the dashboard takes to page a 100 000-call journal.

// observed names the three ways figure 20 runs a host: as figures 3 and 4
// do (nothing observed), traced, and metered.
var observed = []string{"plain", "traced", "metered"}

// otlpSink is an OTLP/HTTP trace receiver on loopback that reads every
// export request whole and drops it: the exporter's work (batching,
// protobuf encoding, the HTTP round trip) is all done, the receiver's
// decoding is not.
type otlpSink struct {
	srv            *httptest.Server
	requests, size atomic.Int64
}

func newOTLPSink() *otlpSink {
	s := &otlpSink{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		s.requests.Add(1)
		s.size.Add(n)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	return s
}

// openObservedCell is openCell with the host traced (tp) or metered (a
// fresh cell.Metrics watching the store, as cell serve --metrics sets it
// up), or neither.
func openObservedCell(dir string, engine *host.Engine, tp *sdktrace.TracerProvider, metered bool) (*cell, error) {
	st, err := badgerstore.Open(dir)
	if err != nil {
		return nil, err
	}
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		st.Close()
		return nil, err
	}
	deps := host.Deps{Store: st, KV: st, Events: st, Key: key}
	if tp != nil {
		deps.Tracer = tp
	}
	if metered {
		m := agentcell.NewMetrics()
		m.Watch(st)
		deps.Observer = m
	}
	h, err := host.New(engine, deps, host.Config{})
	if err != nil {
		st.Close()
		return nil, err
	}
	return &cell{store: st, host: h, key: key}, nil
}

// observability measures figures 20a, 20b and 20c.
func (h *harness) observability(ctx context.Context) ([]Figure, error) {
	sink := newOTLPSink()
	defer sink.srv.Close()
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(sink.srv.URL+"/v1/traces"))
	if err != nil {
		return nil, err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	defer tp.Shutdown(context.Background())

	cells := make([]*cell, len(observed))
	for i, name := range observed {
		var t *sdktrace.TracerProvider
		if name == "traced" {
			t = tp
		}
		c, err := openObservedCell(dir(h.root, "observe-"+name), h.engine, t, name == "metered")
		if err != nil {
			return nil, err
		}
		defer c.close()
		if _, err := c.run(ctx, h.guests.KVPut, countInput(20), kvGrant("warmup"), 21); err != nil {
			return nil, err
		}
		cells[i] = c
	}
	// The machine's other work changes from one second to the next, so
	// the three hosts take many short turns: each repetition is three
	// rounds, each round a third of figure 3a's run and of figure 4a's
	// runs on each host, in an order that turns from round to round.
	rounds := 3 * h.cfg.Reps
	n, agents, m := max(h.cfg.DurableCalls/3, 20), h.cfg.Agents, max(h.cfg.AgentCalls/3, 5)
	// rates[f][c] are the calls/s of figure f (0: 3a, 1: 4a) with cells[c],
	// one per round; cpu[f][c] the process's CPU time per call.
	var rates, cpu [2][3][]float64
	for r := range rounds {
		for k := range observed {
			i := (k + r) % len(observed)
			c := cells[i]
			// The traced turns end with the export of their spans, so
			// that none of it falls into another turn.
			flush := func() error {
				if observed[i] == "traced" {
					return tp.ForceFlush(ctx)
				}
				return nil
			}
			mt := startMeter()
			if _, err := c.run(ctx, h.guests.KVPut, countInput(n), kvGrant(fmt.Sprintf("one-r%d", r)), uint64(n)+1); err != nil {
				return nil, err
			}
			if err := flush(); err != nil {
				return nil, err
			}
			rd := mt.stop()
			rates[0][i] = append(rates[0][i], float64(n)/rd.Wall.Seconds())
			cpu[0][i] = append(cpu[0][i], us(rd.CPU)/float64(n))
			mt = startMeter()
			_, err := concurrently(agents, func(a int) error {
				_, err := c.run(ctx, h.guests.KVPut, countInput(m), kvGrant(fmt.Sprintf("a%d-r%d", a, r)), uint64(m)+1)
				return err
			})
			if err == nil {
				err = flush()
			}
			if err != nil {
				return nil, err
			}
			rd = mt.stop()
			rates[1][i] = append(rates[1][i], float64(agents*m)/rd.Wall.Seconds())
			cpu[1][i] = append(cpu[1][i], us(rd.CPU)/float64(agents*m))
		}
		h.logf("20 observability round %d: one agent %.0f / %.0f / %.0f calls/s, %d agents %.0f / %.0f / %.0f calls/s (plain / traced / metered)", r,
			rates[0][0][r], rates[0][1][r], rates[0][2][r], agents, rates[1][0][r], rates[1][1][r], rates[1][2][r])
	}
	if err := tp.ForceFlush(ctx); err != nil {
		return nil, err
	}
	if sink.requests.Load() == 0 {
		return nil, errors.New("bench: the traced runs exported no spans")
	}
	// overhead is, per repetition, how much slower than plain config c
	// ran figure f, in percent.
	overhead := func(f, c int) []float64 {
		var o []float64
		for r := range rates[f][c] {
			o = append(o, (rates[f][0][r]/rates[f][c][r]-1)*100)
		}
		return o
	}
	// cpuOverhead is the same of the process's CPU time per call.
	cpuOverhead := func(f, c int) float64 { return (median(cpu[f][c])/median(cpu[f][0]) - 1) * 100 }
	figure := func(id, what string, c int, how string) Figure {
		o3, o4 := overhead(0, c), overhead(1, c)
		v, s := median(o3), o3
		if median(o4) > v {
			v, s = median(o4), o4
		}
		return Figure{
			ID: id, Name: "overhead of " + what + " on figures 3a and 4a", Unit: "%", Better: "lower",
			Value: v, Samples: s,
			Measures: fmt.Sprintf("figures 3a and 4a at a third of their sizes, 3a one agent making %d kv.put calls of testdata/kvput.wat (each a durable badger commit), 4a %d agents of %d kv.put calls on one store, run on a host %s and on the same host with nothing observed (Deps.Tracer and Deps.Observer nil, as figures 3 and 4), each on its own badgerstore, the three hosts taking turns in %d rounds (3 a repetition, the order turning each round): the overhead is plain calls/s / observed calls/s - 1, per round; the figure is the larger of the two medians (3a's and 4a's; the samples are that one's). The process's CPU time per call, observed against plain (medians), is in extra: on a loaded machine it is steadier than the rates. A few percent is within the noise of one round on a loaded 2-core machine: read the samples, and the Go benchmarks that measure the observing alone in CPU per call (host BenchmarkCallSpan, host/cell BenchmarkMetricsCall; bench/README.md).", n, agents, m, how, rounds),
			Goal:     &Goal{Text: "< 3 %", MaxValue: ptr(3)},
			Extra: map[string]float64{"on 3a %": median(o3), "on 4a %": median(o4),
				"3a plain calls/s": median(rates[0][0]), "3a observed calls/s": median(rates[0][c]),
				"4a plain calls/s": median(rates[1][0]), "4a observed calls/s": median(rates[1][c]),
				"process CPU per call on 3a %": cpuOverhead(0, c), "process CPU per call on 4a %": cpuOverhead(1, c),
				"rounds": float64(rounds)},
		}
	}
	traced := figure("20a", "tracing", 1, "traced by the OpenTelemetry SDK (Deps.Tracer: a span per run and per import call, with the journal's run, seq and entry hash; payloads off, the default) through the SDK's batch span processor (default settings) and the real OTLP/HTTP protobuf exporter, to a receiver on loopback in the same process that reads each request and drops it; each traced turn ends with ForceFlush, timed with it: span making, batching, encoding and sending are included, a collector's decoding is not")
	traced.Extra["OTLP export requests"] = float64(sink.requests.Load())
	traced.Extra["OTLP bytes per call (approx.)"] = float64(sink.size.Load()) / float64(rounds*(n+agents*m)+20)
	metered := figure("20b", "metrics", 2, "with the cell's Prometheus metrics as its observer (cell.NewMetrics, Watch on the store: calls by op, class and status, commit latency histograms, fsync latency from the store; as cell serve --metrics), nothing scraping")
	page, err := h.uiPage(ctx)
	if err != nil {
		return nil, err
	}
	return []Figure{traced, metered, page}, nil
}

// uiEntries is the number of calls of figure 20c's run.
const uiEntries = 100_000

// uiPage measures figure 20c: the dashboard's timeline page of a
// 100 000-call journal, p95.
func (h *harness) uiPage(ctx context.Context) (Figure, error) {
	calls := uint64(uiEntries)
	if h.cfg.UIPages < 50 { // -quick
		calls = 5000
	}
	j, err := uibench.Open(ctx, dir(h.root, "ui"), agentcell.Options{CacheDir: dir(h.root, "ui-cache")})
	if err != nil {
		return Figure{}, err
	}
	defer j.Close(ctx)
	run, err := j.LoopRun(ctx, h.guests.Loop, calls)
	if err != nil {
		return Figure{}, err
	}
	head, err := j.Cell.Store.Head(ctx, run)
	if err != nil {
		return Figure{}, err
	}
	// One page first: the first request opens the connection.
	if _, _, err := j.Page(ctx, 0); err != nil {
		return Figure{}, err
	}
	var p95, p50, fp95 []float64
	for r := range h.cfg.Reps {
		var took, floor []time.Duration
		for i := range h.cfg.UIPages {
			from := uibench.Offset(r*h.cfg.UIPages+i, calls)
			d, page, err := j.Page(ctx, from)
			if err != nil {
				return Figure{}, err
			}
			if rows := uibench.Rows(page); len(rows) != agentcell.UIPageSize || rows[0] != fmt.Sprint(from) {
				return Figure{}, fmt.Errorf("bench: the page from %d has %d rows", from, len(rows))
			}
			took = append(took, d)
			fd, err := readPage(ctx, j.Cell.Store, run, from)
			if err != nil {
				return Figure{}, err
			}
			floor = append(floor, fd)
		}
		p95, p50, fp95 = append(p95, ms(percentile(took, 95))), append(p50, ms(percentile(took, 50))), append(fp95, ms(percentile(floor, 95)))
		h.logf("20c dashboard page rep %d: p95 %.1f ms, p50 %.1f ms; store read p95 %.2f ms", r, p95[r], p50[r], fp95[r])
	}
	return Figure{
		ID: "20c", Name: fmt.Sprintf("dashboard: a timeline page of a %d-call journal, p95", calls), Unit: "ms", Better: "lower",
		Value: median(p95), Samples: p95,
		Measures: fmt.Sprintf("GET /runs/RUN?from=N (HTML, the API token as a bearer) on the dashboard of a cell (cell.Server.UI on loopback, internal/uibench, as host/cell's BenchmarkUIJournalPage100k) whose badgerstore holds one run of testdata/loop.wat with %d calls (%d entries): a page of %d timeline rows, timed in the client to the last byte of the body, at offsets spread over the journal (uibench.Offset); the 95th percentile of %d pages per repetition.", calls, head, agentcell.UIPageSize, h.cfg.UIPages),
		Floor: &Floor{Name: "store read of the page", Unit: "ms", Value: median(fp95), Samples: fp95,
			Measures: fmt.Sprintf("Store.Records of the same %d entries from the same offset with journal.DecodeRecord and DecodeEntry of each, p95 (for context: what the page must read).", agentcell.UIPageSize)},
		Goal:  &Goal{Text: "< 200 ms", MaxValue: ptr(200)},
		Extra: map[string]float64{"p50 ms": median(p50)},
	}, nil
}

// errPageRead stops readPage's iteration.
var errPageRead = errors.New("page read")

// readPage reads and decodes the UIPageSize entries of run from from.
func readPage(ctx context.Context, st journal.Store, run journal.RunID, from uint64) (time.Duration, error) {
	n := 0
	start := time.Now()
	err := st.Records(ctx, run, from, func(_ uint64, raw []byte) error {
		rec, err := journal.DecodeRecord(raw)
		if err != nil {
			return err
		}
		if _, err := journal.DecodeEntry(rec.Entry); err != nil {
			return err
		}
		if n++; n == agentcell.UIPageSize {
			return errPageRead
		}
		return nil
	})
	d := time.Since(start)
	if err != nil && !errors.Is(err, errPageRead) {
		return 0, err
	}
	if n != agentcell.UIPageSize {
		return 0, fmt.Errorf("bench: read %d entries from %d", n, from)
	}
	return d, nil
}
