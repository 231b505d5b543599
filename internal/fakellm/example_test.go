package fakellm_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/agentrt/agentrt/internal/fakellm"
)

// A test serves a script, sends its client at the server, then asserts
// on what the server was sent and the usage it reported.
func Example() {
	script, err := fakellm.ParseScript([]byte(`
api_key: sk-example
turns:
  - expect: {model: gpt-test, last_role: user}
    reply: {text: "Paris."}
    usage: {input_tokens: 9, output_tokens: 2, cache_read_tokens: 3}
`))
	if err != nil {
		panic(err)
	}
	srv, err := fakellm.New(script)
	if err != nil {
		panic(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()

	req, _ := http.NewRequest("POST", hs.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-test","messages":[{"role":"user","content":"Capital of France?"}]}`))
	req.Header.Set("Authorization", "Bearer sk-example")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	var reply struct {
		Choices []struct {
			Message struct{ Content string }
		}
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		}
	}
	json.NewDecoder(resp.Body).Decode(&reply)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	fmt.Println(reply.Choices[0].Message.Content, reply.Usage.PromptTokens)

	st := srv.Stats()
	for !st.Settled() {
		st = srv.Stats()
	}
	fmt.Println(len(st.Requests), st.Requests[0].Outcome, st.Usage.InputTokens, st.Usage.CacheReadTokens)
	// Output:
	// Paris. 12
	// 1 completed 9 3
}
