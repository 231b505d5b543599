package fakellm_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/agentrt/agentrt/internal/fakellm"
)

const key = "sk-fake-0123456789"

// start serves script on a loopback port for the test's lifetime.
func start(t testing.TB, script string) (*fakellm.Server, string) {
	t.Helper()
	sc, err := fakellm.ParseScript([]byte(script))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := fakellm.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return srv, hs.URL
}

func openaiClient(url string, opts ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{
		option.WithAPIKey(key), option.WithBaseURL(url + "/v1/"), option.WithMaxRetries(0),
	}, opts...)...)
}

func anthropicClient(url string, opts ...aoption.RequestOption) anthropic.Client {
	return anthropic.NewClient(append([]aoption.RequestOption{
		aoption.WithAPIKey(key), aoption.WithBaseURL(url), aoption.WithMaxRetries(0),
	}, opts...)...)
}

// twoTurns is a script whose turns are each asked twice, streamed and
// not, so a test compares the two answers of one turn.
const twoTurns = `
api_key: ` + key + `
match: key
turns:
  - key: "What is in the news?"
    reply:
      text: "Let me look that up for you."
      chunks: 4
      tool_calls:
        - {name: fetch, arguments: {url: "http://news.test/today", max_bytes: 4096}, chunks: 3}
        - {id: call_notes, name: notes_write, arguments: '{"key": "q", "value": "news"}'}
    usage: {input_tokens: 120, output_tokens: 40, cache_read_tokens: 64, cache_write_tokens: 16, reasoning_tokens: 8}
  - key: "Say hello"
    reply: {text: "Hello, wörld!", chunks: 5}
    usage: {input_tokens: 7, output_tokens: 3}
`

var want = fakellm.Usage{InputTokens: 120, OutputTokens: 40, CacheReadTokens: 64, CacheWriteTokens: 16, ReasoningTokens: 8}

func TestChatCompletionsThroughTheSDK(t *testing.T) {
	srv, url := start(t, twoTurns)
	c := openaiClient(url)
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{
		Model:    "gpt-test",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is in the news?")},
		Tools: []openai.ChatCompletionToolUnionParam{
			openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "fetch"}),
		},
	}
	got, err := c.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := c.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	var last openai.ChatCompletionChunk
	chunks := 0
	for stream.Next() {
		last = stream.Current()
		acc.AddChunk(last)
		chunks++
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	// openai-go v3.98.0's ChatCompletionAccumulator sums the usage
	// fields it knows and drops prompt_tokens_details.cache_write_tokens;
	// the usage is the last chunk's, which a client must read itself.
	acc.Usage = last.Usage
	if len(last.Choices) != 0 {
		t.Errorf("the usage chunk has %d choices, want none", len(last.Choices))
	}
	for name, cc := range map[string]*openai.ChatCompletion{"plain": got, "streamed": &acc.ChatCompletion} {
		m := cc.Choices[0].Message
		if m.Content != "Let me look that up for you." || cc.Choices[0].FinishReason != "tool_calls" {
			t.Errorf("%s: content %q, finish %q", name, m.Content, cc.Choices[0].FinishReason)
		}
		if len(m.ToolCalls) != 2 || m.ToolCalls[0].Function.Name != "fetch" ||
			m.ToolCalls[0].Function.Arguments != `{"max_bytes":4096,"url":"http://news.test/today"}` ||
			m.ToolCalls[1].ID != "call_notes" || m.ToolCalls[1].Function.Arguments != `{"key":"q","value":"news"}` {
			t.Errorf("%s: tool calls %+v", name, m.ToolCalls)
		}
		u := cc.Usage
		if u.PromptTokens != 200 || u.CompletionTokens != 40 || u.TotalTokens != 240 ||
			u.PromptTokensDetails.CachedTokens != 64 || u.PromptTokensDetails.CacheWriteTokens != 16 ||
			u.CompletionTokensDetails.ReasoningTokens != 8 {
			t.Errorf("%s: usage %+v", name, u)
		}
	}
	// role, 4 text pieces, 2 calls (opening + 3 and 1 argument pieces),
	// the finish and the usage chunk.
	if chunks != 1+4+(1+3)+(1+1)+1+1 {
		t.Errorf("%d chunks", chunks)
	}
	st := settled(t, srv)
	if len(st.Requests) != 2 || st.Requests[0].Stream || !st.Requests[1].Stream {
		t.Fatalf("requests %+v", st.Requests)
	}
	for _, r := range st.Requests {
		if r.Outcome != fakellm.OutcomeCompleted || r.Usage == nil || *r.Usage != want || r.Turn != 0 {
			t.Errorf("request %+v", r)
		}
	}
	sum := want
	sum.InputTokens, sum.OutputTokens, sum.CacheReadTokens, sum.CacheWriteTokens, sum.ReasoningTokens = 240, 80, 128, 32, 16
	if st.Usage != sum {
		t.Errorf("usage sum %+v, want %+v", st.Usage, sum)
	}
}

// A chat stream without stream_options.include_usage carries no usage,
// and the fake records none: a client that forgets to ask is caught.
func TestChatStreamWithoutIncludeUsageReportsNone(t *testing.T) {
	srv, url := start(t, twoTurns)
	c := openaiClient(url)
	stream := c.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model: "gpt-test", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello")},
	})
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Choices[0].Message.Content != "Hello, wörld!" || acc.Usage.TotalTokens != 0 {
		t.Errorf("content %q usage %+v", acc.Choices[0].Message.Content, acc.Usage)
	}
	st := settled(t, srv)
	if st.Requests[0].Usage != nil || st.Usage != (fakellm.Usage{}) || st.Requests[0].Outcome != fakellm.OutcomeCompleted {
		t.Errorf("stats %+v", st)
	}
}

func TestResponsesThroughTheSDK(t *testing.T) {
	srv, url := start(t, twoTurns)
	c := openaiClient(url)
	ctx := context.Background()
	params := responses.ResponseNewParams{
		Model: "gpt-test",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("What is in the news?")},
	}
	got, err := c.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	stream := c.Responses.NewStreaming(ctx, params)
	var text strings.Builder
	var final responses.Response
	var seqs []int64
	var args []string // per function call, in output order
	for stream.Next() {
		ev := stream.Current()
		seqs = append(seqs, ev.SequenceNumber)
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.output_item.added":
			if ev.Item.Type == "function_call" {
				args = append(args, "")
			}
		case "response.function_call_arguments.delta":
			args[len(args)-1] += ev.Delta
		case "response.completed":
			final = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	for i, s := range seqs {
		if s != int64(i) {
			t.Fatalf("sequence numbers %v", seqs)
		}
	}
	if text.String() != "Let me look that up for you." || len(args) != 2 {
		t.Errorf("streamed text %q, arguments %v", text.String(), args)
	}
	for name, r := range map[string]*responses.Response{"plain": got, "streamed": &final} {
		if r.Status != "completed" || r.OutputText() != "Let me look that up for you." || len(r.Output) != 3 {
			t.Fatalf("%s: status %q text %q output %d", name, r.Status, r.OutputText(), len(r.Output))
		}
		fc := r.Output[1].AsFunctionCall()
		if fc.Name != "fetch" || fc.Arguments != `{"max_bytes":4096,"url":"http://news.test/today"}` || r.Output[2].AsFunctionCall().CallID != "call_notes" {
			t.Errorf("%s: function call %+v", name, fc)
		}
		if args[0] != fc.Arguments || args[1] != r.Output[2].AsFunctionCall().Arguments {
			t.Errorf("%s: streamed arguments %q, final %q", name, args, fc.Arguments)
		}
		u := r.Usage
		if u.InputTokens != 200 || u.OutputTokens != 40 || u.TotalTokens != 240 || u.InputTokensDetails.CachedTokens != 64 ||
			u.InputTokensDetails.CacheWriteTokens != 16 || u.OutputTokensDetails.ReasoningTokens != 8 {
			t.Errorf("%s: usage %+v", name, u)
		}
	}
	if st := settled(t, srv); st.Usage.InputTokens != 240 || st.Usage.CacheWriteTokens != 32 || len(st.Requests) != 2 {
		t.Errorf("stats %+v", st)
	}
}

func TestMessagesThroughTheSDK(t *testing.T) {
	srv, url := start(t, twoTurns)
	c := anthropicClient(url)
	ctx := context.Background()
	params := anthropic.MessageNewParams{
		Model: "claude-test", MaxTokens: 1024,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is in the news?"))},
		Tools:    []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "fetch", InputSchema: anthropic.ToolInputSchemaParam{}}}},
	}
	got, err := c.Messages.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	stream := c.Messages.NewStreaming(ctx, params)
	var acc anthropic.Message
	var startOutput int64
	for stream.Next() {
		ev := stream.Current()
		if ev.Type == "message_start" {
			startOutput = ev.Message.Usage.OutputTokens
		}
		if err := acc.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if startOutput != 1 {
		t.Errorf("message_start's provisional output_tokens %d, want 1 as the API sends", startOutput)
	}
	for name, m := range map[string]*anthropic.Message{"plain": got, "streamed": &acc} {
		if m.StopReason != "tool_use" || len(m.Content) != 3 || m.Content[0].Text != "Let me look that up for you." {
			t.Fatalf("%s: stop %q content %+v", name, m.StopReason, m.Content)
		}
		tu := m.Content[1].AsToolUse()
		if tu.Name != "fetch" || string(tu.Input) != `{"max_bytes":4096,"url":"http://news.test/today"}` || m.Content[2].AsToolUse().ID != "call_notes" {
			t.Errorf("%s: tool use %+v", name, tu)
		}
		u := m.Usage
		if u.InputTokens != 120 || u.CacheReadInputTokens != 64 || u.CacheCreationInputTokens != 16 || u.OutputTokens != 40 ||
			u.OutputTokensDetails.ThinkingTokens != 8 {
			t.Errorf("%s: usage %+v", name, u)
		}
	}
	st := settled(t, srv)
	if st.Usage.InputTokens != 240 || st.Usage.OutputTokens != 80 || st.Usage.CacheReadTokens != 128 {
		t.Errorf("stats %+v", st.Usage)
	}
}

// A background stream cut mid-event resumes through the SDK's
// GetStreaming from the last sequence number received; the events put
// together are those of an uncut stream, and the usage is counted once.
func TestResponsesBackgroundStreamResumes(t *testing.T) {
	srv, url := start(t, `
api_key: `+key+`
turns:
  - reply: {text: "one two three four five six", chunks: 6}
    usage: {input_tokens: 50, output_tokens: 6, cache_read_tokens: 10}
    faults: [{cut_after: 5}]
`)
	c := openaiClient(url)
	ctx := context.Background()
	params := responses.ResponseNewParams{
		Model: "gpt-test", Background: openai.Bool(true), Store: openai.Bool(true),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("count")},
	}
	stream := c.Responses.NewStreaming(ctx, params)
	var id string
	last := int64(-1)
	var text strings.Builder
	for stream.Next() {
		ev := stream.Current()
		if ev.Type == "response.created" {
			id = ev.Response.ID
		}
		if ev.Type == "response.output_text.delta" {
			text.WriteString(ev.Delta)
		}
		last = ev.SequenceNumber
	}
	if stream.Err() == nil {
		t.Fatal("the cut stream ended without an error")
	}
	if last != 4 || id == "" {
		t.Fatalf("got events up to %d, id %q; want 0-4 before the cut", last, id)
	}
	resumed := c.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{StartingAfter: openai.Int(last)})
	var final responses.Response
	for resumed.Next() {
		ev := resumed.Current()
		if ev.SequenceNumber != last+1 {
			t.Fatalf("resumed at %d after %d", ev.SequenceNumber, last)
		}
		last = ev.SequenceNumber
		if ev.Type == "response.output_text.delta" {
			text.WriteString(ev.Delta)
		}
		if ev.Type == "response.completed" {
			final = ev.Response
		}
	}
	if err := resumed.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() != "one two three four five six" || final.OutputText() != text.String() || final.Usage.InputTokens != 60 {
		t.Errorf("text %q, final %q, usage %+v", text.String(), final.OutputText(), final.Usage)
	}
	// Retrieved once more, whole: the usage is not counted again.
	again, err := c.Responses.Get(ctx, id, responses.ResponseGetParams{})
	if err != nil || again.OutputText() != text.String() {
		t.Fatalf("get: %v, %q", err, again.OutputText())
	}
	st := settled(t, srv)
	if len(st.Requests) != 3 || st.Requests[0].Outcome != fakellm.OutcomeCut || st.Requests[0].Usage != nil ||
		st.Requests[1].API != fakellm.APIResponsesGet || st.Requests[1].StartingAfter != 4 || st.Requests[1].Usage == nil ||
		!st.Requests[2].Redelivery {
		t.Fatalf("requests %+v", st.Requests)
	}
	if st.Usage != (fakellm.Usage{InputTokens: 50, OutputTokens: 6, CacheReadTokens: 10}) {
		t.Errorf("usage counted %+v", st.Usage)
	}
}

// A background request not streamed is answered queued, and retrieved
// completed.
func TestResponsesBackgroundPoll(t *testing.T) {
	_, url := start(t, twoTurns)
	c := openaiClient(url)
	ctx := context.Background()
	r, err := c.Responses.New(ctx, responses.ResponseNewParams{
		Model: "gpt-test", Background: openai.Bool(true),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hello")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "queued" || len(r.Output) != 0 || !r.Background {
		t.Fatalf("status %q output %d", r.Status, len(r.Output))
	}
	done, err := c.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
	if err != nil || done.Status != "completed" || done.OutputText() != "Hello, wörld!" {
		t.Fatalf("%v %q %q", err, done.Status, done.OutputText())
	}
	var apiErr *openai.Error
	_, err = c.Responses.Get(ctx, "resp_nothing", responses.ResponseGetParams{})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("unknown id: %v", err)
	}
	// A response stored but not in the background is retrieved, not
	// streamed again; one not stored is not kept.
	plain := responses.ResponseNewParams{Model: "gpt-test", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hello")}}
	kept, err := c.Responses.New(ctx, plain)
	if err != nil || !strings.Contains(kept.RawJSON(), `"store":true`) {
		t.Fatal(err)
	}
	if again, err := c.Responses.Get(ctx, kept.ID, responses.ResponseGetParams{}); err != nil || again.OutputText() != "Hello, wörld!" {
		t.Fatalf("get a stored response: %v", err)
	}
	s := c.Responses.GetStreaming(ctx, kept.ID, responses.ResponseGetParams{})
	for s.Next() {
	}
	if !errors.As(s.Err(), &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, "was not created with background: true") {
		t.Fatalf("stream a response not in the background: %v", s.Err())
	}
	plain.Store = openai.Bool(false)
	gone, err := c.Responses.New(ctx, plain)
	if err != nil || !strings.Contains(gone.RawJSON(), `"store":false`) {
		t.Fatal(err)
	}
	if _, err := c.Responses.Get(ctx, gone.ID, responses.ResponseGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("get a response not stored: %v", err)
	}
	plain.Background = openai.Bool(true)
	if _, err := c.Responses.New(ctx, plain); !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, "must be stored") {
		t.Fatalf("background without store: %v", err)
	}
}

// The fake wants the key where each API reads it, and answers 401 in
// that API's error shape without echoing what it was sent.
func TestKeyIsRequiredWhereEachAPIReadsIt(t *testing.T) {
	srv, url := start(t, twoTurns)
	ctx := context.Background()
	chat := openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello")}}
	var oerr *openai.Error
	wrong := openaiClient(url, option.WithAPIKey("sk-wrong-key"))
	_, err := wrong.Chat.Completions.New(ctx, chat)
	if !errors.As(err, &oerr) || oerr.StatusCode != 401 || oerr.Code != "invalid_api_key" || strings.Contains(err.Error(), "sk-wrong-key") {
		t.Errorf("wrong key: %v", err)
	}
	right := openaiClient(url)
	_, err = right.Chat.Completions.New(ctx, chat)
	if err != nil {
		t.Errorf("right key: %v", err)
	}
	msg := anthropic.MessageNewParams{Model: "c", MaxTokens: 5, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello"))}}
	var aerr *anthropic.Error
	awrong := anthropicClient(url, aoption.WithAPIKey("sk-wrong-key"))
	_, err = awrong.Messages.New(ctx, msg)
	if !errors.As(err, &aerr) || aerr.StatusCode != 401 || !strings.Contains(aerr.RawJSON(), `"authentication_error"`) {
		t.Errorf("wrong anthropic key: %v", err)
	}
	// anthropic-sdk-go v2 sends the key as Authorization: Bearer; a raw
	// client sends x-api-key. Both are read, and the stats say which.
	aright := anthropicClient(url)
	if _, err = aright.Messages.New(ctx, msg); err != nil {
		t.Errorf("right anthropic key: %v", err)
	}
	raw := func(h map[string]string) (int, string) {
		req, _ := http.NewRequest("POST", url+"/v1/messages", strings.NewReader(`{"model":"c","max_tokens":5,"messages":[{"role":"user","content":"Say hello"}]}`))
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct {
		h      map[string]string
		status int
		body   string
	}{
		{map[string]string{"x-api-key": key, "anthropic-version": "2023-06-01"}, 200, `"type":"message"`},
		{map[string]string{"anthropic-version": "2023-06-01"}, 401, `{"error":{"message":"x-api-key header is required","type":"authentication_error"}`},
		{map[string]string{"x-api-key": "sk-wrong-key", "authorization": "Bearer " + key, "anthropic-version": "2023-06-01"}, 401, `"invalid x-api-key"`},
		{map[string]string{"x-api-key": key}, 400, `"anthropic-version: header is required","type":"invalid_request_error"`},
		{map[string]string{"x-api-key": key, "anthropic-version": "latest"}, 400, `anthropic-version: \"latest\" is not a valid version`},
	} {
		status, body := raw(c.h)
		if status != c.status || !strings.Contains(body, c.body) || strings.Contains(body, "sk-wrong-key") {
			t.Errorf("%v: %d %s, want %d with %s", c.h, status, body, c.status, c.body)
		}
	}
	b, _ := json.Marshal(settled(t, srv))
	if strings.Contains(string(b), key) || strings.Contains(string(b), "sk-wrong-key") {
		t.Errorf("the stats hold a key: %s", b)
	}
	refused := 0
	for _, r := range settled(t, srv).Requests {
		if r.Status == 401 {
			refused++
			if r.Outcome != fakellm.OutcomeRefused || r.Turn != -1 {
				t.Errorf("refused request %+v", r)
			}
		}
	}
	if refused != 4 {
		t.Errorf("%d refused, want 4", refused)
	}
	headers := ""
	for _, r := range settled(t, srv).Requests {
		if r.Status == 200 {
			headers += r.API + ":" + r.KeyHeader + " "
		}
	}
	if headers != "chat:authorization messages:authorization messages:x-api-key " {
		t.Errorf("keys read from %q", headers)
	}
}

// Faults through the SDKs: a 429 with Retry-After is retried by the SDK
// and answered; a 500 surfaces when retries are off; a delay beyond the
// client's timeout is a timeout; malformed JSON and a cut stream are
// errors, and none of them is counted as usage.
func TestFaultsThroughTheSDKs(t *testing.T) {
	srv, url := start(t, `
api_key: `+key+`
match: key
turns:
  - key: rate
    reply: {text: "after the wait"}
    usage: {input_tokens: 3, output_tokens: 3}
    faults: [{status: 429, retry_after: 1s}]
  - key: broken
    reply: {text: "never"}
    faults: [{status: 500, message: "the fake's server error"}]
  - key: slow
    reply: {text: "too late"}
    faults: [{delay: 5s}]
  - key: garbled
    reply: {text: "a reply that is cut and spoilt", chunks: 4}
    faults: [{malformed: true}, {malformed: true}]
  - key: cut
    reply: {text: "a reply that is cut and spoilt", chunks: 4}
    faults: [{cut_after: 3}, {cut_after: 80}]
`)
	ctx := context.Background()
	ask := func(text string) openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(text)}}
	}
	retrying := openaiClient(url, option.WithMaxRetries(1))
	got, err := retrying.Chat.Completions.New(ctx, ask("rate"))
	if err != nil || got.Choices[0].Message.Content != "after the wait" {
		t.Fatalf("429 then retry: %v", err)
	}
	c := openaiClient(url)
	var oerr *openai.Error
	_, err = c.Chat.Completions.New(ctx, ask("broken"))
	if !errors.As(err, &oerr) || oerr.StatusCode != 500 || oerr.Message != "the fake's server error" || oerr.Type != "server_error" {
		t.Errorf("500: %v", err)
	}
	tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = c.Chat.Completions.New(tctx, ask("slow"))
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("slow: %v", err)
	}
	if _, err = c.Chat.Completions.New(ctx, ask("garbled")); err == nil {
		t.Error("malformed body: no error")
	}
	stream := c.Chat.Completions.NewStreaming(ctx, ask("garbled"))
	for stream.Next() {
	}
	if stream.Err() == nil {
		t.Error("malformed event: no error")
	}
	stream = c.Chat.Completions.NewStreaming(ctx, ask("cut"))
	n := 0
	for stream.Next() {
		n++
	}
	if stream.Err() == nil || n != 3 {
		t.Errorf("cut stream: %d chunks, %v", n, stream.Err())
	}
	if _, err = c.Chat.Completions.New(ctx, ask("cut")); err == nil {
		t.Error("cut body: no error")
	}
	st := waitIdle(t, srv, 8)
	wantOutcomes := []string{
		fakellm.OutcomeFault, fakellm.OutcomeCompleted, fakellm.OutcomeFault, fakellm.OutcomeCanceled,
		fakellm.OutcomeMalformed, fakellm.OutcomeMalformed, fakellm.OutcomeCut, fakellm.OutcomeCut,
	}
	for i, w := range wantOutcomes {
		if st.Requests[i].Outcome != w {
			t.Errorf("request %d: outcome %q, want %q (%+v)", i+1, st.Requests[i].Outcome, w, st.Requests[i])
		}
	}
	if st.Requests[0].Status != 429 || st.Requests[0].Fault != "status 429" || st.Requests[1].Attempt != 2 {
		t.Errorf("429: %+v / %+v", st.Requests[0], st.Requests[1])
	}
	if st.Usage != (fakellm.Usage{InputTokens: 3, OutputTokens: 3}) {
		t.Errorf("only the answered call has usage: %+v", st.Usage)
	}
}

// waitIdle waits until the server has recorded n requests and each has
// an outcome (a handler still writing has none yet).
func waitIdle(t *testing.T, srv *fakellm.Server, n int) fakellm.Stats {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		st := srv.Stats()
		if len(st.Requests) >= n && st.Settled() {
			return st
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("the server did not settle on %d requests: %+v", n, srv.Stats().Requests)
	return fakellm.Stats{}
}

// settled returns the stats once every request recorded has its outcome:
// a client can read an answer's last byte before its handler records it.
func settled(t *testing.T, srv *fakellm.Server) fakellm.Stats {
	t.Helper()
	return waitIdle(t, srv, 0)
}

// Stop reasons are spelt per API, the same streamed and not: max_tokens
// is Chat's "length", an incomplete Response and Anthropic's max_tokens;
// a stop sequence is named by Anthropic only.
func TestStopReasonsInEachAPI(t *testing.T) {
	_, url := start(t, `
api_key: `+key+`
match: key
turns:
  - key: long
    reply: {text: "cut short", stop: max_tokens}
  - key: seq
    reply: {text: "up to", stop_sequence: "END"}
`)
	ctx := context.Background()
	oc := openaiClient(url)
	ac := anthropicClient(url)
	for _, c := range []struct{ key, finish, status, reason, stop string }{
		{"long", "length", "incomplete", "max_output_tokens", "max_tokens"},
		{"seq", "stop", "completed", "", "stop_sequence"},
	} {
		chat := openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(c.key)}}
		cc, err := oc.Chat.Completions.New(ctx, chat)
		if err != nil || cc.Choices[0].FinishReason != c.finish {
			t.Errorf("%s: chat %v %+v", c.key, err, cc)
		}
		rp := responses.ResponseNewParams{Model: "m", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(c.key)}}
		r, err := oc.Responses.New(ctx, rp)
		if err != nil || string(r.Status) != c.status || r.IncompleteDetails.Reason != c.reason {
			t.Errorf("%s: response %v %q %+v", c.key, err, r.Status, r.IncompleteDetails)
		}
		stream := oc.Responses.NewStreaming(ctx, rp)
		var last responses.ResponseStreamEventUnion
		for stream.Next() {
			last = stream.Current()
		}
		if stream.Err() != nil || last.Type != "response."+c.status || string(last.Response.Status) != c.status {
			t.Errorf("%s: response stream ends with %q %q %v", c.key, last.Type, last.Response.Status, stream.Err())
		}
		mp := anthropic.MessageNewParams{Model: "c", MaxTokens: 5, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(c.key))}}
		m, err := ac.Messages.New(ctx, mp)
		ms := ac.Messages.NewStreaming(ctx, mp)
		var acc anthropic.Message
		for ms.Next() {
			acc.Accumulate(ms.Current())
		}
		for name, x := range map[string]*anthropic.Message{"plain": m, "streamed": &acc} {
			wantSeq := ""
			if c.key == "seq" {
				wantSeq = "END"
			}
			if err != nil || ms.Err() != nil || string(x.StopReason) != c.stop || x.StopSequence != wantSeq {
				t.Errorf("%s %s: %v %v %q %q", c.key, name, err, ms.Err(), x.StopReason, x.StopSequence)
			}
		}
	}
}

// An error event mid-stream reaches each SDK as a stream error with the
// fake's message, after the events before it.
func TestErrorEventMidStreamInEachSDK(t *testing.T) {
	srv, url := start(t, `
api_key: `+key+`
match: key
turns:
  - key: q
    reply: {text: "one two three four", chunks: 4}
    faults:
      - {error_after: 3, message: "overloaded, try later"}
      - {error_after: 3, message: "overloaded, try later"}
      - {error_after: 3, message: "overloaded, try later"}
`)
	ctx := context.Background()
	oc := openaiClient(url)
	ac := anthropicClient(url)
	cs := oc.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("q")}})
	n := 0
	for cs.Next() {
		n++
	}
	if cs.Err() == nil || !strings.Contains(cs.Err().Error(), "overloaded, try later") || n != 3 {
		t.Errorf("chat: %d events, %v", n, cs.Err())
	}
	rs := oc.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "m", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("q")}})
	var types []string
	var last responses.ResponseStreamEventUnion
	for rs.Next() {
		last = rs.Current()
		types = append(types, last.Type)
	}
	// The Responses SDK hands the error event over as an event.
	if err := rs.Err(); err != nil || len(types) != 4 || last.Type != "error" || last.Message != "overloaded, try later" ||
		last.Code != "server_error" || last.SequenceNumber != 3 {
		t.Errorf("responses: %v, %+v, %v", types, last, err)
	}
	ms := ac.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "c", MaxTokens: 5, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("q"))}})
	n = 0
	for ms.Next() {
		n++
	}
	// The SDK does not hand over the ping, the third event.
	if ms.Err() == nil || !strings.Contains(ms.Err().Error(), "overloaded, try later") || n != 2 {
		t.Errorf("messages: %d events, %v", n, ms.Err())
	}
	for _, r := range settled(t, srv).Requests {
		if r.Outcome != fakellm.OutcomeFault || r.Usage != nil || r.Fault != "error_after 3" {
			t.Errorf("%+v", r)
		}
	}
}
