package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/journal"
	"github.com/spf13/cobra"
)

func (c *cli) runCmd() *cobra.Command {
	var (
		input, inputFile, grantFile, seedHex string
		asJSON, quiet                        bool
	)
	cmd := &cobra.Command{
		Use:   "run MODULE.wasm",
		Short: "Run an agent module, journaling every call",
		Long: `Run an agent module on this cell. Every import call is journaled (signed,
hash-chained) before its effect; the run id printed at the end names the
journal for agentrt journal show and agentrt replay.

The grant file (YAML or JSON) names the capabilities the agent may use:
  capabilities:
    run: {}
    kv: {namespace: crawler}
    http: {hosts: ["127.0.0.1:8080"]}
Without --grant the agent gets the run capability alone. A module that imports
a capability its grant lacks is refused before it runs.

The guest's stdout, stderr and log lines are shown on stderr as they happen,
and the output on stdout at the end.`,
		Example: `  agentrt run agent.wasm --input '{"n": 3}'
  agentrt run crawler.wasm --grant grant.yaml --input-file in.json --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			code, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			spec := host.RunSpec{Code: code, Name: filepath.Base(args[0])}
			switch {
			case input != "" && inputFile != "":
				return withHint(errors.New("--input and --input-file both given"), "pass the input one way")
			case inputFile != "":
				if spec.Input, err = os.ReadFile(inputFile); err != nil {
					return err
				}
			case input != "":
				spec.Input = []byte(input)
			}
			if grantFile != "" {
				if spec.Grant, err = host.LoadGrant(grantFile); err != nil {
					return err
				}
			}
			if seedHex != "" {
				if spec.Seed, err = hex.DecodeString(seedHex); err != nil || len(spec.Seed) != 32 {
					return withHint(fmt.Errorf("--seed %q is not 32 bytes of hex", seedHex), "give 64 hex digits, or leave --seed out for a fresh seed")
				}
			}
			cl, err := c.openShowing(ctx, quiet)
			if err != nil {
				return err
			}
			defer cl.Close(ctx)
			start := time.Now()
			res, err := cl.Host.Run(ctx, spec)
			return c.report(res, err, start, asJSON)
		},
	}
	f := cmd.Flags()
	f.StringVar(&input, "input", "", "the run input (usually JSON)")
	f.StringVar(&inputFile, "input-file", "", "read the run input from a file")
	f.StringVar(&grantFile, "grant", "", "grant file (YAML or JSON) naming the capabilities the agent may use")
	f.StringVar(&seedHex, "seed", "", "seed of the guest's random stream, 64 hex digits (default: fresh)")
	f.BoolVar(&asJSON, "json", false, `print one JSON object {"run_id","status","output"} on stdout`)
	f.BoolVarP(&quiet, "quiet", "q", false, "do not show the guest's stdout, stderr and log lines")
	return cmd
}

// openShowing opens the cell for a command that runs an agent, showing the
// guest's events on stderr unless quiet.
func (c *cli) openShowing(ctx context.Context, quiet bool) (*cell.Cell, error) {
	var sink func(host.Event)
	if !quiet {
		sink = func(e host.Event) { printEvent(c.stderr, e) }
	}
	return c.open(ctx, cell.Options{Sink: sink})
}

// report prints how a run (or a resume) ended and returns the command's
// error: the output on stdout, or the JSON object with --json.
func (c *cli) report(res *host.Result, err error, start time.Time, asJSON bool) error {
	if err != nil {
		if res != nil {
			fmt.Fprintf(c.stderr, "run %s stopped after %d calls\n", res.Run, res.Steps)
		}
		return err
	}
	if asJSON {
		return c.printRunJSON(res)
	}
	fmt.Fprintf(c.stderr, "run %s %s: %d calls in %s\n", res.Run, res.Status, res.Steps, time.Since(start).Round(time.Millisecond))
	if res.Status != journal.StatusCompleted {
		fmt.Fprintf(c.stderr, "agentrt: error: %v\n", res.Err)
		return &exitError{1}
	}
	c.stdout.Write(res.Output)
	if len(res.Output) > 0 && res.Output[len(res.Output)-1] != '\n' {
		fmt.Fprintln(c.stdout)
	}
	return nil
}

// printEvent writes one guest event in its human form.
func printEvent(w io.Writer, e host.Event) {
	switch e.Kind {
	case host.EventRunLog:
		levels := [...]string{"debug", "info", "warn", "error"}
		fmt.Fprintf(w, "  [%s] %s\n", levels[min(int(e.Level), len(levels)-1)], e.Data)
	default:
		w.Write(e.Data)
	}
}

// printRunJSON prints a run's result; a JSON output is embedded as JSON,
// anything else as a string.
func (c *cli) printRunJSON(res *host.Result) error {
	out := map[string]any{"run_id": res.Run.String(), "status": res.Status, "steps": res.Steps}
	if json.Valid(res.Output) {
		out["output"] = json.RawMessage(res.Output)
	} else {
		out["output"] = string(res.Output)
	}
	if res.Err != nil {
		out["error"] = res.Err.Error()
	}
	if err := json.NewEncoder(c.stdout).Encode(out); err != nil {
		return err
	}
	if res.Status != journal.StatusCompleted {
		return &exitError{1}
	}
	return nil
}
