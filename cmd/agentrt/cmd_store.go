package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/fileread"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/badgerstore"
	"github.com/agentrt/agentrt/journal/cellkey"
	"github.com/spf13/cobra"
)

func (c *cli) storeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Check a data directory's store for damage, and salvage what verifies",
		Long: `Check the store of a data directory (DATA/store) and salvage it.

  check     read every file and every journal, and report the damage: which
            file, where, which runs it reaches
  salvage   copy whatever still verifies into a new data directory

Every command that opens a store checks its files first. A store that does
not open cleanly (a MANIFEST cut or overwritten, a table that fails its
checksums, a table the MANIFEST lost) is refused, and nothing in it is
changed: these commands are how to see and recover from the damage. Neither
changes the store they read.`,
		Example: "  agentrt store check\n  agentrt store salvage --to /srv/agentrt-salvaged",
	}
	cmd.AddCommand(c.storeCheckCmd(), c.storeSalvageCmd())
	return cmd
}

// storeTrust returns the keys whose seals a store check counts: those in
// file, or any key (the check is of integrity: a handoff from another cell
// is not damage).
func storeTrust(file string) (journal.TrustFunc, error) {
	if file == "" {
		return nil, nil
	}
	keys, err := readTrustFile(file)
	if err != nil {
		return nil, err
	}
	return journal.TrustKeys(keys...), nil
}

func (c *cli) storeCheckCmd() *cobra.Command {
	var asJSON bool
	var trustFile string
	cmd := &cobra.Command{
		Use:   "check [--json]",
		Short: "Report the damage to a store, and the runs it reaches",
		Long: `Read the whole store of the data directory without changing it: the MANIFEST
(it must replay to its last byte), every block of every table (its checksum),
the tables the MANIFEST does not list, then every run's journal, verified from
its first entry to the head its index records (decoding, chain, hashes, seals;
by any key, or by the keys in --trust FILE).

A damaged store is read from a copy of what still reads, made in a temporary
directory and removed after, so that the report names the runs the damage
reaches: for each, how many entries read back whole, how many its head names,
and the damaged files that hold its keys.

Exits 0 when the store is whole, 1 when anything is damaged. The store must
not be in use (stop agentrt cell serve first).`,
		Example: "  agentrt store check\n  agentrt store check --json | jq '.runs[] | select(.ok | not)'",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := c.data()
			if err != nil {
				return err
			}
			trust, err := storeTrust(trustFile)
			if err != nil {
				return err
			}
			rep, err := badgerstore.Check(cmd.Context(), cell.StoreDir(dir), badgerstore.CheckOptions{Trust: trust})
			if err != nil {
				return storeError(err)
			}
			if asJSON {
				enc := json.NewEncoder(c.stdout)
				enc.SetIndent("", "  ")
				if err := enc.Encode(rep); err != nil {
					return err
				}
				if !rep.OK {
					return &exitError{code: 1}
				}
				return nil
			}
			if err := printCheck(c.stdout, rep); err != nil {
				return err
			}
			if !rep.OK {
				damaged := 0
				for _, r := range rep.Runs {
					if !r.OK {
						damaged++
					}
				}
				return withHint(fmt.Errorf("the store is damaged: %d problems in its files, %d changed blobs, %d of %d runs reached", len(rep.Problems), len(rep.BadBlobs), damaged, len(rep.Runs)),
					"copy out what still verifies: agentrt store salvage --to DIR (the store itself is not changed)")
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON (dir, ok, tables, problems, debris, runs, blobs, bad_blobs)")
	cmd.Flags().StringVar(&trustFile, "trust", "", "count only seals by the keys in this file (default: any key; the check is of integrity)")
	return cmd
}

func printCheck(w io.Writer, rep *badgerstore.CheckReport) error {
	fmt.Fprintf(w, "store:   %s (%d tables read)\n", rep.Dir, rep.Tables)
	if len(rep.Problems) == 0 {
		fmt.Fprintln(w, "files:   whole")
	} else {
		fmt.Fprintf(w, "files:   %d problems\n", len(rep.Problems))
		for _, p := range rep.Problems {
			fmt.Fprintf(w, "  %s: %s [%s]\n", p.File, p.Detail, p.Kind)
		}
	}
	for _, d := range rep.Debris {
		fmt.Fprintf(w, "debris:  %s (left by a crash; the next open removes it)\n", d)
	}
	if rep.LogRecords > 0 {
		fmt.Fprintf(w, "log:     %d records in the journal's log, left by a crash: checked applied, as the next open applies them\n", rep.LogRecords)
	}
	if rep.Blobs > 0 || len(rep.BadBlobs) > 0 {
		fmt.Fprintf(w, "blobs:   %d read, %d changed\n", rep.Blobs, len(rep.BadBlobs))
		for _, b := range rep.BadBlobs {
			if b.Problem != "" {
				fmt.Fprintf(w, "  blob %s: %s\n", b.Sum, b.Problem)
			} else {
				fmt.Fprintf(w, "  blob %s: its bytes hash to %s\n", b.Sum, b.Got)
			}
		}
	}
	damaged := 0
	for _, r := range rep.Runs {
		if !r.OK {
			damaged++
		}
	}
	fmt.Fprintf(w, "runs:    %d, %d damaged\n", len(rep.Runs), damaged)
	if len(rep.Runs) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "RUN\tSTATUS\tENTRIES\tPROBLEM")
		for _, r := range rep.Runs {
			status := string(r.Status)
			if status == "" {
				status = "?"
			}
			problem := "ok"
			if !r.OK {
				problem = r.Problem
				if len(r.Damage) > 0 {
					problem = joinNonEmpty(problem, "keys in "+fmt.Sprint(r.Damage))
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s\n", r.Run, status, r.Readable, r.Length, problem)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	verdict := "OK"
	if !rep.OK {
		verdict = "DAMAGED"
	}
	fmt.Fprintf(w, "verdict: %s\n", verdict)
	return nil
}

func joinNonEmpty(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

func (c *cli) storeSalvageCmd() *cobra.Command {
	var to, trustFile string
	cmd := &cobra.Command{
		Use:   "salvage --to DIR",
		Short: "Copy whatever still verifies into a new data directory",
		Long: `Copy what still verifies of this data directory's store into a new data
directory DIR (which must not exist, or be empty), and leave this one as it is.

Every journal is copied up to the end of its longest prefix that verifies and
is covered by a seal. A journal copied short keeps its original head in the new
store, so every read of it there still fails naming the entries that are
missing, as here: it is never taken for a shorter run. The modules, the agents'
kv state, the event logs, the leases and the nonces of presented tokens are
copied as they are; the cell key (cell_ed25519), DATA/token_roots, modes.yaml
and policies/ are copied into DIR, so that DIR is this cell. The lineage index
is rebuilt on the next agentrt journal query.

Use the new directory with --data DIR (or move it in place of this one once
agentrt store check says it is whole). Exits 0 when every run was copied whole,
1 when some were copied short or not at all; DIR is written either way.`,
		Example: "  agentrt store salvage --to /srv/agentrt-salvaged\n  agentrt --data /srv/agentrt-salvaged store check",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if to == "" {
				return withHint(errors.New("--to DIR is required"), "name a new data directory for what is salvaged, e.g. --to DATA-salvaged")
			}
			dir, err := c.data()
			if err != nil {
				return err
			}
			if abs, _ := filepath.Abs(to); abs == mustAbs(dir) {
				return withHint(fmt.Errorf("--to %s is this data directory", to), "salvage into a new directory; this one is left as it is")
			}
			trust, err := storeTrust(trustFile)
			if err != nil {
				return err
			}
			if entries, err := os.ReadDir(to); err == nil && len(entries) > 0 {
				return withHint(fmt.Errorf("%s is not empty", to), "salvage writes a new data directory: name one that does not exist")
			}
			if err := os.MkdirAll(to, 0o700); err != nil {
				return err
			}
			rep, err := badgerstore.Salvage(cmd.Context(), cell.StoreDir(dir), cell.StoreDir(to), badgerstore.CheckOptions{Trust: trust})
			if err != nil {
				return storeError(err)
			}
			if err := copyCellFiles(dir, to); err != nil {
				return fmt.Errorf("salvage: the store is in %s, but the cell's files were not copied: %w", cell.StoreDir(to), err)
			}
			short := 0
			tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "RUN\tCOPIED\tPROBLEM")
			for _, r := range rep.Runs {
				problem := "whole"
				if !r.Complete {
					short++
					problem = r.Problem
				}
				fmt.Fprintf(tw, "%s\t%d/%d\t%s\n", r.Run, r.Copied, r.Length, problem)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			for _, m := range rep.MissingModules {
				fmt.Fprintf(c.stderr, "agentrt: warning: module %s\n", m)
			}
			fmt.Fprintf(c.stderr, "salvaged into %s: %d runs (%d whole, %d short), %d modules, %d kv keys, %d events, %d leases, %d nonces, %d cell records\n",
				to, len(rep.Runs), len(rep.Runs)-short, short, rep.Modules, rep.KV, rep.Events, rep.Leases, rep.Nonces, rep.CellRecords)
			if short > 0 || len(rep.MissingModules) > 0 {
				return withHint(fmt.Errorf("%d runs could not be copied whole, and %d modules are missing", short, len(rep.MissingModules)),
					"what was copied verifies; a run copied short still reads as incomplete in %s", to)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "the new data directory to write (required)")
	cmd.Flags().StringVar(&trustFile, "trust", "", "copy only journals sealed by the keys in this file (default: any key)")
	return cmd
}

// copyCellFiles copies a data directory's identity and gate files into a
// salvaged one: the cell key (kept 0600), the token roots, the modes and
// the policies.
func copyCellFiles(from, to string) error {
	for name, kind := range map[string]fileread.Kind{cellkey.FileName: fileread.Key, cell.TokenRootsFile: fileread.Trust, cell.ModesFile: fileread.Modes} {
		if err := copyIfExists(filepath.Join(from, name), filepath.Join(to, name), kind); err != nil {
			return err
		}
	}
	src := filepath.Join(from, cell.PoliciesDir)
	entries, err := os.ReadDir(src)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(to, cell.PoliciesDir), 0o700); err != nil {
		return err
	}
	for _, e := range entries {
		if e.Type().IsRegular() {
			if err := copyIfExists(filepath.Join(src, e.Name()), filepath.Join(to, cell.PoliciesDir, e.Name()), fileread.Policy); err != nil {
				return err
			}
		}
	}
	return nil
}

func copyIfExists(from, to string, kind fileread.Kind) error {
	info, err := os.Stat(from)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	b, err := fileread.Read(from, kind)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, info.Mode().Perm())
}

// storeError adds a hint to a store command's failure.
func storeError(err error) error {
	if errors.Is(err, badgerstore.ErrLocked) {
		return withHint(err, "the store is in use: stop the process that holds it (agentrt cell serve) and run this again")
	}
	return err
}
