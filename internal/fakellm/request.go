package fakellm

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
)

// request is what the fake reads of a request body, in any API.
type request struct {
	api          string
	model        string
	stream       bool
	includeUsage bool // chat: stream_options.include_usage
	background   bool // responses
	store        bool // responses: store, true unless the request says false
	tools        []string
	toolsGiven   bool
	lastRole     string
	lastText     string
	bodySHA      string
	matchKey     string
	bodyLen      int
}

// invalidRequest is a body the API itself would refuse; it is answered 400
// in the API's shape.
type invalidRequest struct{ msg string }

func (e *invalidRequest) Error() string { return e.msg }

func invalid(format string, a ...any) error {
	return &invalidRequest{fmt.Sprintf(format, a...)}
}

// textOf returns the text of a content value: a string, or a list of
// parts whose text (and, for tool results, content or output) is joined.
func textOf(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type    string          `json:"type"`
		Text    string          `json:"text"`
		Content json.RawMessage `json:"content"`
		Output  json.RawMessage `json:"output"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		switch {
		case p.Text != "":
			b.WriteString(p.Text)
		case len(p.Content) > 0:
			b.WriteString(textOf(p.Content))
		case len(p.Output) > 0:
			b.WriteString(textOf(p.Output))
		}
	}
	return b.String()
}

// parseRequest reads body as api's request. A body the real API would
// refuse (not JSON, no model, no messages) returns an *invalidRequest.
func parseRequest(api string, body []byte) (*request, error) {
	var common struct {
		Model         string `json:"model"`
		Stream        bool   `json:"stream"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
		Background bool            `json:"background"`
		Store      *bool           `json:"store"`
		Messages   json.RawMessage `json:"messages"`
		Input      json.RawMessage `json:"input"`
		Tools      []struct {
			Name     string `json:"name"`
			Function *struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
		MaxTokens *int64 `json:"max_tokens"`
	}
	if err := json.Unmarshal(body, &common); err != nil {
		return nil, invalid("the body is not a JSON object: %v", err)
	}
	r := &request{api: api, model: common.Model, stream: common.Stream, background: common.Background, bodyLen: len(body)}
	r.store = common.Store == nil || *common.Store
	if api == APIResponses && r.background && !r.store {
		return nil, invalid("background: a background response must be stored (store: true)")
	}
	if common.Model == "" {
		return nil, invalid("model: a model is required")
	}
	if common.StreamOptions != nil {
		if !common.Stream {
			return nil, invalid("stream_options: only allowed when stream is true")
		}
		r.includeUsage = common.StreamOptions.IncludeUsage
	}
	r.toolsGiven = common.Tools != nil
	for _, t := range common.Tools {
		name := t.Name
		if t.Function != nil {
			name = t.Function.Name
		}
		r.tools = append(r.tools, name)
	}
	type message struct {
		Role       string          `json:"role"`
		Type       string          `json:"type"`
		Content    json.RawMessage `json:"content"`
		Output     json.RawMessage `json:"output"`
		ToolCalls  json.RawMessage `json:"tool_calls"`
		ToolCallID string          `json:"tool_call_id"`
	}
	var msgs []message
	switch api {
	case APIChat, APIMessages:
		if len(common.Messages) == 0 || json.Unmarshal(common.Messages, &msgs) != nil || len(msgs) == 0 {
			return nil, invalid("messages: a non-empty list of messages is required")
		}
		if api == APIMessages && common.MaxTokens == nil {
			return nil, invalid("max_tokens: Field required")
		}
		last := msgs[len(msgs)-1]
		r.lastRole, r.lastText = last.Role, textOf(last.Content)
	case APIResponses:
		var s string
		if json.Unmarshal(common.Input, &s) == nil {
			r.lastRole, r.lastText = "user", s
			break
		}
		if json.Unmarshal(common.Input, &msgs) != nil || len(msgs) == 0 {
			return nil, invalid("input: a string or a non-empty list of input items is required")
		}
		last := msgs[len(msgs)-1]
		switch last.Type {
		case "function_call_output":
			r.lastRole, r.lastText = "tool", textOf(last.Output)
		case "function_call":
			r.lastRole = "assistant"
		default:
			r.lastRole, r.lastText = last.Role, textOf(last.Content)
		}
	}
	sum := sha256.Sum256(body)
	r.bodySHA = hex.EncodeToString(sum[:])
	r.matchKey = matchKey(body)
	return r, nil
}

// matchKey hashes the body as canonical JSON (keys sorted, numbers as
// written) without the fields that only say how the answer is delivered
// (stream, stream_options, background), so that a call sent again after a
// cut stream, streamed or not, finds the turn it had.
func matchKey(body []byte) string {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var m map[string]any
	if dec.Decode(&m) != nil {
		sum := sha256.Sum256(body)
		return hex.EncodeToString(sum[:])
	}
	delete(m, "stream")
	delete(m, "stream_options")
	delete(m, "background")
	b, _ := json.Marshal(m)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// mismatch returns why r does not satisfy e, or "".
func (e *Expect) mismatch(r *request) string {
	if e == nil {
		return ""
	}
	switch {
	case e.API != "" && e.API != r.api:
		return fmt.Sprintf("expects the %s API, the request came to %s", e.API, r.api)
	case e.Model != "" && e.Model != r.model:
		return fmt.Sprintf("expects model %q, the request has %q", e.Model, r.model)
	case e.Stream != nil && *e.Stream != r.stream:
		return fmt.Sprintf("expects stream %v, the request has %v", *e.Stream, r.stream)
	case e.LastRole != "" && e.LastRole != r.lastRole:
		return fmt.Sprintf("expects the last message's role %q, the request's is %q", e.LastRole, r.lastRole)
	case e.LastText != "" && e.LastText != r.lastText:
		return fmt.Sprintf("expects the last message's text %q, the request's is %q", e.LastText, r.lastText)
	case e.LastTextContains != "" && !strings.Contains(r.lastText, e.LastTextContains):
		return fmt.Sprintf("expects the last message's text to contain %q, the request's is %q", e.LastTextContains, r.lastText)
	case e.Tools != nil && strings.Join(e.Tools, "\x00") != strings.Join(r.tools, "\x00"):
		return fmt.Sprintf("expects the tools [%s] offered, the request offers [%s]", strings.Join(e.Tools, ", "), strings.Join(r.tools, ", "))
	}
	return ""
}
