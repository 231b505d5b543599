package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
)

func (c *cli) cellHandoffCmd() *cobra.Command {
	var target, to string
	cmd := &cobra.Command{
		Use:   "handoff RUN --to CELL",
		Short: "Move a live run to another cell of the cluster by a signed handoff",
		Long: `Move a run that this cell daemon executes to another cell of its cluster
(agentrt cell serve --nats). The cell stops the run at its next step
boundary (a step under way completes first, so nothing is left in doubt),
seals a handoff envelope with its cell key (the run, both cells, the lease
epoch, the journal's head, the run's capability token, a nonce and a short
expiry), records it in the run's envelope chain in the cluster, hands the
run's lease to CELL and sends it the envelope. CELL verifies all of it
before it takes the lease, journals the envelope in its lease entry and
resumes the run from its journal.

If CELL refuses the envelope (it does not trust this cell, the envelope
expired, the run moved on, ...), the run goes on here, and the command
fails with CELL's reason.

CELL is the destination's id (its public key in hex, as GET /v1/cell shows
it) or its name in the cluster's registry (the name of its --describe
file). RUN is a run id, a unique prefix of one, or "last".`,
		Example: "  agentrt cell handoff last --to b\n  agentrt cell handoff 18ec7ae8 --to 5f1c...e2 --cell http://127.0.0.1:7070",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if to == "" {
				return withHint(errors.New("no destination cell"), "name it with --to CELL: its id or its registry name")
			}
			cl, err := c.cellClient(target)
			if err != nil {
				return err
			}
			if cl == nil {
				return withHint(errors.New("no cell daemon serves this data directory"),
					"a handoff moves a run a daemon executes: start it with agentrt cell serve --nats URL, or name it with --cell")
			}
			info, err := cl.Handoff(cmd.Context(), args[0], to)
			if err != nil {
				return remoteHint(err)
			}
			fmt.Fprintf(c.stdout, "run %s handed to cell %s (lease epoch %d → %d, envelope %s)\n", info.Run, info.To, info.Epoch, info.Epoch+1, info.Envelope)
			return nil
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "the destination cell: its id (hex public key) or its name in the cluster's registry")
	cmd.Flags().StringVar(&target, "cell", "", "the source cell to ask (unix:PATH or http://127.0.0.1:PORT); default: the data directory's socket")
	return cmd
}
