package provider

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/internal/golden"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata/golden from the requests the clients send")

const testKey = "sk-live-Hq3Lm9Xv2Rt7Kp4Zw8Nb"

// fake is a loopback server that speaks Chat Completions: it records each
// request and answers with the next scripted reply.
type fake struct {
	mu      sync.Mutex
	bodies  [][]byte
	headers []http.Header
	urls    []string
	replies []func(w http.ResponseWriter)
	path    string // "" is /v1/chat/completions
}

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.bodies = append(f.bodies, b)
	f.headers = append(f.headers, r.Header.Clone())
	f.urls = append(f.urls, r.URL.String())
	n := len(f.bodies) - 1
	f.mu.Unlock()
	want := f.path
	if want == "" {
		want = "/v1/chat/completions"
	}
	if r.URL.Path != want || r.Method != http.MethodPost {
		http.Error(w, "wrong path "+r.URL.Path, http.StatusNotFound)
		return
	}
	if n >= len(f.replies) {
		http.Error(w, "no more scripted replies", http.StatusTeapot)
		return
	}
	f.replies[n](w)
}

func jsonReply(status int, body string, hdr ...string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(hdr); i += 2 {
			w.Header().Set(hdr[i], hdr[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

func sseReply(events ...string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range events {
			io.WriteString(w, e)
			w.(http.Flusher).Flush()
		}
	}
}

func newTestClient(t *testing.T, f *fake, kind Kind, edit func(*Provider)) *Client {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	base := srv.URL + "/v1"
	switch kind {
	case Anthropic:
		base = srv.URL
		f.path = "/v1/messages"
	case OpenAIResponses:
		f.path = "/v1/responses"
	}
	p := &Provider{Name: "test", Kind: kind, BaseURL: base, Models: map[string]ModelPrice{"gpt-4.1-mini": {}, "claude-sonnet-4-5": {}},
		Credential: &CredentialSource{Env: "X"}, Timeout: Duration(2 * time.Second), Retry: Retry{Attempts: 3, MaxWait: Duration(5 * time.Second)}}
	if edit != nil {
		edit(p)
	}
	c, err := New(p, Credential{id: "env:X", key: testKey}, srv.Client(), func(sum []byte) ([]byte, error) { return []byte("PNG"), nil })
	if err != nil {
		t.Fatal(err)
	}
	c.sleep = func(context.Context, time.Duration) error { return nil }
	return c
}

var weatherTool = abi.LLMTool{Name: "get_weather", Description: "Current weather in a city", Schema: []byte(`{"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}`)}

func toolRequest() *abi.LLMRequest {
	t7 := uint32(700)
	return &abi.LLMRequest{Model: "gpt-4.1-mini", MaxOutputTokens: 256, Temperature: &t7, Stop: []string{"END"},
		Tools: []abi.LLMTool{weatherTool},
		Messages: []abi.LLMMessage{
			{Role: abi.RoleSystem, Content: []abi.LLMPart{{Type: abi.PartText, Text: "Be brief."}}},
			{Role: abi.RoleUser, Content: []abi.LLMPart{{Type: abi.PartText, Text: "Weather in Paris and Oslo?"}}},
			{Role: abi.RoleAssistant, Content: []abi.LLMPart{
				{Type: abi.PartToolCall, ID: "call_1", Name: "get_weather", Arguments: []byte(`{"city":"Paris"}`)},
				{Type: abi.PartToolCall, ID: "call_2", Name: "get_weather", Arguments: []byte(`{"city":"Oslo"}`)}}},
			{Role: abi.RoleUser, Content: []abi.LLMPart{
				{Type: abi.PartToolResult, ID: "call_1", Text: `{"temp_c":18}`},
				{Type: abi.PartToolResult, ID: "call_2", Text: "no data", IsError: true}}},
		}}
}

// The replies as OpenAI documents them (platform.openai.com/docs/api-reference/chat).
const chatToolReply = `{"id":"chatcmpl-abc","object":"chat.completion","created":1741569952,"model":"gpt-4.1-mini-2025-04-14",
"choices":[{"index":0,"message":{"role":"assistant","content":"Checking.","refusal":null,"tool_calls":[
{"id":"call_9","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Rome\"}"}}]},"logprobs":null,"finish_reason":"tool_calls"}],
"usage":{"prompt_tokens":1200,"completion_tokens":30,"total_tokens":1230,"prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":0},
"completion_tokens_details":{"reasoning_tokens":8,"audio_tokens":0}}}`

var chatToolStream = []string{
	`data: {"id":"chatcmpl-abc","object":"chat.completion.chunk","model":"gpt-4.1-mini-2025-04-14","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}` + "\n\n",
	`data: {"id":"chatcmpl-abc","object":"chat.completion.chunk","model":"gpt-4.1-mini-2025-04-14","choices":[{"index":0,"delta":{"content":"Check"},"finish_reason":null}],"usage":null}` + "\n\n",
	`data: {"id":"chatcmpl-abc","object":"chat.completion.chunk","model":"gpt-4.1-mini-2025-04-14","choices":[{"index":0,"delta":{"content":"ing."},"finish_reason":null}],"usage":null}` + "\n\n",
	`data: {"id":"chatcmpl-abc","object":"chat.completion.chunk","model":"gpt-4.1-mini-2025-04-14","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_9","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}],"usage":null}` + "\n\n",
	`data: {"id":"chatcmpl-abc","object":"chat.completion.chunk","model":"gpt-4.1-mini-2025-04-14","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]},"finish_reason":null}],"usage":null}` + "\n\n",
	`data: {"id":"chatcmpl-abc","object":"chat.completion.chunk","model":"gpt-4.1-mini-2025-04-14","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Rome\"}"}}]},"finish_reason":null}],"usage":null}` + "\n\n",
	`data: {"id":"chatcmpl-abc","object":"chat.completion.chunk","model":"gpt-4.1-mini-2025-04-14","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":null}` + "\n\n",
	`data: {"id":"chatcmpl-abc","object":"chat.completion.chunk","model":"gpt-4.1-mini-2025-04-14","choices":[],"usage":{"prompt_tokens":1200,"completion_tokens":30,"total_tokens":1230,"prompt_tokens_details":{"cached_tokens":1024},"completion_tokens_details":{"reasoning_tokens":8}}}` + "\n\n",
	"data: [DONE]\n\n",
}

var wantToolResponse = abi.LLMResponse{ID: "chatcmpl-abc", Model: "gpt-4.1-mini-2025-04-14", StopReason: abi.StopToolUse,
	Content: []abi.LLMPart{{Type: abi.PartText, Text: "Checking."}, {Type: abi.PartToolCall, ID: "call_9", Name: "get_weather", Arguments: []byte(`{"city":"Rome"}`)}},
	Usage:   abi.LLMUsage{Input: 176, CacheRead: 1024, Output: 30, Reasoning: 8}}

func sameResponse(t *testing.T, got, want abi.LLMResponse) {
	t.Helper()
	g, _ := abi.Marshal(got)
	w, _ := abi.Marshal(want)
	if string(g) != string(w) {
		t.Fatalf("response\n got %+v\nwant %+v", got, want)
	}
}

// TestChatToolCallsBothWays sends a conversation with tool calls and tool
// results, non-streaming and streaming, for both chat kinds; compares each
// request body with its golden file; checks that the tool call comes back,
// with the same usage (cache tokens included) both ways; and that the key
// travels only in the Authorization header.
func TestChatToolCallsBothWays(t *testing.T) {
	bodies := map[string][]byte{}
	for _, kind := range []Kind{OpenAIChat, OpenAICompatible} {
		f := &fake{replies: []func(http.ResponseWriter){jsonReply(200, chatToolReply), sseReply(chatToolStream...)}}
		c := newTestClient(t, f, kind, nil)
		res, err := c.Complete(context.Background(), toolRequest(), nil)
		if err != nil {
			t.Fatal(err)
		}
		sameResponse(t, res.Response, wantToolResponse)
		var chunks []abi.LLMChunk
		sres, err := c.Complete(context.Background(), toolRequest(), func(ch abi.LLMChunk) error { chunks = append(chunks, ch); return nil })
		if err != nil {
			t.Fatal(err)
		}
		sameResponse(t, sres.Response, wantToolResponse)
		if res.Attempts[0].Usage != sres.Attempts[0].Usage || len(res.Attempts) != 1 || len(sres.Attempts) != 1 {
			t.Fatalf("usage differs: %+v streamed, %+v not", sres.Attempts, res.Attempts)
		}
		if last := chunks[len(chunks)-1]; last.Type != abi.ChunkUsage || *last.Usage != wantToolResponse.Usage {
			t.Fatalf("last chunk %+v, want the usage", last)
		}
		var text string
		for _, ch := range chunks {
			if ch.Type == abi.ChunkText {
				text += ch.Text
			}
		}
		if text != "Checking." {
			t.Fatalf("text chunks %q", text)
		}
		bodies[string(kind)+".json"] = f.bodies[0]
		bodies[string(kind)+".stream.json"] = f.bodies[1]
		for i, h := range f.headers {
			if got := h.Get("Authorization"); got != "Bearer "+testKey {
				t.Fatalf("Authorization %q", got)
			}
			h.Del("Authorization")
			if strings.Contains(fmt.Sprint(h), testKey) || strings.Contains(string(f.bodies[i]), testKey) || strings.Contains(f.urls[i], testKey) {
				t.Fatalf("the key is sent outside the Authorization header")
			}
		}
	}
	golden.Sync(t, "testdata/golden", "openai-*.json", bodies, *rewrite)
}

func simpleRequest() *abi.LLMRequest {
	return &abi.LLMRequest{Model: "gpt-4.1-mini", MaxOutputTokens: 16, Messages: []abi.LLMMessage{{Role: abi.RoleUser, Content: []abi.LLMPart{{Type: abi.PartText, Text: "hi"}}}}}
}

const okReply = `{"id":"chatcmpl-ok","model":"gpt-4.1-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":2}}`

func TestChatErrors(t *testing.T) {
	ctx := context.Background()
	t.Run("429 retry-after then ok", func(t *testing.T) {
		f := &fake{replies: []func(http.ResponseWriter){jsonReply(429, `{"error":{"message":"Rate limit reached"}}`, "Retry-After", "2"), jsonReply(200, okReply)}}
		c := newTestClient(t, f, OpenAIChat, nil)
		var waited []time.Duration
		c.sleep = func(_ context.Context, d time.Duration) error { waited = append(waited, d); return nil }
		res, err := c.Complete(ctx, simpleRequest(), nil)
		if err != nil || res.Response.Text() != "Hello" {
			t.Fatalf("%v %+v", err, res)
		}
		if len(res.Attempts) != 2 || !errors.Is(res.Attempts[0].Err, ErrRateLimited) || len(waited) != 1 || waited[0] != 2*time.Second {
			t.Fatalf("attempts %+v, waited %v; want a 429 attempt then a wait of the Retry-After", res.Attempts, waited)
		}
	})
	t.Run("429 longer than max_wait", func(t *testing.T) {
		f := &fake{replies: []func(http.ResponseWriter){jsonReply(429, `{}`, "Retry-After", "600")}}
		c := newTestClient(t, f, OpenAIChat, nil)
		_, err := c.Complete(ctx, simpleRequest(), nil)
		var e *Error
		if !errors.As(err, &e) || e.Kind != abi.LLMRateLimited || e.RetryAfter != 600*time.Second || len(f.bodies) != 1 {
			t.Fatalf("err %v after %d requests; want rate_limited with retry-after 10m0s and no retry", err, len(f.bodies))
		}
	})
	t.Run("500 until the attempts run out", func(t *testing.T) {
		r := jsonReply(500, `{"error":{"message":"boom"}}`)
		f := &fake{replies: []func(http.ResponseWriter){r, r, r, r}}
		c := newTestClient(t, f, OpenAIChat, nil)
		res, err := c.Complete(ctx, simpleRequest(), nil)
		if !errors.Is(err, ErrServerError) || len(f.bodies) != 3 || len(res.Attempts) != 3 || !strings.Contains(err.Error(), "HTTP 500: boom") {
			t.Fatalf("err %v, %d requests; want server_error after 3", err, len(f.bodies))
		}
	})
	t.Run("400 is not retried", func(t *testing.T) {
		f := &fake{replies: []func(http.ResponseWriter){jsonReply(401, `{"error":{"message":"Incorrect API key provided: `+testKey+`"}}`)}}
		c := newTestClient(t, f, OpenAIChat, nil)
		_, err := c.Complete(ctx, simpleRequest(), nil)
		if !errors.Is(err, ErrRefused) || len(f.bodies) != 1 || strings.Contains(err.Error(), testKey) || !strings.Contains(err.Error(), "[key]") {
			t.Fatalf("err %v; want refused, once, with the echoed key redacted", err)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		slow := func(w http.ResponseWriter) { time.Sleep(400 * time.Millisecond); jsonReply(200, okReply)(w) }
		f := &fake{replies: []func(http.ResponseWriter){slow, jsonReply(200, okReply)}}
		c := newTestClient(t, f, OpenAIChat, func(p *Provider) { p.Timeout = Duration(100 * time.Millisecond) })
		res, err := c.Complete(ctx, simpleRequest(), nil)
		if err != nil || len(res.Attempts) != 2 || !errors.Is(res.Attempts[0].Err, ErrTimeout) {
			t.Fatalf("err %v attempts %+v; want a timed-out attempt, then success", err, res.Attempts)
		}
	})
	t.Run("malformed JSON", func(t *testing.T) {
		f := &fake{replies: []func(http.ResponseWriter){jsonReply(200, `{"id":"x","choices":[`)}}
		c := newTestClient(t, f, OpenAIChat, nil)
		_, err := c.Complete(ctx, simpleRequest(), nil)
		if !errors.Is(err, ErrMalformed) || len(f.bodies) != 1 {
			t.Fatalf("err %v; want malformed, not retried", err)
		}
	})
	t.Run("stream cut inside an event", func(t *testing.T) {
		cut := append(append([]string{}, chatToolStream[:3]...), `data: {"id":"chatcmpl-abc","choices":[{"index":0,"delta":{"content":"nev`)
		f := &fake{replies: []func(http.ResponseWriter){sseReply(cut...), jsonReply(200, okReply)}}
		c := newTestClient(t, f, OpenAIChat, nil)
		var text string
		res, err := c.Complete(ctx, simpleRequest(), func(ch abi.LLMChunk) error { text += ch.Text; return nil })
		if !errors.Is(err, ErrStreamInterrupted) || !strings.Contains(err.Error(), "inside an event") {
			t.Fatalf("err %v, want stream_interrupted inside an event", err)
		}
		if text != "Checking." || len(f.bodies) != 1 || len(res.Attempts) != 1 {
			t.Fatalf("prefix %q after %d requests; want the delivered prefix and no retry", text, len(f.bodies))
		}
	})
	t.Run("stream ends between events without DONE", func(t *testing.T) {
		f := &fake{replies: []func(http.ResponseWriter){sseReply(chatToolStream[:8]...)}}
		c := newTestClient(t, f, OpenAIChat, nil)
		_, err := c.Complete(ctx, simpleRequest(), func(abi.LLMChunk) error { return nil })
		if !errors.Is(err, ErrStreamInterrupted) || !strings.Contains(err.Error(), "between events") {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("model not allowed", func(t *testing.T) {
		f := &fake{}
		c := newTestClient(t, f, OpenAIChat, nil)
		r := simpleRequest()
		r.Model = "gpt-5"
		if _, err := c.Complete(ctx, r, nil); !errors.Is(err, ErrModelNotAllowed) || !strings.Contains(err.Error(), `model "gpt-5" is not allowed for provider test (allowed: claude-sonnet-4-5, gpt-4.1-mini)`) || len(f.bodies) != 0 {
			t.Fatalf("err %v, %d requests", err, len(f.bodies))
		}
	})
}

func TestRetryAfterDate(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := http.Header{"Retry-After": {now.Add(90 * time.Second).Format(http.TimeFormat)}}
	if got := retryAfter(h, now); got != 90*time.Second {
		t.Fatalf("%v", got)
	}
	h = http.Header{"Retry-After-Ms": {"1500"}, "Retry-After": {"9"}}
	if got := retryAfter(h, now); got != 1500*time.Millisecond {
		t.Fatalf("%v", got)
	}
}

func TestNewRefusesOtherKinds(t *testing.T) {
	for _, k := range []Kind{"gemini", ""} {
		if _, err := New(&Provider{Name: "p", Kind: k}, Credential{}, nil, nil); !errors.Is(err, ErrUnsupported) {
			t.Fatalf("%s: %v", k, err)
		}
	}
}

func TestChatImageByHash(t *testing.T) {
	png := []byte("\x89PNG fake bytes")
	sum := sha256.Sum256(png)
	req := simpleRequest()
	req.Messages[0].Content = append(req.Messages[0].Content, abi.LLMPart{Type: abi.PartImage, SHA256: sum[:], MediaType: "image/png"})
	f := &fake{replies: []func(http.ResponseWriter){jsonReply(200, okReply)}}
	c := newTestClient(t, f, OpenAIChat, nil)
	c.images = func(h []byte) ([]byte, error) { return png, nil }
	if _, err := c.Complete(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	want := `{"type":"image_url","image_url":{"url":"data:image/png;base64,` + base64.StdEncoding.EncodeToString(png) + `"}}`
	if !strings.Contains(string(f.bodies[0]), want) {
		t.Fatalf("body %s\nlacks %s", f.bodies[0], want)
	}
	c.images = func(h []byte) ([]byte, error) { return []byte("other bytes"), nil }
	if _, err := c.Complete(context.Background(), req, nil); err == nil || !strings.Contains(err.Error(), "hash to") || len(f.bodies) != 1 {
		t.Fatalf("err %v: want the hash mismatch refused before sending", err)
	}
}
