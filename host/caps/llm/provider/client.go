package provider

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/agentrt/agentrt/abi"
)

// Error is a failed model call: its kind (the prefix the guest sees,
// abi/SPEC.md §13.4), the HTTP status when there was one, and the
// Retry-After the provider sent. Its message never holds the key.
type Error struct {
	Kind       abi.LLMErrorKind
	Status     int
	RetryAfter time.Duration
	Msg        string
}

func (e *Error) Error() string { return string(e.Kind) + ": " + e.Msg }

// Is matches another *Error of the same kind, so that
// errors.Is(err, ErrStreamInterrupted) holds for every cut stream.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Kind == e.Kind && t.Msg == ""
}

// Sentinels for errors.Is, one per kind.
var (
	ErrRateLimited       = &Error{Kind: abi.LLMRateLimited}
	ErrServerError       = &Error{Kind: abi.LLMServerError}
	ErrTimeout           = &Error{Kind: abi.LLMTimeout}
	ErrMalformed         = &Error{Kind: abi.LLMMalformed}
	ErrStreamInterrupted = &Error{Kind: abi.LLMStreamInterrupted}
	ErrRefused           = &Error{Kind: abi.LLMRefused}
	ErrUnavailable       = &Error{Kind: abi.LLMUnavailable}
)

// ErrUnsupported is returned by New for a kind this package has no client
// for yet, and by Complete for a request the provider's API cannot carry.
var ErrUnsupported = errors.New("not supported")

// ErrModelNotAllowed is returned by Complete, before anything is sent, for
// a model that is not among the provider's models in llm.yaml (the guest
// sees StatusDenied).
var ErrModelNotAllowed = errors.New("model not allowed")

// Attempt is one HTTP request of a call. Usage is what the provider
// reported for it, zero when it reported nothing (an error reply).
type Attempt struct {
	Usage abi.LLMUsage
	Err   error
}

// Result is what Complete learnt: the response, and every attempt with
// its usage, so that the caller accounts for each one, failed or not.
type Result struct {
	Response abi.LLMResponse
	Attempts []Attempt
}

// Images returns the bytes of an image by its SHA-256.
type Images func(sha256 []byte) ([]byte, error)

// Client calls one provider.
type Client struct {
	p      *Provider
	cred   Credential
	hc     *http.Client
	images Images
	// sleep waits between attempts; tests shorten it.
	sleep func(context.Context, time.Duration) error
}

// MaxReply bounds a reply body or a stream event, bytes.
const MaxReply = 32 << 20

// New returns a client for p with its loaded credential. hc nil is
// http.DefaultClient; its own Timeout should be 0, since the provider's
// timeout is applied per attempt, between reads.
func New(p *Provider, cred Credential, hc *http.Client, images Images) (*Client, error) {
	switch p.Kind {
	case OpenAIChat, OpenAICompatible, Anthropic, OpenAIResponses:
	default:
		return nil, fmt.Errorf("provider %s: kind %s: %w by this client yet", p.Name, p.Kind, ErrUnsupported)
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{p: p, cred: cred, hc: hc, images: images, sleep: sleepCtx}, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Complete sends req, streaming when onChunk is not nil (onChunk gets each
// chunk as it arrives; its error ends the call). It retries what is worth
// retrying (429 within retry.max_wait, 5xx, a timeout, no connection), at
// most retry.attempts in all, and never after a chunk was delivered: the
// caller has the prefix, and a new attempt would not extend it.
func (c *Client) Complete(ctx context.Context, req *abi.LLMRequest, onChunk func(abi.LLMChunk) error) (Result, error) {
	return c.CompleteResumable(ctx, req, onChunk, nil)
}

// Name is the provider's name in llm.yaml.
func (c *Client) Name() string { return c.p.Name }

// CredentialID is the id of the client's credential ("env:VAR",
// "file:PATH"), as the journal names it.
func (c *Client) CredentialID() string { return c.cred.ID() }

// Resumable reports whether the provider's streams can be resumed
// (Resume): an openai-responses provider with background: true.
func (c *Client) Resumable() bool { return c.p.Kind == OpenAIResponses && c.p.Background }

// CompleteResumable is Complete for a stream that a Resumable provider
// can resume: onStart, when not nil, is told the response's id as soon as
// the stream names it, before its first chunk.
func (c *Client) CompleteResumable(ctx context.Context, req *abi.LLMRequest, onChunk func(abi.LLMChunk) error, onStart func(id string)) (Result, error) {
	var res Result
	if !c.p.Allowed(req.Model) {
		return res, fmt.Errorf("%w: model %q is not allowed for provider %s (allowed: %s)", ErrModelNotAllowed, req.Model, c.p.Name, strings.Join(c.p.ModelNames(), ", "))
	}
	var body []byte
	var err error
	switch c.p.Kind {
	case Anthropic:
		body, err = c.anthropicBody(req, onChunk != nil)
	case OpenAIResponses:
		body, err = c.responsesBody(req, onChunk != nil)
	default:
		body, err = c.chatBody(req, onChunk != nil)
	}
	if err != nil {
		return res, err
	}
	var delivered atomic.Int64
	counting := onChunk
	if onChunk != nil {
		counting = func(ch abi.LLMChunk) error { delivered.Add(1); return onChunk(ch) }
	}
	for n := 1; ; n++ {
		resp, usage, err := c.attempt(ctx, http.MethodPost, "", body, counting, onStart)
		res.Attempts = append(res.Attempts, Attempt{Usage: usage, Err: err})
		if err == nil {
			res.Response = resp
			return res, nil
		}
		var e *Error
		if !errors.As(err, &e) || n >= c.p.Retry.Attempts || delivered.Load() > 0 || ctx.Err() != nil {
			return res, err
		}
		wait := time.Duration(0)
		switch e.Kind {
		case abi.LLMRateLimited:
			if e.RetryAfter > time.Duration(c.p.Retry.MaxWait) {
				return res, err
			}
			wait = e.RetryAfter
		case abi.LLMServerError, abi.LLMTimeout, abi.LLMUnavailable:
		default:
			return res, err
		}
		if wait == 0 {
			wait = min(time.Duration(250<<(n-1))*time.Millisecond, time.Duration(c.p.Retry.MaxWait))
		}
		if err := c.sleep(ctx, wait); err != nil {
			return res, err
		}
	}
}

// attempt makes one HTTP request, under the provider's timeout between
// reads.
// Resume reads again the stream of response id, which a Resumable
// provider keeps, and delivers its chunks after the first skip (those the
// caller delivered before it lost the stream). The stream is read from its
// start, so that its parts are numbered as they were the first time; one
// attempt is made (a failure is the caller's to report as interrupted).
func (c *Client) Resume(ctx context.Context, id string, skip uint64, onChunk func(abi.LLMChunk) error) (Result, error) {
	if !c.Resumable() {
		return Result{}, fmt.Errorf("provider %s: %w (only openai-responses with background: true)", c.p.Name, ErrUnsupported)
	}
	if id == "" || strings.ContainsAny(id, "/?#%") {
		return Result{}, &Error{Kind: abi.LLMMalformed, Msg: fmt.Sprintf("provider %s: %q is not a response id", c.p.Name, id)}
	}
	var seen uint64
	resp, usage, err := c.attempt(ctx, http.MethodGet, "/"+id+"?stream=true", nil, func(ch abi.LLMChunk) error {
		if seen++; seen <= skip {
			return nil
		}
		return onChunk(ch)
	}, nil)
	res := Result{Attempts: []Attempt{{Usage: usage, Err: err}}}
	if err != nil {
		return res, err
	}
	if seen < skip {
		return res, &Error{Kind: abi.LLMMalformed, Msg: fmt.Sprintf("provider %s: the stored stream of %s has %d chunks, fewer than the %d delivered", c.p.Name, id, seen, skip)}
	}
	res.Response = resp
	return res, nil
}

// attempt makes one HTTP request: method to the API's path plus suffix,
// with body (nil: none).
func (c *Client) attempt(ctx context.Context, method, suffix string, body []byte, onChunk func(abi.LLMChunk) error, onStart func(string)) (abi.LLMResponse, abi.LLMUsage, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var timedOut atomic.Bool
	timeout := time.Duration(c.p.Timeout)
	timer := time.AfterFunc(timeout, func() { timedOut.Store(true); cancel() })
	defer timer.Stop()
	path, parse, stream := "/chat/completions", parseChat, streamChat
	switch c.p.Kind {
	case Anthropic:
		path, parse, stream = "/v1/messages", parseAnthropic, streamAnthropic
	case OpenAIResponses:
		path, parse = "/responses", parseResponses
		stream = func(r io.Reader, on func(abi.LLMChunk) error) (abi.LLMResponse, error) {
			return streamResponsesFrom(r, on, onStart)
		}
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	hreq, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.p.BaseURL, "/")+path+suffix, rd)
	if err != nil {
		return abi.LLMResponse{}, abi.LLMUsage{}, err
	}
	if body != nil {
		hreq.Header.Set("Content-Type", "application/json")
	}
	if k := c.cred.Key(); k != "" {
		if c.p.Kind == Anthropic {
			hreq.Header.Set("X-Api-Key", k)
		} else {
			hreq.Header.Set("Authorization", "Bearer "+k)
		}
	}
	if c.p.Kind == Anthropic {
		hreq.Header.Set("Anthropic-Version", AnthropicVersion)
	}
	if onChunk != nil {
		hreq.Header.Set("Accept", "text/event-stream")
	}
	wrap := func(err error, kind abi.LLMErrorKind, what string) error {
		if timedOut.Load() {
			return &Error{Kind: abi.LLMTimeout, Msg: fmt.Sprintf("provider %s: no reply within %s (%s)", c.p.Name, timeout, what)}
		}
		if ctx.Err() != nil && !timedOut.Load() {
			return ctx.Err()
		}
		return &Error{Kind: kind, Msg: fmt.Sprintf("provider %s: %s: %s", c.p.Name, what, c.redact(err.Error()))}
	}
	hresp, err := c.hc.Do(hreq)
	if err != nil {
		return abi.LLMResponse{}, abi.LLMUsage{}, wrap(err, abi.LLMUnavailable, "request")
	}
	defer hresp.Body.Close()
	timer.Reset(timeout)
	if hresp.StatusCode != http.StatusOK {
		return abi.LLMResponse{}, abi.LLMUsage{}, c.httpError(hresp)
	}
	r := &resetReader{r: io.LimitReader(hresp.Body, MaxReply), timer: timer, d: timeout}
	if onChunk == nil {
		b, err := io.ReadAll(r)
		if err != nil {
			return abi.LLMResponse{}, abi.LLMUsage{}, wrap(err, abi.LLMStreamInterrupted, "reading the reply")
		}
		resp, err := parse(b)
		if err != nil {
			return abi.LLMResponse{}, abi.LLMUsage{}, &Error{Kind: abi.LLMMalformed, Msg: fmt.Sprintf("provider %s: %v", c.p.Name, err)}
		}
		return resp, resp.Usage, nil
	}
	resp, err := stream(r, onChunk)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			e.Msg = fmt.Sprintf("provider %s: %s", c.p.Name, e.Msg)
			return resp, resp.Usage, e
		}
		if errors.Is(err, errChunk) {
			return resp, resp.Usage, errors.Unwrap(err)
		}
		return resp, resp.Usage, wrap(err, abi.LLMStreamInterrupted, "reading the stream")
	}
	return resp, resp.Usage, nil
}

// resetReader restarts the timeout at every read that returns bytes.
type resetReader struct {
	r     io.Reader
	timer *time.Timer
	d     time.Duration
}

func (r *resetReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.timer.Reset(r.d)
	}
	return n, err
}

func (c *Client) redact(s string) string {
	if k := c.cred.Key(); k != "" {
		s = strings.ReplaceAll(s, k, "[key]")
	}
	return s
}

// httpError maps a non-200 reply.
func (c *Client) httpError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	msg := strings.TrimSpace(string(b))
	var env struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &env) == nil && env.Error.Message != "" {
		msg = env.Error.Message
	}
	if len(msg) > 512 {
		msg = msg[:512] + "..."
	}
	e := &Error{Status: resp.StatusCode, Msg: fmt.Sprintf("provider %s: HTTP %d: %s", c.p.Name, resp.StatusCode, c.redact(msg))}
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		e.Kind = abi.LLMRateLimited
		e.RetryAfter = retryAfter(resp.Header, time.Now())
		if e.RetryAfter > 0 {
			e.Msg += fmt.Sprintf("; retry after %s", e.RetryAfter)
		}
	case resp.StatusCode == http.StatusRequestTimeout:
		e.Kind = abi.LLMTimeout
	case resp.StatusCode >= 500: // Anthropic's 529 (overloaded) included
		e.Kind = abi.LLMServerError
	default:
		e.Kind = abi.LLMRefused
	}
	return e
}

// retryAfter reads retry-after-ms (OpenAI's) or Retry-After, in seconds
// or as an HTTP date.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if ms, err := strconv.ParseFloat(h.Get("Retry-After-Ms"), 64); err == nil && ms > 0 {
		return time.Duration(ms * float64(time.Millisecond))
	}
	v := h.Get("Retry-After")
	if s, err := strconv.Atoi(v); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// The Chat Completions request, in the field order the golden files show.
type chatRequest struct {
	Model               string         `json:"model"`
	Messages            []chatMessage  `json:"messages"`
	Tools               []chatTool     `json:"tools,omitempty"`
	MaxCompletionTokens uint32         `json:"max_completion_tokens,omitempty"`
	MaxTokens           uint32         `json:"max_tokens,omitempty"`
	Temperature         *float64       `json:"temperature,omitempty"`
	TopP                *float64       `json:"top_p,omitempty"`
	Stop                []string       `json:"stop,omitempty"`
	ResponseFormat      *chatFormat    `json:"response_format,omitempty"`
	Stream              bool           `json:"stream,omitempty"`
	StreamOptions       *streamOptions `json:"stream_options,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatMessage struct {
	Role       string         `json:"role"`
	Content    any            `json:"content"`
	ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type chatContent struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitempty"`
	ImageURL *imageURL `json:"image_url,omitempty"`
}

type imageURL struct {
	URL string `json:"url"`
}

type chatToolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type chatTool struct {
	Type     string      `json:"type"`
	Function chatToolDef `json:"function"`
}

type chatToolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

type chatFormat struct {
	Type       string          `json:"type"`
	JSONSchema *chatJSONSchema `json:"json_schema,omitempty"`
}

type chatJSONSchema struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
	Strict bool            `json:"strict,omitempty"`
}

func thousandths(v *uint32) *float64 {
	if v == nil {
		return nil
	}
	f := float64(*v) / 1000
	return &f
}

// chatBody maps req onto Chat Completions. Tool results become role
// "tool" messages, one per result, in order.
func (c *Client) chatBody(req *abi.LLMRequest, stream bool) ([]byte, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	out := chatRequest{Model: req.Model, Temperature: thousandths(req.Temperature), TopP: thousandths(req.TopP), Stop: req.Stop}
	// OpenAI deprecated max_tokens for max_completion_tokens; the
	// compatible servers (Ollama, vLLM, llama.cpp) read max_tokens.
	if c.p.Kind == OpenAIChat {
		out.MaxCompletionTokens = req.MaxOutputTokens
	} else {
		out.MaxTokens = req.MaxOutputTokens
	}
	if stream {
		out.Stream = true
		// Without it the stream carries no usage at all.
		out.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	for _, t := range req.Tools {
		if !json.Valid(t.Schema) {
			return nil, fmt.Errorf("tool %s: schema is not JSON", t.Name)
		}
		out.Tools = append(out.Tools, chatTool{Type: "function", Function: chatToolDef{Name: t.Name, Description: t.Description, Parameters: t.Schema}})
	}
	if f := req.Format; f != nil {
		switch f.Type {
		case abi.FormatText:
			out.ResponseFormat = &chatFormat{Type: "text"}
		case abi.FormatJSON:
			out.ResponseFormat = &chatFormat{Type: "json_object"}
		case abi.FormatJSONSchema:
			if !json.Valid(f.Schema) {
				return nil, errors.New("format: schema is not JSON")
			}
			out.ResponseFormat = &chatFormat{Type: "json_schema", JSONSchema: &chatJSONSchema{Name: f.Name, Schema: f.Schema, Strict: f.Strict}}
		}
	}
	for _, m := range req.Messages {
		var parts []chatContent
		var calls []chatToolCall
		for _, p := range m.Content {
			switch p.Type {
			case abi.PartText:
				parts = append(parts, chatContent{Type: "text", Text: p.Text})
			case abi.PartImage:
				url, err := c.dataURL(p)
				if err != nil {
					return nil, err
				}
				parts = append(parts, chatContent{Type: "image_url", ImageURL: &imageURL{URL: url}})
			case abi.PartToolCall:
				calls = append(calls, chatToolCall{ID: p.ID, Type: "function", Function: chatFunction{Name: p.Name, Arguments: string(p.Arguments)}})
			case abi.PartToolResult:
				// Chat Completions has no error flag on a tool message:
				// the flag becomes words the model reads, not a loss.
				text := p.Text
				if p.IsError {
					text = "error: " + text
				}
				out.Messages = append(out.Messages, chatMessage{Role: "tool", ToolCallID: p.ID, Content: text})
			}
		}
		if len(parts) == 0 && len(calls) == 0 {
			continue
		}
		msg := chatMessage{Role: m.Role, ToolCalls: calls}
		switch {
		case len(parts) == 0:
			msg.Content = nil // an assistant turn of tool calls only: content is null
		case len(parts) == 1 && parts[0].Type == "text":
			msg.Content = parts[0].Text
		default:
			msg.Content = parts
		}
		out.Messages = append(out.Messages, msg)
	}
	return json.Marshal(out)
}

func (c *Client) dataURL(p abi.LLMPart) (string, error) {
	if c.images == nil {
		return "", fmt.Errorf("image %x: %w: this client resolves no images", p.SHA256, ErrUnsupported)
	}
	b, err := c.images(p.SHA256)
	if err != nil {
		return "", fmt.Errorf("image %x: %w", p.SHA256, err)
	}
	if sum := sha256.Sum256(b); !bytes.Equal(sum[:], p.SHA256) {
		return "", fmt.Errorf("image %x: the bytes found hash to %x", p.SHA256, sum)
	}
	return "data:" + p.MediaType + ";base64," + base64Std(b), nil
}

type chatUsage struct {
	PromptTokens        uint64 `json:"prompt_tokens"`
	CompletionTokens    uint64 `json:"completion_tokens"`
	PromptTokensDetails struct {
		CachedTokens uint64 `json:"cached_tokens"`
		// CacheWriteTokens are prompt tokens written to the cache, billed
		// at the cache-write price; like cached_tokens they are counted
		// inside prompt_tokens.
		CacheWriteTokens uint64 `json:"cache_write_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens uint64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

func (u *chatUsage) abi() abi.LLMUsage {
	if u == nil {
		return abi.LLMUsage{}
	}
	cached := min(u.PromptTokensDetails.CachedTokens, u.PromptTokens)
	written := min(u.PromptTokensDetails.CacheWriteTokens, u.PromptTokens-cached)
	return abi.LLMUsage{Input: u.PromptTokens - cached - written, CacheRead: cached, CacheWrite: written, Output: u.CompletionTokens, Reasoning: u.CompletionTokensDetails.ReasoningTokens}
}

type chatReply struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content   *string        `json:"content"`
			Refusal   *string        `json:"refusal"`
			ToolCalls []chatToolCall `json:"tool_calls"`
		} `json:"message"`
		Delta struct {
			Content   *string        `json:"content"`
			Refusal   *string        `json:"refusal"`
			ToolCalls []chatToolCall `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *chatUsage `json:"usage"`
}

func chatStop(finish string, refused bool) string {
	if refused {
		return abi.StopRefusal
	}
	switch finish {
	case "stop":
		return abi.StopEnd
	case "length":
		return abi.StopMaxTokens
	case "tool_calls", "function_call":
		return abi.StopToolUse
	case "content_filter":
		return abi.StopContentFilter
	}
	return abi.StopOther
}

func parseChat(b []byte) (abi.LLMResponse, error) {
	var r chatReply
	if err := json.Unmarshal(b, &r); err != nil {
		return abi.LLMResponse{}, fmt.Errorf("reply is not Chat Completions JSON: %v", err)
	}
	if len(r.Choices) == 0 || r.Choices[0].FinishReason == nil {
		return abi.LLMResponse{}, errors.New("reply has no choice with a finish_reason")
	}
	ch := r.Choices[0]
	out := abi.LLMResponse{ID: r.ID, Model: r.Model, Content: []abi.LLMPart{}, Usage: r.Usage.abi()}
	refused := ch.Message.Refusal != nil && *ch.Message.Refusal != ""
	if refused {
		out.Content = append(out.Content, abi.LLMPart{Type: abi.PartText, Text: *ch.Message.Refusal})
	} else if ch.Message.Content != nil && *ch.Message.Content != "" {
		out.Content = append(out.Content, abi.LLMPart{Type: abi.PartText, Text: *ch.Message.Content})
	}
	for _, tc := range ch.Message.ToolCalls {
		out.Content = append(out.Content, abi.LLMPart{Type: abi.PartToolCall, ID: tc.ID, Name: tc.Function.Name, Arguments: []byte(tc.Function.Arguments)})
	}
	out.StopReason = chatStop(*ch.FinishReason, refused)
	return out, nil
}

// errChunk wraps the error of the caller's onChunk, which ends the call
// as the caller's error, not as a provider's.
var errChunk = errors.New("chunk handler")

// streamChat reads a Chat Completions event stream to its [DONE],
// delivering chunks and assembling the response. A stream that ends
// before [DONE] (inside an event or between two) is interrupted: what was
// delivered is the prefix, and the response returned holds it.
func streamChat(r io.Reader, onChunk func(abi.LLMChunk) error) (abi.LLMResponse, error) {
	sr := newSSE(r, "[DONE]")
	out := abi.LLMResponse{Content: []abi.LLMPart{}}
	textPart := -1
	toolPart := map[int]int{}
	var finish string
	var refused bool
	emit := sink(onChunk)
	for {
		data, err := sr.next()
		if err != nil {
			return out, err
		}
		if string(data) == "[DONE]" {
			if finish == "" {
				return out, &Error{Kind: abi.LLMMalformed, Msg: "[DONE] before any finish_reason"}
			}
			out.StopReason = chatStop(finish, refused)
			return out, nil
		}
		var ev chatReply
		if err := json.Unmarshal(data, &ev); err != nil {
			return out, &Error{Kind: abi.LLMMalformed, Msg: fmt.Sprintf("event %d is not JSON: %v", sr.events, err)}
		}
		if ev.ID != "" {
			out.ID = ev.ID
		}
		if ev.Model != "" {
			out.Model = ev.Model
		}
		if ev.Usage != nil {
			out.Usage = ev.Usage.abi()
			u := out.Usage
			if err := emit(abi.LLMChunk{Type: abi.ChunkUsage, Usage: &u}); err != nil {
				return out, err
			}
		}
		if len(ev.Choices) == 0 {
			continue
		}
		d := ev.Choices[0].Delta
		text := ""
		if d.Content != nil {
			text = *d.Content
		}
		if d.Refusal != nil && *d.Refusal != "" {
			refused, text = true, *d.Refusal
		}
		if text != "" {
			if textPart < 0 {
				textPart = len(out.Content)
				out.Content = append(out.Content, abi.LLMPart{Type: abi.PartText})
			}
			out.Content[textPart].Text += text
			if err := emit(abi.LLMChunk{Type: abi.ChunkText, Index: uint32(textPart), Text: text}); err != nil {
				return out, err
			}
		}
		for _, tc := range d.ToolCalls {
			i := 0
			if tc.Index != nil {
				i = *tc.Index
			}
			p, ok := toolPart[i]
			if !ok {
				p = len(out.Content)
				toolPart[i] = p
				out.Content = append(out.Content, abi.LLMPart{Type: abi.PartToolCall})
			}
			part := &out.Content[p]
			ch := abi.LLMChunk{Type: abi.ChunkToolCall, Index: uint32(p)}
			if tc.ID != "" && part.ID == "" {
				part.ID, ch.ID = tc.ID, tc.ID
			}
			if tc.Function.Name != "" && part.Name == "" {
				part.Name, ch.Name = tc.Function.Name, tc.Function.Name
			}
			if tc.Function.Arguments != "" {
				part.Arguments = append(part.Arguments, tc.Function.Arguments...)
				ch.Arguments = []byte(tc.Function.Arguments)
			}
			if err := emit(ch); err != nil {
				return out, err
			}
		}
		if f := ev.Choices[0].FinishReason; f != nil {
			finish = *f
		}
	}
}

// Seal returns a MAC over parts, keyed by a key derived from the
// provider's credential: every cell that holds the credential computes the
// same one, and nothing of the credential can be learnt from it. The llm
// capability seals a stream's cursor with it, so that a guest cannot make
// the host resume a response other than the one it was streaming.
func (c *Client) Seal(parts ...string) []byte {
	k := sha256.Sum256([]byte("agentrt cursor key\x00" + c.p.Name + "\x00" + c.cred.Key()))
	m := hmac.New(sha256.New, k[:])
	for _, p := range parts {
		fmt.Fprintf(m, "%d:%s", len(p), p)
	}
	return m.Sum(nil)
}
