package abi

// The ops of agentrt:mcp (SPEC.md §16): tools, resources and prompts of the
// Model Context Protocol servers the grant declares. The host is the MCP
// client; the guest names a server by its name in the grant and a tool by
// its name on that server. JSON values of the protocol (a tool's input
// schema, a call's arguments and content) travel as JSON text, as the
// server sent them: the host neither interprets nor re-encodes them beyond
// what the protocol requires.

// Op codes of agentrt:mcp.
const (
	OpMCPListTools    uint32 = 1
	OpMCPCallTool     uint32 = 2
	OpMCPReadResource uint32 = 3
	OpMCPGetPrompt    uint32 = 4
)

// MCPListToolsRequest is the request of mcp.list_tools: the server, by its
// name in the grant.
type MCPListToolsRequest struct {
	Server string `cbor:"server"`
}

// MCPListToolsResponse lists the tools of a server that the grant allows,
// in the server's order. Tools the server offers and the grant does not
// allow are left out.
type MCPListToolsResponse struct {
	Tools []MCPTool `cbor:"tools"`
}

// MCPTool is one tool's definition as the server gave it, and what the
// grant says of it.
type MCPTool struct {
	Name        string `cbor:"name"`
	Title       string `cbor:"title,omitempty"`
	Description string `cbor:"description,omitempty"`
	// InputSchema and OutputSchema are JSON Schema documents, as JSON text.
	InputSchema  string `cbor:"input_schema"`
	OutputSchema string `cbor:"output_schema,omitempty"`
	// Annotations are the server's hints (readOnlyHint, idempotentHint,
	// ...), as JSON text: shown, never trusted.
	Annotations string `cbor:"annotations,omitempty"`
	// Idempotent is what the grant says: a call a crash left in doubt is
	// sent again only when it is set.
	Idempotent bool `cbor:"idempotent,omitempty"`
	// Hash is the SHA-256 of the tool's definition, what a grant's pin
	// holds (SPEC.md §16.3).
	Hash []byte `cbor:"hash"`
}

// MCPCallToolRequest is the request of mcp.call_tool: the tool name on the
// server, and its arguments as a JSON object ("" for none).
type MCPCallToolRequest struct {
	Server    string `cbor:"server"`
	Tool      string `cbor:"tool"`
	Arguments string `cbor:"arguments,omitempty"`
}

// MCPCallToolResponse is a tool's result: IsError says the tool reported
// an error (the call itself succeeded); Content is the result's content
// blocks as a JSON array; Text joins the text blocks, one per line;
// Structured is the structured content as JSON text, when the tool gave
// one.
type MCPCallToolResponse struct {
	IsError    bool   `cbor:"is_error,omitempty"`
	Content    string `cbor:"content"`
	Text       string `cbor:"text"`
	Structured string `cbor:"structured,omitempty"`
}

// MCPReadResourceRequest is the request of mcp.read_resource.
type MCPReadResourceRequest struct {
	Server string `cbor:"server"`
	URI    string `cbor:"uri"`
}

// MCPReadResourceResponse holds the resource's contents.
type MCPReadResourceResponse struct {
	Contents []MCPResourceContents `cbor:"contents"`
}

// MCPResourceContents is one part of a resource: text or bytes.
type MCPResourceContents struct {
	URI      string `cbor:"uri"`
	MIMEType string `cbor:"mime_type,omitempty"`
	Text     string `cbor:"text,omitempty"`
	Blob     []byte `cbor:"blob,omitempty"`
}

// MCPGetPromptRequest is the request of mcp.get_prompt: the prompt's name
// and its arguments.
type MCPGetPromptRequest struct {
	Server    string      `cbor:"server"`
	Name      string      `cbor:"name"`
	Arguments []MCPPrompt `cbor:"arguments,omitempty"`
}

// MCPPrompt is one argument of a prompt, a name and its value.
type MCPPrompt struct {
	Name  string `cbor:"name"`
	Value string `cbor:"value"`
}

// MCPGetPromptResponse is a prompt's messages.
type MCPGetPromptResponse struct {
	Description string             `cbor:"description,omitempty"`
	Messages    []MCPPromptMessage `cbor:"messages"`
}

// MCPPromptMessage is one message of a prompt: its role ("user",
// "assistant"), its content block as JSON text and, when that block is
// text, the text.
type MCPPromptMessage struct {
	Role    string `cbor:"role"`
	Content string `cbor:"content"`
	Text    string `cbor:"text,omitempty"`
}
