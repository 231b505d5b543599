package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/internal/golden"
)

// Replies as docs.anthropic.com documents them (Messages, streaming).
const anthToolReply = `{"id":"msg_01A","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929",
"content":[{"type":"text","text":"Checking."},{"type":"tool_use","id":"toolu_01","name":"get_weather","input":{"city": "Rome"}}],
"stop_reason":"tool_use","stop_sequence":null,
"usage":{"input_tokens":176,"cache_creation_input_tokens":512,"cache_read_input_tokens":1024,"output_tokens":30}}`

var anthToolStream = []string{
	"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01A\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5-20250929\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":176,\"cache_creation_input_tokens\":512,\"cache_read_input_tokens\":1024,\"output_tokens\":1}}}\n\n",
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
	"event: ping\ndata: {\"type\": \"ping\"}\n\n",
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Check\"}}\n\n",
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"ing.\"}}\n\n",
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_01\",\"name\":\"get_weather\",\"input\":{}}}\n\n",
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"city\\\":\"}}\n\n",
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\\\"Rome\\\"}\"}}\n\n",
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
	"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":30}}\n\n",
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
}

var wantAnthResponse = abi.LLMResponse{ID: "msg_01A", Model: "claude-sonnet-4-5-20250929", StopReason: abi.StopToolUse,
	Content: []abi.LLMPart{{Type: abi.PartText, Text: "Checking."}, {Type: abi.PartToolCall, ID: "toolu_01", Name: "get_weather", Arguments: []byte(`{"city":"Rome"}`)}},
	Usage:   abi.LLMUsage{Input: 176, CacheWrite: 512, CacheRead: 1024, Output: 30}}

func anthRequestFor() *abi.LLMRequest {
	r := toolRequest()
	r.Model = "claude-sonnet-4-5"
	return r
}

// TestAnthropicToolCallsBothWays is TestChatToolCallsBothWays for
// Messages: golden bodies, tool calls both ways, the same usage streamed
// and not (message_delta's cumulative output_tokens replaces
// message_start's 1, never adds to it), the key only in x-api-key, and
// the pinned anthropic-version.
func TestAnthropicToolCallsBothWays(t *testing.T) {
	f := &fake{replies: []func(http.ResponseWriter){jsonReply(200, anthToolReply), sseReply(anthToolStream...)}}
	c := newTestClient(t, f, Anthropic, nil)
	res, err := c.Complete(context.Background(), anthRequestFor(), nil)
	if err != nil {
		t.Fatal(err)
	}
	sameResponse(t, res.Response, wantAnthResponse)
	var chunks []abi.LLMChunk
	sres, err := c.Complete(context.Background(), anthRequestFor(), func(ch abi.LLMChunk) error { chunks = append(chunks, ch); return nil })
	if err != nil {
		t.Fatal(err)
	}
	sameResponse(t, sres.Response, wantAnthResponse)
	if res.Attempts[0].Usage != sres.Attempts[0].Usage {
		t.Fatalf("usage %+v streamed, %+v not", sres.Attempts[0].Usage, res.Attempts[0].Usage)
	}
	if last := chunks[len(chunks)-1]; last.Type != abi.ChunkUsage || *last.Usage != wantAnthResponse.Usage {
		t.Fatalf("last chunk %+v", last)
	}
	for i, h := range f.headers {
		if h.Get("X-Api-Key") != testKey || h.Get("Anthropic-Version") != AnthropicVersion {
			t.Fatalf("headers %v", h.Get("Anthropic-Version"))
		}
		h.Del("X-Api-Key")
		if strings.Contains(fmt.Sprint(h), testKey) || strings.Contains(string(f.bodies[i]), testKey) || strings.Contains(f.urls[i], testKey) {
			t.Fatal("the key is sent outside x-api-key")
		}
	}
	golden.Sync(t, "testdata/golden", "anthropic*.json", map[string][]byte{"anthropic.json": f.bodies[0], "anthropic.stream.json": f.bodies[1]}, *rewrite)
}

func TestAnthropicErrors(t *testing.T) {
	ctx := context.Background()
	t.Run("529 overloaded is retried", func(t *testing.T) {
		f := &fake{replies: []func(http.ResponseWriter){jsonReply(529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`), jsonReply(200, anthToolReply)}}
		c := newTestClient(t, f, Anthropic, nil)
		res, err := c.Complete(ctx, anthRequestFor(), nil)
		if err != nil || len(res.Attempts) != 2 || !errors.Is(res.Attempts[0].Err, ErrServerError) || !strings.Contains(res.Attempts[0].Err.Error(), "Overloaded") {
			t.Fatalf("%v %+v", err, res.Attempts)
		}
	})
	t.Run("error event mid-stream", func(t *testing.T) {
		ev := append(append([]string{}, anthToolStream[:4]...), "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n")
		f := &fake{replies: []func(http.ResponseWriter){sseReply(ev...)}}
		c := newTestClient(t, f, Anthropic, nil)
		var text string
		_, err := c.Complete(ctx, anthRequestFor(), func(ch abi.LLMChunk) error { text += ch.Text; return nil })
		if !errors.Is(err, ErrServerError) || text != "Check" || len(f.bodies) != 1 {
			t.Fatalf("err %v, prefix %q, %d requests; want server_error after the prefix, not retried", err, text, len(f.bodies))
		}
	})
	t.Run("cut inside an event", func(t *testing.T) {
		ev := append(append([]string{}, anthToolStream[:5]...), "event: content_block_delta\ndata: {\"type\":\"content_blo")
		f := &fake{replies: []func(http.ResponseWriter){sseReply(ev...)}}
		c := newTestClient(t, f, Anthropic, nil)
		var text string
		res, err := c.Complete(ctx, anthRequestFor(), func(ch abi.LLMChunk) error { text += ch.Text; return nil })
		if !errors.Is(err, ErrStreamInterrupted) || text != "Checking." || res.Attempts[0].Usage.Input != 176 {
			t.Fatalf("err %v, prefix %q, usage %+v; want the prefix and message_start's input usage", err, text, res.Attempts[0].Usage)
		}
	})
	t.Run("json format refused", func(t *testing.T) {
		f := &fake{}
		c := newTestClient(t, f, Anthropic, nil)
		r := anthRequestFor()
		r.Format = &abi.LLMFormat{Type: abi.FormatJSON}
		if _, err := c.Complete(ctx, r, nil); !errors.Is(err, ErrUnsupported) || len(f.bodies) != 0 {
			t.Fatalf("%v", err)
		}
	})
}
