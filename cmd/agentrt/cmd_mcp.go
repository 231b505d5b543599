package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/caps/mcp"
	"github.com/spf13/cobra"
)

func (c *cli) mcpCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Model Context Protocol servers of grants",
	}
	cmd.AddCommand(c.mcpPinCmd())
	return cmd
}

func (c *cli) mcpPinCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pin GRANT.yaml SERVER",
		Short: "Print the current hashes of an MCP server's tool definitions, for its pin",
		Long: `Connect to the MCP server a grant file declares (a stdio server launched under
the sandbox, as a run would launch it; an http server at its URL) and print the
SHA-256 of each of its tool definitions (abi/SPEC.md 16.3), as the grant's pin
holds them: a YAML map of the granted tools, ready to paste under the server's
entry as pin:. Tools the server offers and the grant does not allow follow as
comments.

Read the definitions before you pin them: a pin says "these definitions, and
no others". When a pinned definition changes, every call to the server is
refused, naming the tools that changed, until the pin is updated.

An http server's credential (credential:) is not read by this command; a
server that needs one is refused with the server's own error.`,
		Example: "  agentrt mcp pin grant.yaml notes",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			g, err := host.LoadGrant(args[0])
			if err != nil {
				return err
			}
			var s *mcp.Server
			if g.MCP != nil {
				for i := range g.MCP.Servers {
					if g.MCP.Servers[i].Name == args[1] {
						s = &g.MCP.Servers[i]
					}
				}
			}
			if s == nil {
				return fmt.Errorf("%s declares no mcp server %q (hint: list it under mcp: {servers: [{name: %s, ...}]})", args[0], args[1], args[1])
			}
			pins, err := mcp.Pins(cmd.Context(), s, mcp.Deps{})
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 8, 1, ' ', 0)
			fmt.Fprintln(w, "pin:")
			for _, p := range pins {
				if p.Granted {
					fmt.Fprintf(w, "  %s:\t%s\n", p.Tool, p.Hash)
				}
			}
			for _, p := range pins {
				if !p.Granted {
					fmt.Fprintf(w, "  # %s:\t%s\t(not granted)\n", p.Tool, p.Hash)
				}
			}
			return w.Flush()
		},
	}
	return cmd
}
