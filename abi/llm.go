package abi

import (
	"errors"
	"fmt"
	"strings"
)

// The agentrt:llm capability (SPEC.md §13): model calls, provider
// neutral, streamed or not.

// Op codes of agentrt:llm: llm.complete makes one model call (an effect);
// llm.next continues the stream a streamed llm.complete opened (pure: it
// reads what the provider sends, and its answer is journaled and replayed).
const (
	OpLLMComplete uint32 = 1
	OpLLMNext     uint32 = 2
)

// Roles of an LLMMessage.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Types of an LLMPart.
const (
	PartText       = "text"
	PartImage      = "image"
	PartToolCall   = "tool_call"
	PartToolResult = "tool_result"
)

// Types of an LLMFormat.
const (
	FormatText       = "text"
	FormatJSON       = "json"
	FormatJSONSchema = "json_schema"
)

// Stop reasons of an LLMResponse: a closed set, which each provider's own
// values map onto (SPEC.md §13.3). A value a provider adds later maps to
// StopOther, never to a new string the guest cannot know.
const (
	StopEnd           = "end"            // the model finished its turn
	StopMaxTokens     = "max_tokens"     // max_output_tokens was reached
	StopSequence      = "stop_sequence"  // one of the request's stop sequences
	StopToolUse       = "tool_use"       // the model asks for tool calls
	StopRefusal       = "refusal"        // the model refused
	StopContentFilter = "content_filter" // the provider filtered the output
	StopPause         = "pause"          // the provider paused a long turn (Anthropic pause_turn)
	StopOther         = "other"          // anything else the provider said
)

// StopReasons lists every stop reason, in a stable order.
var StopReasons = []string{StopEnd, StopMaxTokens, StopSequence, StopToolUse, StopRefusal, StopContentFilter, StopPause, StopOther}

// Types of an LLMChunk.
const (
	ChunkText     = "text"
	ChunkToolCall = "tool_call"
	ChunkUsage    = "usage"
)

// LLMPart is one piece of a message: text, an image by hash, a tool call
// (from the assistant) or a tool result (from the user). Fields a type
// does not use are absent.
type LLMPart struct {
	// ID is the tool call's id (tool_call), or the id of the call a
	// tool_result answers.
	ID string `cbor:"id,omitempty"`
	// Name is the tool called (tool_call).
	Name string `cbor:"name,omitempty"`
	// Text is the text (text), or the tool's output (tool_result).
	Text string `cbor:"text,omitempty"`
	Type string `cbor:"type"`
	// SHA256 names an image by the hash of its bytes (image), which the
	// host resolves from the run's blobs; the bytes never travel in the
	// request.
	SHA256 []byte `cbor:"sha256,omitempty"`
	// IsError marks a tool result that reports a failure (tool_result).
	IsError bool `cbor:"is_error,omitempty"`
	// Arguments are the call's arguments as JSON text (tool_call).
	Arguments []byte `cbor:"arguments,omitempty"`
	// MediaType is the image's type: image/png, image/jpeg, image/gif or
	// image/webp (image).
	MediaType string `cbor:"media_type,omitempty"`
}

// LLMMessage is one turn of the conversation.
type LLMMessage struct {
	Role    string    `cbor:"role"`
	Content []LLMPart `cbor:"content"`
}

// LLMTool is a tool the model may call.
type LLMTool struct {
	Name        string `cbor:"name"`
	Schema      []byte `cbor:"schema"` // JSON Schema of the arguments, as JSON text
	Description string `cbor:"description,omitempty"`
}

// LLMFormat asks for output of a kind: text, any JSON object, or JSON
// that follows Schema.
type LLMFormat struct {
	Name   string `cbor:"name,omitempty"` // json_schema: the schema's name
	Type   string `cbor:"type"`
	Schema []byte `cbor:"schema,omitempty"` // json_schema: JSON text
	Strict bool   `cbor:"strict,omitempty"` // json_schema: ask the provider to enforce it
}

// LLMRequest is the request of llm.complete. Sampling values are integers
// in thousandths (CBOR bodies carry no floats, SPEC.md §6.1 rule 8):
// Temperature 700 is 0.7. A nil pointer leaves the provider's default.
type LLMRequest struct {
	Model    string       `cbor:"model"`
	Tools    []LLMTool    `cbor:"tools,omitempty"`
	Stop     []string     `cbor:"stop,omitempty"`
	TopP     *uint32      `cbor:"top_p,omitempty"`  // thousandths, 0..1000
	Format   *LLMFormat   `cbor:"format,omitempty"` // absent: text
	Stream   bool         `cbor:"stream,omitempty"`
	Messages []LLMMessage `cbor:"messages"`
	Provider string       `cbor:"provider,omitempty"` // a provider of the cell's llm.yaml; absent: the grant's first
	// MaxOutputTokens bounds the answer; 0 is refused (every call needs
	// a bound for the budget's reservation).
	MaxOutputTokens uint32  `cbor:"max_output_tokens"`
	Temperature     *uint32 `cbor:"temperature,omitempty"` // thousandths, 0..2000
}

// LLMUsage counts the tokens of one call, as the provider reported them.
// Input counts only the input tokens billed at the input price: the total
// input is Input + CacheRead + CacheWrite. Output counts every output
// token billed, reasoning included; Reasoning is the part of Output the
// model spent reasoning.
type LLMUsage struct {
	Input      uint64 `cbor:"input"`
	Output     uint64 `cbor:"output"`
	Reasoning  uint64 `cbor:"reasoning,omitempty"`
	CacheRead  uint64 `cbor:"cache_read,omitempty"`
	CacheWrite uint64 `cbor:"cache_write,omitempty"`
}

// Add returns the sum of u and v.
func (u LLMUsage) Add(v LLMUsage) LLMUsage {
	return LLMUsage{Input: u.Input + v.Input, Output: u.Output + v.Output, Reasoning: u.Reasoning + v.Reasoning,
		CacheRead: u.CacheRead + v.CacheRead, CacheWrite: u.CacheWrite + v.CacheWrite}
}

// LLMResponse answers llm.complete. Content holds the answer's text and
// tool_call parts in the order the model produced them.
type LLMResponse struct {
	ID      string    `cbor:"id"` // the provider's response id
	Model   string    `cbor:"model"`
	Usage   LLMUsage  `cbor:"usage"`
	Content []LLMPart `cbor:"content"`
	// Provider is the cell's provider (llm.yaml) that answered, and
	// Credential the id of the credential the call was made with
	// ("env:OPENAI_API_KEY"), never the key: what the journal records
	// of where the call went.
	Provider   string `cbor:"provider,omitempty"`
	Credential string `cbor:"credential,omitempty"`
	StopReason string `cbor:"stop_reason"`
}

// ToolCalls returns the tool_call parts of r's content.
func (r *LLMResponse) ToolCalls() []LLMPart {
	var out []LLMPart
	for _, p := range r.Content {
		if p.Type == PartToolCall {
			out = append(out, p)
		}
	}
	return out
}

// Text returns the text parts of r's content, joined.
func (r *LLMResponse) Text() string {
	var b strings.Builder
	for _, p := range r.Content {
		if p.Type == PartText {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// LLMChunk is one piece of a streamed answer. Index is the content part
// of the final LLMResponse it extends: a text chunk appends Text to that
// part; the first tool_call chunk of a part carries ID and Name, and
// every one may append Arguments. The one usage chunk comes last.
type LLMChunk struct {
	ID        string    `cbor:"id,omitempty"`
	Name      string    `cbor:"name,omitempty"`
	Text      string    `cbor:"text,omitempty"`
	Type      string    `cbor:"type"`
	Index     uint32    `cbor:"index"`
	Usage     *LLMUsage `cbor:"usage,omitempty"`
	Arguments []byte    `cbor:"arguments,omitempty"`
}

// LLMBatch is what a streamed call delivers at a time: the answer of a
// streamed llm.complete (the first chunk) and of each llm.next. The host
// sends the first chunk at once, then gathers the chunks that arrive into
// batches about 50 ms apart (sooner at 4 KiB), so that the journal records
// a stream in a few entries and a reader of the run's journal sees it as
// it comes. Step is the step of the llm.complete that opened the stream,
// which llm.next names. Response is set in the last batch: the whole answer, as an unstreamed call returns it
// (every chunk of every batch, assembled). Cursor is where the stream
// stands, for the next llm.next to name: a provider that can resume a
// stream (OpenAI Responses in background mode) is asked from there after
// the host lost the connection (a crash, a resume on another cell).
type LLMBatch struct {
	Step     uint64       `cbor:"step"`
	Chunks   []LLMChunk   `cbor:"chunks"`
	Response *LLMResponse `cbor:"response,omitempty"`
	Cursor   *LLMCursor   `cbor:"cursor,omitempty"`
}

// LLMCursor is where a stream stands, for a provider that can resume one
// (OpenAI Responses in background mode): the cell's provider and the
// model asked, the provider's response id and the number of chunks
// delivered so far, sealed by MAC (the host's, keyed by the provider's
// credential and bound to the run and step, so that a guest cannot make
// the host read another response). The guest passes it back unchanged; it
// holds nothing secret.
type LLMCursor struct {
	MAC        []byte `cbor:"mac"`
	Model      string `cbor:"model"`
	Provider   string `cbor:"provider"`
	Delivered  uint64 `cbor:"delivered"`
	ResponseID string `cbor:"response_id"`
}

// LLMNextRequest asks for the next batch of the stream opened by the
// streamed llm.complete of step Step, from Cursor (the last batch's).
type LLMNextRequest struct {
	Step   uint64     `cbor:"step"`
	Cursor *LLMCursor `cbor:"cursor,omitempty"`
}

// LLMErrorKind begins the message of every failed llm.complete call
// answered with StatusFailed (SPEC.md §13.4), followed by ": ", so that a
// guest tells a rate limit from a cut stream without parsing prose.
type LLMErrorKind string

// The kinds of a failed model call.
const (
	LLMRateLimited       LLMErrorKind = "rate_limited"
	LLMServerError       LLMErrorKind = "server_error"
	LLMTimeout           LLMErrorKind = "timeout"
	LLMMalformed         LLMErrorKind = "malformed"
	LLMStreamInterrupted LLMErrorKind = "stream_interrupted"
	LLMRefused           LLMErrorKind = "refused"
	LLMUnavailable       LLMErrorKind = "unavailable" // no connection to the provider
)

// LLMErrorKinds lists every kind, in a stable order.
var LLMErrorKinds = []LLMErrorKind{LLMRateLimited, LLMServerError, LLMTimeout, LLMMalformed, LLMStreamInterrupted, LLMRefused, LLMUnavailable}

// LLMKindOf returns the kind a failed call's Error names, and false when
// the error is not a StatusFailed one or names no kind of this ABI.
func LLMKindOf(e *Error) (LLMErrorKind, bool) {
	if e == nil || e.Code != StatusFailed {
		return "", false
	}
	k, _, ok := strings.Cut(e.Message, ": ")
	if !ok {
		return "", false
	}
	for _, known := range LLMErrorKinds {
		if LLMErrorKind(k) == known {
			return known, true
		}
	}
	return "", false
}

// Validate checks what the codec cannot: the closed sets (roles, part
// types, formats), the fields each part type needs, sampling ranges, a
// bound on output, system messages first. The host answers a request
// that fails it with StatusBadRequest and the error's text.
func (r *LLMRequest) Validate() error {
	if r.Model == "" {
		return errors.New("model is empty")
	}
	if r.MaxOutputTokens == 0 {
		return errors.New("max_output_tokens is 0; every call needs a bound")
	}
	if r.Temperature != nil && *r.Temperature > 2000 {
		return fmt.Errorf("temperature %d is above 2000 (2.0)", *r.Temperature)
	}
	if r.TopP != nil && *r.TopP > 1000 {
		return fmt.Errorf("top_p %d is above 1000 (1.0)", *r.TopP)
	}
	if len(r.Messages) == 0 {
		return errors.New("messages is empty")
	}
	seen := map[string]bool{}
	for i, t := range r.Tools {
		if t.Name == "" {
			return fmt.Errorf("tools[%d]: name is empty", i)
		}
		if seen[t.Name] {
			return fmt.Errorf("tools[%d]: tool %q is defined twice", i, t.Name)
		}
		seen[t.Name] = true
		if len(t.Schema) == 0 {
			return fmt.Errorf("tools[%d] (%s): schema is empty", i, t.Name)
		}
	}
	if f := r.Format; f != nil {
		switch f.Type {
		case FormatText, FormatJSON:
			if f.Name != "" || len(f.Schema) > 0 || f.Strict {
				return fmt.Errorf("format %s takes no name, schema or strict", f.Type)
			}
		case FormatJSONSchema:
			if f.Name == "" || len(f.Schema) == 0 {
				return errors.New("format json_schema needs a name and a schema")
			}
		default:
			return fmt.Errorf("format type %q is not text, json or json_schema", f.Type)
		}
	}
	for i, s := range r.Stop {
		if s == "" {
			return fmt.Errorf("stop[%d] is empty", i)
		}
	}
	leading := true
	for i, m := range r.Messages {
		if len(m.Content) == 0 {
			return fmt.Errorf("messages[%d]: content is empty", i)
		}
		switch m.Role {
		case RoleSystem:
			if !leading {
				return fmt.Errorf("messages[%d]: a system message must come before every other", i)
			}
		case RoleUser, RoleAssistant:
			leading = false
		default:
			return fmt.Errorf("messages[%d]: role %q is not system, user or assistant", i, m.Role)
		}
		for j, p := range m.Content {
			if err := p.validate(m.Role); err != nil {
				return fmt.Errorf("messages[%d].content[%d]: %w", i, j, err)
			}
		}
	}
	return nil
}

func (p *LLMPart) validate(role string) error {
	extra := func(ok bool) error {
		if !ok {
			return fmt.Errorf("a %s part has a field it does not use", p.Type)
		}
		return nil
	}
	switch p.Type {
	case PartText:
		return extra(p.ID == "" && p.Name == "" && p.SHA256 == nil && !p.IsError && p.Arguments == nil && p.MediaType == "")
	case PartImage:
		if role != RoleUser {
			return fmt.Errorf("an image part belongs to a user message, not %s", role)
		}
		if len(p.SHA256) != 32 {
			return fmt.Errorf("an image's sha256 is %d bytes, want 32", len(p.SHA256))
		}
		switch p.MediaType {
		case "image/png", "image/jpeg", "image/gif", "image/webp":
		default:
			return fmt.Errorf("image media_type %q is not image/png, image/jpeg, image/gif or image/webp", p.MediaType)
		}
		return extra(p.ID == "" && p.Name == "" && p.Text == "" && !p.IsError && p.Arguments == nil)
	case PartToolCall:
		if role != RoleAssistant {
			return fmt.Errorf("a tool_call part belongs to an assistant message, not %s", role)
		}
		if p.ID == "" || p.Name == "" {
			return errors.New("a tool_call needs an id and a name")
		}
		return extra(p.Text == "" && p.SHA256 == nil && !p.IsError && p.MediaType == "")
	case PartToolResult:
		if role != RoleUser {
			return fmt.Errorf("a tool_result part belongs to a user message, not %s", role)
		}
		if p.ID == "" {
			return errors.New("a tool_result needs the id of the call it answers")
		}
		return extra(p.Name == "" && p.SHA256 == nil && p.Arguments == nil && p.MediaType == "")
	}
	return fmt.Errorf("part type %q is not text, image, tool_call or tool_result", p.Type)
}
