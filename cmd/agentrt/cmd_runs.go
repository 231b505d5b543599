package main

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"

	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/termtext"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/badgerstore"
	"github.com/spf13/cobra"
)

func (c *cli) runsCmd() *cobra.Command {
	var asJSON, parked bool
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List runs, newest first",
		Long: `List the runs of this cell, newest first. A run killed mid-way shows as
running; its journal holds everything up to the last commit. A cancelled run
waits for agentrt resume. A parked run waits for a timer or an approval, with
no instance in memory: WAITING says for what (--parked lists only those).
While a cell daemon holds the data directory, the list comes from it, and
LIVE marks the runs it is executing.`,
		Example: "  agentrt runs\n  agentrt runs --parked\n  agentrt runs --json | jq -r .run_id",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			runs, err := c.listRuns(cmd.Context())
			if err != nil {
				return err
			}
			if parked {
				kept := runs[:0]
				for _, ri := range runs {
					if ri.Status == journal.StatusParked || ri.Wait != nil && !ri.Status.Finished() {
						kept = append(kept, ri)
					}
				}
				runs = kept
			}
			if asJSON {
				for _, ri := range runs {
					if err := c.printJSON(ri); err != nil {
						return err
					}
				}
				return nil
			}
			if len(runs) == 0 {
				fmt.Fprintln(c.stderr, "no runs yet (start one with: agentrt run MODULE.wasm)")
				return nil
			}
			tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "RUN\tSTATUS\tSTARTED\tSTEPS\tMODULE\tWAITING")
			for _, ri := range runs {
				// The index counts steps when a run ends; a run still going
				// (or killed) has its count in its journal only.
				steps := "-"
				if ri.Status.Finished() {
					steps = fmt.Sprint(ri.Steps)
				}
				status := string(ri.Status)
				switch {
				case ri.Queued != nil:
					status = fmt.Sprintf("queued (priority %d)", ri.Queued.Priority)
				case ri.Live:
					status += " (live)"
				}
				// The module's name is the submitter's; shown, it cannot
				// act on the terminal.
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s %.12s\t%s\n", ri.RunID, status,
					ri.Started.Local().Format("2006-01-02 15:04:05"), steps, termtext.Line(ri.Module), ri.ModuleSHA256, waitingLine(ri))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per run (run_id, status, live, module_sha256, started, ended, steps, output, wait, ...)")
	cmd.Flags().BoolVar(&parked, "parked", false, "list only the runs that wait (parked, or cancelled while parked), with what they wait for")
	return cmd
}

// waitingLine says what a run waits for: a timer's wake time, an
// approval's group and expiry.
func waitingLine(ri cell.RunInfo) string {
	if q := ri.Queued; q != nil {
		return "a worker, since " + q.Since.Local().Format("2006-01-02 15:04:05")
	}
	w := ri.Wait
	if w == nil || ri.Status.Finished() {
		return ""
	}
	switch w.Kind {
	case journal.WaitTimer:
		return fmt.Sprintf("timer until %s (step %d)", w.Until.Local().Format("2006-01-02 15:04:05"), w.Step)
	case journal.WaitApproval:
		s := fmt.Sprintf("approval of %s (step %d", w.Group, w.Step)
		if w.Until != nil {
			s += ", expires " + w.Until.Local().Format("2006-01-02 15:04:05")
		}
		return s + ")"
	}
	return w.Kind
}

// listRuns reads the run index from the store, or, while a process holds
// the data directory, asks it through its socket: it knows which runs it
// is executing (live).
func (c *cli) listRuns(ctx context.Context) ([]cell.RunInfo, error) {
	st, err := c.openStore()
	if errors.Is(err, badgerstore.ErrLocked) {
		cl, err := c.holder(ctx, err)
		if err != nil {
			return nil, err
		}
		runs, err := cl.Runs(ctx)
		if err != nil {
			return nil, remoteHint(err)
		}
		return runs, nil
	}
	if err != nil {
		return nil, err
	}
	defer st.Close()
	metas, err := st.Runs(ctx)
	if err != nil {
		return nil, err
	}
	runs := make([]cell.RunInfo, len(metas))
	for i, m := range metas {
		runs[i] = cell.Info(m, false)
	}
	return runs, nil
}

// openStore opens only the store: commands that read journals need no
// engine and no key.
func (c *cli) openStore() (*badgerstore.Store, error) {
	dir, err := c.data()
	if err != nil {
		return nil, err
	}
	return badgerstore.Open(cell.StoreDir(dir))
}
