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

A directory of Go files (a main package using guest-sdk/agent, in a module:
a go.mod in DIR or above it) is built with the go command for GOOS=wasip1
GOARCH=wasm, in any folder and offline: the guest SDK comes from this agentrt
binary, at its own version. The build reads the agent's go.mod and go.sum and
never writes them: it gives the go command a copy of the go.mod that replaces
the SDK's module (github.com/agentrt/agentrt/guest-sdk) with the SDK's source.
A go.mod that replaces the SDK itself, the agentrt repository's own go.mod, or
a go.work that applies is used as it is. The first build compiles the Go
runtime for wasip1 (5-10 s; the go build cache keeps it) and says so.

A directory of C files (including agentrt.h, or agentrt_loop.h for the loop
controller) is built with clang for wasm32-wasi against wasi-libc, with the
SDK's headers beside the sources, else those of the agentrt checkout they are
in, else those this binary carries.

A Cargo package (a Cargo.toml naming agentrt = "0.1") is built with cargo
build --offline --release for wasm32-wasi, the crate served from guest-sdk/rust
of the checkout it lies in, else from the copy this binary carries; the rustc
used is the first, of the one on PATH and /usr/bin/rustc, that has the
wasm32-wasi standard library. make deps installs these toolchains.

On a terminal (stdout and stderr both), a spinner on stderr shows the build
going on, with its time and what it does (compiling the Go runtime, a module
downloaded); elsewhere those notes are printed as lines.

agentrt new DIR writes an agent that builds at once.`,
		Example: "  agentrt build examples/crawler -o crawler.wasm\n  agentrt build examples/wordfreq-c -o wordfreq.wasm\n  agentrt build examples/wordfreq-rust -o wordfreq-rust.wasm\n  agentrt new hello && agentrt build hello -o hello.wasm",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			if out == "" {
				out = filepath.Base(filepath.Clean(dir)) + ".wasm"
			}
			opts := wasmbuild.Options{Progress: c.stderr}
			bar := c.spinner("build "+filepath.Base(filepath.Clean(dir)), false)
			if bar != nil {
				opts.Progress = &describer{fn: bar.describe}
			}
			_, err := wasmbuild.Build(cmd.Context(), dir, out, opts)
			bar.finish()
			if err != nil {
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
