package main

import (
	"github.com/agentrt/agentrt/host"
	"github.com/spf13/cobra"
)

// engineFlag adds --engine to a command that runs or re-executes modules
// in this process: the WebAssembly engine of the cell it opens.
func (c *cli) engineFlag(cmd *cobra.Command) {
	usage := "WebAssembly engine: wazero (default, pure Go) or wasmtime (cgo; agentrt built with -tags wasmtime"
	if host.EngineAvailable(host.EngineWasmtime) {
		usage += ", as this one is)"
	} else {
		usage += ", which this one is not)"
	}
	cmd.Flags().StringVar(&c.engine, "engine", "", usage+"; runs recorded under one replay under the other")
}
