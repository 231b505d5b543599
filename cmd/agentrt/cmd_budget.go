package main

import (
	"github.com/agentrt/agentrt/host"
	"github.com/spf13/cobra"
)

func (c *cli) budgetCmd() *cobra.Command {
	var (
		asJSON    bool
		trustFile string
	)
	cmd := &cobra.Command{
		Use:   "budget RUN",
		Short: "Show a run's budget: ceilings, reserved, spent and left",
		Long: `Show the budget of a run, rebuilt from its verified journal: for each
dimension (steps, model_calls, input_tokens, output_tokens, micro_usd,
tool_calls, http_requests, wall_seconds), the ceiling in force (its token's,
lowered by the run's own run.limit calls; "unlimited" for none), what open
reservations hold, what was spent and what is left. Money prints in dollars
(micro-USD in --json). Steps are the journal's calls, wall_seconds the time
from its start entry to its last. RUN is a run id, a unique prefix of one,
or "last". journal show lists the reserves and settles one by one.`,
		Example: "  agentrt budget last\n  agentrt budget 0188c3 --json | jq '.dimensions[] | select(.dimension == \"tool_calls\")'",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			st, run, err := c.openRunReader(ctx, args[0])
			if err != nil {
				return err
			}
			defer st.Close()
			trust, err := c.trust(trustFile)
			if err != nil {
				return err
			}
			rep, err := host.LoadBudget(ctx, st, run, trust)
			if err != nil {
				return err
			}
			if asJSON {
				return rep.WriteJSON(c.stdout)
			}
			return rep.WriteText(c.stdout)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object: each dimension's ceiling, reserved, spent and left, and the open reservations")
	cmd.Flags().StringVar(&trustFile, "trust", "", "file of trusted cell keys, one authorized_keys line each (default: this cell's key)")
	return cmd
}
