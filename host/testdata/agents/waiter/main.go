//go:build wasip1

// Command waiter waits, durably, as its input says: it sleeps for a
// duration or until a time (timer.sleep), or asks its approvers
// (approval.request), and around the wait it makes effects (kv puts of a
// counter, HTTP POSTs to a test server) so that a test sees none made
// twice across the parks and resumes.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/agentrt/agentrt/guest-sdk/agent"
)

type input struct {
	// Sleep is a duration (ns) to sleep; Until a Unix ns time to sleep to.
	Sleep int64 `json:"sleep,omitempty"`
	Until int64 `json:"until,omitempty"`
	// Action and Group ask for an approval.
	Action string `json:"action,omitempty"`
	Group  string `json:"group,omitempty"`
	// Hits, when set, is a URL the agent POSTs to before and after it
	// waits.
	Hits string `json:"hits,omitempty"`
	// Counter, when set, is a kv key the agent increments before and
	// after it waits.
	Counter bool `json:"counter,omitempty"`
}

func bump() error {
	v, err := agent.KVGet("effects")
	n := 0
	if err == nil {
		n, _ = strconv.Atoi(string(v))
	}
	return agent.KVPut("effects", []byte(strconv.Itoa(n+1)))
}

func hit(url, what string) error {
	_, err := agent.HTTPDo(&agent.HTTPRequest{Method: "POST", URL: url, Body: []byte(what)})
	return err
}

func main() {
	agent.Main(func(ctx context.Context, raw []byte) ([]byte, error) {
		var in input
		if err := json.Unmarshal(raw, &in); err != nil {
			return nil, err
		}
		around := func(what string) error {
			if in.Counter {
				if err := bump(); err != nil {
					return err
				}
			}
			if in.Hits != "" {
				return hit(in.Hits, what)
			}
			return nil
		}
		if err := around("before"); err != nil {
			return nil, err
		}
		out := map[string]any{}
		switch {
		case in.Sleep != 0:
			due, woke, err := agent.Sleep(time.Duration(in.Sleep))
			if err != nil {
				return nil, err
			}
			out["due"], out["woke"] = due.UnixNano(), woke.UnixNano()
		case in.Until != 0:
			due, woke, err := agent.SleepUntil(time.Unix(0, in.Until))
			if err != nil {
				return nil, err
			}
			out["due"], out["woke"] = due.UnixNano(), woke.UnixNano()
		case in.Action != "":
			a, err := agent.RequestApproval(in.Action, in.Group)
			if err != nil {
				return nil, err
			}
			out["approved"], out["approvers"], out["reason"], out["digest"] = a.Approved, a.Approvers, a.Reason, fmt.Sprintf("%x", a.Digest)
		}
		if err := around("after"); err != nil {
			return nil, err
		}
		if in.Counter {
			v, err := agent.KVGet("effects")
			if err != nil {
				return nil, err
			}
			out["effects"] = string(v)
		}
		return json.Marshal(out)
	})
}
