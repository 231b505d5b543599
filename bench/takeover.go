package bench

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	agentcell "github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/cellkey"
	"github.com/agentrt/agentrt/journal/jetstore"
)

// cellProc is an agentrt cell serve --nats process of figure 19a; a killed
// one is started again on its data directory (same key).
type cellProc struct {
	dir string
	pub ed25519.PublicKey
	cmd *exec.Cmd
	log *lockedBuffer
	// done is closed once the process has exited.
	done chan struct{}
}

// start starts the cell's process.
func (c *cellProc) start(cli, cache, urls string) error {
	c.log = &lockedBuffer{}
	c.cmd = exec.Command(cli, "--data", c.dir, "--cache", cache, "cell", "serve", "--nats", urls,
		"--replicas", "3", "--lease-ttl", leaseTTL.String(), "--heartbeat", heartbeat.String())
	c.cmd.Stderr = c.log
	if err := c.cmd.Start(); err != nil {
		return err
	}
	done, cmd := make(chan struct{}), c.cmd
	c.done = done
	go func() {
		cmd.Wait()
		close(done)
	}()
	return nil
}

// exited reports whether the process has exited.
func (c *cellProc) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// registered reports whether the process has written its first registry
// record.
func (c *cellProc) registered() bool {
	return strings.Contains(c.log.String(), "in the cluster registry")
}

// kill SIGKILLs the process and waits for its end.
func (c *cellProc) kill() {
	if c.cmd != nil {
		c.cmd.Process.Kill()
		<-c.done
	}
}

// waitFor polls cond every 20 ms until it holds or limit passes.
func waitFor(what string, limit time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(limit)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: gave up waiting %s for %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// errFound stops a read of a journal at the entry looked for.
var errFound = errors.New("found")

// takeoverGrant is the grant of figure 19a's runs.
const takeoverGrant = "capabilities:\n  run: {}\n  kv: {namespace: takeover}\n"

// takeovers measures figures 19a and 19b: three cell processes on the R3
// cluster p; each round, one of them (in turn) runs testdata/kvput.wat
// and is SIGKILLed once its run has made some calls; the time is from the
// kill to the first live call of the peer that takes the run over, by the
// peer's intent entry's host time (same machine, same wall clock).
func (h *harness) takeovers(ctx context.Context, cli string, p *natsProcs) ([]Figure, error) {
	cells := make([]*cellProc, 3)
	for i := range cells {
		d := dir(h.root, fmt.Sprintf("cells/c%d", i))
		k, err := cellkey.LoadOrCreate(d)
		if err != nil {
			return nil, err
		}
		cells[i] = &cellProc{dir: d, pub: k.Public().(ed25519.PublicKey)}
	}
	// Each cell trusts the others' seals: a run it takes over carries
	// them.
	for i, c := range cells {
		var b strings.Builder
		for j, o := range cells {
			if j != i {
				b.WriteString(cellkey.AuthorizedKey(o.pub) + "\n")
			}
		}
		if err := os.WriteFile(filepath.Join(c.dir, agentcell.TrustedCellsFile), []byte(b.String()), 0o600); err != nil {
			return nil, err
		}
	}
	nc, err := connect(p)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	// The cells' stream and buckets are made before they start: on a
	// loaded machine an R3 raft group may take longer to form than a cell
	// waits for its store.
	store, err := jetstore.Open(ctx, nc, jetstore.Options{Replicas: 3, Timeout: time.Minute})
	if err != nil {
		return nil, err
	}
	for _, open := range []func(context.Context) error{
		func(ctx context.Context) error { _, err := agentcell.OpenRegistry(ctx, nc, 3); return err },
		func(ctx context.Context) error { _, err := agentcell.OpenHandoffs(ctx, nc, 3); return err },
	} {
		if err := jetstore.Patiently(ctx, time.Minute, open); err != nil {
			return nil, err
		}
	}
	// A new R3 bucket answers reads only once its raft group has a
	// leader.
	if err := waitFor("the lease bucket to answer", time.Minute, func() (bool, error) {
		_, _, err := store.Lease(ctx, journal.NewRunID(time.Now()))
		return err == nil, nil
	}); err != nil {
		return nil, err
	}
	cache := dir(h.root, "cells-cache")
	defer func() {
		for _, c := range cells {
			c.kill()
		}
	}()
	// The cells start together, as a cluster's do (jetstore binds the
	// lease bucket after its direct gets are off, whoever opens it first).
	for _, c := range cells {
		if err := c.start(cli, cache, p.url()); err != nil {
			return nil, err
		}
	}
	for i, c := range cells {
		if err := waitFor(fmt.Sprintf("cell %d in the registry", i), 2*time.Minute, func() (bool, error) {
			if c.exited() {
				return false, fmt.Errorf("bench: cell %d exited: %s", i, c.log)
			}
			return c.registered(), nil
		}); err != nil {
			return nil, fmt.Errorf("%w\n%s", err, c.log)
		}
	}
	var total, afterExpiry, toLease []float64
	for i := range h.cfg.Takeovers {
		k := i % len(cells)
		holder := cells[k]
		if err := waitFor(fmt.Sprintf("cell %d back in the registry", k), 2*time.Minute, func() (bool, error) { return holder.registered(), nil }); err != nil {
			return nil, fmt.Errorf("%w\n%s", err, holder.log)
		}
		cl, err := agentcell.Dial("unix:" + agentcell.SocketPath(holder.dir))
		if err != nil {
			return nil, err
		}
		// On a loaded machine an R3 group may be between leaders for a
		// moment (the servers answer "no responders"): a refused
		// submission is tried again, for up to a minute.
		var id string
		if err := waitFor(fmt.Sprintf("cell %d to take a run", k), time.Minute, func() (bool, error) {
			id, err = cl.Submit(ctx, agentcell.Submission{Module: h.guests.KVPut, Name: "kvput.wasm", Grant: takeoverGrant,
				Input: countInput(1 << 30)})
			if err != nil {
				h.logf("19 takeover %d: submit to cell %d: %v", i, k, err)
				time.Sleep(200 * time.Millisecond)
			}
			return err == nil, nil
		}); err != nil {
			return nil, fmt.Errorf("%w\n%s", err, holder.log)
		}
		run, err := journal.ParseRunID(id)
		if err != nil {
			return nil, err
		}
		// Some calls first, so that the peer resumes a journal with
		// completed effects in it.
		if err := waitFor("the run's first calls", time.Minute, func() (bool, error) {
			n, err := store.Head(ctx, run)
			return n >= 30, err
		}); err != nil {
			return nil, err
		}
		killed := time.Now()
		holder.kill()
		l, ok, err := store.Lease(ctx, run)
		if err != nil || !ok || !bytes.Equal(l.Owner, holder.pub) {
			return nil, fmt.Errorf("bench: the lease of run %s after the kill: %+v %v %v", run, l, ok, err)
		}
		var peer []byte
		var leaseAt, firstAt int64
		var readErr error
		if err := waitFor("a peer's first live call", time.Minute, func() (bool, error) {
			peer, leaseAt, firstAt = nil, 0, 0
			err := journal.ReadEntries(ctx, store, run, func(e *journal.Entry, _ *journal.Record) error {
				switch {
				case e.Phase == journal.PhaseLease && !bytes.Equal(e.Cell, holder.pub):
					peer, leaseAt = e.Cell, e.Time
				case peer != nil && e.Phase == journal.PhaseIntent && bytes.Equal(e.Cell, peer):
					firstAt = e.Time
					return errFound
				}
				return nil
			})
			// jetstore's Records reads the run's head record before its
			// records: an append between the two (the killed cell's last
			// batch landing, the peer's first) makes the records go past
			// the head, which it reports as damage. Read again.
			var gap *journal.GapError
			if errors.As(err, &gap) || errors.Is(err, journal.ErrIncomplete) {
				readErr = err
				return false, nil
			}
			if errors.Is(err, errFound) {
				return true, nil
			}
			return false, err
		}); err != nil {
			var logs strings.Builder
			for j, c := range cells {
				fmt.Fprintf(&logs, "\ncell %d's log:\n%s", j, c.log)
			}
			return nil, fmt.Errorf("%w (run %s, killed cell %d; last read: %v)%s", err, run, k, readErr, logs.String())
		}
		total = append(total, ms(time.Duration(firstAt-killed.UnixNano())))
		afterExpiry = append(afterExpiry, ms(time.Duration(firstAt-l.Expires)))
		toLease = append(toLease, ms(time.Duration(leaseAt-killed.UnixNano())))
		h.logf("19 takeover %d: cell %d killed, first live call on a peer after %.0f ms (lease entry after %.0f ms; %.0f ms after the lease expired)", i, k, total[i], toLease[i], afterExpiry[i])
		// The peer stops the run, and the killed cell starts again while
		// the next round runs on another one.
		var stopped bool
		for _, c := range cells {
			if bytes.Equal(c.pub, peer) {
				pc, err := agentcell.Dial("unix:" + agentcell.SocketPath(c.dir))
				if err != nil {
					return nil, err
				}
				if _, err := pc.Cancel(ctx, id); err != nil {
					return nil, fmt.Errorf("bench: cancel run %s on its new holder: %w", run, err)
				}
				stopped = true
			}
		}
		if !stopped {
			return nil, errors.New("bench: the run was taken over by a cell that is not one of the three")
		}
		if err := holder.start(cli, cache, p.url()); err != nil {
			return nil, err
		}
	}
	p50, p99 := percentileF(total, 50), percentileF(total, 99)
	extra := map[string]float64{"takeovers": float64(len(total)),
		"lease TTL ms": ms(leaseTTL), "heartbeat ms": ms(heartbeat),
		"kill to the peer's lease entry p50 ms":      percentileF(toLease, 50),
		"lease expiry to the first live call p50 ms": percentileF(afterExpiry, 50),
		"lease expiry to the first live call p99 ms": percentileF(afterExpiry, 99),
		"max ms": percentileF(total, 100)}
	measures := fmt.Sprintf("3 agentrt cell serve --nats processes (--replicas 3 --lease-ttl %s --heartbeat %s: the lease renewed every third of the TTL, expired leases looked for at every heartbeat) on 3 nats-server processes (R3, sync_interval: always), all on loopback. %d rounds; in each, one cell in turn runs testdata/kvput.wat (a kv.put loop, each call a durable commit) submitted on its unix socket, and once the run's journal has 30 entries the harness SIGKILLs that cell. The time is from the kill (the harness's clock) to the intent entry of the first live call on the peer that took the run over (the entry's host time, written by the peer; same machine, same wall clock): the lease's expiry, the peer's next look, placement, acquiring the lease, verifying the journal's tail, journaling the takeover, replaying the run's completed calls, and the first call. The peer then cancels the run and the killed cell is started again on its data directory.", leaseTTL, heartbeat, len(total))
	return []Figure{{
		ID: "19a", Name: "takeover after SIGKILL: p50", Unit: "ms", Better: "lower",
		Value: p50, Samples: total, Measures: measures + " The figure is the median over the rounds (samples: every round).",
		Extra: extra,
	}, {
		ID: "19b", Name: "takeover after SIGKILL: p99", Unit: "ms", Better: "lower",
		Value: p99, Samples: total,
		Measures: "the 99th percentile (nearest rank) of the takeovers of 19a; with fewer than 100 rounds it is the slowest round (samples: every round).",
		Goal:     &Goal{Text: fmt.Sprintf("<= lease TTL + 500 ms = %.0f ms", ms(leaseTTL+500*time.Millisecond)), MaxValue: ptr(ms(leaseTTL + 500*time.Millisecond))},
		Extra:    map[string]float64{"takeovers": float64(len(total))},
	}}, nil
}

// percentileF is percentile for values that are not durations; it does
// not change v.
func percentileF(v []float64, p float64) float64 {
	d := make([]time.Duration, len(v))
	for i, x := range v {
		d[i] = time.Duration(x * 1e6)
	}
	return ms(percentile(d, p))
}
