package main

import (
	"context"
	"io"
	"maps"
	"net"
	"net/http"
	"strconv"
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
		// free-port VAR sets VAR to a loopback TCP port no one listens on.
		"free-port": func(ts *testscript.TestScript, neg bool, args []string) {
			if neg || len(args) != 1 {
				ts.Fatalf("usage: free-port VAR")
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			ts.Check(err)
			ts.Setenv(args[0], strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
			ln.Close()
		},
		// scrape ADDR writes what http://ADDR/metrics answers to stdout,
		// waiting at most 60 s for it to answer.
		"scrape": func(ts *testscript.TestScript, neg bool, args []string) {
			if neg || len(args) != 1 {
				ts.Fatalf("usage: scrape ADDR")
			}
			deadline := time.Now().Add(60 * time.Second)
			for {
				resp, err := http.Get("http://" + args[0] + "/metrics")
				if err == nil {
					b, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					ts.Check(err)
					if resp.StatusCode != http.StatusOK {
						ts.Fatalf("GET /metrics: %s", resp.Status)
					}
					ts.Stdout().Write(b)
					return
				}
				if time.Now().After(deadline) {
					ts.Fatalf("no metrics on %s in 60 s: %v", args[0], err)
				}
				time.Sleep(20 * time.Millisecond)
			}
		},
	}
}
