package main

import (
	"regexp"

	"github.com/rogpeppe/go-internal/testscript"
)

// forkScriptCmds are the commands of the fork script, which names runs it
// did not start by their ids.
func forkScriptCmds() map[string]func(ts *testscript.TestScript, neg bool, args []string) {
	return map[string]func(ts *testscript.TestScript, neg bool, args []string){
		// capture VAR REGEXP sets $VAR to the first group of the first
		// match of REGEXP in the last command's stdout.
		"capture": func(ts *testscript.TestScript, neg bool, args []string) {
			if neg || len(args) != 2 {
				ts.Fatalf("usage: capture VAR REGEXP")
			}
			m := regexp.MustCompile(args[1]).FindStringSubmatch(ts.ReadFile("stdout"))
			if len(m) < 2 {
				ts.Fatalf("capture: no match of %q in stdout", args[1])
			}
			ts.Setenv(args[0], m[1])
		},
	}
}
