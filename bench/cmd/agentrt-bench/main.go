// Command agentrt-bench measures agentrt's hot paths against their floors
// and writes bench/results.json and bench/results.md (make bench).
package main

import (
	"os"

	"github.com/agentrt/agentrt/bench"
	sandbox "github.com/agentrt/agentrt/native-sandbox"
)

// main serves as the sandbox helper too: figure 18 launches an MCP server
// under the sandbox.
func main() {
	sandbox.HelperMain()
	os.Exit(bench.Main(os.Args[1:], os.Stdout, os.Stderr))
}
