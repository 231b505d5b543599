package abi_test

// The llm vectors live in testdata/llm, apart from testdata/vectors: the
// guest SDK runners of testdata/vectors (Go, C, Rust) decode every op they
// find there, and only the Go SDK has the llm types. TestVectors leaves
// the llm ops to TestLLMVectors, which requires a valid request and
// response of each.
//
//	go test ./abi/ -run TestLLMVectorFiles -rewrite

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/internal/abivectors"
	"github.com/fxamacker/cbor/v2"
)

const llmVectorDir = "testdata/llm"

func u32(v uint32) *uint32 { return &v }

func llmBody(op, kind string) (any, error) {
	switch {
	case op == "llm.next" && kind == "request":
		return new(abi.LLMNextRequest), nil
	case op == "llm.next" && kind == "response", kind == "batch":
		return new(abi.LLMBatch), nil
	}
	switch kind {
	case "request":
		return new(abi.LLMRequest), nil
	case "response":
		return new(abi.LLMResponse), nil
	case "chunk":
		return new(abi.LLMChunk), nil
	case "error":
		return new(abi.Error), nil
	}
	return nil, fmt.Errorf("unknown kind %q", kind)
}

func generateLLMVectors(t *testing.T) []*vector {
	var out []*vector
	op := "llm.complete"
	add := func(v *vector, name string) {
		v.Op = op
		v.File = fmt.Sprintf("%s.%s.%s.txt", op, v.Kind, name)
		for _, o := range out {
			if o.File == v.File {
				t.Fatalf("duplicate vector %s", v.File)
			}
		}
		out = append(out, v)
	}
	valid := func(kind, name, comment string, value any) {
		data := marshalVector(t, value)
		d, err := cbor.Diagnose(data)
		if err != nil {
			t.Fatal(err)
		}
		add(&vector{Kind: kind, Expect: "valid", Comment: comment, Diag: d, Data: data}, name)
	}
	invalid := func(kind, name, reason, comment string, data []byte) {
		add(&vector{Kind: kind, Expect: "invalid", Reason: reason, Comment: comment, Data: data}, name)
	}
	sha := unhex("9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08")
	weather := []byte(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)

	valid("request", "minimal", "one user text message; every optional field absent",
		&abi.LLMRequest{Model: "gpt-4.1-mini", MaxOutputTokens: 256,
			Messages: []abi.LLMMessage{{Role: abi.RoleUser, Content: []abi.LLMPart{{Type: abi.PartText, Text: "Hello"}}}}})
	valid("request", "full", "system first, an image by hash, tools, sampling in thousandths (700 = 0.7), stop sequences, a JSON schema format, streaming, a named provider",
		&abi.LLMRequest{Model: "claude-sonnet-4-5", Provider: "anthropic", MaxOutputTokens: 1024, Stream: true,
			Temperature: u32(700), TopP: u32(950), Stop: []string{"\n\nHuman:"},
			Format: &abi.LLMFormat{Type: abi.FormatJSONSchema, Name: "answer", Schema: []byte(`{"type":"object"}`), Strict: true},
			Tools:  []abi.LLMTool{{Name: "get_weather", Description: "Current weather in a city", Schema: weather}},
			Messages: []abi.LLMMessage{
				{Role: abi.RoleSystem, Content: []abi.LLMPart{{Type: abi.PartText, Text: "Be brief."}}},
				{Role: abi.RoleUser, Content: []abi.LLMPart{{Type: abi.PartText, Text: "What is this?"}, {Type: abi.PartImage, SHA256: sha, MediaType: "image/png"}}},
			}})
	valid("request", "temperature-zero", "a zero temperature is sent (the pointer is set), not omitted as the provider default",
		&abi.LLMRequest{Model: "m", MaxOutputTokens: 1, Temperature: u32(0),
			Messages: []abi.LLMMessage{{Role: abi.RoleUser, Content: []abi.LLMPart{{Type: abi.PartText, Text: "x"}}}}})
	valid("request", "tool-round-trip", "the assistant's tool call and the user's tool result, by the call's id",
		&abi.LLMRequest{Model: "gpt-4.1-mini", MaxOutputTokens: 256, Tools: []abi.LLMTool{{Name: "get_weather", Schema: weather}},
			Messages: []abi.LLMMessage{
				{Role: abi.RoleUser, Content: []abi.LLMPart{{Type: abi.PartText, Text: "Weather in Paris?"}}},
				{Role: abi.RoleAssistant, Content: []abi.LLMPart{{Type: abi.PartToolCall, ID: "call_1", Name: "get_weather", Arguments: []byte(`{"city":"Paris"}`)}}},
				{Role: abi.RoleUser, Content: []abi.LLMPart{{Type: abi.PartToolResult, ID: "call_1", Text: `{"temp_c":18}`}, {Type: abi.PartToolResult, ID: "call_2", Text: "no such city", IsError: true}}},
			}})
	valid("response", "text", "usage: reasoning and cache fields are omitempty; input and output always present",
		&abi.LLMResponse{ID: "chatcmpl-1", Model: "gpt-4.1-mini-2025-04-14", StopReason: abi.StopEnd,
			Content: []abi.LLMPart{{Type: abi.PartText, Text: "Hello!"}}, Usage: abi.LLMUsage{Input: 9, Output: 3}})
	valid("response", "tool-use", "text, then a tool call; every usage field set (input excludes the cached tokens)",
		&abi.LLMResponse{ID: "msg_01", Model: "claude-sonnet-4-5-20250929", StopReason: abi.StopToolUse,
			Content: []abi.LLMPart{{Type: abi.PartText, Text: "Let me check."}, {Type: abi.PartToolCall, ID: "toolu_01", Name: "get_weather", Arguments: []byte(`{"city":"Paris"}`)}},
			Usage:   abi.LLMUsage{Input: 12, Output: 40, Reasoning: 16, CacheRead: 2048, CacheWrite: 512}})
	valid("response", "empty-content", "a turn cut at max_tokens before any text: content is the empty list",
		&abi.LLMResponse{ID: "resp_1", Model: "o4-mini", StopReason: abi.StopMaxTokens, Content: []abi.LLMPart{}, Usage: abi.LLMUsage{Input: 5, Output: 16, Reasoning: 16}})
	valid("chunk", "text", "a text delta appended to content part 0", &abi.LLMChunk{Type: abi.ChunkText, Index: 0, Text: "Hel"})
	valid("chunk", "tool-call-start", "the first chunk of a tool call carries its id and name", &abi.LLMChunk{Type: abi.ChunkToolCall, Index: 1, ID: "call_1", Name: "get_weather"})
	valid("chunk", "tool-call-arguments", "later chunks append JSON text to the arguments", &abi.LLMChunk{Type: abi.ChunkToolCall, Index: 1, Arguments: []byte(`{"city":`)})
	valid("chunk", "usage", "the last chunk", &abi.LLMChunk{Type: abi.ChunkUsage, Usage: &abi.LLMUsage{Input: 9, Output: 3, CacheRead: 1024}})
	valid("error", "rate-limited", "a failed call's message begins with its kind", &abi.Error{Code: abi.StatusFailed, Message: "rate_limited: provider openai: 429 after 3 attempts; retry after 20s"})
	valid("error", "stream-interrupted", "the chunks delivered before the cut are the prefix of the answer", &abi.Error{Code: abi.StatusFailed, Message: "stream_interrupted: provider anthropic: the stream ended inside an event after 12 chunks"})
	valid("error", "denied", "a model the grant or the cell's llm.yaml does not allow", &abi.Error{Code: abi.StatusDenied, Message: `llm.complete: model "gpt-5" is not allowed for provider openai (allowed: gpt-4.1-mini)`})

	invalid("request", "float-temperature", "wrong-type", "temperature is an integer in thousandths; floats never appear in a body",
		cborCat(cborMap(4), cborText("model"), cborText("m"), cborText("messages"), cborArray(0), cborText("temperature"), unhex("f93c00"), cborText("max_output_tokens"), cborUint(1)))
	invalid("request", "stream-false", "not-canonical", "stream is omitempty: false MUST be absent",
		cborCat(cborMap(4), cborText("model"), cborText("m"), cborText("stream"), cborFalse, cborText("messages"), cborArray(0), cborText("max_output_tokens"), cborUint(1)))
	invalid("response", "unknown-stop-field", "unknown-field", "stop_sequence is not a field: the stop reason says it",
		cborCat(cborMap(6), cborText("id"), cborText("x"), cborText("model"), cborText("m"), cborText("usage"), cborMap(2), cborText("input"), cborUint(0), cborText("output"), cborUint(0),
			cborText("content"), cborArray(0), cborText("stop_reason"), cborText("end"), cborText("stop_sequence"), cborText("x")))
	invalid("chunk", "index-negative", "wrong-type", "index is unsigned",
		cborCat(cborMap(2), cborText("type"), cborText("text"), cborText("index"), unhex("20")))
	valid("batch", "first", "the answer of a streamed llm.complete: its first chunks, the stream's step and a cursor where the provider can resume",
		&abi.LLMBatch{Step: 7, Chunks: []abi.LLMChunk{{Type: abi.ChunkText, Index: 0, Text: "Hel"}, {Type: abi.ChunkText, Index: 0, Text: "lo"}},
			Cursor: &abi.LLMCursor{Provider: "openai", Model: "gpt-4.1-mini", ResponseID: "resp_1", Delivered: 2, MAC: bytes.Repeat([]byte{0xab}, 32)}})

	op = "llm.next"
	valid("request", "basic", "continue the stream opened at step 7", &abi.LLMNextRequest{Step: 7})
	valid("request", "cursor", "from the last batch's cursor", &abi.LLMNextRequest{Step: 7, Cursor: &abi.LLMCursor{Provider: "openai", Model: "gpt-4.1-mini", ResponseID: "resp_1", Delivered: 2, MAC: bytes.Repeat([]byte{0xab}, 32)}})
	valid("response", "more", "chunks that arrived since; no response yet", &abi.LLMBatch{Step: 7, Chunks: []abi.LLMChunk{{Type: abi.ChunkText, Index: 0, Text: "!"}}})
	valid("response", "last", "the last batch: its chunks (maybe none) and the whole answer",
		&abi.LLMBatch{Step: 7, Chunks: []abi.LLMChunk{{Type: abi.ChunkUsage, Usage: &abi.LLMUsage{Input: 9, Output: 3}}},
			Response: &abi.LLMResponse{ID: "resp_1", Model: "gpt-4.1-mini", StopReason: abi.StopEnd, Content: []abi.LLMPart{{Type: abi.PartText, Text: "Hello!"}}, Usage: abi.LLMUsage{Input: 9, Output: 3}}})
	valid("error", "lost", "a stream the host lost (a resume after a crash) and the provider cannot resume",
		&abi.Error{Code: abi.StatusFailed, Message: "stream_interrupted: the stream of step 7 was lost when the run stopped"})
	invalid("request", "step-text", "wrong-type", "step is an unsigned integer",
		cborCat(cborMap(1), cborText("step"), cborText("7")))
	return out
}

func TestLLMVectorFiles(t *testing.T) {
	checkVectorFiles(t, llmVectorDir, "TestLLMVectorFiles", generateLLMVectors(t))
}

// TestLLMVectors runs the files of testdata/llm as TestVectors runs
// testdata/vectors: valid ones decode and re-encode to the same bytes,
// invalid ones fail for the reason they name.
func TestLLMVectors(t *testing.T) {
	vs, err := abivectors.Read(llmVectorDir)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, v := range vs {
		t.Run(strings.TrimSuffix(v.File, ".txt"), func(t *testing.T) {
			body, err := llmBody(v.Op, v.Kind)
			if err != nil {
				t.Fatal(err)
			}
			err = abi.Unmarshal(v.Data, body)
			if v.Expect == "invalid" {
				check := invalidReasons[v.Reason]
				if check == nil {
					t.Fatalf("unknown reason %q", v.Reason)
				}
				if err == nil || !check(err) {
					t.Fatalf("decoded with err %v, want a %s error", err, v.Reason)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			kinds[v.Kind] = true
			kinds[v.Op+"."+v.Kind] = true
			again, err := abi.Marshal(body)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again, v.Data) {
				t.Fatalf("re-encoded to %x, want %x", again, v.Data)
			}
			if r, ok := body.(*abi.LLMRequest); ok {
				if err := r.Validate(); err != nil {
					t.Fatalf("a valid vector fails Validate: %v", err)
				}
			}
		})
	}
	for _, k := range []string{"request", "response", "chunk", "error", "batch"} {
		if !kinds[k] {
			t.Errorf("no valid %s vector", k)
		}
	}
	for _, op := range abi.Ops {
		for _, kind := range []string{"request", "response"} {
			if op.Cap == abi.CapLLM && !kinds[op.Name+"."+kind] {
				t.Errorf("no valid %s vector for %s", kind, op.Name)
			}
		}
	}
}

func TestLLMValidate(t *testing.T) {
	text := func(s string) abi.LLMPart { return abi.LLMPart{Type: abi.PartText, Text: s} }
	user := abi.LLMMessage{Role: abi.RoleUser, Content: []abi.LLMPart{text("hi")}}
	base := func() abi.LLMRequest {
		return abi.LLMRequest{Model: "m", MaxOutputTokens: 10, Messages: []abi.LLMMessage{user}}
	}
	cases := []struct {
		name string
		edit func(r *abi.LLMRequest)
		want string
	}{
		{"no model", func(r *abi.LLMRequest) { r.Model = "" }, "model is empty"},
		{"no bound", func(r *abi.LLMRequest) { r.MaxOutputTokens = 0 }, "max_output_tokens is 0"},
		{"hot", func(r *abi.LLMRequest) { r.Temperature = u32(2001) }, "temperature 2001"},
		{"top_p", func(r *abi.LLMRequest) { r.TopP = u32(1001) }, "top_p 1001"},
		{"no messages", func(r *abi.LLMRequest) { r.Messages = nil }, "messages is empty"},
		{"role", func(r *abi.LLMRequest) { r.Messages[0].Role = "tool" }, `role "tool"`},
		{"late system", func(r *abi.LLMRequest) {
			r.Messages = append(r.Messages, abi.LLMMessage{Role: abi.RoleSystem, Content: []abi.LLMPart{text("x")}})
		}, "messages[1]: a system message must come before"},
		{"image hash", func(r *abi.LLMRequest) {
			r.Messages[0].Content = []abi.LLMPart{{Type: abi.PartImage, SHA256: []byte{1}, MediaType: "image/png"}}
		}, "sha256 is 1 bytes"},
		{"image type", func(r *abi.LLMRequest) {
			r.Messages[0].Content = []abi.LLMPart{{Type: abi.PartImage, SHA256: make([]byte, 32), MediaType: "image/tiff"}}
		}, `media_type "image/tiff"`},
		{"tool call from user", func(r *abi.LLMRequest) {
			r.Messages[0].Content = []abi.LLMPart{{Type: abi.PartToolCall, ID: "a", Name: "b"}}
		}, "belongs to an assistant message"},
		{"result without id", func(r *abi.LLMRequest) {
			r.Messages[0].Content = []abi.LLMPart{{Type: abi.PartToolResult, Text: "x"}}
		}, "needs the id"},
		{"text with extra", func(r *abi.LLMRequest) {
			r.Messages[0].Content = []abi.LLMPart{{Type: abi.PartText, Text: "x", Name: "n"}}
		}, "does not use"},
		{"part type", func(r *abi.LLMRequest) { r.Messages[0].Content = []abi.LLMPart{{Type: "audio"}} }, `part type "audio"`},
		{"dup tool", func(r *abi.LLMRequest) {
			r.Tools = []abi.LLMTool{{Name: "a", Schema: []byte("{}")}, {Name: "a", Schema: []byte("{}")}}
		}, `tool "a" is defined twice`},
		{"schema-less format", func(r *abi.LLMRequest) { r.Format = &abi.LLMFormat{Type: abi.FormatJSONSchema, Name: "x"} }, "needs a name and a schema"},
		{"format type", func(r *abi.LLMRequest) { r.Format = &abi.LLMFormat{Type: "yaml"} }, `format type "yaml"`},
		{"empty stop", func(r *abi.LLMRequest) { r.Stop = []string{""} }, "stop[0] is empty"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := base()
			r.Messages = append([]abi.LLMMessage(nil), r.Messages...)
			c.edit(&r)
			err := r.Validate()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, c.want)
			}
		})
	}
	r := base()
	if err := r.Validate(); err != nil {
		t.Fatalf("the base request fails: %v", err)
	}
}

func TestLLMKindOf(t *testing.T) {
	for _, k := range abi.LLMErrorKinds {
		got, ok := abi.LLMKindOf(&abi.Error{Code: abi.StatusFailed, Message: string(k) + ": x"})
		if !ok || got != k {
			t.Errorf("LLMKindOf(%s) = %q, %v", k, got, ok)
		}
	}
	for _, e := range []*abi.Error{nil, {Code: abi.StatusDenied, Message: "rate_limited: x"}, {Code: abi.StatusFailed, Message: "teapot: x"}, {Code: abi.StatusFailed, Message: "rate_limited"}} {
		if k, ok := abi.LLMKindOf(e); ok {
			t.Errorf("LLMKindOf(%+v) = %q, want none", e, k)
		}
	}
}
