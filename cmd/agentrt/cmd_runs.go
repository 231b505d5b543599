package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/badgerstore"
	"github.com/spf13/cobra"
)

func (c *cli) runsCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List runs, newest first",
		Long: `List the runs of this cell, newest first. A run killed mid-way shows as
running; its journal holds everything up to the last commit.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := c.openStore()
			if err != nil {
				return err
			}
			defer st.Close()
			runs, err := st.Runs(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(c.stdout)
				for _, m := range runs {
					if err := enc.Encode(runJSON(m)); err != nil {
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
			fmt.Fprintln(tw, "RUN\tSTATUS\tSTARTED\tSTEPS\tMODULE")
			for _, m := range runs {
				// The index counts steps when a run ends; a run still going
				// (or killed) has its count in its journal only.
				steps := "-"
				if m.Status.Finished() {
					steps = fmt.Sprint(m.Steps)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s %x\n", m.ID, m.Status,
					time.Unix(0, m.Started).Local().Format("2006-01-02 15:04:05"), steps, m.ModuleName, m.ModuleSHA256[:6])
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per run (run_id, status, module_sha256, started, ...)")
	return cmd
}

func runJSON(m journal.RunMeta) map[string]any {
	o := map[string]any{
		"run_id":        m.ID.String(),
		"status":        m.Status,
		"module_sha256": hex.EncodeToString(m.ModuleSHA256),
		"module":        m.ModuleName,
		"started":       time.Unix(0, m.Started).UTC().Format(time.RFC3339Nano),
		"steps":         m.Steps,
		"cell":          hex.EncodeToString(m.Cell),
	}
	if m.Ended != 0 {
		o["ended"] = time.Unix(0, m.Ended).UTC().Format(time.RFC3339Nano)
	}
	if m.Error != "" {
		o["error"] = m.Error
	}
	return o
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
