package provider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/agentrt/agentrt/abi"
)

// AnthropicVersion is the anthropic-version header every Messages request
// carries: pinned, so that a change of the API's shape is a change here,
// reviewed, and not a surprise in production.
const AnthropicVersion = "2023-06-01"

type anthRequest struct {
	Model         string        `json:"model"`
	MaxTokens     uint32        `json:"max_tokens"`
	System        string        `json:"system,omitempty"`
	Messages      []anthMessage `json:"messages"`
	Tools         []anthTool    `json:"tools,omitempty"`
	Temperature   *float64      `json:"temperature,omitempty"`
	TopP          *float64      `json:"top_p,omitempty"`
	StopSequences []string      `json:"stop_sequences,omitempty"`
	Stream        bool          `json:"stream,omitempty"`
}

type anthMessage struct {
	Role    string      `json:"role"`
	Content []anthBlock `json:"content"`
}

type anthBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	Source    *anthSource     `json:"source,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   string          `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

type anthSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
}

type anthTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// anthropicBody maps req onto Messages: system messages become the
// top-level system text; a response format other than text is refused,
// since Messages has no such field in the pinned version.
func (c *Client) anthropicBody(req *abi.LLMRequest, stream bool) ([]byte, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if f := req.Format; f != nil && f.Type != abi.FormatText {
		return nil, fmt.Errorf("format %s: %w by Anthropic Messages (anthropic-version %s)", f.Type, ErrUnsupported, AnthropicVersion)
	}
	out := anthRequest{Model: req.Model, MaxTokens: req.MaxOutputTokens, Temperature: thousandths(req.Temperature), TopP: thousandths(req.TopP), StopSequences: req.Stop, Stream: stream}
	var system []string
	for _, t := range req.Tools {
		if !json.Valid(t.Schema) {
			return nil, fmt.Errorf("tool %s: schema is not JSON", t.Name)
		}
		out.Tools = append(out.Tools, anthTool{Name: t.Name, Description: t.Description, InputSchema: t.Schema})
	}
	for _, m := range req.Messages {
		if m.Role == abi.RoleSystem {
			for _, p := range m.Content {
				system = append(system, p.Text)
			}
			continue
		}
		msg := anthMessage{Role: m.Role}
		for _, p := range m.Content {
			switch p.Type {
			case abi.PartText:
				msg.Content = append(msg.Content, anthBlock{Type: "text", Text: p.Text})
			case abi.PartImage:
				url, err := c.dataURL(p)
				if err != nil {
					return nil, err
				}
				data := url[strings.Index(url, ",")+1:]
				msg.Content = append(msg.Content, anthBlock{Type: "image", Source: &anthSource{Type: "base64", MediaType: p.MediaType, Data: data}})
			case abi.PartToolCall:
				args := p.Arguments
				if len(args) == 0 {
					args = []byte("{}")
				}
				if !json.Valid(args) {
					return nil, fmt.Errorf("tool call %s: arguments are not JSON", p.ID)
				}
				msg.Content = append(msg.Content, anthBlock{Type: "tool_use", ID: p.ID, Name: p.Name, Input: args})
			case abi.PartToolResult:
				msg.Content = append(msg.Content, anthBlock{Type: "tool_result", ToolUseID: p.ID, Content: p.Text, IsError: p.IsError})
			}
		}
		out.Messages = append(out.Messages, msg)
	}
	out.System = strings.Join(system, "\n\n")
	return json.Marshal(out)
}

type anthUsage struct {
	InputTokens              *uint64 `json:"input_tokens"`
	OutputTokens             *uint64 `json:"output_tokens"`
	CacheCreationInputTokens *uint64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *uint64 `json:"cache_read_input_tokens"`
	// OutputTokensDetails.ThinkingTokens counts the thinking tokens that
	// output_tokens includes (abi.LLMUsage.Reasoning, also inside Output).
	OutputTokensDetails *struct {
		ThinkingTokens *uint64 `json:"thinking_tokens"`
	} `json:"output_tokens_details"`
}

// merge sets the fields u reports: message_delta's usage is cumulative
// and may omit fields, so a field it carries replaces the one known, and
// one it omits keeps it. Summing message_start's and message_delta's
// output_tokens, as some clients did, counts the first tokens twice.
func (u *anthUsage) merge(into *abi.LLMUsage) {
	if u == nil {
		return
	}
	if u.InputTokens != nil {
		into.Input = *u.InputTokens
	}
	if u.OutputTokens != nil {
		into.Output = *u.OutputTokens
	}
	if u.CacheCreationInputTokens != nil {
		into.CacheWrite = *u.CacheCreationInputTokens
	}
	if u.CacheReadInputTokens != nil {
		into.CacheRead = *u.CacheReadInputTokens
	}
	if d := u.OutputTokensDetails; d != nil && d.ThinkingTokens != nil {
		into.Reasoning = *d.ThinkingTokens
	}
}

type anthReply struct {
	Type       string      `json:"type"`
	ID         string      `json:"id"`
	Model      string      `json:"model"`
	Content    []anthBlock `json:"content"`
	StopReason *string     `json:"stop_reason"`
	Usage      *anthUsage  `json:"usage"`
}

func anthStop(s string) string {
	switch s {
	case "end_turn":
		return abi.StopEnd
	case "max_tokens":
		return abi.StopMaxTokens
	case "stop_sequence":
		return abi.StopSequence
	case "tool_use":
		return abi.StopToolUse
	case "refusal":
		return abi.StopRefusal
	case "pause_turn":
		return abi.StopPause
	}
	return abi.StopOther
}

func parseAnthropic(b []byte) (abi.LLMResponse, error) {
	var r anthReply
	if err := json.Unmarshal(b, &r); err != nil {
		return abi.LLMResponse{}, fmt.Errorf("reply is not Messages JSON: %v", err)
	}
	if r.Type != "message" || r.StopReason == nil {
		return abi.LLMResponse{}, fmt.Errorf("reply is of type %q without a stop_reason, not a message", r.Type)
	}
	out := abi.LLMResponse{ID: r.ID, Model: r.Model, Content: []abi.LLMPart{}, StopReason: anthStop(*r.StopReason)}
	r.Usage.merge(&out.Usage)
	for _, b := range r.Content {
		switch b.Type {
		case "text":
			out.Content = append(out.Content, abi.LLMPart{Type: abi.PartText, Text: b.Text})
		case "tool_use":
			out.Content = append(out.Content, abi.LLMPart{Type: abi.PartToolCall, ID: b.ID, Name: b.Name, Arguments: compactJSON(b.Input)})
		}
	}
	return out, nil
}

func compactJSON(b []byte) []byte {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return b
	}
	return buf.Bytes()
}

type anthEvent struct {
	Type         string     `json:"type"`
	Index        int        `json:"index"`
	Message      *anthReply `json:"message"`
	ContentBlock *anthBlock `json:"content_block"`
	Delta        struct {
		Type        string  `json:"type"`
		Text        string  `json:"text"`
		PartialJSON string  `json:"partial_json"`
		StopReason  *string `json:"stop_reason"`
	} `json:"delta"`
	Usage *anthUsage `json:"usage"`
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// streamAnthropic reads a Messages event stream to its message_stop. The
// stream's block indexes are Anthropic's; parts are numbered as the
// response holds them (thinking blocks, which this client does not
// return, take no part).
func streamAnthropic(r io.Reader, onChunk func(abi.LLMChunk) error) (abi.LLMResponse, error) {
	sr := newSSE(r, "message_stop")
	out := abi.LLMResponse{Content: []abi.LLMPart{}}
	part := map[int]int{}
	var stop string
	emit := sink(onChunk)
	for {
		data, err := sr.next()
		if err != nil {
			return out, err
		}
		var ev anthEvent
		if err := json.Unmarshal(data, &ev); err != nil {
			return out, &Error{Kind: abi.LLMMalformed, Msg: fmt.Sprintf("event %d is not JSON: %v", sr.events, err)}
		}
		switch ev.Type {
		case "message_start":
			if ev.Message == nil {
				return out, &Error{Kind: abi.LLMMalformed, Msg: "message_start without a message"}
			}
			out.ID, out.Model = ev.Message.ID, ev.Message.Model
			ev.Message.Usage.merge(&out.Usage)
		case "content_block_start":
			b := ev.ContentBlock
			if b == nil {
				return out, &Error{Kind: abi.LLMMalformed, Msg: "content_block_start without a block"}
			}
			switch b.Type {
			case "text":
				part[ev.Index] = len(out.Content)
				out.Content = append(out.Content, abi.LLMPart{Type: abi.PartText})
			case "tool_use":
				p := len(out.Content)
				part[ev.Index] = p
				out.Content = append(out.Content, abi.LLMPart{Type: abi.PartToolCall, ID: b.ID, Name: b.Name})
				if err := emit(abi.LLMChunk{Type: abi.ChunkToolCall, Index: uint32(p), ID: b.ID, Name: b.Name}); err != nil {
					return out, err
				}
			}
		case "content_block_delta":
			p, ok := part[ev.Index]
			if !ok {
				continue // a block this client does not return (thinking)
			}
			switch ev.Delta.Type {
			case "text_delta":
				out.Content[p].Text += ev.Delta.Text
				if err := emit(abi.LLMChunk{Type: abi.ChunkText, Index: uint32(p), Text: ev.Delta.Text}); err != nil {
					return out, err
				}
			case "input_json_delta":
				out.Content[p].Arguments = append(out.Content[p].Arguments, ev.Delta.PartialJSON...)
				if err := emit(abi.LLMChunk{Type: abi.ChunkToolCall, Index: uint32(p), Arguments: []byte(ev.Delta.PartialJSON)}); err != nil {
					return out, err
				}
			}
		case "message_delta":
			if ev.Delta.StopReason != nil {
				stop = *ev.Delta.StopReason
			}
			ev.Usage.merge(&out.Usage)
		case "message_stop":
			if stop == "" {
				return out, &Error{Kind: abi.LLMMalformed, Msg: "message_stop without a stop_reason"}
			}
			for i := range out.Content {
				if out.Content[i].Type == abi.PartToolCall && len(out.Content[i].Arguments) == 0 {
					out.Content[i].Arguments = []byte("{}")
				}
			}
			out.StopReason = anthStop(stop)
			u := out.Usage
			if err := emit(abi.LLMChunk{Type: abi.ChunkUsage, Usage: &u}); err != nil {
				return out, err
			}
			return out, nil
		case "error":
			msg := "error event"
			kind := abi.LLMServerError
			if ev.Error != nil {
				msg = ev.Error.Type + ": " + ev.Error.Message
				if ev.Error.Type == "rate_limit_error" {
					kind = abi.LLMRateLimited
				}
			}
			return out, &Error{Kind: kind, Msg: "in the stream: " + msg}
		}
	}
}
