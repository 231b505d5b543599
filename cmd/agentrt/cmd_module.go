package main

import (
	"encoding/hex"
	"fmt"

	"github.com/agentrt/agentrt/host/cell"
	"github.com/spf13/cobra"
)

func (c *cli) moduleCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "module",
		Short: "Store agent modules in the cell by their sha256",
	}
	cmd.AddCommand(c.modulePushCmd())
	return cmd
}

func (c *cli) modulePushCmd() *cobra.Command {
	var target string
	cmd := &cobra.Command{
		Use:   "push MODULE.wasm",
		Short: "Store a module in the cell, checked and compiled, and print its sha256",
		Long: `Store a module in the cell under its sha256, which is printed on stdout. The
module is checked and compiled as a run would compile it (a module the cell
refuses is not stored); a daemon keeps it compiled in memory, so that the
first run of it starts without compiling. Runs can then name the module by
its hash (the API's "module_sha256"), and agentrt run sends only the hash of
a module the daemon holds.

With --cell the module goes to that daemon; without, to the daemon that holds
the data directory, or, when none does, into the data directory's store.`,
		Example: "  agentrt module push agent.wasm\n  agentrt module push agent.wasm --cell unix:$HOME/.local/share/agentrt/agentrt.sock",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			code, err := readModule(args[0])
			if err != nil {
				return err
			}
			if target == "" {
				cl, err := c.open(ctx, cell.Options{})
				if target = c.heldByDaemon(err, "the module goes to it"); target == "" {
					if err != nil {
						return err
					}
					defer cl.Close(ctx)
					sum, err := cl.Host.PutModule(ctx, code)
					if err != nil {
						return err
					}
					fmt.Fprintf(c.stderr, "stored in %s\n", cl.Dir)
					fmt.Fprintln(c.stdout, hex.EncodeToString(sum))
					return nil
				}
			}
			cl, err := c.dial(target)
			if err != nil {
				return err
			}
			mi, err := cl.PushModule(ctx, code)
			if err != nil {
				return remoteHint(err)
			}
			fmt.Fprintf(c.stderr, "stored in the cell at %s\n", target)
			fmt.Fprintln(c.stdout, mi.SHA256)
			return nil
		},
	}
	cmd.Flags().StringVar(&target, "cell", "", "push to a cell daemon (unix:DATA/agentrt.sock or http://127.0.0.1:PORT)")
	return cmd
}
