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
		Long: `Compile the agent in DIR to a wasip1 module, reproducibly: the same source
gives the same bytes and so the same module hash in every run header.

A directory of Go files (a main package using guest-sdk/agent) is built with the
go command for GOOS=wasip1 GOARCH=wasm. A directory of C files (including
guest-sdk/c/agentrt.h) is built with clang for wasm32-wasi against wasi-libc.
A Cargo package (a Cargo.toml naming agentrt = "0.1") is built with cargo
build --offline --release for wasm32-wasi, the crate served from guest-sdk/rust;
the rustc used is the first, of the one on PATH and /usr/bin/rustc, that has
the wasm32-wasi standard library. make deps installs these toolchains.`,
		Example: "  agentrt build examples/crawler -o crawler.wasm\n  agentrt build examples/wordfreq-c -o wordfreq.wasm\n  agentrt build examples/wordfreq-rust -o wordfreq-rust.wasm",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			if out == "" {
				out = filepath.Base(filepath.Clean(dir)) + ".wasm"
			}
			lang, err := wasmbuild.Detect(dir)
			if err != nil {
				return err
			}
			build := wasmbuild.Go
			switch lang {
			case "c":
				build = wasmbuild.C
			case "rust":
				build = wasmbuild.Rust
			}
			if err := build(cmd.Context(), dir, out); err != nil {
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
