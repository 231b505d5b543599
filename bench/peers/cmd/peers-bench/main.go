// Command peers-bench is make bench-peers: agentrt beside DBOS Transact Go
// on PostgreSQL, on this machine, at the same durability. It starts a
// PostgreSQL server of its own (loopback, fsync and synchronous commit on)
// in a temporary folder, and measures a DBOS workflow of -steps sequential
// trivial steps beside an agentrt Go agent making -steps durable kv.put
// calls on a badgerstore (each fsynced before the next call): one at a
// time in process and as whole processes (agentrt run, and a DBOS program
// running one workflow), then -concurrency runs at once in process and
// through an agentrt cell serve daemon (submissions by module hash; DBOS
// has no daemon, so its in-process figure stands beside). It prints the
// table and writes -out (JSON). See bench/README.md.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentrt/agentrt/bench/peers/dbosflow"
)

// Row is one comparison: agentrt's figure, DBOS's and their ratios.
type Row struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Agentrt Side   `json:"agentrt"`
	DBOS    Side   `json:"dbos"`
	// PerStepRatio, ThroughputRatio and RunRatio are agentrt / DBOS.
	PerStepRatio    float64 `json:"per_step_ratio"`
	ThroughputRatio float64 `json:"throughput_ratio"`
	RunRatio        float64 `json:"run_ratio"`
	Measures        string  `json:"measures"`
	Goal            string  `json:"goal,omitempty"`
	Met             *bool   `json:"met,omitempty"`
}

// Report is what -out holds.
type Report struct {
	Schema     string            `json:"schema"`
	Started    string            `json:"started"`
	DurationS  float64           `json:"duration_s"`
	Steps      int               `json:"steps"`
	Reps       int               `json:"reps"`
	CPUs       int               `json:"cpus"`
	Go         string            `json:"go"`
	LoadBefore string            `json:"loadavg_before"`
	LoadAfter  string            `json:"loadavg_after"`
	FsyncUS    float64           `json:"fsync_us"`
	Postgres   string            `json:"postgres"`
	PGSettings map[string]string `json:"postgres_settings"`
	DBOS       string            `json:"dbos"`
	AgentBytes int               `json:"agent_bytes"`
	Rows       []Row             `json:"rows"`
	Notes      []string          `json:"notes,omitempty"`
}

const dbosVersion = "github.com/dbos-inc/dbos-transact-golang v1.8.0"

func main() {
	out := flag.String("out", "peers.json", "write the report (JSON) here")
	agentrt := flag.String("agentrt", "", "the agentrt CLI to measure (required: make bench-peers passes bin/agentrt)")
	steps := flag.Int("steps", 100, "steps of each workflow and agent run")
	reps := flag.Int("reps", 5, "repetitions of each measurement; medians are reported")
	concs := flag.String("concurrency", "16,64", "numbers of runs at once, comma-separated")
	flag.Parse()
	if *agentrt == "" || *steps < 1 || *reps < 1 {
		fmt.Fprintln(os.Stderr, "peers-bench: -agentrt is required, -steps and -reps must be at least 1")
		os.Exit(2)
	}
	var levels []int
	for _, f := range strings.Split(*concs, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 2 {
			fmt.Fprintf(os.Stderr, "peers-bench: -concurrency %q: want numbers of at least 2\n", *concs)
			os.Exit(2)
		}
		levels = append(levels, n)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := run(ctx, *agentrt, *steps, *reps, levels)
	if err != nil {
		fmt.Fprintln(os.Stderr, "peers-bench:", err)
		os.Exit(1)
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err == nil {
		err = os.WriteFile(*out, append(b, '\n'), 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "peers-bench:", err)
		os.Exit(1)
	}
	printTable(os.Stdout, rep)
	for _, n := range rep.Notes {
		fmt.Println(n)
	}
	fmt.Printf("wrote %s\n", *out)
}

func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, "peers-bench: "+format+"\n", args...) }

func run(ctx context.Context, agentrt string, steps, reps int, levels []int) (*Report, error) {
	start := time.Now()
	agentrt, err := filepath.Abs(agentrt)
	if err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp("", "agentrt-peers-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(root)
	rep := &Report{Schema: "agentrt-peers/v1", Started: start.UTC().Format(time.RFC3339), Steps: steps, Reps: reps,
		CPUs: runtime.NumCPU(), Go: runtime.Version(), LoadBefore: loadAvg(), DBOS: dbosVersion}

	if rep.FsyncUS, err = fsyncMicros(root); err != nil {
		return nil, err
	}
	logf("a 256-byte write + fsync in %s: %.0f us", root, rep.FsyncUS)
	logf("building the agent (agent/, Go, wasip1) and the DBOS program")
	wasm := filepath.Join(root, "agent.wasm")
	if err := command(ctx, "", agentrt, "build", "./agent", "-o", wasm); err != nil {
		return nil, err
	}
	code, err := os.ReadFile(wasm)
	if err != nil {
		return nil, err
	}
	rep.AgentBytes = len(code)
	dbosBin := filepath.Join(root, "dbos-workflow")
	if err := command(ctx, "", "go", "build", "-o", dbosBin, "./cmd/dbos-workflow"); err != nil {
		return nil, err
	}

	logf("starting PostgreSQL")
	pg, err := startPostgres(ctx, filepath.Join(root, "pg"))
	if err != nil {
		return nil, err
	}
	defer pg.stop()
	rep.Postgres, rep.PGSettings = pg.Version, pg.Settings
	logf("PostgreSQL %s on 127.0.0.1:%d, %v", pg.Version, pg.port, pg.Settings)

	dctx, err := dbosflow.Open(pg.URL)
	if err != nil {
		return nil, fmt.Errorf("DBOS: %w", err)
	}
	defer dbosflow.Close(dctx)
	if err := dbosflow.Run(dctx, steps); err != nil { // the warm-up
		return nil, fmt.Errorf("DBOS: %w", err)
	}
	ip, err := openInProcess(ctx, filepath.Join(root, "inprocess"), code, steps)
	if err != nil {
		return nil, err
	}
	defer ip.close(ctx)
	if err := ip.run(ctx, "warmup"); err != nil {
		return nil, err
	}

	row := func(id, name, measures string, a, d Side) Row {
		return Row{ID: id, Name: name, Agentrt: a, DBOS: d, Measures: measures,
			PerStepRatio: a.PerStepUS / d.PerStepUS, ThroughputRatio: a.StepsPerS / d.StepsPerS, RunRatio: a.RunMS / d.RunMS}
	}
	latencyGoal := func(r *Row) {
		r.Goal = "per-step latency <= 0.4x DBOS"
		met := r.PerStepRatio <= 0.4
		r.Met = &met
	}

	// 1: one at a time, in process.
	logf("one at a time, in process")
	a1, d1, err := compare(reps, 1, steps, func(r, i int) error { return ip.run(ctx, fmt.Sprintf("seq-%d", r)) }, dbosRun(dctx, steps))
	if err != nil {
		return nil, err
	}
	r1 := row("1", "one at a time, in process", fmt.Sprintf(
		"agentrt: host.Host.Run of the Go agent (%d KiB) on a badgerstore, %d kv.put calls each committed durably (fsync) before the next, module compiled by a warm-up run; DBOS: dbos.RunWorkflow + GetResult of a workflow of %d dbos.RunAsStep steps, each checkpointed in PostgreSQL (synchronous commit, fsync) before the next, after a warm-up workflow. Per step: the run's wall time / %d.",
		len(code)>>10, steps, steps, steps), a1, d1)
	latencyGoal(&r1)
	rep.Rows = append(rep.Rows, r1)

	// 2: one at a time, whole processes.
	logf("one at a time, whole processes")
	cliData := filepath.Join(root, "cli")
	grant := filepath.Join(root, "grant.yaml")
	if err := os.WriteFile(grant, []byte(grantYAML("cli")), 0o600); err != nil {
		return nil, err
	}
	runArgs := []string{"run", wasm, "--data", cliData, "--grant", grant, "--input", strconv.Itoa(steps), "--in-process", "-q"}
	if err := command(ctx, "", agentrt, runArgs...); err != nil { // the warm-up: the disk cache of compiled code
		return nil, err
	}
	a2, d2, err := compare(reps, 1, steps, process(ctx, agentrt, runArgs...), process(ctx, dbosBin, "-db", pg.URL, "-steps", strconv.Itoa(steps)))
	if err != nil {
		return nil, err
	}
	r2 := row("2", "one at a time, whole process", fmt.Sprintf(
		"agentrt: the process agentrt run agent.wasm --in-process of the Go agent (%d steps) on its data directory (the compiled module in its disk cache from a warm-up run), start to exit; DBOS: a Go program (cmd/dbos-workflow) that opens DBOS on the same PostgreSQL (schema migrated by the runs before), runs one workflow of %d steps and shuts DBOS down, start to exit.", steps, steps), a2, d2)
	r2.Goal = "whole agentrt run <= 1.0x DBOS's whole workflow"
	met2 := r2.RunRatio <= 1
	r2.Met = &met2
	rep.Rows = append(rep.Rows, r2)

	// 3..: the daemon, and runs at once.
	logf("starting agentrt cell serve")
	daemonData := filepath.Join(root, "daemon")
	dm, err := startDaemon(ctx, agentrt, daemonData, filepath.Join(root, "daemon.log"), code, steps)
	if err != nil {
		return nil, err
	}
	defer dm.stop()
	if err := dm.run(ctx, "warmup"); err != nil {
		return nil, err
	}
	a3, d3, err := compare(reps, 1, steps, func(r, i int) error { return dm.run(ctx, fmt.Sprintf("seq-%d", r)) }, dbosRun(dctx, steps))
	if err != nil {
		return nil, err
	}
	r3 := row("3", "one at a time, through the daemon", "agentrt: a run of the Go agent submitted to an agentrt cell serve process on its unix socket by module_sha256 (pushed once, compiled and kept by the daemon, warmed by one run) and followed to its end (POST /v1/runs?follow=1), from the request to the end line; DBOS: figure 1's in-process workflow, measured again in turns with these runs (DBOS has no daemon).", a3, d3)
	latencyGoal(&r3)
	rep.Rows = append(rep.Rows, r3)

	// 2d: one at a time, whole processes, through the daemon: agentrt run
	// without --in-process on the daemon's data directory, which it finds
	// held by the daemon and submits to by hash.
	logf("one at a time, whole processes, through the daemon")
	viaDaemon := []string{"run", wasm, "--data", daemonData, "--grant", grant, "--input", strconv.Itoa(steps), "-q"}
	if err := command(ctx, "", agentrt, viaDaemon...); err != nil { // the warm-up
		return nil, err
	}
	a2d, d2d, err := compare(reps, 1, steps, process(ctx, agentrt, viaDaemon...), process(ctx, dbosBin, "-db", pg.URL, "-steps", strconv.Itoa(steps)))
	if err != nil {
		return nil, err
	}
	r2d := row("2d", "whole process, via the daemon", fmt.Sprintf(
		"agentrt: the process agentrt run agent.wasm (no --in-process) of the Go agent (%d steps) on the data directory that figure 3's daemon holds: it submits the run to the daemon by the module's hash and follows it to its end, start to exit; DBOS: figure 2's process, measured again in turns with these.", steps), a2d, d2d)
	r2d.Goal = "whole agentrt run <= 1.0x DBOS's whole workflow"
	met2d := r2d.RunRatio <= 1
	r2d.Met = &met2d
	rep.Rows = append(rep.Rows, r2d)

	for _, n := range levels {
		logf("%d at once, in process", n)
		an, dn, err := compare(reps, n, steps, func(r, i int) error { return ip.run(ctx, fmt.Sprintf("c%d-%d-%d", n, r, i)) }, dbosRun(dctx, steps))
		if err != nil {
			return nil, err
		}
		rep.Rows = append(rep.Rows, row(fmt.Sprintf("%da", n), fmt.Sprintf("%d at once, in process", n), fmt.Sprintf(
			"%d goroutines each running figure 1's run (agentrt: one host and badgerstore, each run its own kv namespace; DBOS: one DBOS context, its default pool): throughput = %d x %d steps / the wall time from the first start to the last end; per step: the median run's wall time / %d.", n, n, steps, steps), an, dn))
		logf("%d at once, through the daemon", n)
		am, dm2, err := compare(reps, n, steps, func(r, i int) error { return dm.run(ctx, fmt.Sprintf("d%d-%d-%d", n, r, i)) }, dbosRun(dctx, steps))
		if err != nil {
			return nil, err
		}
		rm := row(fmt.Sprintf("%db", n), fmt.Sprintf("%d at once, through the daemon", n), fmt.Sprintf(
			"%d clients submitting figure 3's run at once to the daemon, each following its run to its end; DBOS: figure %da's in-process workflows, measured again in turns with these runs.", n, n), am, dm2)
		if n == 16 {
			rm.Goal = "throughput >= 10x DBOS"
			met := rm.ThroughputRatio >= 10
			rm.Met = &met
		}
		rep.Rows = append(rep.Rows, rm)
	}
	var busy []string
	for _, r := range rep.Rows {
		if r.Agentrt.MachineBusy > 0.9 || r.DBOS.MachineBusy > 0.9 {
			busy = append(busy, fmt.Sprintf("%s (agentrt %.0f%%, DBOS %.0f%%)", r.ID, 100*r.Agentrt.MachineBusy, 100*r.DBOS.MachineBusy))
		}
	}
	if len(busy) > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("WARNING: the machine's CPUs were more than 90%% busy while these rows ran (any process, this one included): %s. Both sides were bounded by the CPU the machine could give them; rerun on an idle machine before drawing conclusions.", strings.Join(busy, ", ")))
	}
	rep.LoadAfter = loadAvg()
	rep.DurationS = time.Since(start).Seconds()
	rep.Notes = append(rep.Notes, "The load averages (1, 5, 15 minutes) are the machine's before and after: other processes on it slow both sides alike only if they load the CPU and the disk evenly; compare runs on an idle machine.")
	return rep, nil
}

func command(ctx context.Context, dir, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// fsyncMicros is the mean time of a 256-byte append and fsync of a file
// in dir, 200 times: the disk both sides commit to.
func fsyncMicros(dir string) (float64, error) {
	f, err := os.CreateTemp(dir, "fsync-")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 256)
	const n = 200
	start := time.Now()
	for range n {
		if _, err := f.Write(buf); err != nil {
			return 0, err
		}
		if err := f.Sync(); err != nil {
			return 0, err
		}
	}
	return float64(time.Since(start).Nanoseconds()) / 1e3 / n, nil
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func printTable(w io.Writer, rep *Report) {
	fmt.Fprintf(w, "agentrt beside %s on PostgreSQL %s (fsync %s, synchronous_commit %s), %d steps a run, medians of %d;\n%d CPUs, load average %s before, %s after; a write + fsync %.0f us; the Go agent %.1f MB\n",
		rep.DBOS, rep.Postgres, rep.PGSettings["fsync"], rep.PGSettings["synchronous_commit"], rep.Steps, rep.Reps,
		rep.CPUs, rep.LoadBefore, rep.LoadAfter, rep.FsyncUS, float64(rep.AgentBytes)/1e6)
	fmt.Fprintf(w, "%-4s %-34s | %-30s | %-30s | %-30s | %-9s | %s\n", "", "", "per step, us", "throughput, steps/s", "a whole run, ms", "CPU busy", "goal")
	fmt.Fprintf(w, "%-4s %-34s | %9s %9s %10s | %9s %9s %10s | %9s %9s %10s | %-9s |\n", "fig", "", "agentrt", "DBOS", "ratio",
		"agentrt", "DBOS", "ratio", "agentrt", "DBOS", "ratio", "a / d")
	for _, r := range rep.Rows {
		goal := ""
		if r.Met != nil {
			goal = r.Goal + ": " + map[bool]string{true: "met", false: "MISSED"}[*r.Met]
		}
		fmt.Fprintf(w, "%-4s %-34s | %9.0f %9.0f %9.2fx | %9.0f %9.0f %9.2fx | %9.1f %9.1f %9.2fx | %3.0f%%/%3.0f%% | %s\n", r.ID, r.Name,
			r.Agentrt.PerStepUS, r.DBOS.PerStepUS, r.PerStepRatio, r.Agentrt.StepsPerS, r.DBOS.StepsPerS, r.ThroughputRatio,
			r.Agentrt.RunMS, r.DBOS.RunMS, r.RunRatio, 100*r.Agentrt.MachineBusy, 100*r.DBOS.MachineBusy, goal)
	}
}
