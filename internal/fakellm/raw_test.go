package fakellm_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrt/agentrt/internal/fakellm"
	"github.com/agentrt/agentrt/internal/yamlkeys"
)

type answer struct {
	status int
	header http.Header
	body   string
	err    error // reading the body
}

// post sends body to path with the key where api reads it.
func post(t *testing.T, url, path, body string) answer {
	t.Helper()
	return postKey(t, url, path, body, "")
}

// postKey is post with an Idempotency-Key header, when idem is not "".
func postKey(t *testing.T, url, path, body, idem string) answer {
	t.Helper()
	req, err := http.NewRequest("POST", url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if idem != "" {
		req.Header.Set("Idempotency-Key", idem)
	}
	if path == "/v1/messages" {
		req.Header.Set("x-api-key", key)
		req.Header.Set("anthropic-version", "2023-06-01")
	} else {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b), err}
}

func chatBody(text string, stream bool) string {
	b, _ := json.Marshal(map[string]any{
		"model": "gpt-test", "stream": stream,
		"messages": []any{map[string]any{"role": "user", "content": text}},
	})
	return string(b)
}

// Under match: order a call sent again gets the turn it had, whether it
// is sent streamed or not: what a resumed run's call left in doubt needs.
// A call that does not satisfy its turn is refused and leaves the turn
// for the next call.
func TestOrderMatchingGivesACallSentAgainItsTurn(t *testing.T) {
	srv, url := start(t, `
api_key: `+key+`
turns:
  - name: first
    reply: {text: "first answer", chunks: 3}
    faults: [{cut_after: 2}]
  - name: second
    reply: {text: "second answer"}
  - name: third
    expect: {model: gpt-test, last_text: "three"}
    reply: {text: "third answer"}
`)
	if a := postKey(t, url, "/v1/chat/completions", chatBody("one", true), "run-1/step-3"); a.err == nil {
		t.Fatalf("the cut stream read whole: %q", a.body)
	}
	a := postKey(t, url, "/v1/chat/completions", chatBody("one", false), "run-1/step-3")
	if a.status != 200 || !strings.Contains(a.body, `"content":"first answer"`) {
		t.Fatalf("one, sent again: %d %s", a.status, a.body)
	}
	if a = post(t, url, "/v1/chat/completions", chatBody("two", false)); !strings.Contains(a.body, "second answer") {
		t.Fatalf("two: %s", a.body)
	}
	if a = post(t, url, "/v1/chat/completions", chatBody("two", false)); !strings.Contains(a.body, "second answer") {
		t.Fatalf("two, sent again: %s", a.body)
	}
	a = post(t, url, "/v1/chat/completions", chatBody("drei", false))
	if a.status != 400 || !strings.Contains(a.body, `fakellm: turn 2 (third) expects the last message's text \"three\", the request's is \"drei\"`) {
		t.Fatalf("mismatch: %d %s", a.status, a.body)
	}
	if a = post(t, url, "/v1/chat/completions", chatBody("three", false)); !strings.Contains(a.body, "third answer") {
		t.Fatalf("three: %s", a.body)
	}
	a = post(t, url, "/v1/chat/completions", chatBody("four", false))
	if a.status != 400 || !strings.Contains(a.body, "no turn left: the script's 3 turns were all given") {
		t.Fatalf("four: %d %s", a.status, a.body)
	}
	st := settled(t, srv)
	var turns []int
	for _, r := range st.Requests {
		turns = append(turns, r.Turn)
	}
	if !reflect.DeepEqual(turns, []int{0, 0, 1, 1, -1, 2, -1}) {
		t.Errorf("turns %v", turns)
	}
	if st.Requests[0].IdempotencyKey != "run-1/step-3" || st.Requests[1].IdempotencyKey != "run-1/step-3" || st.Requests[2].IdempotencyKey != "" {
		t.Errorf("idempotency keys %q %q %q", st.Requests[0].IdempotencyKey, st.Requests[1].IdempotencyKey, st.Requests[2].IdempotencyKey)
	}
	if st.Requests[0].MatchKey != st.Requests[1].MatchKey || st.Requests[0].BodySHA256 == st.Requests[1].BodySHA256 {
		t.Error("a call streamed and then not must share its match key and not its body hash")
	}
	again := st.ResentAfterCompletion()
	if len(again) != 1 || again[0].Seq != 4 {
		t.Errorf("resent after completion: %+v", again)
	}
}

// Under match: key a request gets the turn whose key is its last
// message's text, in every API, however often it is sent.
func TestKeyMatchingReadsTheLastMessageOfEachAPI(t *testing.T) {
	srv, url := start(t, `
api_key: `+key+`
match: key
turns:
  - key: "page text"
    expect: {last_role: tool}
    reply: {text: "from a tool result"}
  - key: "hello"
    expect: {last_role: user, tools: [fetch, notes]}
    reply: {text: "from a user"}
  - key: "no tools"
    expect: {tools: []}
    reply: {text: "none offered"}
`)
	cases := []struct{ path, body, want string }{
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"q"},{"role":"tool","tool_call_id":"c1","content":"page text"}]}`, "from a tool result"},
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hel"},{"type":"text","text":"lo"}]}],"tools":[{"type":"function","function":{"name":"fetch"}},{"type":"function","function":{"name":"notes"}}]}`, "from a user"},
		{"/v1/responses", `{"model":"m","input":[{"type":"function_call","call_id":"c1","name":"fetch","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"page text"}]}`, "from a tool result"},
		{"/v1/responses", `{"model":"m","input":"hello","tools":[{"type":"function","name":"fetch"},{"type":"function","name":"notes"}]}`, "from a user"},
		{"/v1/messages", `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":[{"type":"text","text":"hello"}]}],"tools":[{"name":"fetch","input_schema":{"type":"object"}},{"name":"notes","input_schema":{"type":"object"}}]}`, "from a user"},
		{"/v1/messages", `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"no tools"}]}`, "none offered"},
		{"/v1/messages", `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"no tools"}]}`, "none offered"},
	}
	for _, c := range cases {
		if a := post(t, url, c.path, c.body); a.status != 200 || !strings.Contains(a.body, c.want) {
			t.Errorf("%s %s: %d %s", c.path, c.body, a.status, a.body)
		}
	}
	// A tool result under Anthropic's API is the user's message.
	a := post(t, url, "/v1/messages", `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"page text"}]}]}`)
	if a.status != 400 || !strings.Contains(a.body, `expects the last message's role \"tool\", the request's is \"user\"`) || !strings.Contains(a.body, `"invalid_request_error"`) {
		t.Errorf("tool_result: %d %s", a.status, a.body)
	}
	a = post(t, url, "/v1/responses", `{"model":"m","input":"hello","tools":[{"type":"function","name":"notes"}]}`)
	if a.status != 400 || !strings.Contains(a.body, "expects the tools [fetch, notes] offered, the request offers [notes]") {
		t.Errorf("tools: %d %s", a.status, a.body)
	}
	a = post(t, url, "/v1/chat/completions", chatBody("unknown", false))
	if a.status != 400 || !strings.Contains(a.body, `no turn has the key \"unknown\"`) {
		t.Errorf("no key: %d %s", a.status, a.body)
	}
	if n := len(settled(t, srv).Requests); n != len(cases)+3 {
		t.Errorf("%d requests recorded", n)
	}
}

// Bodies the real APIs refuse are refused in their shape, and recorded.
func TestBadRequestsAreRefusedInTheAPIsShape(t *testing.T) {
	srv, url := start(t, twoTurns)
	cases := []struct {
		path, body string
		status     int
		want       string
	}{
		{"/v1/chat/completions", `not json`, 400, `"message":"the body is not a JSON object`},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"Say hello"}]}`, 400, `"message":"model: a model is required"`},
		{"/v1/chat/completions", `{"model":"m","messages":[]}`, 400, "messages: a non-empty list"},
		{"/v1/chat/completions", `{"model":"m","stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Say hello"}]}`, 400, "stream_options: only allowed when stream is true"},
		{"/v1/responses", `{"model":"m","input":[]}`, 400, "input: a string or a non-empty list"},
		{"/v1/messages", `{"model":"m","messages":[{"role":"user","content":"Say hello"}]}`, 400, `{"error":{"message":"max_tokens: Field required","type":"invalid_request_error"}`},
		{"/v1/embeddings", `{}`, 404, "fakellm serves POST /v1/chat/completions"},
	}
	for _, c := range cases {
		if a := post(t, url, c.path, c.body); a.status != c.status || !strings.Contains(a.body, c.want) {
			t.Errorf("%s %s: %d %s, want %d with %s", c.path, c.body, a.status, a.body, c.status, c.want)
		}
	}
	big := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("x", fakellm.MaxBody) + `"}]}`
	if a := post(t, url, "/v1/chat/completions", big); a.status != 413 {
		t.Errorf("a body over the limit: %d %s", a.status, a.body)
	}
	for _, r := range settled(t, srv).Requests {
		if r.Outcome != fakellm.OutcomeRefused || r.Turn != -1 || r.Usage != nil {
			t.Errorf("refused request recorded as %+v", r)
		}
	}
}

// Two replies of a turn differ only in their ids; the stats served over
// HTTP are the Go API's.
func TestRepliesOfATurnDifferOnlyInTheirIDs(t *testing.T) {
	srv, url := start(t, twoTurns)
	for _, path := range []string{"/v1/chat/completions", "/v1/responses", "/v1/messages"} {
		body := `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"Say hello"}],"input":"Say hello"}`
		a, b := post(t, url, path, body), post(t, url, path, body)
		var x, y map[string]any
		if json.Unmarshal([]byte(a.body), &x) != nil || json.Unmarshal([]byte(b.body), &y) != nil {
			t.Fatalf("%s: %s / %s", path, a.body, b.body)
		}
		if x["id"] == y["id"] {
			t.Errorf("%s: the two replies share id %v", path, x["id"])
		}
		delete(x, "id")
		delete(y, "id")
		if path == "/v1/responses" {
			// The output items' ids carry the response's too.
			for _, m := range []map[string]any{x, y} {
				for _, it := range m["output"].([]any) {
					delete(it.(map[string]any), "id")
				}
			}
		}
		if !reflect.DeepEqual(x, y) {
			t.Errorf("%s: replies differ beyond the id:\n%s\n%s", path, a.body, b.body)
		}
	}
	resp, err := http.Get(url + fakellm.StatsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got fakellm.Stats
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	want := settled(t, srv)
	for i := range want.Requests {
		// JSON keeps the instant, not the location or monotonic reading.
		if !got.Requests[i].Time.Equal(want.Requests[i].Time) {
			t.Errorf("request %d: time %v, want %v", i, got.Requests[i].Time, want.Requests[i].Time)
		}
		want.Requests[i].Time, got.Requests[i].Time = time.Time{}, time.Time{}
	}
	if !reflect.DeepEqual(got, want) || got.Usage.InputTokens != 6*7 {
		t.Errorf("stats over HTTP:\n%+v\nwant\n%+v", got, want)
	}
}

// A chunk_delay spaces the events; the events arrive as they are sent,
// not at the end.
func TestChunkDelaySpacesTheEvents(t *testing.T) {
	_, url := start(t, `
api_key: `+key+`
turns:
  - reply: {text: "abcdef", chunks: 3, chunk_delay: 60ms}
`)
	req, _ := http.NewRequest("POST", url+"/v1/messages", strings.NewReader(`{"model":"m","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"x"}]}`))
	req.Header.Set("x-api-key", key)
	req.Header.Set("anthropic-version", "2023-06-01")
	begin := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var firstDelta time.Duration
	var names []string
	for sc.Scan() {
		if name, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			names = append(names, name)
			if name == "content_block_delta" && firstDelta == 0 {
				firstDelta = time.Since(begin)
			}
		}
	}
	total := time.Since(begin)
	wantNames := []string{"message_start", "content_block_start", "ping", "content_block_delta", "content_block_delta", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}
	if !reflect.DeepEqual(names, wantNames) {
		t.Fatalf("events %v", names)
	}
	// 8 gaps of 60 ms: the whole stream takes at least 480 ms, and the
	// first delta (after 3 gaps) arrives well before the end.
	if total < 480*time.Millisecond || firstDelta > total-200*time.Millisecond {
		t.Errorf("first delta at %v, end at %v", firstDelta, total)
	}
}

// Concurrent calls are each recorded once, with their own number.
func TestConcurrentCallsAreCountedOnce(t *testing.T) {
	srv, url := start(t, twoTurns)
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func(stream bool) {
			defer wg.Done()
			if a := post(t, url, "/v1/chat/completions", chatBody("Say hello", stream)); a.status != 200 {
				t.Errorf("%d %s", a.status, a.body)
			}
		}(i%2 == 0)
	}
	wg.Wait()
	st := settled(t, srv)
	seen := map[int]bool{}
	for _, r := range st.Requests {
		seen[r.Seq] = true
	}
	if len(st.Requests) != 20 || len(seen) != 20 {
		t.Fatalf("%d requests, %d numbers", len(st.Requests), len(seen))
	}
	// Only the 10 non-streamed answers carry usage (the streams did not
	// ask for it).
	if st.Usage != (fakellm.Usage{InputTokens: 70, OutputTokens: 30}) {
		t.Errorf("usage %+v", st.Usage)
	}
}

func TestScriptErrors(t *testing.T) {
	head := "api_key: k\nturns:\n"
	cases := []struct{ doc, want string }{
		{"api_key: k\nturnz: []\n", `line 2: unknown key "turnz" at the top level; allowed: api_key, anthropic_version, match, turns (did you mean turns?)`},
		{head + "  - reply: {text: a, chunkz: 2}\n", `unknown key "chunkz" in turns[0].reply`},
		{head + "  - reply: {text: a}\n    faults: [{staus: 429}]\n", `unknown key "staus" in turns[0].faults[0]`},
		{"turns:\n  - reply: {text: a}\n", "api_key is required"},
		{"api_key: k\n", "the script has no turns"},
		{"api_key: k\nmatch: random\n" + "turns:\n  - reply: {text: a}\n", `match "random": write "order" or "key"`},
		{head + "  - reply: {}\n", "turns[0]: the reply has neither text nor tool calls"},
		{head + "  - reply: {text: abc, chunks: 4}\n", "reply.chunks is 4 but the text has 3 characters"},
		{head + "  - reply: {text: a, stop: done}\n", `reply.stop "done": write end_turn`},
		{head + "  - reply: {text: a, stop: tool_use}\n", "reply.stop is tool_use but the reply has no tool calls"},
		{head + "  - reply: {tool_calls: [{arguments: {}}]}\n", "tool_calls[0]: name is required"},
		{head + "  - reply: {text: a, stop: end_turn, stop_sequence: X}\n", "reply.stop_sequence goes with stop: stop_sequence, not end_turn"},
		{head + "  - reply: {text: a, stop: stop_sequence}\n", "give the sequence as reply.stop_sequence"},
		{head + "  - reply: {tool_calls: [{name: f, arguments: '[1]'}]}\n", "[1] is not a JSON object"},
		{head + "  - reply: {tool_calls: [{name: f, arguments: '{x'}]}\n", "the string is not JSON"},
		{head + "  - reply: {text: a, delay: 5}\n", `duration "5": write it with a unit`},
		{head + "  - reply: {text: a}\n    usage: {output_tokens: 2, reasoning_tokens: 3}\n", "reasoning_tokens (3) are a part of output_tokens (2)"},
		{head + "  - reply: {text: a}\n    faults: [{status: 200}]\n", "status 200 is not an error status"},
		{head + "  - reply: {text: a}\n    faults: [{status: 500, cut_after: 2}]\n", "status answers with an error body"},
		{head + "  - reply: {text: a}\n    faults: [{retry_after: 1s}]\n", "retry_after goes with a status"},
		{head + "  - reply: {text: a}\n    faults: [{cut_after: 2, error_after: 3}]\n", "cut_after and error_after both end the stream"},
		{head + "  - reply: {text: a}\n    faults: [{status: 503, error_after: 3}]\n", "malformed, cut_after, error_after and chunk_delay apply to a reply"},
		{head + "  - reply: {text: a}\n    faults: [{status: 429, retry_after: 1500ms}]\n", "Retry-After is sent in whole seconds"},
		{head + "  - reply: {text: a}\n    faults: [{}]\n", "the fault does nothing"},
		{head + "  - key: a\n    reply: {text: a}\n", "key is only read under match: key"},
		{"api_key: k\nmatch: key\nturns:\n  - {key: a, reply: {text: a}}\n  - {key: a, name: again, reply: {text: b}}\n", `turns[1] (again): key "a" is also turns[0]'s`},
		{head + "  - reply: {text: a}\n    expect: {api: completions}\n", `expect.api "completions"`},
		{"api_key: k\nanthropic_version: v1\nturns:\n  - reply: {text: a}\n", `anthropic_version "v1" is not a date`},
	}
	for _, c := range cases {
		_, err := fakellm.ParseScript([]byte(c.doc))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q:\n got %v\nwant %s", c.doc, err, c.want)
			continue
		}
		var uk *yamlkeys.UnknownKeyError
		if !errors.As(err, &uk) && !strings.Contains(c.doc, "delay: 5") && !errors.Is(err, fakellm.ErrBadScript) {
			t.Errorf("%q: %v wraps neither ErrBadScript nor an unknown key", c.doc, err)
		}
	}
	// JSON is YAML, and a good script parses.
	sc, err := fakellm.ParseScript([]byte(`{"api_key": "k", "turns": [{"reply": {"tool_calls": [{"name": "f", "arguments": {"b": 1, "a": [true]}}]}}]}`))
	if err != nil || sc.Turns[0].Reply.Stop != fakellm.StopToolUse || sc.Match != fakellm.MatchOrder {
		t.Fatalf("%v %+v", err, sc)
	}
}
