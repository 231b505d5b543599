package main

import (
	"context"
	"maps"
	"time"

	"github.com/agentrt/agentrt/host/cell"
	"github.com/rogpeppe/go-internal/testscript"
)

// scriptCmds are the scripts' own commands.
func scriptCmds() map[string]func(ts *testscript.TestScript, neg bool, args []string) {
	cmds := tokenScriptCmds()
	maps.Copy(cmds, daemonScriptCmds())
	maps.Copy(cmds, forkScriptCmds())
	maps.Copy(cmds, taskScriptCmds())
	return cmds
}

// daemonScriptCmds are the commands of scripts that start a cell daemon
// in the background (exec agentrt cell serve &daemon&).
func daemonScriptCmds() map[string]func(ts *testscript.TestScript, neg bool, args []string) {
	return map[string]func(ts *testscript.TestScript, neg bool, args []string){
		// wait-cell waits until a cell daemon answers on the socket of
		// $AGENTRT_DATA, for at most 60 s.
		"wait-cell": func(ts *testscript.TestScript, neg bool, args []string) {
			if neg || len(args) != 0 {
				ts.Fatalf("usage: wait-cell")
			}
			cl, err := cell.Dial("unix:" + cell.SocketPath(ts.Getenv("AGENTRT_DATA")))
			ts.Check(err)
			deadline := time.Now().Add(60 * time.Second)
			for {
				ci, err := cl.Cell(context.Background())
				if err == nil && !ci.ControlOnly {
					return
				}
				if time.Now().After(deadline) {
					ts.Fatalf("no cell daemon answered in 60 s: %v", err)
				}
				time.Sleep(20 * time.Millisecond)
			}
		},
	}
}
