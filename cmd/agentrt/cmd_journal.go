package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/agentrt/agentrt/journal"
	"github.com/spf13/cobra"
)

func (c *cli) journalCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "journal",
		Short: "Inspect run journals",
	}
	var (
		asJSON, summary bool
		trustFile       string
	)
	show := &cobra.Command{
		Use:   "show RUN",
		Short: "Print the entries of a run's journal",
		Long: `Print every entry of a run's journal: its phase, step, op, input and output
hashes and whether it is covered by a valid signature of a trusted cell (by
default this cell; --trust FILE names authorized_keys-style keys). RUN is a run id,
a unique prefix of one, or "last" for the newest run. Unlike replay, show goes
on past a bad entry and marks it.`,
		Example: "  agentrt journal show 0188c3\n  agentrt journal show 0188c3 --json | jq .op",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			st, run, err := c.openRun(ctx, args[0])
			if err != nil {
				return err
			}
			defer st.Close()
			trust, err := c.trust(trustFile)
			if err != nil {
				return err
			}
			entries, err := journal.Inspect(ctx, st, run, trust)
			if err != nil {
				return err
			}
			if len(entries) == 0 {
				return fmt.Errorf("run %s: %w", run, journal.ErrNotFound)
			}
			if summary {
				return c.printSummary(run, entries)
			}
			if asJSON {
				enc := json.NewEncoder(c.stdout)
				for _, in := range entries {
					if err := enc.Encode(entryJSON(in)); err != nil {
						return err
					}
				}
				return nil
			}
			tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SEQ\tPHASE\tSTEP\tOP\tSTATUS\tINPUT\tOUTPUT\tSIG")
			bad := 0
			for _, in := range entries {
				if in.Err != nil {
					bad++
					fmt.Fprintf(tw, "%d\tUNDECODABLE\t\t%v\t\t\t\t\n", in.Seq, in.Err)
					continue
				}
				e := in.Entry
				sig := "ok"
				if !in.SigOK {
					sig, bad = "BAD", bad+1
				}
				op := e.Op
				switch e.Phase {
				case journal.PhaseStart:
					op = e.Header.ModuleName
				case journal.PhaseLease:
					op = fmt.Sprintf("epoch %d, cell %x", e.Epoch, e.Cell[:4])
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Seq, e.Phase, stepText(e.Step), op, statusText(e),
					short(e.InputHash), short(e.OutputHash), sig)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(c.stderr, "%d entries of run %s; %d not covered by a valid signature\n", len(entries), run, bad)
			if bad > 0 {
				return &exitError{1}
			}
			return nil
		},
	}
	show.Flags().BoolVar(&summary, "summary", false, "print calls per op, seals and the run's outcome instead of every entry")
	show.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per entry (seq, phase, step, op, input_hash, output_hash, cell, sig_ok, ...)")
	show.Flags().StringVar(&trustFile, "trust", "", "file of trusted cell keys, one authorized_keys line each (default: this cell's key)")
	cmd.AddCommand(show)
	return cmd
}

// printSummary prints what a journal holds in a few lines: the calls per
// op with their outcomes, the seals, and how the run ended.
func (c *cli) printSummary(run journal.RunID, entries []journal.Inspected) error {
	type counts struct{ calls, failed, effects int }
	ops := map[string]*counts{}
	var order []string
	seals, bad := 0, 0
	var end *journal.End
	for _, in := range entries {
		if in.Err != nil || !in.SigOK {
			bad++
		}
		if in.Err != nil {
			continue
		}
		e := in.Entry
		if in.Sealed {
			seals++
		}
		if e.End != nil {
			end = e.End
		}
		if e.Op == "" {
			continue
		}
		n := ops[e.Op]
		if n == nil {
			n = &counts{}
			ops[e.Op] = n
			order = append(order, e.Op)
		}
		switch e.Phase {
		case journal.PhaseIntent:
			n.effects++
		case journal.PhaseCompleted:
			n.calls++
		case journal.PhaseFailed:
			n.calls++
			n.failed++
		}
	}
	fmt.Fprintf(c.stdout, "run %s: %d entries, %d seals, %d not covered by a valid signature\n", run, len(entries), seals, bad)
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "OP\tCALLS\tFAILED\tJOURNALED AS")
	for _, op := range order {
		n := ops[op]
		kind := "pure (1 entry)"
		if n.effects > 0 {
			kind = "effect (intent, executing, outcome)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", op, n.calls, n.failed, kind)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	switch {
	case end == nil:
		fmt.Fprintln(c.stdout, "the run has not finished (no end entry)")
	case end.Error != "":
		fmt.Fprintf(c.stdout, "ended %s after %d calls: %s\n", end.Status, end.Steps, end.Error)
	default:
		fmt.Fprintf(c.stdout, "ended %s after %d calls, output %d bytes\n", end.Status, end.Steps, len(end.Output))
	}
	if bad > 0 {
		return &exitError{1}
	}
	return nil
}

func stepText(step uint64) string {
	if step == 0 {
		return "-"
	}
	return fmt.Sprint(step)
}

func statusText(e *journal.Entry) string {
	switch e.Phase {
	case journal.PhaseCompleted, journal.PhaseFailed:
		return statusName(e.Status)
	case journal.PhaseEnd:
		return string(e.End.Status)
	}
	return ""
}

func short(h []byte) string {
	if len(h) < 6 {
		return hex.EncodeToString(h)
	}
	return hex.EncodeToString(h[:6])
}

func entryJSON(in journal.Inspected) map[string]any {
	o := map[string]any{"seq": in.Seq, "sig_ok": in.SigOK}
	if in.Err != nil {
		o["error"] = in.Err.Error()
		return o
	}
	e := in.Entry
	o["phase"] = e.Phase.String()
	o["step"] = e.Step
	o["op"] = e.Op
	o["input_hash"] = hex.EncodeToString(e.InputHash)
	o["output_hash"] = hex.EncodeToString(e.OutputHash)
	o["cell"] = hex.EncodeToString(e.Cell)
	o["time"] = time.Unix(0, e.Time).UTC().Format(time.RFC3339Nano)
	o["sealed"] = in.Sealed
	if e.Epoch != 0 {
		o["epoch"] = e.Epoch
	}
	if e.Phase == journal.PhaseCompleted || e.Phase == journal.PhaseFailed {
		o["status"] = statusName(e.Status)
	}
	if e.Key != "" {
		o["idempotency_key"] = e.Key
	}
	if e.Header != nil {
		o["module_sha256"] = hex.EncodeToString(e.Header.ModuleSHA256)
		o["module"] = e.Header.ModuleName
	}
	if e.End != nil {
		o["run_status"] = e.End.Status
		if e.End.Error != "" {
			o["error"] = e.End.Error
		}
	}
	return o
}
