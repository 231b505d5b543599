// Command research-agent is an example agent that answers a question by
// a tool-calling loop with a model: it calls the model (agentrt:llm) with
// three tools, fetch (a URL the grant's http section allows), read_note
// and write_note (notes in kv), runs the tools the model asks for, feeds
// the results back, and stops when the model answers. Its output is the
// answer with the sources it fetched.
//
// Every model call is an effect, journaled before it is sent; a resumed
// run is answered from the journal up to the call a crash cut off, which
// the host sends again, so no completed call is paid for twice. The API
// key stays in the cell (DATA/llm.yaml names where it comes from): the
// agent never sees it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/agentrt/agentrt/guest-sdk/abi"
	"github.com/agentrt/agentrt/guest-sdk/agent"
)

// Input is the question and how to ask it.
type Input struct {
	Question string `json:"question"`
	// Model is a model of the grant's llm section; Provider, if set, one
	// of its providers (else the grant's first).
	Model    string `json:"model"`
	Provider string `json:"provider,omitempty"`
	// Stream asks for the answers streamed (llm.complete, then llm.next).
	Stream bool `json:"stream,omitempty"`
	// MaxCalls bounds the model calls (default 10); MaxOutputTokens each
	// answer (default 1024, at most the grant's max_output_tokens).
	MaxCalls        int    `json:"max_calls,omitempty"`
	MaxOutputTokens uint32 `json:"max_output_tokens,omitempty"`
	// MCP, when set, names an MCP server of the grant (the mcp-notes
	// example's notes server, grant-mcp.yaml) whose tools replace the kv
	// notes: the model is offered them named MCP_TOOL (notes_add_note,
	// ...), and its calls go to the server through mcp.call_tool.
	MCP string `json:"mcp,omitempty"`
}

// Output is the answer with its sources.
type Output struct {
	Answer string `json:"answer"`
	// Sources are the URLs fetched with status 200, in the order first
	// fetched.
	Sources []string `json:"sources"`
	// Notes are the keys of the notes the model wrote.
	Notes     []string `json:"notes"`
	Calls     int      `json:"calls"`
	ToolCalls int      `json:"tool_calls"`
	Usage     Usage    `json:"usage"`
}

// Usage sums the usage the model reported for the calls of this run.
type Usage struct {
	Input      uint64 `json:"input"`
	Output     uint64 `json:"output"`
	CacheRead  uint64 `json:"cache_read,omitempty"`
	CacheWrite uint64 `json:"cache_write,omitempty"`
}

// maxPageBytes bounds the page text a fetch gives the model: the whole
// conversation is sent again on every call, so a long page would cost
// its size on every later call.
const maxPageBytes = 4000

const system = `You are a research assistant. Answer the user's question from sources you fetch with the fetch tool; ` +
	`keep what you learn in notes (read_note, write_note) so that a later question can use it. ` +
	`When you answer, name the URLs you relied on.`

var tools = []agent.LLMTool{
	{Name: "fetch", Description: "Fetch a web page (GET) and return its status, title and text.",
		Schema: []byte(`{"type":"object","properties":{"url":{"type":"string","description":"an http or https URL"}},"required":["url"],"additionalProperties":false}`)},
	{Name: "read_note", Description: "Read the note saved under a key, or learn that there is none.",
		Schema: []byte(`{"type":"object","properties":{"key":{"type":"string"}},"required":["key"],"additionalProperties":false}`)},
	{Name: "write_note", Description: "Save a note under a key, replacing any note there.",
		Schema: []byte(`{"type":"object","properties":{"key":{"type":"string"},"text":{"type":"string"}},"required":["key","text"],"additionalProperties":false}`)},
}

func main() {
	agent.MainJSON(research)
}

func research(_ context.Context, in Input) (*Output, error) {
	if in.Question == "" {
		return nil, errors.New(`input needs "question"`)
	}
	if in.Model == "" {
		return nil, errors.New(`input needs "model", one of the models the grant's llm section allows`)
	}
	if in.MaxCalls <= 0 {
		in.MaxCalls = 10
	}
	if in.MaxOutputTokens == 0 {
		in.MaxOutputTokens = 1024
	}
	r := &researcher{out: &Output{Sources: []string{}, Notes: []string{}}, seen: map[string]bool{}}
	offered := tools
	if in.MCP != "" {
		// MCP mode: fetch, and the server's tools instead of the notes.
		mt, funcs, err := agent.MCPTools(in.MCP, in.MCP+"_")
		if err != nil {
			return nil, fmt.Errorf("mcp server %s: %w", in.MCP, err)
		}
		offered = append([]agent.LLMTool{tools[0]}, mt...)
		r.mcp, r.mcpNotes = funcs, in.MCP+"_add_note"
	}
	msgs := []agent.LLMMessage{
		{Role: abi.RoleSystem, Content: []agent.LLMPart{{Type: abi.PartText, Text: system}}},
		{Role: abi.RoleUser, Content: []agent.LLMPart{{Type: abi.PartText, Text: in.Question}}},
	}
	for r.out.Calls < in.MaxCalls {
		req := &agent.LLMRequest{Model: in.Model, Provider: in.Provider, Messages: msgs, Tools: offered, MaxOutputTokens: in.MaxOutputTokens}
		resp, err := r.ask(req, in.Stream)
		if err != nil {
			return nil, fmt.Errorf("model call %d: %w", r.out.Calls+1, err)
		}
		calls := resp.ToolCalls()
		if len(calls) == 0 {
			r.out.Answer = resp.Text()
			agent.Logf("answered after %d model calls and %d tool calls, from %d sources", r.out.Calls, r.out.ToolCalls, len(r.out.Sources))
			return r.out, nil
		}
		msgs = append(msgs, agent.LLMMessage{Role: abi.RoleAssistant, Content: resp.Content})
		results := make([]agent.LLMPart, 0, len(calls))
		for _, c := range calls {
			text, failed := r.run(c)
			results = append(results, agent.LLMPart{Type: abi.PartToolResult, ID: c.ID, Text: text, IsError: failed})
		}
		msgs = append(msgs, agent.LLMMessage{Role: abi.RoleUser, Content: results})
	}
	return nil, fmt.Errorf("the model did not answer within %d calls (max_calls)", in.MaxCalls)
}

type researcher struct {
	out  *Output
	seen map[string]bool
	// mcp are the MCP server's tools in MCP mode, by the model's names;
	// mcpNotes is the name of its add_note, whose notes count as Notes.
	mcp      map[string]agent.ToolFunc
	mcpNotes string
}

// ask makes one model call. A stream the provider cut, or one a crash cut
// and the resumed run cannot continue, is asked again from the start: the
// chunks already read are a prefix of an answer that was never completed.
func (r *researcher) ask(req *agent.LLMRequest, stream bool) (*agent.LLMResponse, error) {
	for attempt := 1; ; attempt++ {
		var resp *agent.LLMResponse
		var err error
		if stream {
			resp, err = agent.LLMStream(req, nil)
		} else {
			resp, err = agent.LLMComplete(req)
		}
		if errors.Is(err, agent.ErrStreamInterrupted) && attempt < 3 {
			agent.Logf("model call %d: %v; asking again", r.out.Calls+1, err)
			continue
		}
		if err != nil {
			return nil, err
		}
		r.out.Calls++
		u := resp.Usage
		r.out.Usage.Input += u.Input
		r.out.Usage.Output += u.Output
		r.out.Usage.CacheRead += u.CacheRead
		r.out.Usage.CacheWrite += u.CacheWrite
		return resp, nil
	}
}

// run runs one tool call and returns its result for the model, and
// whether it failed. A failure is the model's to read (a page the grant
// does not allow, a note that is not there), not the run's, unless the
// host itself fails.
func (r *researcher) run(c agent.LLMPart) (string, bool) {
	r.out.ToolCalls++
	var args struct{ URL, Key, Text string }
	if err := json.Unmarshal(c.Arguments, &args); err != nil {
		return fmt.Sprintf("the arguments are not a JSON object: %v", err), true
	}
	if fn := r.mcp[c.Name]; fn != nil {
		text, err := fn(context.Background(), c.Arguments)
		if err != nil {
			return err.Error(), true
		}
		if c.Name == r.mcpNotes {
			var a struct{ Title string }
			_ = json.Unmarshal(c.Arguments, &a)
			r.out.Notes = append(r.out.Notes, a.Title)
		}
		return text, false
	}
	if r.mcp != nil && c.Name != "fetch" {
		return fmt.Sprintf("there is no tool %q: use fetch or the tools of the mcp server", c.Name), true
	}
	switch c.Name {
	case "fetch":
		return r.fetch(args.URL)
	case "read_note":
		if args.Key == "" {
			return "read_note needs a key", true
		}
		b, err := agent.KVGet("note/" + args.Key)
		if errors.Is(err, agent.ErrNotFound) {
			return "there is no note under " + args.Key, false
		}
		if err != nil {
			return err.Error(), true
		}
		return string(b), false
	case "write_note":
		if args.Key == "" {
			return "write_note needs a key", true
		}
		if err := agent.KVPut("note/"+args.Key, []byte(args.Text)); err != nil {
			return err.Error(), true
		}
		r.out.Notes = append(r.out.Notes, args.Key)
		return "saved", false
	}
	return fmt.Sprintf("there is no tool %q: use fetch, read_note or write_note", c.Name), true
}

func (r *researcher) fetch(url string) (string, bool) {
	if url == "" {
		return "fetch needs a url", true
	}
	resp, err := agent.HTTPGet(url)
	if errors.Is(err, agent.ErrInDoubt) {
		// A crash left this GET in doubt; it changes nothing on the
		// server, so it is asked again (a new call, with a new key).
		resp, err = agent.HTTPGet(url)
	}
	switch {
	case errors.Is(err, agent.ErrDenied):
		return "this agent's grant does not allow " + url, true
	case err != nil:
		return err.Error(), true
	}
	if resp.Status != 200 {
		return fmt.Sprintf("status %d", resp.Status), true
	}
	if !r.seen[url] {
		r.seen[url] = true
		r.out.Sources = append(r.out.Sources, url)
	}
	return pageText(string(resp.Body)), false
}

var (
	titleRE = regexp.MustCompile(`<title>([^<]*)</title>`)
	headRE  = regexp.MustCompile(`(?s)<head>.*?</head>`)
	tagRE   = regexp.MustCompile(`<[^>]*>`)
	spaceRE = regexp.MustCompile(`\s+`)
)

// pageText is what the model reads of a page: its title and its text
// without markup, at most maxPageBytes.
func pageText(html string) string {
	title := ""
	if m := titleRE.FindStringSubmatch(html); m != nil {
		title = m[1]
	}
	text := headRE.ReplaceAllString(html, " ")
	text = strings.TrimSpace(spaceRE.ReplaceAllString(tagRE.ReplaceAllString(text, " "), " "))
	if len(text) > maxPageBytes {
		text = text[:maxPageBytes] + " [cut]"
	}
	return "title: " + title + "\n\n" + text
}
