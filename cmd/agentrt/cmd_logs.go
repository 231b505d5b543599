package main

import (
	"github.com/agentrt/agentrt/host"
	"github.com/spf13/cobra"
)

func (c *cli) logsCmd() *cobra.Command {
	var raw bool
	cmd := &cobra.Command{
		Use: "logs RUN",
		Long: `Print a run's event log: the guest's stdout and stderr as it wrote them, and
its log lines as "  [level] message", one per line.

What the guest wrote is shown with terminal control characters escaped: ESC
as \x1b, other C0 and C1 controls, DEL and bytes that are not UTF-8 as \xNN
or \uNNNN, bidi overrides and isolates as \u202e and the like; newlines and
tabs stay (in a log line they are escaped too). A guest cannot move the
cursor, hide or rewrite text, retitle the window or write the clipboard.
With --raw the stdout and stderr bytes are printed exactly as stored, for a
file or a program (never for a terminal: they may hold control sequences).

RUN is a run id, a unique prefix of one, or "last" for the newest run.`,
		Short:   "Print a run's event log: the guest's stdout, stderr and log lines",
		Example: "  agentrt logs last\n  agentrt logs 18ec7ae8 --raw > run.out",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			st, run, err := c.openRunReader(ctx, args[0])
			if err != nil {
				return err
			}
			defer st.Close()
			if _, err := st.Meta(ctx, run); err != nil {
				return err
			}
			p := newEventPrinter(c.stdout, raw)
			defer p.flush()
			return host.ReadEvents(ctx, st, run, func(e host.Event) error {
				p.print(e)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&raw, "raw", false, "print the guest's bytes exactly, control characters included")
	return cmd
}
