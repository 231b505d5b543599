package fakellm_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/internal/golden"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata/replies from the server")

// goldenTurn has text, a tool call and every usage count, so each golden
// file shows every part of an answer.
const goldenTurn = `
api_key: ` + key + `
turns:
  - reply:
      text: "Checking."
      chunks: 2
      tool_calls: [{name: fetch, arguments: {url: "http://a.test/"}, chunks: 2}]
    usage: {input_tokens: 100, output_tokens: 20, cache_read_tokens: 30, cache_write_tokens: 10, reasoning_tokens: 5}
`

// The answers' exact bytes, one file per API and mode, so that a change
// of the wire format is seen in review against the providers' documents.
// The JSON answers are indented here for reading (the server sends them
// compact); the streams are as sent.
func TestRepliesMatchTheGoldenFiles(t *testing.T) {
	want := map[string][]byte{}
	for _, c := range []struct{ name, path, body string }{
		{"chat", "/v1/chat/completions", `{"model":"gpt-test","messages":[{"role":"user","content":"q"}]%s}`},
		{"responses", "/v1/responses", `{"model":"gpt-test","input":"q"%s}`},
		{"messages", "/v1/messages", `{"model":"claude-test","max_tokens":64,"messages":[{"role":"user","content":"q"}]%s}`},
	} {
		for _, mode := range []string{"json", "stream"} {
			_, url := start(t, goldenTurn)
			extra := ""
			if mode == "stream" {
				extra = `,"stream":true`
				if c.name == "chat" {
					extra += `,"stream_options":{"include_usage":true}`
				}
			}
			a := post(t, url, c.path, strings.Replace(c.body, "%s", extra, 1))
			if a.status != 200 || a.err != nil {
				t.Fatalf("%s %s: %d %v %s", c.name, mode, a.status, a.err, a.body)
			}
			b := []byte(a.body)
			if mode == "json" {
				var buf bytes.Buffer
				if err := json.Indent(&buf, b, "", "  "); err != nil {
					t.Fatalf("%s: %v", c.name, err)
				}
				b = append(buf.Bytes(), '\n')
			}
			want[c.name+"-"+mode+".txt"] = b
		}
	}
	golden.Sync(t, "testdata/replies", "*.txt", want, *rewrite)
}

// A cut, in every API's stream, leaves the client exactly the events
// before it, then a broken event and the end of the connection without
// the terminating chunk: an error, not a clean end.
func TestStreamCutInEachAPI(t *testing.T) {
	for _, c := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"q"}]}`},
		{"/v1/responses", `{"model":"m","stream":true,"input":"q"}`},
		{"/v1/messages", `{"model":"m","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"q"}]}`},
	} {
		srv, url := start(t, `
api_key: `+key+`
turns:
  - reply: {text: "one two three four", chunks: 4}
    faults: [{cut_after: 4}]
`)
		req, _ := http.NewRequest("POST", url+c.path, strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("anthropic-version", "2023-06-01")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != io.ErrUnexpectedEOF {
			t.Errorf("%s: read ended with %v, want an unexpected EOF", c.path, err)
		}
		whole := strings.Count(string(b), "\n\n")
		tail := b[bytes.LastIndex(b, []byte("\n\n"))+2:]
		if whole != 4 || len(tail) == 0 || bytes.Contains(tail, []byte("\n\n")) {
			t.Errorf("%s: %d whole events and a tail of %q", c.path, whole, tail)
		}
		sc := bufio.NewScanner(bytes.NewReader(tail))
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && json.Valid([]byte(d)) {
				t.Errorf("%s: the cut event's data is whole: %s", c.path, d)
			}
		}
		if r := settled(t, srv).Requests[0]; r.Outcome != "cut" || r.Usage != nil || r.Fault != "cut_after 4" {
			t.Errorf("%s: %+v", c.path, r)
		}
	}
}

// An error status carries Retry-After and each API's error type.
func TestErrorStatusesInEachAPI(t *testing.T) {
	_, url := start(t, `
api_key: `+key+`
match: key
turns:
  - key: a
    reply: {text: ok}
    faults: [{status: 429, retry_after: 7s}, {status: 529}, {status: 503}]
`)
	want := []struct {
		status         int
		retry, chat, m string
	}{
		{429, "7", `"code":"rate_limit_exceeded"`, `"type":"rate_limit_error"`},
		{529, "", `"type":"server_error"`, `"type":"overloaded_error"`},
		{503, "", `"type":"server_error"`, `"type":"api_error"`},
	}
	for i, w := range want {
		path, shape := "/v1/chat/completions", w.chat
		body := chatBody("a", false)
		if i%2 == 1 {
			path, shape = "/v1/messages", w.m
			body = `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"a"}]}`
		}
		a := post(t, url, path, body)
		if a.status != w.status || a.header.Get("Retry-After") != w.retry || !strings.Contains(a.body, shape) {
			t.Errorf("attempt %d: %d retry-after %q %s", i+1, a.status, a.header.Get("Retry-After"), a.body)
		}
	}
	if a := post(t, url, "/v1/responses", `{"model":"m","input":"a"}`); a.status != 200 {
		t.Errorf("after the faults: %d %s", a.status, a.body)
	}
}
