// Command selfprobe asks the run.self ops about itself, one step of its
// input at a time, and prints one line per step, so host tests can compare
// what the agent was told with what the host did.
//
//	input: [{"op":"may+do","call":"http.request","method":"GET","url":"..."}, {"op":"whoami"}, ...]
//
// A "may", "do" or "may+do" step names a call (http.request, kv.put,
// kv.get, clock.now, random.bytes, run.log; llm.complete to ask only): "may" asks the gate
// about it (run.self_may), "do" makes it, "may+do" both, in that order.
package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/agentrt/agentrt/guest-sdk/abi"
	"github.com/agentrt/agentrt/guest-sdk/agent"
)

// Step is one thing to ask or do.
type Step struct {
	Op     string `json:"op"`
	Call   string `json:"call"`
	Method string `json:"method"`
	URL    string `json:"url"`
	Key    string `json:"key"`
	// From, Limit, JOp and Phase are a journal query's.
	From  uint64 `json:"from"`
	Limit uint32 `json:"limit"`
	JOp   string `json:"jop"`
	Phase string `json:"phase"`
}

func main() {
	agent.MainJSON(func(_ context.Context, steps []Step) ([]string, error) {
		var out []string
		for _, s := range steps {
			out = append(out, do(s))
		}
		return out, nil
	})
}

// request returns the request of the call s names, as its SDK function
// would send it.
func request(s Step) any {
	switch s.Call {
	case "http.request":
		return &abi.HTTPRequest{Method: s.Method, URL: s.URL}
	case "kv.put":
		return &abi.KVPutRequest{Key: s.Key, Value: []byte("v")}
	case "kv.get":
		return &abi.KVGetRequest{Key: s.Key}
	case "random.bytes":
		return &abi.RandomBytesRequest{N: 4}
	case "run.log":
		return &abi.LogRequest{Level: agent.Info, Message: s.Key}
	case "llm.complete":
		// A call the probe cannot make (it does not import agentrt:llm),
		// only ask about.
		return &abi.LLMRequest{Model: s.Key, MaxOutputTokens: 16, Messages: []abi.LLMMessage{{Role: "user", Content: []abi.LLMPart{{Type: "text", Text: "hi"}}}}}
	}
	return nil // clock.now
}

// status renders an SDK error as "ok" or the ABI status and message.
func status(err error) string {
	var e *abi.Error
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &e):
		return fmt.Sprintf("%s %s", e.Code, e.Message)
	}
	return "error " + err.Error()
}

func may(s Step) string {
	d, err := agent.MayI(s.Call, request(s))
	if err != nil {
		return "may " + status(err)
	}
	switch d.Decision {
	case abi.MayDeny:
		return fmt.Sprintf("may deny %s %s %s", d.Stage, d.Status, d.Reason)
	case abi.MayAsk:
		return fmt.Sprintf("may ask %s %s", d.Stage, d.Reason)
	}
	return "may " + d.Decision
}

func call(s Step) string {
	var err error
	switch s.Call {
	case "http.request":
		_, err = agent.HTTPDo(request(s).(*abi.HTTPRequest))
	case "kv.put":
		err = agent.KVPut(s.Key, []byte("v"))
	case "kv.get":
		_, err = agent.KVGet(s.Key)
	case "clock.now":
		_, err = agent.Now()
	case "random.bytes":
		_, err = agent.RandomBytes(4)
	case "run.log":
		err = agent.Log(agent.Info, s.Key)
	default:
		return "do: unknown call " + s.Call
	}
	return "do " + status(err)
}

func do(s Step) string {
	switch s.Op {
	case "may":
		return may(s)
	case "do":
		return call(s)
	case "may+do":
		return may(s) + " | " + call(s)
	case "whoami":
		r, err := agent.Whoami()
		if err != nil {
			return "whoami " + status(err)
		}
		return fmt.Sprintf("whoami run=%s task=%s attempt=%d parent=%s step=%d depth=%d cell=%s module=%s",
			r.RunID, r.Task, r.Attempt, r.Parent, r.ParentStep, r.Depth, r.Cell, hex.EncodeToString(r.ModuleSHA256))
	case "caps":
		r, err := agent.MyCaps()
		if err != nil {
			return "caps " + status(err)
		}
		return fmt.Sprintf("caps %s budget=%s claims=%s", strings.Join(r.Capabilities, ","), r.Budget, r.Caps)
	case "budget":
		r, err := agent.MyBudget()
		if err != nil {
			return "budget " + status(err)
		}
		var dims []string
		for _, d := range r.Dims {
			if d.Limited || d.Spent > 0 || d.Reserved > 0 {
				dims = append(dims, fmt.Sprintf("%s=%d/%d/%d/%d", d.Dim, d.Spent, d.Reserved, d.Left, d.Ceiling))
			}
		}
		return "budget " + strings.Join(dims, " ")
	case "mode":
		r, err := agent.MyMode()
		if err != nil {
			return "mode " + status(err)
		}
		var rules []string
		for _, x := range r.Rules {
			rules = append(rules, x.Name+":"+x.Effect)
		}
		return fmt.Sprintf("mode %s modes=%v default=%s rules=%s", r.Mode, r.Modes, r.Default, strings.Join(rules, ","))
	case "journal":
		r, err := agent.MyJournal(agent.JournalQuery{From: s.From, Limit: s.Limit, Op: s.JOp, Phase: s.Phase})
		if err != nil {
			return "journal " + status(err)
		}
		var es []string
		for _, e := range r.Entries {
			es = append(es, fmt.Sprintf("%d:%s:%s:%d", e.Seq, e.Phase, e.Op, e.Step))
		}
		return fmt.Sprintf("journal next=%d n=%d %s", r.Next, len(r.Entries), strings.Join(es, " "))
	}
	return "unknown op " + s.Op
}
