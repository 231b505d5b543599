package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentrt/agentrt/host"
	agentcell "github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/badgerstore"
	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/agentrt/agentrt/bench/peers/dbosflow"
)

// Side is one system's figure: per-step latency, throughput and the
// wall time of a whole run, medians over the repetitions.
type Side struct {
	// PerStepUS is a run's wall time over its steps (the median run of a
	// repetition), in microseconds.
	PerStepUS float64 `json:"per_step_us"`
	// StepsPerS is the steps of all the runs of a repetition over its
	// wall time (the first start to the last end).
	StepsPerS float64 `json:"steps_per_s"`
	// RunMS is the median run's wall time, in milliseconds.
	RunMS float64 `json:"run_ms"`
	// MachineBusy is the share of the machine's CPU time that was busy
	// (any process, this one included) while this side's repetitions ran,
	// from /proc/stat; -1 where it cannot be read. Near 1, the figure was
	// bounded by the CPUs the machine could give.
	MachineBusy      float64   `json:"machine_cpu_busy"`
	PerStepSamples   []float64 `json:"per_step_us_samples"`
	StepsPerSSamples []float64 `json:"steps_per_s_samples"`
	RunMSSamples     []float64 `json:"run_ms_samples"`
	busy, total      uint64
}

// batch runs run i of repetition rep.
type batch func(rep, i int) error

// add runs one repetition: conc runs of one at once, of steps steps each.
func (s *Side) add(rep, conc, steps int, one batch) error {
	busy0, total0 := cpuTimes()
	walls := make([]time.Duration, conc)
	errs := make([]error, conc)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range conc {
		wg.Go(func() {
			s := time.Now()
			errs[i] = one(rep, i)
			walls[i] = time.Since(s)
		})
	}
	wg.Wait()
	total := time.Since(t0)
	busy1, total1 := cpuTimes()
	s.busy, s.total = s.busy+busy1-busy0, s.total+total1-total0
	if err := errors.Join(errs...); err != nil {
		return err
	}
	slices.Sort(walls)
	med := walls[len(walls)/2]
	s.PerStepSamples = append(s.PerStepSamples, float64(med.Nanoseconds())/1e3/float64(steps))
	s.StepsPerSSamples = append(s.StepsPerSSamples, float64(conc*steps)/total.Seconds())
	s.RunMSSamples = append(s.RunMSSamples, float64(med.Nanoseconds())/1e6)
	return nil
}

// settle sets the medians.
func (s *Side) settle() {
	s.PerStepUS, s.StepsPerS, s.RunMS = median(s.PerStepSamples), median(s.StepsPerSSamples), median(s.RunMSSamples)
	s.MachineBusy = -1
	if s.total > 0 {
		s.MachineBusy = float64(s.busy) / float64(s.total)
	}
}

// repeat runs reps repetitions of conc runs at once.
func repeat(reps, conc, steps int, one batch) (Side, error) {
	var s Side
	for r := range reps {
		if err := s.add(r, conc, steps, one); err != nil {
			return s, err
		}
	}
	s.settle()
	return s, nil
}

// compare measures agentrt (a) and DBOS (d) in turns, a repetition of
// each after the other, so that a change in the machine's other work
// falls on both.
func compare(reps, conc, steps int, a, d batch) (Side, Side, error) {
	var as, ds Side
	for r := range reps {
		if err := as.add(r, conc, steps, a); err != nil {
			return as, ds, fmt.Errorf("agentrt: %w", err)
		}
		if err := ds.add(r, conc, steps, d); err != nil {
			return as, ds, fmt.Errorf("DBOS: %w", err)
		}
	}
	as.settle()
	ds.settle()
	return as, ds, nil
}

// cpuTimes reads the machine's busy and total CPU time (jiffies) from
// /proc/stat; zeros where there is none.
func cpuTimes() (busy, total uint64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return 0, 0
	}
	for i, v := range f[1:] {
		n, _ := strconv.ParseUint(v, 10, 64)
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, total
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	c := slices.Clone(v)
	slices.Sort(c)
	if len(c)%2 == 1 {
		return c[len(c)/2]
	}
	return (c[len(c)/2-1] + c[len(c)/2]) / 2
}

func grantYAML(ns string) string {
	return fmt.Sprintf("capabilities:\n  run: {}\n  kv: {namespace: %s}\n", ns)
}

func stepsInput(n int) []byte { return []byte(strconv.Itoa(n)) }

// inProcess is agentrt in this process: one engine, one host on a
// badgerstore (durable commits: each kv.put is fsynced before the agent's
// next call), as a cell runs it. The module is stored once (PutModule) and
// every run names it by its hash, as an embedding that runs a known agent
// does: no run reads or hashes its 3.6 MB again.
type inProcess struct {
	engine *host.Engine
	store  *badgerstore.Store
	host   *host.Host
	sum    []byte
	steps  int
}

func openInProcess(ctx context.Context, dir string, code []byte, steps int) (*inProcess, error) {
	engine, err := host.NewEngine(ctx, host.EngineConfig{})
	if err != nil {
		return nil, err
	}
	st, err := badgerstore.Open(dir)
	if err != nil {
		engine.Close(ctx)
		return nil, err
	}
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		return nil, err
	}
	h, err := host.New(engine, host.Deps{Store: st, KV: st, Events: st, Key: key}, host.Config{})
	if err != nil {
		st.Close()
		engine.Close(ctx)
		return nil, err
	}
	sum, err := h.PutModule(ctx, code)
	if err != nil {
		st.Close()
		engine.Close(ctx)
		return nil, err
	}
	return &inProcess{engine: engine, store: st, host: h, sum: sum, steps: steps}, nil
}

func (p *inProcess) run(ctx context.Context, ns string) error {
	res, err := p.host.Run(ctx, host.RunSpec{ModuleSHA256: p.sum, Name: "peers", Input: stepsInput(p.steps),
		Grant: &host.Grant{Run: &host.RunGrant{}, KV: &host.KVGrant{Namespace: ns}}})
	if err != nil {
		return err
	}
	if res.Status != journal.StatusCompleted {
		return fmt.Errorf("agentrt run %s ended %s: %v", res.Run, res.Status, res.Err)
	}
	if string(res.Output) != strconv.Itoa(p.steps) {
		return fmt.Errorf("agentrt run %s answered %q, want %d", res.Run, res.Output, p.steps)
	}
	return nil
}

func (p *inProcess) close(ctx context.Context) {
	p.store.Close()
	p.engine.Close(ctx)
}

// daemon is an agentrt cell serve process and a client on its socket.
type daemon struct {
	cmd    *exec.Cmd
	client *agentcell.Client
	sum    string
	steps  int
	done   chan error
}

func startDaemon(ctx context.Context, agentrt, data, logFile string, code []byte, steps int) (*daemon, error) {
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, err
	}
	lf, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(agentrt, "cell", "serve", "--data", data)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.Env = cleanEnv()
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, err
	}
	d := &daemon{cmd: cmd, steps: steps, done: make(chan error, 1)}
	go func() { d.done <- cmd.Wait(); lf.Close() }()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		cl, err := agentcell.Dial("unix:" + agentcell.SocketPath(data))
		if err == nil {
			if _, err = cl.Cell(ctx); err == nil {
				d.client = cl
				break
			}
		}
		select {
		case err := <-d.done:
			return nil, fmt.Errorf("agentrt cell serve exited (%v); its log is %s", err, logFile)
		case <-ctx.Done():
			d.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			d.stop()
			return nil, fmt.Errorf("agentrt cell serve did not answer in 2 minutes: %v (log %s)", err, logFile)
		}
	}
	mi, err := d.client.PushModule(ctx, code)
	if err != nil {
		d.stop()
		return nil, fmt.Errorf("push the agent to the daemon: %w", err)
	}
	d.sum = mi.SHA256
	return d, nil
}

// run submits a run of the pushed module by its hash and follows it to its end.
func (d *daemon) run(ctx context.Context, ns string) error {
	s, err := d.client.SubmitFollow(ctx, agentcell.Submission{ModuleSHA256: d.sum, Name: "peers",
		Input: stepsInput(d.steps), Grant: grantYAML(ns)})
	if err != nil {
		return err
	}
	defer s.Close()
	for {
		l, err := s.Next()
		if err != nil {
			return fmt.Errorf("daemon run: the stream ended without the run's end: %w", err)
		}
		if l.End != nil {
			if l.End.Status != journal.StatusCompleted {
				return fmt.Errorf("daemon run %s ended %s", l.End.RunID, l.End.Status)
			}
			got := string(l.End.Output)
			if l.End.OutputText {
				if err := json.Unmarshal(l.End.Output, &got); err != nil {
					return err
				}
			}
			if got != strconv.Itoa(d.steps) {
				return fmt.Errorf("daemon run %s answered %s, want %d", l.End.RunID, l.End.Output, d.steps)
			}
			return nil
		}
	}
}

// stop drains the daemon (SIGTERM) and waits for it.
func (d *daemon) stop() {
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(time.Minute):
		d.cmd.Process.Kill()
		<-d.done
	}
}

// dbosRun is a batch of workflows on one DBOS context.
func dbosRun(ctx dbos.Context, steps int) batch {
	return func(int, int) error { return dbosflow.Run(ctx, steps) }
}

// process is a batch of whole processes.
func process(ctx context.Context, name string, args ...string) batch {
	return func(int, int) error {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env = cleanEnv()
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s: %v\n%s", filepath.Base(name), err, out)
		}
		return nil
	}
}

// cleanEnv is this process's environment less agentrt's own variables,
// so that a data directory or daemon of the user's is not used.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if len(kv) >= 8 && kv[:8] == "AGENTRT_" {
			continue
		}
		env = append(env, kv)
	}
	return env
}
