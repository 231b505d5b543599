package provider

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/agentrt/agentrt/abi"
)

type respRequest struct {
	Model           string     `json:"model"`
	Instructions    string     `json:"instructions,omitempty"`
	Input           []respItem `json:"input"`
	Tools           []respTool `json:"tools,omitempty"`
	MaxOutputTokens uint32     `json:"max_output_tokens"`
	Temperature     *float64   `json:"temperature,omitempty"`
	TopP            *float64   `json:"top_p,omitempty"`
	Text            *respText  `json:"text,omitempty"`
	Store           bool       `json:"store"`
	Stream          bool       `json:"stream,omitempty"`
	Background      bool       `json:"background,omitempty"`
}

type respItem struct {
	Type      string        `json:"type"`
	Role      string        `json:"role,omitempty"`
	Content   []respContent `json:"content,omitempty"`
	CallID    string        `json:"call_id,omitempty"`
	Name      string        `json:"name,omitempty"`
	Arguments *string       `json:"arguments,omitempty"`
	Output    *string       `json:"output,omitempty"`
}

type respContent struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	ImageURL string `json:"image_url,omitempty"`
	Refusal  string `json:"refusal,omitempty"`
}

type respTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict"`
}

type respText struct {
	Format respFormat `json:"format"`
}

type respFormat struct {
	Type   string          `json:"type"`
	Name   string          `json:"name,omitempty"`
	Schema json.RawMessage `json:"schema,omitempty"`
	Strict bool            `json:"strict,omitempty"`
}

// responsesBody maps req onto Responses. store is false: the host keeps
// the conversation in its journal and sends it whole, so the provider need
// not keep it; except for a streamed call to a provider configured with
// background: true, whose response is stored for its stream to be resumed. Stop sequences are refused: Responses has none.
func (c *Client) responsesBody(req *abi.LLMRequest, stream bool) ([]byte, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if len(req.Stop) > 0 {
		return nil, fmt.Errorf("stop sequences: %w by OpenAI Responses", ErrUnsupported)
	}
	out := respRequest{Model: req.Model, MaxOutputTokens: req.MaxOutputTokens, Temperature: thousandths(req.Temperature), TopP: thousandths(req.TopP), Stream: stream, Input: []respItem{}}
	if stream && c.p.Background {
		// A background response is stored (the API requires it) so that
		// its stream can be read again after the connection is lost.
		out.Background, out.Store = true, true
	}
	for _, t := range req.Tools {
		if !json.Valid(t.Schema) {
			return nil, fmt.Errorf("tool %s: schema is not JSON", t.Name)
		}
		out.Tools = append(out.Tools, respTool{Type: "function", Name: t.Name, Description: t.Description, Parameters: t.Schema})
	}
	if f := req.Format; f != nil {
		switch f.Type {
		case abi.FormatText:
			out.Text = &respText{Format: respFormat{Type: "text"}}
		case abi.FormatJSON:
			out.Text = &respText{Format: respFormat{Type: "json_object"}}
		case abi.FormatJSONSchema:
			if !json.Valid(f.Schema) {
				return nil, fmt.Errorf("format: schema is not JSON")
			}
			out.Text = &respText{Format: respFormat{Type: "json_schema", Name: f.Name, Schema: f.Schema, Strict: f.Strict}}
		}
	}
	var system []string
	for _, m := range req.Messages {
		if m.Role == abi.RoleSystem {
			for _, p := range m.Content {
				system = append(system, p.Text)
			}
			continue
		}
		msg := respItem{Type: "message", Role: m.Role}
		flush := func() {
			if len(msg.Content) > 0 {
				out.Input = append(out.Input, msg)
				msg = respItem{Type: "message", Role: m.Role}
			}
		}
		for _, p := range m.Content {
			switch p.Type {
			case abi.PartText:
				t := "input_text"
				if m.Role == abi.RoleAssistant {
					t = "output_text"
				}
				msg.Content = append(msg.Content, respContent{Type: t, Text: p.Text})
			case abi.PartImage:
				url, err := c.dataURL(p)
				if err != nil {
					return nil, err
				}
				msg.Content = append(msg.Content, respContent{Type: "input_image", ImageURL: url})
			case abi.PartToolCall:
				flush()
				args := string(p.Arguments)
				out.Input = append(out.Input, respItem{Type: "function_call", CallID: p.ID, Name: p.Name, Arguments: &args})
			case abi.PartToolResult:
				flush()
				text := p.Text
				if p.IsError {
					text = "error: " + text // Responses has no error flag on an output
				}
				out.Input = append(out.Input, respItem{Type: "function_call_output", CallID: p.ID, Output: &text})
			}
		}
		flush()
	}
	out.Instructions = strings.Join(system, "\n\n")
	return json.Marshal(out)
}

type respUsage struct {
	InputTokens        uint64 `json:"input_tokens"`
	OutputTokens       uint64 `json:"output_tokens"`
	InputTokensDetails struct {
		CachedTokens uint64 `json:"cached_tokens"`
		// CacheWriteTokens are counted inside input_tokens, as cached_tokens are.
		CacheWriteTokens uint64 `json:"cache_write_tokens"`
	} `json:"input_tokens_details"`
	OutputTokensDetails struct {
		ReasoningTokens uint64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
}

func (u *respUsage) abi() abi.LLMUsage {
	if u == nil {
		return abi.LLMUsage{}
	}
	cached := min(u.InputTokensDetails.CachedTokens, u.InputTokens)
	written := min(u.InputTokensDetails.CacheWriteTokens, u.InputTokens-cached)
	return abi.LLMUsage{Input: u.InputTokens - cached - written, CacheRead: cached, CacheWrite: written, Output: u.OutputTokens, Reasoning: u.OutputTokensDetails.ReasoningTokens}
}

type respReply struct {
	ID                string `json:"id"`
	Object            string `json:"object"`
	Model             string `json:"model"`
	Status            string `json:"status"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Output []struct {
		Type      string        `json:"type"`
		CallID    string        `json:"call_id"`
		Name      string        `json:"name"`
		Arguments string        `json:"arguments"`
		Content   []respContent `json:"content"`
	} `json:"output"`
	Usage *respUsage `json:"usage"`
}

func (r *respReply) response() (abi.LLMResponse, error) {
	out := abi.LLMResponse{ID: r.ID, Model: r.Model, Content: []abi.LLMPart{}, Usage: r.Usage.abi()}
	refused, calls := false, false
	for _, it := range r.Output {
		switch it.Type {
		case "message":
			for _, c := range it.Content {
				switch c.Type {
				case "output_text":
					out.Content = append(out.Content, abi.LLMPart{Type: abi.PartText, Text: c.Text})
				case "refusal":
					refused = true
					out.Content = append(out.Content, abi.LLMPart{Type: abi.PartText, Text: c.Refusal})
				}
			}
		case "function_call":
			calls = true
			out.Content = append(out.Content, abi.LLMPart{Type: abi.PartToolCall, ID: it.CallID, Name: it.Name, Arguments: []byte(it.Arguments)})
		}
	}
	switch {
	case r.Status == "incomplete" && r.IncompleteDetails != nil && r.IncompleteDetails.Reason == "max_output_tokens":
		out.StopReason = abi.StopMaxTokens
	case r.Status == "incomplete" && r.IncompleteDetails != nil && r.IncompleteDetails.Reason == "content_filter":
		out.StopReason = abi.StopContentFilter
	case r.Status != "completed":
		out.StopReason = abi.StopOther
	case refused:
		out.StopReason = abi.StopRefusal
	case calls:
		out.StopReason = abi.StopToolUse
	default:
		out.StopReason = abi.StopEnd
	}
	return out, nil
}

func parseResponses(b []byte) (abi.LLMResponse, error) {
	var r respReply
	if err := json.Unmarshal(b, &r); err != nil {
		return abi.LLMResponse{}, fmt.Errorf("reply is not Responses JSON: %v", err)
	}
	if r.Object != "response" || r.Status == "" {
		return abi.LLMResponse{}, fmt.Errorf("reply is an object %q without a status, not a response", r.Object)
	}
	return r.response()
}

type respEvent struct {
	Type        string     `json:"type"`
	OutputIndex int        `json:"output_index"`
	Delta       string     `json:"delta"`
	Response    *respReply `json:"response"`
	Item        *struct {
		Type   string `json:"type"`
		CallID string `json:"call_id"`
		Name   string `json:"name"`
	} `json:"item"`
	Message string `json:"message"`
	Code    string `json:"code"`
}

// streamResponses reads a Responses event stream to its
// response.completed (or .incomplete). The final response is the one
// that event carries, whole; the chunks are the deltas on the way.
func streamResponses(r io.Reader, onChunk func(abi.LLMChunk) error) (abi.LLMResponse, error) {
	return streamResponsesFrom(r, onChunk, nil)
}

// streamResponsesFrom is streamResponses that tells onStart the response's
// id as soon as the stream names it (nil: no one asks).
func streamResponsesFrom(r io.Reader, onChunk func(abi.LLMChunk) error, onStart func(id string)) (abi.LLMResponse, error) {
	sr := newSSE(r, "response.completed")
	out := abi.LLMResponse{Content: []abi.LLMPart{}}
	textPart := map[int]int{}
	toolPart := map[int]int{}
	parts := 0
	emit := sink(onChunk)
	for {
		data, err := sr.next()
		if err != nil {
			return out, err
		}
		var ev respEvent
		if err := json.Unmarshal(data, &ev); err != nil {
			return out, &Error{Kind: abi.LLMMalformed, Msg: fmt.Sprintf("event %d is not JSON: %v", sr.events, err)}
		}
		switch ev.Type {
		case "response.created":
			if ev.Response != nil {
				out.ID, out.Model = ev.Response.ID, ev.Response.Model
				if onStart != nil {
					onStart(out.ID)
				}
			}
		case "response.output_text.delta", "response.refusal.delta":
			p, ok := textPart[ev.OutputIndex]
			if !ok {
				p = parts
				parts++
				textPart[ev.OutputIndex] = p
			}
			if err := emit(abi.LLMChunk{Type: abi.ChunkText, Index: uint32(p), Text: ev.Delta}); err != nil {
				return out, err
			}
		case "response.output_item.added":
			if ev.Item != nil && ev.Item.Type == "function_call" {
				p := parts
				parts++
				toolPart[ev.OutputIndex] = p
				if err := emit(abi.LLMChunk{Type: abi.ChunkToolCall, Index: uint32(p), ID: ev.Item.CallID, Name: ev.Item.Name}); err != nil {
					return out, err
				}
			}
		case "response.function_call_arguments.delta":
			p, ok := toolPart[ev.OutputIndex]
			if !ok {
				return out, &Error{Kind: abi.LLMMalformed, Msg: "arguments for an output item never added"}
			}
			if err := emit(abi.LLMChunk{Type: abi.ChunkToolCall, Index: uint32(p), Arguments: []byte(ev.Delta)}); err != nil {
				return out, err
			}
		case "response.completed", "response.incomplete":
			if ev.Response == nil {
				return out, &Error{Kind: abi.LLMMalformed, Msg: ev.Type + " without a response"}
			}
			resp, err := ev.Response.response()
			if err != nil {
				return out, err
			}
			u := resp.Usage
			if err := emit(abi.LLMChunk{Type: abi.ChunkUsage, Usage: &u}); err != nil {
				return resp, err
			}
			return resp, nil
		case "response.failed", "error":
			msg := ev.Message
			if ev.Response != nil {
				out.Usage = ev.Response.Usage.abi()
			}
			return out, &Error{Kind: abi.LLMServerError, Msg: fmt.Sprintf("in the stream: %s %s %s", ev.Type, ev.Code, msg)}
		}
	}
}
