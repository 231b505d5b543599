package main

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/internal/fileread"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/cellkey"
	"github.com/agentrt/agentrt/replay"
	"github.com/spf13/cobra"
)

func (c *cli) replayCmd() *cobra.Command {
	var moduleFile, trustFile string
	var quiet bool
	cmd := &cobra.Command{
		Use:   "replay RUN",
		Short: "Re-execute a run against its journal and verify it",
		Long: `Verify a run's journal (every entry decodes, every link of the hash chain, every
input and output hash, every signature, by a trusted cell) and re-execute the
recorded module with the recorded responses fed back to its imports, checking
at every call that the op and the input hash match. Nothing is dispatched.

RUN is a run id, a unique prefix of one, or "last" for the newest run.

Prints "verified N entries" and exits 0 when everything holds; otherwise names
the first bad entry, or the step where the module diverged and the guest
function that made the call.

With --module, replays the recorded history against a new build instead: the
answer to "is my new version compatible with the runs in flight?".

On a terminal, a progress bar on stderr counts the calls replayed; it is not
drawn when stdout or stderr is not a terminal, or with --quiet.`,
		Example: "  agentrt replay 0188c3\n  agentrt replay 0188c3 --module crawler-v2.wasm",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			eng, err := c.newEngine(ctx)
			if err != nil {
				return err
			}
			defer eng.Close(ctx)
			// The journal is read from the store, or through the process
			// that holds it; the module is re-executed here, on this
			// command's engine.
			st, run, err := c.openRunReader(ctx, args[0])
			if err != nil {
				return err
			}
			defer st.Close()
			trust, err := c.trust(trustFile)
			if err != nil {
				return err
			}
			j, err := replay.Load(ctx, st, run, trust)
			if err != nil {
				return err
			}
			code, err := st.Module(ctx, j.Summary.Header.ModuleSHA256)
			if err != nil {
				return err
			}
			bar := c.progress("replay", quiet)
			opts := replay.Options{Progress: bar.set}
			if moduleFile != "" {
				if opts.Code, err = fileread.Read(moduleFile, fileread.Module); err != nil {
					return err
				}
			}
			rep, err := j.Replay(ctx, eng, code, opts)
			bar.finish()
			if errors.Is(err, replay.ErrUnfinished) {
				return withHint(err, "the run is still going or was interrupted; its recorded part is intact (continue it with: agentrt resume RUN)")
			}
			var div *replay.DivergenceError
			if errors.As(err, &div) && len(div.Stack) > 0 {
				fmt.Fprintln(c.stderr, "wasm stack at the call:")
				for _, f := range div.Stack {
					fmt.Fprintf(c.stderr, "  %s\n", f)
				}
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(c.stdout, "verified %d entries (%d calls, %d signatures) of run %s\n", rep.Entries, rep.Calls, rep.Seals, rep.Run)
			return nil
		},
	}
	cmd.Flags().StringVar(&moduleFile, "module", "", "replay against this module instead of the recorded one")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "draw no progress bar")
	cmd.Flags().StringVar(&trustFile, "trust", "", "file of trusted cell keys, one authorized_keys line each (default: this cell's key)")
	c.engineFlag(cmd)
	return cmd
}

// trust returns the trusted keys for commands that open only the store:
// those in file, or else this cell's key.
func (c *cli) trust(file string) (journal.TrustFunc, error) {
	if file != "" {
		return c.trustWith(file, nil)
	}
	dir, err := c.data()
	if err != nil {
		return nil, err
	}
	key, err := cellkey.Load(filepath.Join(dir, cellkey.FileName))
	if err != nil {
		return nil, withHint(err, "this data directory has no cell key; pass the signing cell's key with --trust FILE")
	}
	return journal.TrustKeys(key.Public().(ed25519.PublicKey)), nil
}

func (c *cli) trustWith(file string, own ed25519.PublicKey) (journal.TrustFunc, error) {
	if file == "" {
		return journal.TrustKeys(own), nil
	}
	keys, err := readTrustFile(file)
	if err != nil {
		return nil, err
	}
	return journal.TrustKeys(keys...), nil
}

func statusName(s uint32) string { return abi.Status(s).String() }
