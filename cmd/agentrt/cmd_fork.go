package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/badgerstore"
	"github.com/agentrt/agentrt/replay"
	"github.com/spf13/cobra"
)

func (c *cli) forkCmd() *cobra.Command {
	var (
		asJSON, quiet   bool
		at              uint64
		moduleFile      string
		provider, model string
	)
	cmd := &cobra.Command{
		Use:   "fork RUN --at SEQ",
		Short: "Start a new run from another run's journal, up to an entry, then live",
		Long: `Start a new run that follows RUN up to the journal entry SEQ and then goes on
live: "what if, from here, the agent did otherwise?".

The new run has RUN's input, seed, clock and grant, its own id and its own
journal. Its calls up to SEQ are answered with the responses RUN recorded,
after checking that each is RUN's op with RUN's request at the same step: no
effect before SEQ runs again (an HTTP request is not re-sent). They are
journaled in the fork as its own, so the fork verifies, replays and audits
alone. Every call after SEQ is live. The fork's header names RUN and SEQ
(agentrt journal show FORK --summary); agentrt journal query --run RUN
--forks finds RUN's forks.

SEQ is an entry number as agentrt journal show prints it (the SEQ column),
at a call boundary: the completed or failed entry of a call, or a lifecycle
entry (0, the start, forks before the first call). An entry inside a call
(its intent or executing entry), or past the end of RUN, is refused with the
nearest boundaries.

With --module the fork runs another build. It must make RUN's calls up to SEQ
(it is first replayed against them, writing nothing; a divergence is refused,
naming the step), and may do otherwise after. The command then reports, per
call after SEQ, whether the fork's call matches RUN's at the same step (same
op and input hash), what changed in the request, and where the fork first
diverges, and prints the fork's output. Without --module the fork makes RUN's
calls; its live calls may still be answered otherwise than they were.

--provider P and --model M replace the provider and the model of every
llm.complete the fork makes after SEQ: "what would another model have done
from here?". They must be in RUN's grant (llm: providers, models) and in this
cell's llm.yaml; the fork's journal keeps each request as the agent made it,
and its header records the override, so that the fork replays and audits
exactly.

RUN is a run id, a unique prefix of one, or "last" for the newest run. The
fork runs in this process: a data directory held by a cell daemon is
refused.`,
		Example: "  agentrt journal show last            # find the SEQ to fork at\n" +
			"  agentrt fork last --at 9\n" +
			"  agentrt fork 0188c3 --at 9 --module agent-v2.wasm --json",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if !cmd.Flags().Changed("at") {
				return withHint(errors.New("fork needs the entry to fork at: --at SEQ"),
					"find it in the SEQ column of: agentrt journal show %s", args[0])
			}
			var code []byte
			name := ""
			if moduleFile != "" {
				var err error
				if code, err = readModule(moduleFile); err != nil {
					return err
				}
				name = filepath.Base(moduleFile)
			}
			cl, closeCell, err := c.openShowing(ctx, quiet, nil)
			if errors.Is(err, badgerstore.ErrLocked) {
				return withHint(err, "agentrt fork runs in this process: fork once the process that holds the data directory has ended (a cell daemon: stop it, fork, start it again)")
			}
			if err != nil {
				return err
			}
			defer closeCell()
			parent, err := cell.FindRun(ctx, cl.Store, args[0])
			if err != nil {
				return err
			}
			start := time.Now()
			st, err := cl.Host.Fork(ctx, host.ForkSpec{Parent: parent, At: at, Code: code, Name: name, Provider: provider, Model: model})
			if err != nil {
				return forkHint(err, parent)
			}
			res, err := st.Execute(ctx)
			if c.printer != nil {
				c.printer.flush()
			}
			if err != nil {
				if res != nil {
					fmt.Fprintf(c.stderr, "fork %s stopped after %d calls\n", res.Run, res.Steps)
				}
				return err
			}
			rep, err := replay.CompareFork(ctx, cl.Store, res.Run)
			if err != nil {
				return err
			}
			if asJSON {
				return c.printJSON(forkJSON(res, rep))
			}
			c.printForkReport(res, rep)
			fmt.Fprintf(c.stderr, "run %s %s: %d calls (%d answered from %s) in %s\n", res.Run, res.Status, res.Steps, res.Replayed, parent,
				time.Since(start).Round(time.Millisecond))
			if res.Status != journal.StatusCompleted {
				fmt.Fprintf(c.stderr, "agentrt: error: %s\n", res.Err)
				return &exitError{1}
			}
			c.printOutput(res.Output)
			return nil
		},
	}
	cmd.Flags().Uint64Var(&at, "at", 0, "the entry of RUN to fork at (the SEQ column of agentrt journal show RUN), a call boundary")
	cmd.Flags().StringVar(&moduleFile, "module", "", "run this module instead of RUN's after SEQ (it must make RUN's calls up to SEQ)")
	cmd.Flags().StringVar(&provider, "provider", "", "the provider (of llm.yaml) of every llm.complete after SEQ, within RUN's grant")
	cmd.Flags().StringVar(&model, "model", "", "the model of every llm.complete after SEQ, within RUN's grant")
	cmd.Flags().BoolVar(&asJSON, "json", false, `print one JSON object: {"run_id","parent","seq","step","status","output","calls":[...],"diverged",...}`)
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "do not show the guest's stdout, stderr and log lines")
	c.engineFlag(cmd)
	return cmd
}

// forkHint adds to a refused fork the hint that fixes it.
func forkHint(err error, parent journal.RunID) error {
	var fe *host.ForkPointError
	var div *host.DivergenceError
	switch {
	case errors.Is(err, host.ErrOverride):
		return withHint(err, "name a provider and a model that the run's grant lists (llm: providers, models) and this cell's llm.yaml configures")
	case errors.As(err, &fe) && fe.Step == 0:
		return withHint(err, "fork at or before entry %d; see: agentrt journal show %s", fe.Last, parent)
	case errors.As(err, &fe) && fe.After == 0:
		return withHint(err, "fork at entry %d, before the call; see: agentrt journal show %s", fe.Before, parent)
	case errors.As(err, &fe):
		return withHint(err, "fork at entry %d (before step %d) or %d (after it); see: agentrt journal show %s", fe.Before, fe.Step, fe.After, parent)
	case errors.As(err, &div):
		return withHint(err, "the module does not make the run's calls up to the fork point: fork before step %d, or with a build that makes them", div.Step)
	}
	return err
}

func (c *cli) printForkReport(res *host.Result, rep *replay.ForkReport) {
	fmt.Fprintf(c.stdout, "fork %s of %s at entry %d: steps 1-%d answered from its journal, then live\n", rep.Fork, rep.Parent, rep.Seq, rep.Step)
	if len(rep.Calls) > 0 {
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "STEP\tFORK\tPARENT\tCALL")
		for _, call := range rep.Calls {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", call.Step, orDash(call.Op), orDash(call.ParentOp), forkCallText(call))
		}
		tw.Flush()
	}
	switch {
	case rep.Diverged != 0:
		fmt.Fprintf(c.stdout, "first diverges at step %d\n", rep.Diverged)
	default:
		fmt.Fprintln(c.stdout, "no divergence: every call after the fork point is the parent's")
	}
	if rep.Finished {
		if rep.SameOutput {
			fmt.Fprintln(c.stdout, "the fork ended as the parent did, with the same output")
		} else {
			fmt.Fprintln(c.stdout, "the fork ended otherwise than the parent")
		}
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func forkCallText(call replay.ForkCall) string {
	switch {
	case call.Op == "":
		return "the fork made no call here"
	case call.ParentOp == "":
		return "the parent made no call here"
	case call.Op != call.ParentOp:
		return "another op"
	case !call.Match && len(call.Changes) > 0:
		s := "request differs:"
		for _, ch := range call.Changes {
			s += " " + ch.String()
		}
		return s
	case !call.Match:
		return "request differs"
	case !call.SameOutput:
		return "same call, another answer"
	}
	return "same"
}

func forkJSON(res *host.Result, rep *replay.ForkReport) map[string]any {
	calls := make([]map[string]any, 0, len(rep.Calls))
	for _, call := range rep.Calls {
		o := map[string]any{"step": call.Step, "op": call.Op, "parent_op": call.ParentOp, "match": call.Match, "same_output": call.SameOutput}
		if len(call.Changes) > 0 {
			o["changes"] = call.Changes
		}
		calls = append(calls, o)
	}
	out := map[string]any{
		"run_id": res.Run.String(), "parent": rep.Parent.String(), "seq": rep.Seq, "step": rep.Step,
		"status": res.Status, "steps": res.Steps, "replayed": res.Replayed,
		"calls": calls, "diverged": rep.Diverged, "same_output": rep.SameOutput,
	}
	if value, text, raw := cell.EncodeOutput(res.Output); raw != nil {
		out["output_base64"] = raw
	} else {
		out["output"] = value
		if text {
			out["output_text"] = true
		}
	}
	if res.Err != nil {
		out["error"] = res.Err.Error()
	}
	return out
}
