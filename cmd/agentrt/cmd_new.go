package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/agentrt/agentrt/internal/scaffold"
	"github.com/spf13/cobra"
)

func (c *cli) newCmd() *cobra.Command {
	var opts scaffold.Options
	cmd := &cobra.Command{
		Use:   "new DIR [--lang " + strings.Join(scaffold.Languages, "|") + "]",
		Short: "Write a new agent that builds and runs at once",
		Long: `Write a new agent into DIR (created if need be): its source, grant.yaml, a
README with the commands that build, run, replay and verify it, and a test that
does all of that with the agentrt binary on PATH.

  --lang go   main.go, agent_test.go (go test), go.mod, grant.yaml, README.md
  --lang c    main.c, Makefile (make test), grant.yaml, README.md
  --lang rust src/main.rs, Cargo.toml, Cargo.lock, Makefile (make test: cargo
              cannot find the SDK crate without agentrt build), grant.yaml, README.md

The agent greets the name in its input and counts, in durable kv state, how
many times it has greeted it. It is named after DIR (its module, its .wasm file
and its kv namespace) unless --name says otherwise. A Go agent's go.mod requires
the guest SDK, which is not published: agentrt build supplies the SDK this
binary carries, offline, without changing the go.mod; a Rust agent's Cargo.toml
names agentrt = "0.1", which agentrt build serves from the crate it carries.

DIR must be empty or new: --force writes into a folder with files, replacing
those of the same names and leaving the others.`,
		Example: `  agentrt new hello
  cd hello && agentrt build . -o hello.wasm
  agentrt run hello.wasm --grant grant.yaml --input '{"name":"Ada"}'
  go test

  agentrt new greeter-c --lang c && make -C greeter-c test
  agentrt new greeter-rs --lang rust && make -C greeter-rs test`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			files, err := scaffold.Write(dir, opts)
			if errors.Is(err, scaffold.ErrNotEmpty) {
				return withHint(err, "write the agent into a new folder, or pass --force to write it into this one (files of the same names are replaced)")
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(c.stderr, "wrote %s: %s\n", dir, strings.Join(files, " "))
			name := opts.Name
			if name == "" {
				name = scaffold.Name(filepath.Base(mustAbs(dir)))
			}
			lang := opts.Lang
			if lang == "" {
				lang = scaffold.Languages[0]
			}
			input, test := `'{"name":"Ada"}'`, "go test"
			if lang != "go" {
				input, test = "Ada", "make test"
			}
			fmt.Fprintf(c.stderr, "next:\n  cd %s\n  agentrt build . -o %s.wasm\n  agentrt run %s.wasm --grant grant.yaml --input %s\n  %s    # builds, runs, replays and verifies it (README.md)\n",
				dir, name, name, input, test)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Lang, "lang", scaffold.Languages[0], "the agent's language: "+strings.Join(scaffold.Languages, ", "))
	f.StringVar(&opts.Name, "name", "", "the agent's name: its module, .wasm file and kv namespace (default DIR's name)")
	f.StringVar(&opts.Module, "module", "", "a Go agent's module path (default its name)")
	f.BoolVar(&opts.Force, "force", false, "write into a folder that is not empty, replacing files of the same names")
	return cmd
}

// mustAbs is filepath.Abs, or p when the working directory is gone.
func mustAbs(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
