// Command agentrt runs AI agents compiled to WebAssembly, durably and
// verifiably: every import call is journaled, signed and chained, and any
// run can be replayed and verified. Run `agentrt --help` for the commands.
package main

import "os"

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
