package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
)

// modelToolName is what the model providers accept as a tool's name.
var modelToolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// MCPTools offers the tools of an MCP server to a model: it lists the
// tools of server that the grant allows (MCPListTools) and returns them as
// tool definitions for an LLMRequest, each named prefix + the tool's name
// with the server's description and input schema, and the ToolFuncs, by
// those names, that route the model's calls to MCPCallTool (for ToolStep).
//
// A call's result is the tool's text, or its structured content (JSON)
// when it has no text; a result the tool reports as an error (IsError),
// and a call the host refuses or leaves in doubt, is told to the model as
// a failed tool result. Only the grant's tools are listed, so the model is
// never offered one the host would refuse. A tool whose name, with the
// prefix, is not 1-64 letters, digits, '_' or '-' (what the providers
// accept) is an error naming it: choose another prefix, or call it with
// MCPCallTool.
func MCPTools(server, prefix string) ([]LLMTool, map[string]ToolFunc, error) {
	listed, err := MCPListTools(server)
	if err != nil {
		return nil, nil, err
	}
	tools := make([]LLMTool, 0, len(listed))
	funcs := make(map[string]ToolFunc, len(listed))
	for _, t := range listed {
		name := prefix + t.Name
		if !modelToolName.MatchString(name) {
			return nil, nil, fmt.Errorf("agent: mcp server %s: tool %q named %q for the model, which accepts 1-64 letters, digits, '_' or '-'", server, t.Name, name)
		}
		if funcs[name] != nil {
			return nil, nil, fmt.Errorf("agent: mcp server %s: two tools named %q for the model", server, name)
		}
		schema := []byte(t.InputSchema)
		if len(schema) == 0 || !json.Valid(schema) {
			schema = []byte(`{"type":"object"}`)
		}
		tools = append(tools, LLMTool{Name: name, Description: t.Description, Schema: schema})
		tool := t.Name
		funcs[name] = func(_ context.Context, arguments []byte) (string, error) {
			res, err := MCPCallTool(server, tool, string(arguments))
			if err != nil {
				return "", err
			}
			out := res.Text
			if out == "" && res.Structured != "" {
				out = res.Structured
			}
			if res.IsError {
				if out == "" {
					out = "the tool reported an error"
				}
				return "", errors.New(out)
			}
			return out, nil
		}
	}
	return tools, funcs, nil
}
