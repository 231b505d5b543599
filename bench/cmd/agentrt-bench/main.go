// Command agentrt-bench measures agentrt's hot paths against their floors
// and writes bench/results.json and bench/results.md (make bench).
package main

import (
	"os"

	"github.com/agentrt/agentrt/bench"
)

func main() { os.Exit(bench.Main(os.Args[1:], os.Stdout, os.Stderr)) }
