package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/agentrt/agentrt/host/cell"
	"github.com/spf13/cobra"
)

func (c *cli) purgeCmd() *cobra.Command {
	var (
		before        time.Duration
		keepAudit, dn bool
	)
	cmd := &cobra.Command{
		Use:   "purge --finished-before DURATION",
		Short: "Delete finished runs older than a retention period",
		Long: `Delete the runs that finished more than DURATION ago: their journal, index
record, lease and event log, their tools' workspace (DATA/work/RUN), and their
module when no other run uses it. A journal is deleted whole, never cut, so
every run that is kept stays intact and verifiable. Runs that have not
finished are never purged.

With --keep-audit, only the event logs (the guests' stdout, stderr and log
lines) are deleted: the journals, their modules and the run list stay, so
every run can still be replayed and audited.

On a terminal (stdout and stderr both), a progress bar on stderr counts the
runs purged.`,
		Example: "  agentrt purge --finished-before 720h\n  agentrt purge --finished-before 24h --keep-audit --dry-run",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if before <= 0 {
				return withHint(errors.New("--finished-before is required"), "give a retention period, e.g. --finished-before 720h (30 days)")
			}
			ctx := cmd.Context()
			dir, err := c.data()
			if err != nil {
				return err
			}
			st, err := c.openStore()
			if err != nil {
				return err
			}
			defer st.Close()
			runs, err := st.Runs(ctx)
			if err != nil {
				return err
			}
			cutoff := time.Now().Add(-before).UnixNano()
			var due []int
			for i, m := range runs {
				if m.Status.Finished() && m.Ended != 0 && m.Ended <= cutoff {
					due = append(due, i)
				}
			}
			var bar *progressBar
			if !dn {
				bar = c.progress("purge", false)
				defer bar.finish()
			}
			var n, records, events, modules int
			for _, i := range due {
				m := runs[i]
				bar.set(n, len(due))
				n++
				if dn {
					fmt.Fprintf(c.stdout, "would purge %s (%s, ended %s)\n", m.ID, m.Status, time.Unix(0, m.Ended).UTC().Format(time.RFC3339))
					continue
				}
				p, err := st.Purge(ctx, m.ID, keepAudit)
				if err != nil {
					return err
				}
				records, events, modules = records+p.Records, events+p.Events, modules+p.Module
				workspace := ""
				if !keepAudit {
					// What the run's tools wrote; the journal has its hashes.
					ws := filepath.Join(cell.WorkDir(dir), m.ID.String())
					if _, err := os.Stat(ws); err == nil {
						if err := os.RemoveAll(ws); err != nil {
							return err
						}
						workspace = ", its workspace"
					}
				}
				bar.clear()
				fmt.Fprintf(c.stdout, "purged %s: %d journal commits, %d events, %d module%s\n", m.ID, p.Records, p.Events, p.Module, workspace)
			}
			bar.set(n, len(due))
			bar.finish()
			switch {
			case dn:
				fmt.Fprintf(c.stderr, "%d of %d runs would be purged\n", n, len(runs))
			default:
				fmt.Fprintf(c.stderr, "purged %d of %d runs: %d journal commits, %d events, %d modules\n", n, len(runs), records, events, modules)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.DurationVar(&before, "finished-before", 0, "purge runs that ended longer ago than this (e.g. 720h)")
	f.BoolVar(&keepAudit, "keep-audit", false, "delete only event logs; keep journals and modules for audit")
	f.BoolVar(&dn, "dry-run", false, "say what would be purged, delete nothing")
	return cmd
}
