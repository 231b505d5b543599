package main

import (
	"github.com/agentrt/agentrt/host"
	"github.com/spf13/cobra"
)

func (c *cli) logsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "logs RUN",
		Long:  "Print a run's event log. RUN is a run id, a unique prefix of one, or \"last\" for the newest run.",
		Short: "Print a run's event log: the guest's stdout, stderr and log lines",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			st, run, err := c.openRun(ctx, args[0])
			if err != nil {
				return err
			}
			defer st.Close()
			if _, err := st.Meta(ctx, run); err != nil {
				return err
			}
			return host.ReadEvents(ctx, st, run, func(e host.Event) error {
				printEvent(c.stdout, e)
				return nil
			})
		},
	}
}
