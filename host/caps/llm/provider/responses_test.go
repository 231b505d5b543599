package provider

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/internal/golden"
)

// A reply as platform.openai.com/docs/api-reference/responses documents it.
const respToolReply = `{"id":"resp_01","object":"response","created_at":1741476542,"status":"completed","model":"gpt-4.1-mini-2025-04-14",
"output":[{"type":"reasoning","id":"rs_1","summary":[]},
{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Checking.","annotations":[]}]},
{"type":"function_call","id":"fc_1","call_id":"call_9","name":"get_weather","arguments":"{\"city\":\"Rome\"}","status":"completed"}],
"usage":{"input_tokens":1200,"input_tokens_details":{"cached_tokens":1024},"output_tokens":30,"output_tokens_details":{"reasoning_tokens":8},"total_tokens":1230}}`

var respToolStream = []string{
	"event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_01\",\"object\":\"response\",\"status\":\"in_progress\",\"model\":\"gpt-4.1-mini-2025-04-14\",\"output\":[],\"usage\":null}}\n\n",
	"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":1,\"output_index\":1,\"item\":{\"type\":\"message\",\"id\":\"msg_1\",\"role\":\"assistant\",\"content\":[]}}\n\n",
	"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":2,\"item_id\":\"msg_1\",\"output_index\":1,\"content_index\":0,\"delta\":\"Check\"}\n\n",
	"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":3,\"item_id\":\"msg_1\",\"output_index\":1,\"content_index\":0,\"delta\":\"ing.\"}\n\n",
	"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":4,\"output_index\":2,\"item\":{\"type\":\"function_call\",\"id\":\"fc_1\",\"call_id\":\"call_9\",\"name\":\"get_weather\",\"arguments\":\"\"}}\n\n",
	"event: response.function_call_arguments.delta\ndata: {\"type\":\"response.function_call_arguments.delta\",\"sequence_number\":5,\"item_id\":\"fc_1\",\"output_index\":2,\"delta\":\"{\\\"city\\\":\\\"Rome\\\"}\"}\n\n",
	"event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":6,\"response\":" + strings.ReplaceAll(respToolReply, "\n", "") + "}\n\n",
}

func respRequestFor() *abi.LLMRequest {
	r := toolRequest()
	r.Stop = nil
	return r
}

func TestResponsesToolCallsBothWays(t *testing.T) {
	f := &fake{replies: []func(http.ResponseWriter){jsonReply(200, respToolReply), sseReply(respToolStream...)}}
	c := newTestClient(t, f, OpenAIResponses, nil)
	res, err := c.Complete(context.Background(), respRequestFor(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := wantToolResponse
	want.ID = "resp_01"
	sameResponse(t, res.Response, want)
	var chunks []abi.LLMChunk
	sres, err := c.Complete(context.Background(), respRequestFor(), func(ch abi.LLMChunk) error { chunks = append(chunks, ch); return nil })
	if err != nil {
		t.Fatal(err)
	}
	sameResponse(t, sres.Response, want)
	if res.Attempts[0].Usage != sres.Attempts[0].Usage {
		t.Fatalf("usage %+v streamed, %+v not", sres.Attempts[0].Usage, res.Attempts[0].Usage)
	}
	// The chunks rebuild the response the final event carries.
	rebuilt := []abi.LLMPart{}
	for _, ch := range chunks {
		switch ch.Type {
		case abi.ChunkText:
			if int(ch.Index) == len(rebuilt) {
				rebuilt = append(rebuilt, abi.LLMPart{Type: abi.PartText})
			}
			rebuilt[ch.Index].Text += ch.Text
		case abi.ChunkToolCall:
			if int(ch.Index) == len(rebuilt) {
				rebuilt = append(rebuilt, abi.LLMPart{Type: abi.PartToolCall, ID: ch.ID, Name: ch.Name})
			}
			rebuilt[ch.Index].Arguments = append(rebuilt[ch.Index].Arguments, ch.Arguments...)
		}
	}
	got := want
	got.Content = rebuilt
	sameResponse(t, got, want)
	for _, h := range f.headers {
		if h.Get("Authorization") != "Bearer "+testKey {
			t.Fatal("Authorization")
		}
	}
	golden.Sync(t, "testdata/golden", "responses*.json", map[string][]byte{"responses.json": f.bodies[0], "responses.stream.json": f.bodies[1]}, *rewrite)
}

func TestResponsesErrors(t *testing.T) {
	ctx := context.Background()
	t.Run("stop sequences refused", func(t *testing.T) {
		f := &fake{}
		c := newTestClient(t, f, OpenAIResponses, nil)
		if _, err := c.Complete(ctx, toolRequest(), nil); !errors.Is(err, ErrUnsupported) || len(f.bodies) != 0 {
			t.Fatalf("%v", err)
		}
	})
	t.Run("cut inside an event", func(t *testing.T) {
		ev := append(append([]string{}, respToolStream[:4]...), "event: response.output_text.delta\ndata: {\"type\":\"response.outp")
		f := &fake{replies: []func(http.ResponseWriter){sseReply(ev...)}}
		c := newTestClient(t, f, OpenAIResponses, nil)
		var text string
		_, err := c.Complete(ctx, respRequestFor(), func(ch abi.LLMChunk) error { text += ch.Text; return nil })
		if !errors.Is(err, ErrStreamInterrupted) || text != "Checking." || len(f.bodies) != 1 {
			t.Fatalf("err %v, prefix %q", err, text)
		}
	})
	t.Run("incomplete at max_output_tokens", func(t *testing.T) {
		f := &fake{replies: []func(http.ResponseWriter){jsonReply(200, `{"id":"resp_2","object":"response","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"model":"m","output":[],"usage":{"input_tokens":5,"output_tokens":16}}`)}}
		c := newTestClient(t, f, OpenAIResponses, nil)
		res, err := c.Complete(ctx, respRequestFor(), nil)
		if err != nil || res.Response.StopReason != abi.StopMaxTokens {
			t.Fatalf("%v %+v", err, res.Response)
		}
	})
	t.Run("malformed", func(t *testing.T) {
		f := &fake{replies: []func(http.ResponseWriter){jsonReply(200, `{"object":"list"}`)}}
		c := newTestClient(t, f, OpenAIResponses, nil)
		if _, err := c.Complete(ctx, respRequestFor(), nil); !errors.Is(err, ErrMalformed) {
			t.Fatalf("%v", err)
		}
	})
}

// TestResponsesLongEvent streams a final event far longer than the read
// buffer: an answer of 200 KiB arrives whole.
func TestResponsesLongEvent(t *testing.T) {
	long := strings.Repeat("x", 200<<10)
	reply := `{"id":"resp_3","object":"response","status":"completed","model":"m","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"` + long + `"}]}],"usage":{"input_tokens":5,"output_tokens":51200}}`
	f := &fake{replies: []func(http.ResponseWriter){sseReply("event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":" + reply + "}\n\n")}}
	c := newTestClient(t, f, OpenAIResponses, nil)
	res, err := c.Complete(context.Background(), respRequestFor(), func(abi.LLMChunk) error { return nil })
	if err != nil || res.Response.Text() != long {
		t.Fatalf("err %v, text of %d bytes", err, len(res.Response.Text()))
	}
}
