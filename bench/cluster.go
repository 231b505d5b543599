package bench

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/jetstore"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Figure 19: agentrt on a cluster (issue 14), on nats-server processes
// built from the server module go.mod names, each syncing every write
// before acknowledging it (sync_interval: always):
//
//   - 19a, 19b: the time from SIGKILL of a cell process (agentrt cell
//     serve --nats) holding a run to the run's first live call on a peer;
//   - 19c, 19d: fenced appends of journal/jetstore on R1 and on R3 against
//     bare JetStream publishes to a stream with the same settings;
//   - 19e: figure 3a's one-agent durable call rate on a jetstore R3
//     against a badgerstore.

// leaseTTL is the lease TTL of figure 19a's cells; heartbeat how often
// they write their registry record and look for expired leases.
const (
	leaseTTL  = 3 * time.Second
	heartbeat = 200 * time.Millisecond
)

// natsProcs are nats-server processes on loopback.
type natsProcs struct {
	urls []string
	cmds []*exec.Cmd
	logs []*lockedBuffer
}

// lockedBuffer is a bytes.Buffer that a process writes while the harness
// reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// startNATS starts n nats-server processes of bin (routed to each other
// as a cluster when n > 1), JetStream in directories under root, and
// returns once each listens.
func startNATS(bin, root, name string, n int) (*natsProcs, error) {
	p := &natsProcs{}
	clients, routes := make([]int, n), make([]string, n)
	for i := range n {
		var err error
		if clients[i], err = freePort(); err != nil {
			return nil, err
		}
		rp, err := freePort()
		if err != nil {
			return nil, err
		}
		routes[i] = fmt.Sprintf("127.0.0.1:%d", rp)
	}
	for i := range n {
		d := dir(root, fmt.Sprintf("%s-%d", name, i+1))
		conf := fmt.Sprintf("server_name: %s%d\nlisten: 127.0.0.1:%d\nmax_payload: 8MB\njetstream { store_dir: %q, sync_interval: always }\n",
			name, i+1, clients[i], d)
		if n > 1 {
			conf += fmt.Sprintf("cluster { name: %s, listen: %s, routes: [%s] }\n", name, routes[i], "nats-route://"+strings.Join(routes, ", nats-route://"))
		}
		path := filepath.Join(d, "nats.conf")
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			p.stop()
			return nil, err
		}
		cmd := exec.Command(bin, "-c", path)
		log := &lockedBuffer{}
		cmd.Stderr = log
		if err := cmd.Start(); err != nil {
			p.stop()
			return nil, err
		}
		p.cmds, p.logs = append(p.cmds, cmd), append(p.logs, log)
		p.urls = append(p.urls, fmt.Sprintf("nats://127.0.0.1:%d", clients[i]))
	}
	deadline := time.Now().Add(time.Minute)
	for i, port := range clients {
		for {
			c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
			if err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) {
				p.stop()
				return nil, fmt.Errorf("bench: nats-server %d does not listen after a minute: %v\n%s", i+1, err, p.logs[i])
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return p, nil
}

func (p *natsProcs) url() string { return strings.Join(p.urls, ",") }

func (p *natsProcs) stop() {
	for _, c := range p.cmds {
		c.Process.Kill()
		c.Wait()
	}
}

// goBuild builds pkg (a path in this module, or a module package go.mod
// names) into bin.
func goBuild(ctx context.Context, bin, pkg string) error {
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg)
	build.Dir = filepath.Join(sourceDir(), "..")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("bench: go build %s: %v\n%s", pkg, err, out)
	}
	return nil
}

// cluster measures figure 19.
func (h *harness) cluster(ctx context.Context) ([]Figure, error) {
	bins := dir(h.root, "bin")
	natsBin, cli := filepath.Join(bins, "nats-server"), filepath.Join(bins, "agentrt")
	if err := goBuild(ctx, natsBin, "github.com/nats-io/nats-server/v2"); err != nil {
		return nil, err
	}
	if err := goBuild(ctx, cli, "./cmd/agentrt"); err != nil {
		return nil, err
	}
	one, err := startNATS(natsBin, h.root, "r1-", 1)
	if err != nil {
		return nil, err
	}
	defer one.stop()
	three, err := startNATS(natsBin, h.root, "r3-", 3)
	if err != nil {
		return nil, err
	}
	defer three.stop()
	h.logf("19 nats-server processes: R1 %s, R3 %s", one.url(), three.url())

	var figs []Figure
	for _, c := range []struct {
		id       string
		procs    *natsProcs
		replicas int
	}{{"19c", one, 1}, {"19d", three, 3}} {
		f, err := h.fencedAppends(ctx, c.id, c.procs, c.replicas)
		if err != nil {
			return nil, err
		}
		figs = append(figs, f)
	}
	f, err := h.clusterDurable(ctx, three)
	if err != nil {
		return nil, err
	}
	figs = append(figs, f)
	tk, err := h.takeovers(ctx, cli, three)
	if err != nil {
		return nil, err
	}
	return append(tk, figs...), nil
}

// connect connects to p's servers.
func connect(p *natsProcs) (*nats.Conn, error) {
	return nats.Connect(p.url(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
}

// chain returns n records of a journal of run, each sealed, as the host
// writes a durable commit of one entry: the start entry, then completed
// run.log calls.
func chain(run journal.RunID, n int) ([]journal.Record, error) {
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		return nil, err
	}
	c := journal.NewChain(run, key)
	recs := make([]journal.Record, 0, n)
	for i := range n {
		e := &journal.Entry{Phase: journal.PhaseStart, Header: &journal.Header{ModuleSHA256: make([]byte, 32), ABI: 1, Seed: make([]byte, 32)}}
		if i > 0 {
			req := floorValue[:32]
			e = &journal.Entry{Phase: journal.PhaseCompleted, Step: uint64(i), Op: "run.log", Request: req,
				InputHash: journal.Sum(req), OutputHash: journal.Sum(nil)}
		}
		r, err := c.Link(e)
		if err != nil {
			return nil, err
		}
		r.Seal = c.Seal()
		recs = append(recs, r)
	}
	return recs, nil
}

// fencedAppends measures figure 19c or 19d: fenced appends of one entry a
// commit, one after the other, on one run, against bare publishes.
func (h *harness) fencedAppends(ctx context.Context, id string, p *natsProcs, replicas int) (Figure, error) {
	nc, err := connect(p)
	if err != nil {
		return Figure{}, err
	}
	defer nc.Close()
	st, err := jetstore.Open(ctx, nc, jetstore.Options{Stream: "BENCH", Prefix: "bench", LeaseBucket: "BENCH_LEASES",
		Replicas: replicas, Timeout: time.Minute})
	if err != nil {
		return Figure{}, err
	}
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(time.Minute))
	if err != nil {
		return Figure{}, err
	}
	info, err := js.Stream(ctx, "BENCH")
	if err != nil {
		return Figure{}, err
	}
	// The floor's stream is the journal's stream under another name:
	// the same replicas, storage, limits, atomic batches and rollups.
	fcfg := info.CachedInfo().Config
	fcfg.Name, fcfg.Subjects = "FLOOR", []string{"floor.>"}
	if _, err := js.CreateOrUpdateStream(ctx, fcfg); err != nil {
		return Figure{}, err
	}
	n := h.cfg.ClusterAppends
	var rate, frate, arate, p50, p99 []float64
	size := 0
	for r := range h.cfg.Reps {
		run := journal.NewRunID(time.Now())
		recs, err := chain(run, n+1)
		if err != nil {
			return Figure{}, err
		}
		// The run's first commit reads its (empty) tail: not timed.
		if err := st.Commit(ctx, &journal.Batch{Run: run, Records: recs[:1], Durable: true}); err != nil {
			return Figure{}, err
		}
		lat := make([]time.Duration, 0, n)
		start := time.Now()
		for i := 1; i <= n; i++ {
			t := time.Now()
			if err := st.Commit(ctx, &journal.Batch{Run: run, Next: uint64(i), Records: recs[i : i+1], Durable: true}); err != nil {
				return Figure{}, err
			}
			lat = append(lat, time.Since(t))
		}
		rate = append(rate, float64(n)/time.Since(start).Seconds())
		p50, p99 = append(p50, us(percentile(lat, 50))), append(p99, us(percentile(lat, 99)))

		raw := make([][]byte, n)
		for i := range raw {
			raw[i] = journal.AppendRecord(nil, &recs[i+1])
		}
		size = len(raw[0])
		subj := fmt.Sprintf("floor.%d", r)
		start = time.Now()
		for _, b := range raw {
			if _, err := js.Publish(ctx, subj, b); err != nil {
				return Figure{}, err
			}
		}
		frate = append(frate, float64(n)/time.Since(start).Seconds())
		// The async floor: every publish in flight at once (up to the
		// client's window), then every ack awaited.
		start = time.Now()
		acks := make([]jetstream.PubAckFuture, 0, n)
		for _, b := range raw {
			a, err := js.PublishAsync(subj+".async", b)
			if err != nil {
				return Figure{}, err
			}
			acks = append(acks, a)
		}
		for _, a := range acks {
			select {
			case <-a.Ok():
			case err := <-a.Err():
				return Figure{}, err
			case <-time.After(time.Minute):
				return Figure{}, fmt.Errorf("bench: an async publish was not acknowledged within a minute")
			}
		}
		arate = append(arate, float64(n)/time.Since(start).Seconds())
		h.logf("%s fenced appends R%d rep %d: %.0f appends/s (p50 %.0f us), bare publish %.0f/s, async %.0f/s", id, replicas, r, rate[r], p50[r], frate[r], arate[r])
	}
	for _, s := range []string{"BENCH", "FLOOR"} {
		js.DeleteStream(ctx, s)
	}
	js.DeleteKeyValue(ctx, "BENCH_LEASES")
	return Figure{
		ID: id, Name: fmt.Sprintf("fenced append, R%d: rate", replicas), Unit: "appends/s", Better: "higher",
		Value: median(rate), Samples: rate,
		Measures: fmt.Sprintf("journal/jetstore Store.Commit of %d durable batches of one sealed record each (a completed run.log entry, %d bytes as stored), one after the other on one run: each an atomic batch of the record, fenced on the run subject's last sequence, and the run's head record, acknowledged by the stream (R%d, on nats-server process(es) on loopback, sync_interval: always); appends / wall time. The run's first commit (which reads its empty tail) is not timed.", n, size, replicas),
		Floor: &Floor{Name: "bare sync publish", Unit: "publishes/s", Value: median(frate), Samples: frate,
			Measures: "jetstream.Publish of the same record bytes, one message each, awaiting each ack before the next, to a stream of the same servers with the journal stream's configuration (replicas, storage, atomic batches, rollups; only name and subjects differ)."},
		Extra: map[string]float64{"p50 us": median(p50), "p99 us": median(p99), "async publish floor msgs/s": median(arate)},
		Notes: "The async floor (every publish in flight, then every ack awaited) is the stream's throughput with no ordering between messages; a run's fenced appends cannot overlap (each names the sequence the previous one made).",
	}, nil
}

// clusterDurable measures figure 19e: figure 3a's run on a jetstore R3
// against the same on a badgerstore.
func (h *harness) clusterDurable(ctx context.Context, p *natsProcs) (Figure, error) {
	nc, err := connect(p)
	if err != nil {
		return Figure{}, err
	}
	defer nc.Close()
	st, err := jetstore.Open(ctx, nc, jetstore.Options{Stream: "BENCH3", Prefix: "bench3", LeaseBucket: "BENCH3_LEASES",
		Replicas: 3, Timeout: time.Minute})
	if err != nil {
		return Figure{}, err
	}
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		return Figure{}, err
	}
	hs, err := host.New(h.engine, host.Deps{Store: st, KV: st, Events: st, Leases: st, Key: key}, host.Config{})
	if err != nil {
		return Figure{}, err
	}
	jc := &cell{host: hs, key: key}
	bc, err := openCell(dir(h.root, "cluster-badger"), h.engine)
	if err != nil {
		return Figure{}, err
	}
	defer bc.close()
	n := h.cfg.ClusterCalls
	for _, c := range []*cell{jc, bc} {
		if _, err := c.run(ctx, h.guests.KVPut, countInput(5), kvGrant("warmup"), 6); err != nil {
			return Figure{}, err
		}
	}
	var rate, brate, p50 []float64
	for r := range h.cfg.Reps {
		start := time.Now()
		res, err := jc.run(ctx, h.guests.KVPut, countInput(n), kvGrant(fmt.Sprintf("r%d", r)), uint64(n)+1)
		if err != nil {
			return Figure{}, err
		}
		rate = append(rate, float64(n)/time.Since(start).Seconds())
		lat, err := effectLatencies(ctx, st, res.Run)
		if err != nil {
			return Figure{}, err
		}
		p50 = append(p50, us(percentile(lat, 50)))
		start = time.Now()
		if _, err := bc.run(ctx, h.guests.KVPut, countInput(n), kvGrant(fmt.Sprintf("r%d", r)), uint64(n)+1); err != nil {
			return Figure{}, err
		}
		brate = append(brate, float64(n)/time.Since(start).Seconds())
		h.logf("19e durable on R3 rep %d: %.0f calls/s (p50 %.0f us), badger %.0f calls/s", r, rate[r], p50[r], brate[r])
	}
	js, err := jetstream.New(nc)
	if err == nil {
		js.DeleteStream(ctx, "BENCH3")
		js.DeleteKeyValue(ctx, "BENCH3_LEASES")
	}
	return Figure{
		ID: "19e", Name: "durable effectful call, one agent, on JetStream R3: rate", Unit: "calls/s", Better: "higher",
		Value: median(rate), Samples: rate,
		Measures: fmt.Sprintf("figure 3a's run (host.Host.Run of testdata/kvput.wat, %d kv.put calls, each a durable commit of its entries and kv write) on a journal/jetstore store of 3 nats-server processes on loopback (R3, sync_interval: always; the run's lease renewed in its bucket): calls / wall time of the whole Run; p50 latency from the journal's host times as in 3b in extra.", n),
		Floor: &Floor{Name: "the same on badger (3a)", Unit: "calls/s", Value: median(brate), Samples: brate,
			Measures: "the same run on a badgerstore in a temporary directory (figure 3a's method), taking turns with the R3 run in each repetition."},
		Extra: map[string]float64{"p50 us": median(p50)},
	}, nil
}
