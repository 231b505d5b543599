package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// modelToolName says whether name is what the model providers accept as
// a tool's name: 1 to 64 ASCII letters, digits, '_' or '-'. (A function,
// not a regexp: a package-level regexp is compiled at every agent's start,
// and `{1,64}` made that 2 to 4 ms of each run's guest time.)
func modelToolName(name string) bool {
	if len(name) < 1 || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

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
		if !modelToolName(name) {
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
