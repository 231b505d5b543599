package fakellm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/agentrt/agentrt/internal/yamlkeys"
)

// Script is what the fake model answers: the API key it requires and its
// turns. It is read from YAML or JSON by ParseScript and must not change
// once a Server serves it.
type Script struct {
	// APIKey is the key every request must carry (Authorization: Bearer
	// for the OpenAI APIs, x-api-key for Anthropic's). Required: a fake
	// that took any key could not show that the client sent it.
	APIKey string `yaml:"api_key"`
	// AnthropicVersion, if set, is the only anthropic-version header
	// value /v1/messages accepts; otherwise any value shaped YYYY-MM-DD
	// is taken. The header itself is always required.
	AnthropicVersion string `yaml:"anthropic_version"`
	// Match is how a request finds its turn: "order" (the default) or
	// "key" (see the package comment).
	Match string `yaml:"match"`
	// Turns are the model's answers.
	Turns []Turn `yaml:"turns"`
}

// Turn is one answer of the model, with what the request must contain to
// get it and the faults its first attempts meet.
type Turn struct {
	// Name labels the turn in errors and statistics; "" names it by index.
	Name string `yaml:"name"`
	// Key, under match: key, is the text of the last message of the
	// requests this turn answers.
	Key string `yaml:"key"`
	// Expect is what a request must contain; a request that differs gets
	// a 400 naming the difference and does not use the turn up.
	Expect *Expect `yaml:"expect"`
	// Reply is what the model says.
	Reply Reply `yaml:"reply"`
	// Usage is the usage every reply of this turn reports. When absent it
	// is computed from the sizes of the request and the reply (a quarter
	// of their bytes, rounded up), so it is still the same for a request
	// sent again.
	Usage *Usage `yaml:"usage"`
	// Faults are met by the turn's first attempts, one each, in order;
	// attempts after the last fault get the reply.
	Faults []Fault `yaml:"faults"`
}

// Expect is what a request must contain to be answered by a turn. Empty
// fields are not checked.
type Expect struct {
	// API is "chat", "responses" or "messages".
	API   string `yaml:"api"`
	Model string `yaml:"model"`
	// Stream, when set, is whether the request must ask for a stream.
	Stream *bool `yaml:"stream"`
	// LastRole is the role of the last message: "user", "assistant",
	// "tool" (an OpenAI tool message or a Responses function_call_output)
	// or "system".
	LastRole string `yaml:"last_role"`
	// LastText is the whole text of the last message; LastTextContains a
	// part of it.
	LastText         string `yaml:"last_text"`
	LastTextContains string `yaml:"last_text_contains"`
	// Tools are the names of the tools offered, in the request's order;
	// an empty list written out ("tools: []") means none may be offered.
	Tools []string `yaml:"tools"`
}

// Reply is the content of a turn's answer.
type Reply struct {
	// Text is the assistant's text, streamed in Chunks pieces of nearly
	// equal length (by characters; 1 when 0).
	Text   string `yaml:"text"`
	Chunks int    `yaml:"chunks"`
	// ToolCalls are the calls the model asks for, after the text.
	ToolCalls []ToolCall `yaml:"tool_calls"`
	// Stop is the provider-neutral stop reason: end_turn (the default
	// without tool calls), tool_use (the default with them), max_tokens
	// or stop_sequence.
	Stop string `yaml:"stop"`
	// StopSequence is the stop sequence that ended the reply, with
	// stop: stop_sequence (which it implies when stop is not given).
	// Only Anthropic's API names it; the OpenAI APIs say "stop".
	StopSequence string `yaml:"stop_sequence"`
	// Delay is waited before the first byte of every answer of the turn;
	// ChunkDelay between two streamed events.
	Delay      Duration `yaml:"delay"`
	ChunkDelay Duration `yaml:"chunk_delay"`
}

// ToolCall is one call the model asks for.
type ToolCall struct {
	// ID is the call's id; "" gives one derived from the turn and index.
	ID   string `yaml:"id"`
	Name string `yaml:"name"`
	// Arguments is a JSON object: a mapping in the script, or a string
	// that holds one.
	Arguments any `yaml:"arguments"`
	// Chunks is in how many pieces the arguments are streamed (1 when 0).
	Chunks int `yaml:"chunks"`

	args string // Arguments as compact JSON, set by ParseScript
}

// Usage is a reply's usage in the provider-neutral form: the four counts
// are disjoint, so the tokens billed as input are InputTokens +
// CacheReadTokens + CacheWriteTokens. ReasoningTokens are a part of
// OutputTokens. How each API spells them is in the package comment.
type Usage struct {
	InputTokens      int64 `yaml:"input_tokens" json:"input_tokens"`
	OutputTokens     int64 `yaml:"output_tokens" json:"output_tokens"`
	CacheReadTokens  int64 `yaml:"cache_read_tokens" json:"cache_read_tokens"`
	CacheWriteTokens int64 `yaml:"cache_write_tokens" json:"cache_write_tokens"`
	ReasoningTokens  int64 `yaml:"reasoning_tokens" json:"reasoning_tokens"`
}

func (u *Usage) add(v Usage) {
	u.InputTokens += v.InputTokens
	u.OutputTokens += v.OutputTokens
	u.CacheReadTokens += v.CacheReadTokens
	u.CacheWriteTokens += v.CacheWriteTokens
	u.ReasoningTokens += v.ReasoningTokens
}

// Fault is what goes wrong with one attempt at a turn. Status excludes
// the others but Delay; CutAfter and ErrorAfter exclude each other; the
// rest combine.
type Fault struct {
	// Status answers the attempt with this HTTP error (429, 500, 503,
	// 529, ...) in the API's error shape.
	Status int `yaml:"status"`
	// RetryAfter, with Status, is sent as Retry-After in whole seconds.
	RetryAfter Duration `yaml:"retry_after"`
	// Message is the error's message; "" gives one naming the fault.
	Message string `yaml:"message"`
	// Delay is waited before the first byte (a client whose timeout is
	// shorter sees a timeout); ChunkDelay between streamed events.
	Delay      Duration `yaml:"delay"`
	ChunkDelay Duration `yaml:"chunk_delay"`
	// Malformed sends a body that is not JSON: a non-streamed body cut at
	// its middle with garbage after it, or, in a stream, the middle
	// event's data replaced by such a fragment. The stream goes on after it.
	Malformed bool `yaml:"malformed"`
	// CutAfter, when > 0, ends the connection after that many whole SSE
	// events (or, for a non-streamed answer, after that many bytes of the
	// body) in the middle of the next one, with no terminating chunk.
	CutAfter int `yaml:"cut_after"`
	// ErrorAfter, when > 0, ends a stream after that many whole events
	// with the API's error event, as a provider overloaded mid-stream
	// does: Chat Completions' data: {"error": ...}, Responses' error
	// event, Anthropic's event: error (overloaded_error). The stream then
	// ends cleanly; the error is in it. Message is its message.
	ErrorAfter int `yaml:"error_after"`
}

func (f Fault) String() string {
	var parts []string
	if f.Status != 0 {
		parts = append(parts, fmt.Sprintf("status %d", f.Status))
	}
	if f.Delay > 0 {
		parts = append(parts, "delay "+time.Duration(f.Delay).String())
	}
	if f.ChunkDelay > 0 {
		parts = append(parts, "chunk_delay "+time.Duration(f.ChunkDelay).String())
	}
	if f.Malformed {
		parts = append(parts, "malformed")
	}
	if f.CutAfter > 0 {
		parts = append(parts, fmt.Sprintf("cut_after %d", f.CutAfter))
	}
	if f.ErrorAfter > 0 {
		parts = append(parts, fmt.Sprintf("error_after %d", f.ErrorAfter))
	}
	return strings.Join(parts, ", ")
}

// Duration is a time.Duration written as Go writes one ("150ms", "2s").
type Duration time.Duration

// UnmarshalYAML reads "150ms" or "2s"; a bare number is refused, since
// its unit would be a guess.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: a duration is a string such as \"150ms\"", n.Line)
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: duration %q: write it with a unit, such as \"150ms\" or \"2s\"", n.Line, n.Value)
	}
	if v < 0 {
		return fmt.Errorf("line %d: duration %q is negative", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// ErrBadScript is wrapped by every error ParseScript returns for a script
// that parses but says something the fake cannot do.
var ErrBadScript = errors.New("fakellm: bad script")

// ParseScript reads a script from YAML or JSON (JSON is YAML). A
// misspelt key is reported with its line and the keys allowed there; a
// value the fake cannot serve is reported with the turn and field and
// wraps ErrBadScript.
func ParseScript(doc []byte) (*Script, error) {
	var s Script
	if err := yamlkeys.Check(doc, reflect.TypeOf(s)); err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("fakellm: script: %w", err)
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	return &s, nil
}

func (s *Script) check() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrBadScript, fmt.Sprintf(format, a...))
	}
	if s.APIKey == "" {
		return bad("api_key is required: the fake answers 401 to a request without it, which is how a test shows the client sent its key")
	}
	if s.AnthropicVersion != "" && !isDate(s.AnthropicVersion) {
		return bad("anthropic_version %q is not a date such as 2023-06-01", s.AnthropicVersion)
	}
	switch s.Match {
	case "":
		s.Match = MatchOrder
	case MatchOrder, MatchKey:
	default:
		return bad("match %q: write %q or %q", s.Match, MatchOrder, MatchKey)
	}
	if len(s.Turns) == 0 {
		return bad("the script has no turns")
	}
	keys := map[string]int{}
	for i := range s.Turns {
		t := &s.Turns[i]
		where := fmt.Sprintf("turns[%d]", i)
		if t.Name != "" {
			where += " (" + t.Name + ")"
		}
		if s.Match == MatchKey {
			if j, dup := keys[t.Key]; dup {
				return bad("%s: key %q is also turns[%d]'s: under match: key each turn needs its own", where, t.Key, j)
			}
			keys[t.Key] = i
		} else if t.Key != "" {
			return bad("%s: key is only read under match: key (this script matches in order)", where)
		}
		if e := t.Expect; e != nil {
			switch e.API {
			case "", APIChat, APIResponses, APIMessages:
			default:
				return bad("%s: expect.api %q: write %s, %s or %s", where, e.API, APIChat, APIResponses, APIMessages)
			}
			switch e.LastRole {
			case "", "user", "assistant", "tool", "system", "developer":
			default:
				return bad("%s: expect.last_role %q: write user, assistant, tool, system or developer", where, e.LastRole)
			}
		}
		r := &t.Reply
		if r.Text == "" && len(r.ToolCalls) == 0 {
			return bad("%s: the reply has neither text nor tool calls", where)
		}
		if r.Chunks < 0 {
			return bad("%s: reply.chunks is negative", where)
		}
		if n := utf8.RuneCountInString(r.Text); r.Chunks > max(n, 1) {
			return bad("%s: reply.chunks is %d but the text has %d characters", where, r.Chunks, n)
		}
		if r.StopSequence != "" && r.Stop == "" {
			r.Stop = StopSequence
		}
		if r.StopSequence != "" && r.Stop != StopSequence {
			return bad("%s: reply.stop_sequence goes with stop: stop_sequence, not %s", where, r.Stop)
		}
		if r.Stop == StopSequence && r.StopSequence == "" {
			return bad("%s: reply.stop is stop_sequence: give the sequence as reply.stop_sequence", where)
		}
		switch r.Stop {
		case "":
			r.Stop = StopEndTurn
			if len(r.ToolCalls) > 0 {
				r.Stop = StopToolUse
			}
		case StopEndTurn, StopMaxTokens, StopSequence:
		case StopToolUse:
			if len(r.ToolCalls) == 0 {
				return bad("%s: reply.stop is tool_use but the reply has no tool calls", where)
			}
		default:
			return bad("%s: reply.stop %q: write end_turn, tool_use, max_tokens or stop_sequence", where, r.Stop)
		}
		for j := range r.ToolCalls {
			c := &r.ToolCalls[j]
			cw := fmt.Sprintf("%s: reply.tool_calls[%d]", where, j)
			if c.Name == "" {
				return bad("%s: name is required", cw)
			}
			args, err := argumentsJSON(c.Arguments)
			if err != nil {
				return bad("%s: arguments: %v", cw, err)
			}
			c.args = args
			if c.Chunks < 0 || c.Chunks > len(args) {
				return bad("%s: chunks is %d but the arguments are %d bytes", cw, c.Chunks, len(args))
			}
		}
		if u := t.Usage; u != nil {
			if u.InputTokens < 0 || u.OutputTokens < 0 || u.CacheReadTokens < 0 || u.CacheWriteTokens < 0 || u.ReasoningTokens < 0 {
				return bad("%s: usage has a negative count", where)
			}
			if u.ReasoningTokens > u.OutputTokens {
				return bad("%s: usage.reasoning_tokens (%d) are a part of output_tokens (%d) and cannot exceed them", where, u.ReasoningTokens, u.OutputTokens)
			}
		}
		for j, f := range t.Faults {
			fw := fmt.Sprintf("%s: faults[%d]", where, j)
			if f.Status != 0 && (f.Status < 400 || f.Status > 599) {
				return bad("%s: status %d is not an error status (400-599)", fw, f.Status)
			}
			if f.Status != 0 && (f.Malformed || f.CutAfter != 0 || f.ChunkDelay != 0 || f.ErrorAfter != 0) {
				return bad("%s: status answers with an error body; malformed, cut_after, error_after and chunk_delay apply to a reply", fw)
			}
			if f.CutAfter != 0 && f.ErrorAfter != 0 {
				return bad("%s: cut_after and error_after both end the stream: give one", fw)
			}
			if f.ErrorAfter < 0 {
				return bad("%s: error_after is negative", fw)
			}
			if f.RetryAfter != 0 && f.Status == 0 {
				return bad("%s: retry_after goes with a status (such as 429)", fw)
			}
			if f.RetryAfter%Duration(time.Second) != 0 {
				return bad("%s: retry_after %s: Retry-After is sent in whole seconds", fw, time.Duration(f.RetryAfter))
			}
			if f.CutAfter < 0 {
				return bad("%s: cut_after is negative", fw)
			}
			if f.String() == "" {
				return bad("%s: the fault does nothing (give status, delay, chunk_delay, malformed, cut_after or error_after)", fw)
			}
		}
	}
	return nil
}

// argumentsJSON returns a tool call's arguments as compact JSON, which
// must be an object, as every API requires.
func argumentsJSON(a any) (string, error) {
	var b []byte
	switch v := a.(type) {
	case nil:
		return "{}", nil
	case string:
		var buf bytes.Buffer
		if err := json.Compact(&buf, []byte(v)); err != nil {
			return "", fmt.Errorf("the string is not JSON: %v", err)
		}
		b = buf.Bytes()
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			return "", err
		}
	}
	if len(b) == 0 || b[0] != '{' {
		return "", fmt.Errorf("%s is not a JSON object", b)
	}
	return string(b), nil
}

func isDate(s string) bool {
	_, err := time.Parse("2006-01-02", s)
	return err == nil
}

// The matching modes.
const (
	MatchOrder = "order"
	MatchKey   = "key"
)

// The APIs, as Expect.API and Request.API name them.
const (
	APIChat      = "chat"
	APIResponses = "responses"
	APIMessages  = "messages"
	// APIResponsesGet is GET /v1/responses/{id}: a stored response
	// retrieved, or a background one's stream resumed.
	APIResponsesGet = "responses.get"
)

// The provider-neutral stop reasons.
const (
	StopEndTurn   = "end_turn"
	StopToolUse   = "tool_use"
	StopMaxTokens = "max_tokens"
	StopSequence  = "stop_sequence"
)
