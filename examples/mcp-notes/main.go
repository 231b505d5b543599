// Command mcp-notes is an example agent that uses the tools of an MCP
// server (agentrt:mcp): it lists the tools of the notes server its grant
// declares, saves the notes of its input with add_note, lists and reads
// them back with list_notes and read_note, and makes any further calls its
// input asks for (the tests ask for tools and servers the grant does not
// allow). Its output is the tools it was shown and every call with its
// result or error.
//
// The server is a native program (./server) that agentrt launches under
// its OS sandbox for the run, or one reached over streamable HTTP. Every
// tool call is an effect, journaled before it is sent, so a replay of this
// agent answers every call from the journal and reaches no server.
package main

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/agentrt/agentrt/guest-sdk/agent"
)

// Input is what the agent does.
type Input struct {
	// Server is the grant's name of the notes server; default "notes".
	Server string `json:"server,omitempty"`
	// Notes are saved, listed and read back, in order.
	Notes []Note `json:"notes"`
	// Calls are made after, each its result or error in the output.
	Calls []Call `json:"calls,omitempty"`
}

// Note is one note.
type Note struct {
	Title string `json:"title"`
	Text  string `json:"text"`
}

// Call is one tool call.
type Call struct {
	Server    string          `json:"server,omitempty"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// Output is what the agent saw.
type Output struct {
	Tools []Tool   `json:"tools"`
	Calls []Result `json:"calls"`
}

// Tool is a tool as the host listed it: the server's hints are shown, the
// grant's idempotent is what counts.
type Tool struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Idempotent  bool   `json:"idempotent"`
	Annotations string `json:"annotations,omitempty"`
}

// Result is one call's outcome: the tool's text, or the error and its
// kind (denied, in_doubt, failed, ...).
type Result struct {
	Server  string `json:"server"`
	Tool    string `json:"tool"`
	Text    string `json:"text,omitempty"`
	IsError bool   `json:"is_error,omitempty"`
	Error   string `json:"error,omitempty"`
	Kind    string `json:"kind,omitempty"`
}

func main() {
	agent.MainJSON(func(_ context.Context, in Input) (*Output, error) {
		server := in.Server
		if server == "" {
			server = "notes"
		}
		tools, err := agent.MCPListTools(server)
		if err != nil {
			return nil, err
		}
		out := &Output{Tools: []Tool{}, Calls: []Result{}}
		for _, t := range tools {
			out.Tools = append(out.Tools, Tool{Name: t.Name, Description: t.Description, Idempotent: t.Idempotent, Annotations: t.Annotations})
		}
		call := func(c Call) {
			if c.Server == "" {
				c.Server = server
			}
			r := Result{Server: c.Server, Tool: c.Tool}
			res, err := agent.MCPCallTool(c.Server, c.Tool, string(c.Arguments))
			if err != nil {
				r.Error, r.Kind = err.Error(), kind(err)
			} else {
				r.Text, r.IsError = res.Text, res.IsError
			}
			out.Calls = append(out.Calls, r)
		}
		for _, n := range in.Notes {
			args, _ := json.Marshal(n)
			call(Call{Tool: "add_note", Arguments: args})
		}
		call(Call{Tool: "list_notes"})
		for _, n := range in.Notes {
			args, _ := json.Marshal(map[string]string{"title": n.Title})
			call(Call{Tool: "read_note", Arguments: args})
		}
		for _, c := range in.Calls {
			call(c)
		}
		return out, nil
	})
}

// kind names the class of a host error.
func kind(err error) string {
	for _, k := range []struct {
		err  error
		name string
	}{
		{agent.ErrDenied, "denied"}, {agent.ErrInDoubt, "in_doubt"}, {agent.ErrFailed, "failed"},
		{agent.ErrBadRequest, "bad_request"}, {agent.ErrBudget, "budget"},
	} {
		if errors.Is(err, k.err) {
			return k.name
		}
	}
	return "other"
}
