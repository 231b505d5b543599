package main

import (
	"context"
	"time"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/journal"

	"github.com/agentrt/agentrt/host/cell"
	"github.com/spf13/cobra"
)

func (c *cli) resumeCmd() *cobra.Command {
	var (
		asJSON, quiet bool
		target        string
	)
	cmd := &cobra.Command{
		Use:   "resume RUN",
		Short: "Continue a run that stopped before its end",
		Long: `Continue a run whose process was killed or interrupted. The journal is verified,
the recorded module re-instantiated, and every call the journal records is
answered with its recorded response: no completed effect runs again. Then the
effect the run left in doubt, if any, is decided, and the run goes on live in
the same journal.

An effect in doubt was dispatched but has no recorded outcome. An HTTP request
to servers the grant marks idempotent (http: {hosts: [...], idempotent: true}:
they honour Idempotency-Key) is sent again with the same key; any other is not
re-sent, and the agent gets an in_doubt error for it (agent.ErrInDoubt).

A cancelled run (agentrt cancel) is continued the same way. A run is never
executed twice at once: a resume of a run that is executing is refused.

While a cell daemon (agentrt cell serve) holds the data directory, the run is
resumed in it, and this command follows it. The daemon admits it as it would
a submission (its policy, --run-budget, queue bound and --cell-budget): a run
it does not admit now is refused with the reason, and left as it was.

On a terminal (stdout and stderr both), a progress bar on stderr counts the
recorded calls answered from the journal until the run goes on live; not with
--json, nor for a run resumed in a daemon.

RUN is a run id, a unique prefix of one, or "last" for the newest run.`,
		Example: "  agentrt resume last\n  agentrt resume 18ec7ae8 --json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			resume := func(cl *cell.Client) (*cell.Stream, error) { return cl.ResumeFollow(ctx, args[0]) }
			if target != "" {
				return c.followOnCell(ctx, target, resume, asJSON, quiet)
			}
			cl, closeCell, err := c.openShowing(ctx, quiet, nil)
			if daemon := c.heldByDaemon(err, "the run goes to it"); daemon != "" {
				return c.followOnCell(ctx, daemon, resume, asJSON, quiet)
			}
			if err != nil {
				return err
			}
			defer closeCell()
			run, err := cell.FindRun(ctx, cl.Store, args[0])
			if err != nil {
				return err
			}
			start := time.Now()
			res, err := c.resumeShowing(ctx, cl, run, asJSON)
			res, err = c.sleepThrough(ctx, cl, res, err)
			return c.report(res, err, start, asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, `print one JSON object {"run_id","status","output"} on stdout`)
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "do not show the guest's stdout, stderr and log lines")
	cmd.Flags().StringVar(&target, "cell", "", "resume the run in a cell daemon (unix:DATA/agentrt.sock or http://127.0.0.1:PORT) and follow it")
	c.engineFlag(cmd)
	return cmd
}

// resumeShowing resumes run in cell cl, drawing a progress bar over its
// recorded calls unless quiet.
func (c *cli) resumeShowing(ctx context.Context, cl *cell.Cell, run journal.RunID, quiet bool) (*host.Result, error) {
	st, err := cl.Host.Reopen(ctx, run)
	if err != nil {
		return nil, err
	}
	bar := c.progress("resume", quiet)
	st.OnReplay(func(served, total int) {
		bar.set(served, total)
		if served == total {
			bar.finish() // the run goes live: its output follows
		}
	})
	defer bar.finish()
	return st.Execute(ctx)
}
