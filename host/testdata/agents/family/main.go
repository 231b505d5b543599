//go:build wasip1

// Command family is a sub-agent test agent: its input, JSON, says which
// children to spawn (a module hash, caps, budget and the child's own
// input, recursively), whether to await them, cancel them or list them,
// and what to do itself (sleep an hour, fail). Its output, JSON, reports
// every answer it got, errors included, so that a test reads what the
// agent saw.
package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"github.com/agentrt/agentrt/guest-sdk/abi"
	"github.com/agentrt/agentrt/guest-sdk/agent"
)

type plan struct {
	Spawn []struct {
		Module string          `json:"module"`
		Caps   string          `json:"caps"`
		Budget string          `json:"budget"`
		Input  json.RawMessage `json:"input"`
	} `json:"spawn"`
	// Await and Cancel the children spawned; Await "other" names a run
	// that is not a child.
	Await    bool   `json:"await"`
	Cancel   bool   `json:"cancel"`
	Children bool   `json:"children"`
	Other    string `json:"other"`
	// Sleep parks the agent for an hour after the rest; Fail fails it;
	// Spin makes calls (agent.children) until one fails.
	Sleep  bool   `json:"sleep"`
	Spin   bool   `json:"spin"`
	Fail   string `json:"fail"`
	Output string `json:"output"`
}

type report struct {
	Spawned  []*agent.Child   `json:"spawned,omitempty"`
	Outcomes []*agent.Outcome `json:"outcomes,omitempty"`
	Children []abi.Child      `json:"children,omitempty"`
	Errors   []string         `json:"errors,omitempty"`
	Output   string           `json:"output,omitempty"`
}

func main() {
	agent.Main(func(ctx context.Context, input []byte) ([]byte, error) {
		var p plan
		if err := json.Unmarshal(input, &p); err != nil {
			return nil, err
		}
		var r report
		fail := func(err error) { r.Errors = append(r.Errors, err.Error()) }
		for _, s := range p.Spawn {
			mod, err := hex.DecodeString(s.Module)
			if err != nil {
				return nil, err
			}
			c, err := agent.Spawn(mod, s.Input, agent.SpawnOptions{Caps: s.Caps, Budget: s.Budget})
			if err != nil {
				fail(err)
				continue
			}
			r.Spawned = append(r.Spawned, c)
		}
		if p.Other != "" {
			if _, err := agent.Await(p.Other); err != nil {
				fail(err)
			}
			if err := agent.Cancel(p.Other); err != nil {
				fail(err)
			}
		}
		if p.Cancel {
			for _, c := range r.Spawned {
				if err := agent.Cancel(c.Run); err != nil {
					fail(err)
				}
			}
		}
		if p.Await {
			for _, c := range r.Spawned {
				o, err := agent.Await(c.Run)
				if err != nil {
					fail(err)
					continue
				}
				r.Outcomes = append(r.Outcomes, o)
			}
		}
		if p.Children {
			kids, err := agent.Children()
			if err != nil {
				fail(err)
			}
			r.Children = kids
		}
		for p.Spin {
			if _, err := agent.Children(); err != nil {
				return nil, err
			}
		}
		if p.Sleep {
			if _, _, err := agent.Sleep(time.Hour); err != nil {
				fail(err)
			}
		}
		if p.Fail != "" {
			return nil, errors.New(p.Fail)
		}
		r.Output = p.Output
		return json.Marshal(&r)
	})
}
