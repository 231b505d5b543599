package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentrt/agentrt/internal/wasmbuild"
	"github.com/spf13/cobra"
)

func (c *cli) buildCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "build DIR -o FILE.wasm",
		Short: "Compile an agent to a WebAssembly module",
		Long: `Compile the Go agent in DIR (a main package using guest-sdk/agent) for
GOOS=wasip1 GOARCH=wasm, reproducibly: the same source gives the same bytes
and so the same module hash in every run header.`,
		Example: "  agentrt build examples/crawler -o crawler.wasm",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			if out == "" {
				out = filepath.Base(filepath.Clean(dir)) + ".wasm"
			}
			if err := wasmbuild.Go(cmd.Context(), dir, out); err != nil {
				return err
			}
			info, err := os.Stat(out)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.stderr, "built %s (%d bytes)\n", out, info.Size())
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "module file to write (default DIR's name + .wasm)")
	return cmd
}
