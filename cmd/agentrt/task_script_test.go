package main

import (
	"context"
	"time"

	"github.com/agentrt/agentrt/host/cell"
	"github.com/rogpeppe/go-internal/testscript"
)

// taskScriptCmds are the commands of the scripts that drive tasks in a
// cell daemon.
func taskScriptCmds() map[string]func(ts *testscript.TestScript, neg bool, args []string) {
	return map[string]func(ts *testscript.TestScript, neg bool, args []string){
		// wait-task TASK STATE waits until the task of the daemon on the
		// socket of $AGENTRT_DATA is in STATE, for at most 60 s; it fails
		// at once if the task reaches another final state.
		"wait-task": func(ts *testscript.TestScript, neg bool, args []string) {
			if neg || len(args) != 2 {
				ts.Fatalf("usage: wait-task TASK STATE")
			}
			cl, err := cell.Dial("unix:" + cell.SocketPath(ts.Getenv("AGENTRT_DATA")))
			ts.Check(err)
			want := cell.TaskState(args[1])
			deadline := time.Now().Add(60 * time.Second)
			for {
				tk, err := cl.Task(context.Background(), args[0])
				ts.Check(err)
				switch {
				case tk.State == want:
					return
				case tk.State.Final():
					ts.Fatalf("task %s is %s (%s), not %s", tk.ID, tk.State, tk.Reason, want)
				case time.Now().After(deadline):
					ts.Fatalf("task %s is still %s after 60 s, not %s", tk.ID, tk.State, want)
				}
				time.Sleep(20 * time.Millisecond)
			}
		},
	}
}
