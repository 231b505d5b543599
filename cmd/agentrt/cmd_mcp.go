package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/caps/mcp"
	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/host/cell/mcpserve"
	"github.com/agentrt/agentrt/internal/fileread"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
)

func (c *cli) mcpCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Model Context Protocol servers of grants",
	}
	cmd.AddCommand(c.mcpPinCmd(), c.mcpServeCmd())
	return cmd
}

func (c *cli) mcpServeCmd() *cobra.Command {
	var tokenFile, httpAddr string
	cmd := &cobra.Command{
		Use:   "serve --token FILE [--http 127.0.0.1:PORT]",
		Short: "Serve this cell as an MCP server on stdio, to one client under its token",
		Long: `Serve the cell to a Model Context Protocol client (an IDE, a chat
application) on stdin and stdout: the client launches this command and speaks
MCP to it. Its tools:

  start_run        start a run of a module the cell holds (agentrt module push
                   prints its SHA-256), with an input and a grant
  list_runs        the runs this client started
  run_summary      a run's journal summarized (as journal show --summary)
  verify_run       replay a run and verify its journal (as agentrt replay)
  list_approvals   the approvals the client's runs wait for, with the
                   statements to sign
  answer_approval  relay an approver's signed vote (ssh-keygen -Y sign)

Every call passes the gate under the client's token (--token): a capability
token issued by this cell's key (or a key of DATA/token_roots) for this cell,
carrying its key, as agentrt token issue writes it. Each run the client
starts gets an attenuation of it, so a grant that asks for more than the token
allows is refused, and every call of the run is gated by both. The client
sees only the runs it started (they are recorded with the origin mcp and the
client's id, the first 16 hex digits of the token's SHA-256), and counts no
vote of its own: a vote counts only when an approver of the cell signed it.

With --http the tools are served as streamable HTTP at http://ADDR/mcp, on
a loopback address only. Each request must carry Authorization: Bearer B,
where B is printed at start (the hex SHA-256 of "agentrt-mcp-serve-http",
a NUL byte and the token file's bytes: only the token's holder can compute
it); a request with an Origin header (a browser's page) or a Host that is
not loopback (DNS rebinding) is refused.

The runs execute in this process, on this data directory, while it serves:
not while a cell daemon holds the directory. When the client disconnects,
runs still going are stopped and stay journaled (agentrt resume).`,
		Example: `  agentrt token issue --caps client-caps.yaml -o client.token
  agentrt mcp serve --token client.token
  agentrt mcp serve --token client.token --http 127.0.0.1:8765

  # in the client's MCP configuration:
  {"command": "agentrt", "args": ["mcp", "serve", "--token", "/path/to/client.token"]}`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			tok, err := fileread.Read(tokenFile, fileread.Token)
			if err != nil {
				return err
			}
			cl, err := c.open(ctx, cell.Options{})
			if err != nil {
				return err
			}
			defer cl.Close(context.WithoutCancel(ctx))
			srv, err := mcpserve.New(cl, mcpserve.Options{Token: tok})
			if err != nil {
				return withHint(err, "issue the client a token of this cell: agentrt token issue --caps CAPS.yaml -o FILE")
			}
			defer srv.Close()
			version := fmt.Sprintf("abi-%d", abi.Version)
			if httpAddr != "" {
				return c.mcpServeHTTP(ctx, srv, httpAddr, hex.EncodeToString(cl.Public()), version, tok)
			}
			fmt.Fprintf(c.stderr, "agentrt mcp serve: cell %s, client %s, on stdio\n", hex.EncodeToString(cl.Public()), srv.Client())
			err = srv.MCP(version).Run(ctx, &sdk.IOTransport{Reader: io.NopCloser(c.stdin), Writer: nopWriteCloser{c.stdout}})
			if errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		},
	}
	cmd.Flags().StringVar(&httpAddr, "http", "", "serve streamable HTTP at http://ADDR/mcp instead of stdio; ADDR is loopback only (127.0.0.1:PORT)")
	cmd.Flags().StringVar(&tokenFile, "token", "", "the client's capability token, carrying its key (agentrt token issue -o FILE)")
	_ = cmd.MarkFlagRequired("token")
	return cmd
}

// mcpServeHTTP serves srv at http://addr/mcp until ctx ends.
func (c *cli) mcpServeHTTP(ctx context.Context, srv *mcpserve.Server, addr, cellKey, version string, tok []byte) error {
	if err := mcpserve.CheckListen(addr); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv.Handler(version), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(c.stderr, "agentrt mcp serve: cell %s, client %s, on http://%s/mcp\nAuthorization: Bearer %s\n", cellKey, srv.Client(), ln.Addr(), mcpserve.Bearer(tok))
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case <-ctx.Done():
		hs.Close()
		return nil
	case err := <-errc:
		return err
	}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

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

An http server's credential (credential:) is the cell's, from
DATA/mcp.yaml, as a run's would be; a stdio server whose paths reach the
data directory is not launched.`,
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
			// An http server is reached with the cell's credential, as
			// a run would reach it.
			deps := mcp.Deps{}
			if dir, err := c.data(); err == nil {
				deps.DataDir = dir
				if deps.Credentials, err = mcp.LoadCredentials(filepath.Join(dir, mcp.CredentialsFile)); err != nil {
					return err
				}
			}
			pins, err := mcp.Pins(cmd.Context(), s, deps)
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
