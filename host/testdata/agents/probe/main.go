// Command probe makes the calls its input lists, one per line of output, so
// host tests can drive every capability and every error path from Go.
//
//	input: [{"op":"kv.put","key":"k","size":2000000}, {"op":"http","url":"..."}, ...]
package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentrt/agentrt/guest-sdk/agent"
)

// Step is one call to make.
type Step struct {
	Op   string `json:"op"`
	Key  string `json:"key"`
	Size int    `json:"size"`
	URL  string `json:"url"`
	N    uint32 `json:"n"`
	// Dim and Amount are a run.limit's (op "limit").
	Dim    string `json:"dim"`
	Amount uint64 `json:"amount"`
}

func main() {
	agent.MainJSON(func(_ context.Context, steps []Step) ([]string, error) {
		// A "checkpoint" step continues the run as new from the step
		// after it (run.checkpoint); only then does the probe ask which
		// segment it runs, so that other inputs make the same calls.
		start := 0
		if slices.ContainsFunc(steps, func(s Step) bool { return s.Op == "checkpoint" }) {
			if state, seg, err := agent.State(); err == nil && seg > 0 {
				start, _ = strconv.Atoi(string(state))
			}
		}
		var out []string
		for i := start; i < len(steps); i++ {
			s := steps[i]
			if s.Op == "checkpoint" {
				if err := agent.Checkpoint([]byte(strconv.Itoa(i + 1))); err != nil {
					return nil, err
				}
			}
			out = append(out, do(s))
		}
		return out, nil
	})
}

func do(s Step) string {
	switch s.Op {
	case "kv.put":
		return fmt.Sprintf("kv.put %v", agent.KVPut(s.Key, make([]byte, s.Size)))
	case "kv.get":
		v, err := agent.KVGet(s.Key)
		return fmt.Sprintf("kv.get %d %v", len(v), err)
	case "http":
		r, err := agent.HTTPGet(s.URL)
		if err != nil {
			return fmt.Sprintf("http %v", err)
		}
		return fmt.Sprintf("http %d %d %s", r.Status, len(r.Body), strings.TrimSpace(string(r.Body[:min(len(r.Body), 80)])))
	case "clock":
		t, err := agent.Now()
		return fmt.Sprintf("clock %d %v", t.UnixNano(), err)
	case "virtual-clock":
		return fmt.Sprintf("virtual-clock %d", time.Now().UnixNano())
	case "random":
		b, err := agent.RandomBytes(s.N)
		return fmt.Sprintf("random %s %v", hex.EncodeToString(b), err)
	case "introspect":
		r, err := agent.Introspect()
		return fmt.Sprintf("introspect %s %v %d %v", r.RunID, r.Capabilities, r.Steps, err)
	case "http-loop":
		// Requests URL up to N times, stopping at the first error: a
		// guest that loops until the host stops it.
		sent := 0
		for range s.N {
			if _, err := agent.HTTPGet(s.URL); err != nil {
				return fmt.Sprintf("http-loop %d budget=%v %v", sent, errors.Is(err, agent.ErrBudget), err)
			}
			sent++
		}
		return fmt.Sprintf("http-loop %d", sent)
	case "limit":
		r, err := agent.Limit(agent.BudgetLimit{Dim: s.Dim, Amount: s.Amount})
		if err != nil {
			return fmt.Sprintf("limit %v", err)
		}
		var cs []string
		for _, c := range r.Ceilings {
			cs = append(cs, fmt.Sprintf("%s=%d", c.Dim, c.Amount))
		}
		return "limit " + strings.Join(cs, " ")
	case "checkpoint":
		return "checkpoint"
	case "print":
		// Key goes to stdout, a line of the run's event log.
		fmt.Println(s.Key)
		return "print"
	case "log":
		return fmt.Sprintf("log %v", agent.Log(agent.Warn, s.Key))
	case "sleep":
		before := time.Now()
		time.Sleep(time.Hour)
		return fmt.Sprintf("sleep %s", time.Since(before).Round(time.Minute))
	}
	return "unknown op " + s.Op
}
