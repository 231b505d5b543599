package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/internal/fakellm"
	"github.com/agentrt/agentrt/internal/fakellm/fakellmtest"
)

// The clients against the repository's fake provider (internal/fakellm),
// which was written apart from them, from the providers' documented wire
// formats, and is itself tested through the official SDKs: where the two
// agree, both read the APIs alike. Each API is driven through a
// tool-calling conversation, streamed and not, with faults.

const fakeKey = "sk-fake-Zq81LmXv0Rt4"

// fakeKinds maps each client kind to the fake's API name and the base URL
// suffix that kind's configuration takes.
var fakeKinds = []struct {
	kind Kind
	api  string
	base string
}{
	{OpenAIChat, "chat", "/v1"},
	{OpenAICompatible, "chat", "/v1"},
	{OpenAIResponses, "responses", "/v1"},
	{Anthropic, "messages", ""},
}

// fakeClient serves script on a loopback fakellm server and returns a
// client of the kind for it, with retries that wait no real time (the
// waits asked are recorded in waits).
func fakeClient(t *testing.T, kind Kind, base, script string) (*Client, *fakellm.Server, *[]time.Duration) {
	t.Helper()
	srv, hs := fakellmtest.Serve(t, script)
	t.Setenv("AGENTRT_TEST_FAKE_KEY", fakeKey)
	cfg, err := Parse("llm.yaml", []byte(fmt.Sprintf(`
providers:
  fake:
    kind: %s
    base_url: %s%s
    credential: {env: AGENTRT_TEST_FAKE_KEY}
    retry: {attempts: 3, max_wait: 5s}
    models:
      m-test: {input: "2.50", output: "10", cache_read: "1.25", cache_write: "3.75"}
`, kind, hs.URL, base)))
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Providers["fake"]
	cred, err := p.LoadCredential()
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(p, cred, hs.Client(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var waits []time.Duration
	c.sleep = func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }
	return c, srv, &waits
}

// conversation is a two-turn tool-calling script: the model asks for a
// tool, then answers from its result. Its usages include cache and
// reasoning tokens.
const conversation = `
api_key: ` + fakeKey + `
turns:
  - expect: {model: m-test, last_role: user, tools: [lookup]}
    reply:
      tool_calls: [{name: lookup, arguments: {city: Paris}, chunks: 3}]
    usage: {input_tokens: 120, output_tokens: 14, cache_read_tokens: 40, cache_write_tokens: 8}
  - expect: {model: m-test}
    reply: {text: "Paris has 2.1 million people.", chunks: 4}
    usage: {input_tokens: 160, output_tokens: 9, cache_read_tokens: 120, reasoning_tokens: 3}
`

func firstRequest() *abi.LLMRequest {
	return &abi.LLMRequest{
		Model:           "m-test",
		MaxOutputTokens: 256,
		Tools:           []abi.LLMTool{{Name: "lookup", Description: "population of a city", Schema: []byte(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}},
		Messages: []abi.LLMMessage{
			{Role: abi.RoleSystem, Content: []abi.LLMPart{{Type: abi.PartText, Text: "Answer with numbers."}}},
			{Role: abi.RoleUser, Content: []abi.LLMPart{{Type: abi.PartText, Text: "How many people live in Paris?"}}},
		},
	}
}

func TestClientsAgainstTheFakeProvider(t *testing.T) {
	for _, k := range fakeKinds {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", k.kind, stream), func(t *testing.T) {
				c, srv, _ := fakeClient(t, k.kind, k.base, conversation)
				var chunks []abi.LLMChunk
				var onChunk func(abi.LLMChunk) error
				if stream {
					onChunk = func(ch abi.LLMChunk) error { chunks = append(chunks, ch); return nil }
				}
				req := firstRequest()
				res, err := c.Complete(context.Background(), req, onChunk)
				if err != nil {
					t.Fatalf("first call: %v", err)
				}
				r1 := res.Response
				if r1.StopReason != abi.StopToolUse || len(r1.Content) != 1 || r1.Content[0].Type != abi.PartToolCall || r1.Content[0].Name != "lookup" {
					t.Fatalf("first call: stop %q, content %+v; want one lookup tool call", r1.StopReason, r1.Content)
				}
				if got := strings.ReplaceAll(string(r1.Content[0].Arguments), " ", ""); got != `{"city":"Paris"}` {
					t.Fatalf("tool call arguments %s", r1.Content[0].Arguments)
				}
				// Input counts cached tokens apart (host/budget prices them apart).
				want1 := abi.LLMUsage{Input: 120, Output: 14, CacheRead: 40, CacheWrite: 8}
				if r1.Usage != want1 {
					t.Fatalf("first call usage %+v, want %+v", r1.Usage, want1)
				}

				// The tool's result goes back, with the call's id.
				req.Messages = append(req.Messages,
					abi.LLMMessage{Role: abi.RoleAssistant, Content: r1.Content},
					abi.LLMMessage{Role: abi.RoleUser, Content: []abi.LLMPart{{Type: abi.PartToolResult, ID: r1.Content[0].ID, Text: `{"population":2102650}`}}})
				res, err = c.Complete(context.Background(), req, onChunk)
				if err != nil {
					t.Fatalf("second call: %v", err)
				}
				r2 := res.Response
				if r2.StopReason != abi.StopEnd || len(r2.Content) != 1 || r2.Content[0].Text != "Paris has 2.1 million people." {
					t.Fatalf("second call: stop %q, content %+v", r2.StopReason, r2.Content)
				}
				want2 := abi.LLMUsage{Input: 160, Output: 9, CacheRead: 120, Reasoning: 3}
				if r2.Usage != want2 {
					t.Fatalf("second call usage %+v, want %+v", r2.Usage, want2)
				}
				if stream {
					var text strings.Builder
					for _, ch := range chunks {
						if ch.Type == abi.ChunkText {
							text.WriteString(ch.Text)
						}
					}
					if text.String() != r2.Content[0].Text {
						t.Fatalf("streamed text %q, response %q", text.String(), r2.Content[0].Text)
					}
				}

				st := fakellmtest.Settled(t, srv)
				if len(st.Requests) != 2 {
					t.Fatalf("the fake was sent %d requests, want 2", len(st.Requests))
				}
				for i, rq := range st.Requests {
					if rq.API != k.api || rq.Stream != stream || rq.Outcome != "completed" {
						t.Fatalf("request %d: api %q stream %v outcome %q", i, rq.API, rq.Stream, rq.Outcome)
					}
				}
				// What the client settles is what the provider reported.
				if got, want := r1.Usage.Input+r2.Usage.Input, uint64(st.Usage.InputTokens); got != want {
					t.Fatalf("input tokens: client %d, fake %d", got, want)
				}
				if got, want := r1.Usage.Output+r2.Usage.Output, uint64(st.Usage.OutputTokens); got != want {
					t.Fatalf("output tokens: client %d, fake %d", got, want)
				}
				if got, want := r1.Usage.CacheRead+r2.Usage.CacheRead, uint64(st.Usage.CacheReadTokens); got != want {
					t.Fatalf("cache read tokens: client %d, fake %d", got, want)
				}
				if got, want := r1.Usage.CacheWrite+r2.Usage.CacheWrite, uint64(st.Usage.CacheWriteTokens); got != want {
					t.Fatalf("cache write tokens: client %d, fake %d", got, want)
				}
			})
		}
	}
}

func TestClientsAgainstTheFakeProvidersFaults(t *testing.T) {
	for _, k := range fakeKinds {
		t.Run(string(k.kind)+"/429-then-500-then-ok", func(t *testing.T) {
			c, srv, waits := fakeClient(t, k.kind, k.base, `
api_key: `+fakeKey+`
turns:
  - reply: {text: "ok"}
    usage: {input_tokens: 5, output_tokens: 1}
    faults: [{status: 429, retry_after: 2s}, {status: 500}]
`)
			res, err := c.Complete(context.Background(), firstRequest(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Attempts) != 3 || !errors.Is(res.Attempts[0].Err, ErrRateLimited) || res.Attempts[2].Err != nil {
				t.Fatalf("attempts %+v; want a 429, a 500 and a success", res.Attempts)
			}
			if len(*waits) < 1 || (*waits)[0] != 2*time.Second {
				t.Fatalf("waits %v; want the 429's Retry-After of 2s first", *waits)
			}
			st := fakellmtest.Settled(t, srv)
			if len(st.Requests) != 3 || st.Usage.InputTokens != 5 {
				t.Fatalf("fake saw %d requests, usage %+v", len(st.Requests), st.Usage)
			}
		})
		t.Run(string(k.kind)+"/stream-cut", func(t *testing.T) {
			c, srv, _ := fakeClient(t, k.kind, k.base, `
api_key: `+fakeKey+`
turns:
  - reply: {text: "one two three four five six", chunks: 6}
    usage: {input_tokens: 5, output_tokens: 6}
    faults: [{cut_after: 4}]
`)
			var prefix strings.Builder
			_, err := c.Complete(context.Background(), firstRequest(), func(ch abi.LLMChunk) error {
				prefix.WriteString(ch.Text)
				return nil
			})
			if !errors.Is(err, ErrStreamInterrupted) {
				t.Fatalf("err %v, want ErrStreamInterrupted", err)
			}
			if !strings.HasPrefix("one two three four five six", prefix.String()) {
				t.Fatalf("prefix %q is not a prefix of the reply", prefix.String())
			}
			// Never retried once chunks were delivered.
			if st := fakellmtest.Settled(t, srv); len(st.Requests) != 1 {
				t.Fatalf("fake saw %d requests, want 1", len(st.Requests))
			}
		})
		t.Run(string(k.kind)+"/malformed", func(t *testing.T) {
			c, _, _ := fakeClient(t, k.kind, k.base, `
api_key: `+fakeKey+`
turns:
  - reply: {text: "ok"}
    faults: [{malformed: true}]
`)
			_, err := c.Complete(context.Background(), firstRequest(), nil)
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("err %v, want ErrMalformed", err)
			}
		})
		t.Run(string(k.kind)+"/wrong-key", func(t *testing.T) {
			c, _, _ := fakeClient(t, k.kind, k.base, `
api_key: sk-another-key
turns:
  - reply: {text: "ok"}
`)
			_, err := c.Complete(context.Background(), firstRequest(), nil)
			if err == nil || errors.Is(err, ErrRateLimited) || strings.Contains(err.Error(), fakeKey) {
				t.Fatalf("err %v; want a refusal that does not carry the key", err)
			}
		})
	}
}
