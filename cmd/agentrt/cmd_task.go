package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host/budget"
	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/fileread"
	"github.com/agentrt/agentrt/internal/termtext"
	"github.com/spf13/cobra"
)

// taskClient returns the client of the cell daemon that keeps the tasks:
// the one named with --cell, else the one holding the data directory.
func (c *cli) taskClient(target string) (*cell.Client, error) {
	cl, err := c.cellClient(target)
	if err != nil {
		return nil, err
	}
	if cl == nil {
		return nil, withHint(errors.New("no cell daemon holds the data directory: tasks live in a daemon"),
			"start one with: agentrt cell serve (or name one with --cell)")
	}
	return cl, nil
}

func (c *cli) taskCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "task",
		Short: "Submit, show, cancel and resume tasks: objectives a cell daemon pursues through retried runs",
		Long: `A task is a durable objective that a cell daemon (agentrt cell serve) pursues
through runs, its attempts. A failed attempt is retried by the task's policy
as a new run linked to the task (its journal's header names the task and the
attempt). The task's caps on steps, wall clock, tool calls and spend hold
across its attempts. Tasks survive restarts of the daemon. agentrt tasks
lists them.`,
		Example: `  agentrt task submit agent.wasm --objective "summarise the inbox" --retries 3 --backoff 10s --grant grant.yaml
  agentrt tasks
  agentrt task show last
  agentrt task cancel last
  agentrt task resume last`,
	}
	cmd.AddCommand(c.taskSubmitCmd(), c.taskShowCmd(), c.taskCancelCmd(), c.taskResumeCmd())
	return cmd
}

func (c *cli) taskSubmitCmd() *cobra.Command {
	var (
		objective, inputFile, grantFile, tokenFile, target string
		retries                                            int
		priority                                           int
		backoff, maxBackoff, maxWall                       time.Duration
		maxSteps, maxToolCalls                             uint64
		maxSpend                                           string
		asJSON                                             bool
	)
	cmd := &cobra.Command{
		Use:   "submit MODULE.wasm --objective TEXT",
		Short: "Create a task in the cell daemon and print its id",
		Long: `Create a durable task in the cell daemon and start its first attempt; print
the task's id. The objective is recorded in the task and is each attempt's
input, unless --input gives the input (a file); then the objective is the
task's record alone.

Retries. A failed attempt is retried, up to --retries times, each retry a new
run. The wait after attempt n (from 1) fails is

  min(backoff · 2^(n-1), max-backoff)

on the daemon's clock: with --backoff 10s --max-backoff 1m, 10s, 20s, 40s,
1m, 1m, ... The next attempt's time is in the task's record: a daemon started
again waits out the rest (or starts it at once if its time has passed).

Caps. --max-steps, --max-wall, --max-tool-calls and --max-spend hold across
the attempts: each attempt is granted ceilings of the caps less what the
attempts before it spent (read from their journals), and when a cap is spent
no attempt starts and the task fails, naming the cap. An attempt that runs out
of its ceilings is stopped by its budget like any run.

Grants. With --grant (or neither flag: the run capability alone) the daemon
issues each attempt a capability token of its own for the grant, with those
ceilings. With --token, each attempt gets an attenuation of the token with the
ceilings (never above the token's own): the token must carry its key (as
agentrt token issue and attenuate write it), not be sealed. No token is
presented to the cell twice.

agentrt task show ID follows it; agentrt task cancel and resume stop and
continue it.`,
		Example: `  agentrt task submit agent.wasm --objective "fetch the report"
  agentrt task submit agent.wasm --objective "crawl" --input job.json --grant grant.yaml \
      --retries 5 --backoff 30s --max-backoff 10m --max-steps 5000 --max-wall 1h
  agentrt task submit agent.wasm --objective "answer" --token child.cbor --grant grant.yaml --max-spend 2.50`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			code, err := readModule(args[0])
			if err != nil {
				return err
			}
			if err := checkPriority(priority, cmd.Flags().Changed("priority")); err != nil {
				return err
			}
			sub := cell.TaskSubmission{Module: code, Name: filepath.Base(args[0]), Objective: objective, Retries: retries, Priority: priority}
			if cmd.Flags().Changed("backoff") {
				sub.Backoff = backoff.String()
			}
			if cmd.Flags().Changed("max-backoff") {
				sub.MaxBackoff = maxBackoff.String()
			}
			if inputFile != "" {
				if sub.Input, err = fileread.Read(inputFile, fileread.Input); err != nil {
					return err
				}
			}
			if grantFile != "" {
				g, err := fileread.Read(grantFile, fileread.Grant)
				if err != nil {
					return err
				}
				sub.Grant = string(g)
			}
			if tokenFile != "" {
				if sub.Token, err = fileread.Read(tokenFile, fileread.Token); err != nil {
					return err
				}
			}
			if err := taskCaps(cmd, &sub.Caps, maxSteps, maxToolCalls, maxWall, maxSpend); err != nil {
				return err
			}
			cl, err := c.taskClient(target)
			if err != nil {
				return err
			}
			tk, err := cl.SubmitTask(ctx, sub)
			if err != nil {
				return remoteHint(err)
			}
			if asJSON {
				return c.printJSON(tk)
			}
			fmt.Fprintln(c.stdout, tk.ID)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&objective, "objective", "", "what the task is for (required); the attempts' input unless --input is given")
	f.StringVar(&inputFile, "input", "", "file whose bytes are each attempt's input (default: the objective's text)")
	f.IntVar(&priority, "priority", 0, fmt.Sprintf("the attempts' priority in the daemon's queue, %d (lowest) to %d (highest); 0: %d", cell.MinPriority, cell.MaxPriority, cell.DefaultPriority))
	f.IntVar(&retries, "retries", 0, fmt.Sprintf("how many times a failed attempt is retried (0 to %d)", cell.MaxTaskRetries))
	f.DurationVar(&backoff, "backoff", cell.DefaultTaskBackoff, "the wait before the first retry; it doubles for each retry after")
	f.DurationVar(&maxBackoff, "max-backoff", cell.DefaultTaskMaxBackoff, "the longest wait between two attempts")
	f.StringVar(&grantFile, "grant", "", "grant file (YAML or JSON) naming the capabilities the attempts may use")
	f.StringVar(&tokenFile, "token", "", "capability token carrying its key (agentrt token issue/attenuate), attenuated for each attempt; with --grant, the grant must be within it")
	f.Uint64Var(&maxSteps, "max-steps", 0, "most import calls of all the attempts together")
	f.DurationVar(&maxWall, "max-wall", 0, "most wall-clock time of all the attempts together (whole seconds, e.g. 90s, 1h)")
	f.Uint64Var(&maxToolCalls, "max-tool-calls", 0, "most native tool calls of all the attempts together")
	f.StringVar(&maxSpend, "max-spend", "", "most money of all the attempts together, in dollars (e.g. 2.50, at most six decimals)")
	f.StringVar(&target, "cell", "", "the cell daemon (unix:DATA/agentrt.sock or http://127.0.0.1:PORT); default: the one holding the data directory")
	f.BoolVar(&asJSON, "json", false, "print the task as one JSON object instead of its id")
	_ = cmd.MarkFlagRequired("objective")
	return cmd
}

// taskCaps sets the caps the flags given ask for; a cap of 0 allows no
// attempt and is refused.
func taskCaps(cmd *cobra.Command, b *capability.Budget, steps, tools uint64, wall time.Duration, spend string) error {
	zero := func(flag string) error {
		return withHint(fmt.Errorf("--%s 0 allows no attempt", flag), "give a cap above 0, or leave --%s out for none", flag)
	}
	f := cmd.Flags()
	if f.Changed("max-steps") {
		if steps == 0 {
			return zero("max-steps")
		}
		b.Steps = capability.Limit(steps)
	}
	if f.Changed("max-tool-calls") {
		if tools == 0 {
			return zero("max-tool-calls")
		}
		b.ToolCalls = capability.Limit(tools)
	}
	if f.Changed("max-wall") {
		if wall < time.Second || wall%time.Second != 0 {
			return withHint(fmt.Errorf("--max-wall %v is not a whole number of seconds of at least 1s", wall), "the wall clock is capped in seconds: e.g. --max-wall 90s")
		}
		b.WallSeconds = capability.Limit(uint64(wall / time.Second))
	}
	if f.Changed("max-spend") {
		usd, err := capability.ParseUSD(spend)
		if err != nil {
			return withHint(fmt.Errorf("--max-spend %q: %w", spend, err), "give dollars, e.g. --max-spend 2.50")
		}
		if usd == 0 {
			return zero("max-spend")
		}
		b.MicroUSD = capability.Limit(usd)
	}
	return nil
}

func (c *cli) tasksCmd() *cobra.Command {
	var (
		asJSON bool
		target string
	)
	cmd := &cobra.Command{
		Use:   "tasks",
		Short: "List the cell daemon's tasks, oldest first",
		Long: `List the tasks of the cell daemon, oldest first: each task's state (running,
waiting for its next attempt, completed, failed, cancelled), its attempts and
its objective. agentrt task show ID shows one in full.`,
		Example: "  agentrt tasks\n  agentrt tasks --json | jq 'select(.state == \"failed\") | .reason'",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := c.taskClient(target)
			if err != nil {
				return err
			}
			tks, err := cl.Tasks(cmd.Context())
			if err != nil {
				return remoteHint(err)
			}
			if asJSON {
				for _, tk := range tks {
					if err := c.printJSON(tk); err != nil {
						return err
					}
				}
				return nil
			}
			if len(tks) == 0 {
				fmt.Fprintln(c.stderr, "no tasks yet (submit one with: agentrt task submit MODULE.wasm --objective TEXT)")
				return nil
			}
			tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TASK\tSTATE\tATTEMPTS\tCREATED\tOBJECTIVE")
			for _, tk := range tks {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", tk.ID, tk.State, len(tk.Attempts),
					tk.Created.Local().Format("2006-01-02 15:04:05"), clip(termtext.Line(tk.Objective), 48))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per task (as task show --json)")
	cmd.Flags().StringVar(&target, "cell", "", "the cell daemon (unix:DATA/agentrt.sock or http://127.0.0.1:PORT)")
	return cmd
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func (c *cli) taskShowCmd() *cobra.Command {
	var (
		asJSON bool
		target string
	)
	cmd := &cobra.Command{
		Use:   "show TASK",
		Short: "Show a task: its policy, caps and spend, and each attempt",
		Long: `Show a task: its state, objective, retry policy, caps and what its attempts
spent; then each attempt with its run id, status, steps, spend, start and end.
The current run's waits are shown as the daemon sees them now: what a parked
run waits for (a timer until a time, an approval of a group, bound to its
action digest) and its calls waiting for an approval (agentrt approve).
TASK is a task id, a unique prefix of one, or "last" for the newest task.`,
		Example: "  agentrt task show last\n  agentrt task show 1898b5d9 --json | jq '.attempts[] | {attempt, run_id, status}'",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.taskClient(target)
			if err != nil {
				return err
			}
			tk, err := cl.Task(cmd.Context(), args[0])
			if err != nil {
				return remoteHint(err)
			}
			if asJSON {
				return c.printJSON(tk)
			}
			return writeTask(c.stdout, tk)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the task as one JSON object (attempts, spent, caps, next_at, reason, ...)")
	cmd.Flags().StringVar(&target, "cell", "", "the cell daemon (unix:DATA/agentrt.sock or http://127.0.0.1:PORT)")
	return cmd
}

// spentText writes amounts by dimension name as budget reports do.
func spentText(m map[string]uint64) string {
	var a budget.Amounts
	for name, n := range m {
		if d, ok := budget.ParseDim(name); ok {
			a[d] = n
		}
	}
	return a.String()
}

func writeTask(w io.Writer, tk cell.Task) error {
	at := func(t time.Time) string { return t.Local().Format("2006-01-02 15:04:05") }
	fmt.Fprintf(w, "task %s %s\n", tk.ID, tk.State)
	fmt.Fprintf(w, "objective: %s\n", termtext.Line(tk.Objective))
	input := "the objective"
	if tk.InputGiven {
		input = "given at submission"
	}
	grant := "tokens the cell issues for the grant"
	if tk.Token {
		grant = "attenuations of the submitted token"
	}
	fmt.Fprintf(w, "module: %s %.12s (input: %s; granted by %s)\n", termtext.Line(tk.Module), tk.ModuleSHA256, input, grant)
	fmt.Fprintf(w, "retries: %d, waiting min(%s·2^(n-1), %s) after attempt n\n", tk.Retries, tk.Backoff, tk.MaxBackoff)
	caps := budget.FromBudget(tk.Caps).String()
	fmt.Fprintf(w, "caps: %s; spent: %s\n", caps, spentText(tk.Spent))
	if tk.NextAt != nil {
		fmt.Fprintf(w, "next attempt: %s\n", at(*tk.NextAt))
	}
	if tk.Reason != "" {
		fmt.Fprintf(w, "reason: %s\n", termtext.Line(tk.Reason))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ATTEMPT\tRUN\tSTATUS\tSTEPS\tSPENT\tSTARTED\tENDED")
	for _, a := range tk.Attempts {
		run, status, steps, ended := a.Run, a.Status, fmt.Sprint(a.Steps), "-"
		if run == "" {
			run = "-"
		}
		if a.Live {
			status += " (live)"
		}
		if a.Ended == nil {
			// The index counts steps when a run stops.
			steps = "-"
		} else {
			ended = at(*a.Ended)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Seq, run, status, steps, spentText(a.Spent), at(a.Started), ended)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if n := len(tk.Attempts); n > 0 {
		a := tk.Attempts[n-1]
		if a.Error != "" {
			fmt.Fprintf(w, "attempt %d: %s\n", a.Seq, termtext.Line(a.Error))
		}
		if wt := a.Wait; wt != nil {
			fmt.Fprintf(w, "run %s waits for %s at step %d", a.Run, wt.Kind, wt.Step)
			if wt.Op != "" {
				fmt.Fprintf(w, " (%s)", termtext.Line(wt.Op))
			}
			if wt.Group != "" {
				fmt.Fprintf(w, ", group %s", termtext.Line(wt.Group))
			}
			if wt.Digest != "" {
				fmt.Fprintf(w, ", action digest %s", wt.Digest)
			}
			if wt.Until != nil {
				word := "until"
				if wt.Kind == "approval" {
					word = "expiring"
				}
				fmt.Fprintf(w, ", %s %s", word, at(*wt.Until))
			}
			fmt.Fprintln(w)
		}
		if ap := a.Approval; ap != nil {
			fmt.Fprintf(w, "approval %s of group %s: %s, %d of %d approvers", ap.Digest, termtext.Line(ap.Group), ap.State, len(ap.Approvers), ap.Quorum)
			if ap.Expires != nil {
				fmt.Fprintf(w, ", expires %s", at(*ap.Expires))
			}
			fmt.Fprintf(w, " (agentrt approvals; agentrt approve %s %d --key KEY)\n", a.Run, ap.Step)
		}
		for _, ap := range a.Waiting {
			what := ap.Op
			if ap.Resource != "" {
				what += " " + termtext.Quote(ap.Resource)
			}
			fmt.Fprintf(w, "run %s step %d waits for approval: %s (agentrt approve %s --step %d)\n", a.Run, ap.Step, termtext.Line(what), a.Run, ap.Step)
		}
	}
	return nil
}

func (c *cli) taskCancelCmd() *cobra.Command {
	var target string
	cmd := &cobra.Command{
		Use:   "cancel TASK",
		Short: "Cancel a task: its current run and its pending retry, keeping its state",
		Long: `Cancel a task: its current run stops at its next step boundary (a parked run
is marked cancelled, so no timer or approval wakes it) with its journal kept,
and a retry waiting for its time is not started. agentrt task resume continues
it. A completed or failed task cannot be cancelled (409).`,
		Example: "  agentrt task cancel last",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.taskAction(cmd.Context(), target, args[0], (*cell.Client).CancelTask)
		},
	}
	cmd.Flags().StringVar(&target, "cell", "", "the cell daemon (unix:DATA/agentrt.sock or http://127.0.0.1:PORT)")
	return cmd
}

func (c *cli) taskResumeCmd() *cobra.Command {
	var target string
	cmd := &cobra.Command{
		Use:   "resume TASK",
		Short: "Continue a cancelled task",
		Long: `Continue a cancelled task: its cancelled run is resumed from its journal, by
the same path as agentrt resume (no call is made twice), or, when it was
cancelled between two attempts, its next attempt starts at its time (at once
if that has passed). Only a cancelled task is resumed (409 otherwise).`,
		Example: "  agentrt task resume last",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.taskAction(cmd.Context(), target, args[0], (*cell.Client).ResumeTask)
		},
	}
	cmd.Flags().StringVar(&target, "cell", "", "the cell daemon (unix:DATA/agentrt.sock or http://127.0.0.1:PORT)")
	return cmd
}

func (c *cli) taskAction(ctx context.Context, target, id string, act func(*cell.Client, context.Context, string) (cell.Task, error)) error {
	cl, err := c.taskClient(target)
	if err != nil {
		return err
	}
	tk, err := act(cl, ctx, id)
	if err != nil {
		return remoteHint(err)
	}
	line := fmt.Sprintf("task %s %s", tk.ID, tk.State)
	if n := len(tk.Attempts); n > 0 && tk.Attempts[n-1].Run != "" {
		line += fmt.Sprintf(" (attempt %d, run %s %s)", n, tk.Attempts[n-1].Run, tk.Attempts[n-1].Status)
	}
	fmt.Fprintln(c.stdout, strings.TrimSpace(line))
	return nil
}
