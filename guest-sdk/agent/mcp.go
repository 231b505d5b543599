package agent

import "github.com/agentrt/agentrt/guest-sdk/abi"

// MCPTool is a tool of an MCP server as MCPListTools shows it: the
// server's definition (its schemas and annotations as JSON text), whether
// the grant declares it idempotent, and the hash a grant's pin holds.
// The server's annotations are hints: the host never acts on them.
type MCPTool = abi.MCPTool

// MCPResult is a tool's result: Text joins its text blocks, Content holds
// every block as a JSON array, Structured the structured content (JSON),
// and IsError says the tool reported an error.
type MCPResult = abi.MCPCallToolResponse

// MCPListTools lists the tools of the MCP server the grant declares as
// server, only those the grant allows. The host reads the server's
// definitions afresh; when the grant pins them and one changed, the call
// fails with an error matching ErrDenied that names the changed tools.
func MCPListTools(server string) ([]MCPTool, error) {
	var r abi.MCPListToolsResponse
	if err := call(mcpTransport, abi.CapMCP, abi.OpMCPListTools, &abi.MCPListToolsRequest{Server: server}, &r); err != nil {
		return nil, err
	}
	return r.Tools, nil
}

// MCPCallTool calls tool on the MCP server the grant declares as server,
// with arguments as a JSON object in text ("" for none). A tool the grant
// does not allow gives an error matching ErrDenied, and nothing is sent.
// The call is an effect, journaled before it is sent; if the run crashes
// while it is in flight, a resume sends it again only when the grant lists
// the tool as idempotent, and otherwise returns an error matching
// ErrInDoubt. A tool that reports an error is a success with IsError set.
func MCPCallTool(server, tool, arguments string) (*MCPResult, error) {
	var r abi.MCPCallToolResponse
	if err := call(mcpTransport, abi.CapMCP, abi.OpMCPCallTool, &abi.MCPCallToolRequest{Server: server, Tool: tool, Arguments: arguments}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// MCPReadResource reads the resource uri of server, which must lie under
// a prefix the grant allows.
func MCPReadResource(server, uri string) ([]abi.MCPResourceContents, error) {
	var r abi.MCPReadResourceResponse
	if err := call(mcpTransport, abi.CapMCP, abi.OpMCPReadResource, &abi.MCPReadResourceRequest{Server: server, URI: uri}, &r); err != nil {
		return nil, err
	}
	return r.Contents, nil
}

// MCPGetPrompt gets the prompt name of server, one the grant allows, with
// its arguments.
func MCPGetPrompt(server, name string, args ...abi.MCPPrompt) (*abi.MCPGetPromptResponse, error) {
	var r abi.MCPGetPromptResponse
	if err := call(mcpTransport, abi.CapMCP, abi.OpMCPGetPrompt, &abi.MCPGetPromptRequest{Server: server, Name: name, Arguments: args}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}
