package main

import (
	"os"

	"github.com/agentrt/agentrt/capability"
	"github.com/rogpeppe/go-internal/testscript"
)

// tokenScriptCmds are the scripts' commands for attacks on tokens that no
// agentrt command performs.
func tokenScriptCmds() map[string]func(ts *testscript.TestScript, neg bool, args []string) {
	return map[string]func(ts *testscript.TestScript, neg bool, args []string){
		// drop-last-link IN OUT writes IN without its last link, its
		// proof kept: what the holder of an attenuated token who wants
		// its parent's rights would present.
		"drop-last-link": func(ts *testscript.TestScript, neg bool, args []string) {
			if neg || len(args) != 2 {
				ts.Fatalf("usage: drop-last-link IN OUT")
			}
			t, err := capability.Parse([]byte(ts.ReadFile(args[0])))
			ts.Check(err)
			if len(t.Links) < 2 {
				ts.Fatalf("%s has %d link: nothing to drop", args[0], len(t.Links))
			}
			t.Links = t.Links[:len(t.Links)-1]
			ts.Check(os.WriteFile(ts.MkAbs(args[1]), t.Bytes(), 0o600))
		},
	}
}
