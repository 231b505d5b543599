//go:build !wasip1

package agent_test

// The examples run against a host in memory (fakehost_test.go): the SDK's
// code, its encoding and the bytes it exchanges are the real ones, and the
// host's answers are those the agentrt host gives (its input is
// {"name":"Ada"}; it knows https://example.com/, the tool count-lines, and
// a model that calls the request's first tool once and answers with its
// result).
// Lines starting with "host:" are what the host received: a log line, the
// run's output.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/agentrt/agentrt/guest-sdk/agent"
)

// An agent whose input and output are JSON.
func ExampleMainJSON() {
	type Input struct {
		Name string `json:"name"`
	}
	type Output struct {
		Greeting string `json:"greeting"`
	}
	agent.MainJSON(func(ctx context.Context, in Input) (Output, error) {
		return Output{Greeting: "Hello, " + in.Name + "!"}, nil
	})
	// Output:
	// host: output {"greeting":"Hello, Ada!"}
}

// An agent whose input and output are bytes.
func ExampleMain() {
	agent.Main(func(ctx context.Context, input []byte) ([]byte, error) {
		return []byte(strings.ToUpper(string(input))), nil
	})
	// Output:
	// host: output {"NAME":"ADA"}
}

func ExampleInput() {
	input, err := agent.Input()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s\n", input)
	// Output:
	// {"name":"Ada"}
}

func ExampleSetOutput() {
	// The last call wins: the run's output is what it was given last.
	if err := agent.SetOutput([]byte("done")); err != nil {
		fmt.Println(err)
	}
	// Output:
	// host: output done
}

func ExampleLog() {
	agent.Log(agent.Warn, "the cache is cold")
	agent.Logf("fetched %d pages", 3)
	// A level the ABI does not have is the host's bad_request.
	err := agent.Log(9, "?")
	fmt.Println(errors.Is(err, agent.ErrBadRequest), err)
	// Output:
	// host: log warn the cache is cold
	// host: log info fetched 3 pages
	// true bad_request: run.log: level 9 is not 0..3
}

func ExampleKVGet() {
	// A key never written is ErrNotFound.
	_, err := agent.KVGet("visits")
	fmt.Println(errors.Is(err, agent.ErrNotFound), err)

	if err := agent.KVPut("visits", []byte("1")); err != nil {
		fmt.Println(err)
		return
	}
	v, err := agent.KVGet("visits")
	fmt.Printf("%s %v\n", v, err)
	// Output:
	// true not_found: kv.get: no key "visits"
	// 1 <nil>
}

func ExampleKVPut() {
	// The write commits with its journal entries: it happens exactly once,
	// even when the run crashes and is resumed.
	if err := agent.KVPut("greeted/Ada", []byte("3")); err != nil {
		fmt.Println(err)
		return
	}
	v, _ := agent.KVGet("greeted/Ada")
	fmt.Printf("%s\n", v)
	// Output:
	// 3
}

func ExampleKVDelete() {
	agent.KVPut("session/1", []byte("x"))
	existed, err := agent.KVDelete("session/1")
	fmt.Println(existed, err)
	existed, err = agent.KVDelete("session/1")
	fmt.Println(existed, err)
	// Output:
	// true <nil>
	// false <nil>
}

func ExampleKVList() {
	for _, k := range []string{"page/a", "page/b", "page/c", "other"} {
		agent.KVPut(k, nil)
	}
	// Page through the keys with a prefix, two at a time.
	after := ""
	for {
		keys, more, err := agent.KVList("page/", after, 2)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(keys, more)
		if !more {
			break
		}
		after = keys[len(keys)-1]
	}
	// Output:
	// [page/a page/b] true
	// [page/c] false
}

func ExampleHTTPGet() {
	resp, err := agent.HTTPGet("https://example.com/")
	if err != nil {
		fmt.Println(err)
		return
	}
	h := resp.Headers[0]
	fmt.Printf("%d %s: %s %q\n", resp.Status, h.Name, h.Value, resp.Body)

	// A host the grant does not name is ErrDenied, and nothing is sent.
	_, err = agent.HTTPGet("https://evil.example/")
	fmt.Println(errors.Is(err, agent.ErrDenied), err)
	// Output:
	// 200 Content-Type: text/plain "hello from example.com"
	// true denied: http.request: host evil.example is not in the grant (allowed: example.com)
}

func ExampleHTTPDo() {
	resp, err := agent.HTTPDo(&agent.HTTPRequest{
		Method:  "POST",
		URL:     "https://example.com/items",
		Headers: []agent.Header{{Name: "Content-Type", Value: "application/json"}},
		Body:    []byte(`{"n":1}`),
	})
	if err != nil {
		// A crash while the request was in flight, on a host that does
		// not say it honours Idempotency-Key, is ErrInDoubt on resume:
		// the agent decides whether to send it again.
		fmt.Println(errors.Is(err, agent.ErrInDoubt), err)
		return
	}
	fmt.Println(resp.Status, string(resp.Body))
	// Output:
	// 200 POST {"n":1}
}

func ExampleNow() {
	// The host's wall time, journaled: a replay sees the same instant.
	// time.Now reads the run's virtual clock instead.
	t, err := agent.Now()
	fmt.Println(t.UTC(), err)
	// Output:
	// 2026-01-01 12:00:00 +0000 UTC <nil>
}

func ExampleRandomBytes() {
	// Real entropy from the host, journaled (this host counts instead).
	// math/rand and crypto/rand read the run's seeded stream.
	b, err := agent.RandomBytes(8)
	fmt.Println(len(b), err)
	_, err = agent.RandomBytes(1 << 20)
	fmt.Println(errors.Is(err, agent.ErrTooLarge))
	// Output:
	// 8 <nil>
	// true
}

func ExampleTool() {
	// Arguments are checked against the tool's schema in the grant
	// before anything runs; a flag it does not list is ErrDenied.
	_, err := agent.Tool("count-lines", "--all")
	fmt.Println(errors.Is(err, agent.ErrDenied), err)
	// Output:
	// true denied: tool.run: tool count-lines: argument 1 "--all": flag --all is not in the tool's schema (allowed: none)
}

func ExampleToolWithStdin() {
	res, err := agent.ToolWithStdin("count-lines", []byte("a\nb\nc\n"))
	if err != nil {
		fmt.Println(err)
		return
	}
	// A tool that ran is a success whatever its exit status.
	fmt.Printf("exit %d, stdout %q, files %d, limits %v\n", res.Exit, res.Stdout, len(res.Files), res.Limits)
	// Output:
	// exit 0, stdout "3\n", files 0, limits []
}

func ExampleIntrospect() {
	me, err := agent.Introspect()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(me.RunID, me.ABI, me.Capabilities)
	// Output:
	// 0189c4f1d2a3b4c50123456789abcdef 1 [run kv http clock random tool]
}

func ExampleState() {
	// In the first segment of a run there is no state; after a
	// Checkpoint, the run starts again from main and State returns it.
	state, segment, err := agent.State()
	fmt.Println(state == nil, segment, err)
	// Output:
	// true 0 <nil>
}

func ExampleCheckpoint() {
	// On success Checkpoint does not return: the host journals the state
	// and starts the module again, where State returns it. It returns the
	// error of a checkpoint the host refused, such as a state over the
	// request limit.
	err := agent.Checkpoint(make([]byte, 2<<20))
	fmt.Println(errors.Is(err, agent.ErrTooLarge))
	// Output:
	// true
}

// Compare errors with the sentinels, or read the code and the message.
func ExampleHostError() {
	_, err := agent.KVGet("missing")
	var he *agent.HostError
	if errors.As(err, &he) {
		fmt.Println(he.Code, he.Code == agent.ErrNotFound.Code, he.Message)
	}
	// Output:
	// not_found true kv.get: no key "missing"
}

// A tool-calling agent: the model asks for word_count, the loop runs it
// and feeds the result back, and the model's next answer, without a tool
// call, ends the loop. The host enforces the caps too (run.limit).
func ExampleLoop() {
	tools := map[string]agent.ToolFunc{
		"word_count": func(ctx context.Context, args []byte) (string, error) {
			var a struct {
				Text string `json:"text"`
			}
			if err := json.Unmarshal(args, &a); err != nil {
				return "", err
			}
			return strconv.Itoa(len(strings.Fields(a.Text))), nil
		},
	}
	res, err := agent.Loop(context.Background(), agent.LoopConfig{
		Request: agent.LLMRequest{
			Model:           "gpt-4.1-mini",
			MaxOutputTokens: 500,
			Tools: []agent.LLMTool{{Name: "word_count", Description: "Counts the words of a text.",
				Schema: []byte(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)}},
			Messages: []agent.LLMMessage{{Role: "user", Content: []agent.LLMPart{
				{Type: "text", Text: "How many words are in 'the quick brown fox'?"}}}},
		},
		MaxIterations:   5,
		MaxOutputTokens: 4000,
		MaxToolCalls:    3,
	}, agent.ToolStep(tools))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Reason, res.Iterations, res.ToolCalls, res.Usage.Output)
	fmt.Println(res.Response.Text())
	// Output:
	// done 2 1 40
	// There are 4 words.
}

// At a cap the loop makes one concluding call, without tools, and says
// why it stopped.
func ExampleLoop_cap() {
	tools := map[string]agent.ToolFunc{
		"search": func(ctx context.Context, args []byte) (string, error) { return "no results", nil },
	}
	res, err := agent.Loop(context.Background(), agent.LoopConfig{
		Request: agent.LLMRequest{
			Model:           "gpt-4.1-mini",
			MaxOutputTokens: 500,
			Tools:           []agent.LLMTool{{Name: "search", Schema: []byte(`{"type":"object"}`)}},
			Messages: []agent.LLMMessage{{Role: "user", Content: []agent.LLMPart{
				{Type: "text", Text: "Find 'agentrt' and summarise it."}}}},
		},
		MaxIterations: 1,
	}, agent.ToolStep(tools))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Reason, res.Concluded, res.Detail)
	fmt.Println(res.Response.Text())
	// Output:
	// max_iterations true 1 iterations of 1
	// I cannot tell.
}
