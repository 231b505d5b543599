package main

import (
	"time"

	"github.com/agentrt/agentrt/host/cell"
	"github.com/spf13/cobra"
)

func (c *cli) resumeCmd() *cobra.Command {
	var asJSON, quiet bool
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

RUN is a run id, a unique prefix of one, or "last" for the newest run.`,
		Example: "  agentrt resume last\n  agentrt resume 18ec7ae8 --json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			cl, err := c.openShowing(ctx, quiet)
			if err != nil {
				return err
			}
			defer cl.Close(ctx)
			run, err := cell.FindRun(ctx, cl.Store, args[0])
			if err != nil {
				return err
			}
			start := time.Now()
			res, err := cl.Host.Resume(ctx, run)
			return c.report(res, err, start, asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, `print one JSON object {"run_id","status","output"} on stdout`)
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "do not show the guest's stdout, stderr and log lines")
	return cmd
}
