package bench

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
)

// Main is the agentrt-bench command: it runs the harness, prints the table
// to stdout and writes the JSON and Markdown reports. It returns the exit
// status: 0 when the harness ran (whether or not every goal was met), 1 when
// it could not, 2 for bad usage.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == scaleChildFlag {
		return scaleChild(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == sinkChildFlag {
		return sinkChild(os.Stdin, stdout, stderr)
	}
	fs := flag.NewFlagSet("agentrt-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "bench/results.json", "write the JSON report to `file`")
	md := fs.String("md", "", "write the Markdown report to `file` (default: -out with .md)")
	quick := fs.Bool("quick", false, "tiny sizes: check that the harness works, measure nothing")
	reps := fs.Int("reps", 0, "repetitions per figure (default 5)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to `file`")
	quiet := fs.Bool("q", false, "no progress lines on stderr")
	only := fs.String("only", "", "measure only these figure groups, e.g. `7` or 2,5 (default: all)")
	scale := fs.Int("scale", 0, "journal entries of the run figure 11 exports and verifies (default 10000000)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "agentrt-bench: error: unexpected arguments %q\n", fs.Args())
		return 2
	}
	cfg := DefaultConfig()
	if *quick {
		cfg = QuickConfig()
	}
	if *reps > 0 {
		cfg.Reps = *reps
	}
	if *scale > 0 {
		cfg.ScaleEntries = *scale
	}
	if *only != "" {
		for _, f := range strings.Split(*only, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 || n > 21 {
				fmt.Fprintf(stderr, "agentrt-bench: error: -only %q: figure groups are numbers 1 to 21\n", *only)
				return 2
			}
			cfg.Only = append(cfg.Only, n)
		}
		if slices.Contains(cfg.Only, 5) && !slices.Contains(cfg.Only, 2) {
			cfg.Only = append(cfg.Only, 2) // figure 5 replays figure 2's run
		}
	}
	if !*quiet {
		cfg.Log = stderr
	}
	if *md == "" {
		*md = strings.TrimSuffix(*out, filepath.Ext(*out)) + ".md"
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintf(stderr, "agentrt-bench: error: %v\n", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "agentrt-bench: error: %v\n", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		fmt.Fprintf(stderr, "agentrt-bench: error: %v\n", err)
		if err == ErrNoWat2wasm {
			fmt.Fprintf(stderr, "hint: apt-get install wabt\n")
		}
		return 1
	}
	if err := rep.Table(stdout); err != nil {
		return 1
	}
	if err := writeFile(*out, rep.WriteJSON); err != nil {
		fmt.Fprintf(stderr, "agentrt-bench: error: %v\n", err)
		return 1
	}
	if err := writeFile(*md, rep.Markdown); err != nil {
		fmt.Fprintf(stderr, "agentrt-bench: error: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "\nwrote %s and %s\n", *out, *md)
	return 0
}

func writeFile(path string, write func(io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
