package main

import (
	"crypto/ed25519"
	"fmt"

	"github.com/agentrt/agentrt/journal/cellkey"
	"github.com/spf13/cobra"
)

func (c *cli) keysCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "keys",
		Short: "Print this cell's public key as an authorized_keys line",
		Long: `Print the cell's ed25519 public key, its identity, as one OpenSSH
authorized_keys line. The key is created on first use in the data directory
(mode 0600). Collect these lines in a file to give auditors the keys they
trust (--trust FILE).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := c.data()
			if err != nil {
				return err
			}
			key, err := cellkey.LoadOrCreate(dir)
			if err != nil {
				return err
			}
			fmt.Fprintln(c.stdout, cellkey.AuthorizedKey(key.Public().(ed25519.PublicKey)))
			return nil
		},
	}
}
