// Command taskprobe is a task's attempt for the cell's task tests: it
// counts its attempts in kv, makes the calls asked, may wait for the real
// clock, and fails until its attempt count passes the number asked.
//
//	input: {"fail": 2, "puts": 5, "until": UNIX_NS}
//
// Each attempt reads and writes kv "tries" (2 calls), then makes "puts"
// kv.put calls, then, with "until", reads the real clock (clock.now) until
// it reads that time or later; attempts up to "fail" then fail, the next
// ones complete with "done after N tries". An input that is not JSON (a
// task's objective) is taken as {}: the attempt completes at once.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/agentrt/agentrt/guest-sdk/agent"
)

type plan struct {
	Fail  int   `json:"fail"`
	Puts  int   `json:"puts"`
	Until int64 `json:"until"`
}

func main() {
	agent.Main(func(_ context.Context, input []byte) ([]byte, error) {
		var p plan
		_ = json.Unmarshal(input, &p)
		n := 1
		if v, err := agent.KVGet("tries"); err == nil {
			n, _ = strconv.Atoi(string(v))
			n++
		}
		if err := agent.KVPut("tries", []byte(strconv.Itoa(n))); err != nil {
			return nil, err
		}
		for i := range p.Puts {
			if err := agent.KVPut(fmt.Sprintf("pad%d", i), []byte{byte(i)}); err != nil {
				return nil, err
			}
		}
		for p.Until > 0 {
			now, err := agent.Now()
			if err != nil {
				return nil, err
			}
			if now.UnixNano() >= p.Until {
				break
			}
		}
		if n <= p.Fail {
			return nil, fmt.Errorf("attempt %d fails on purpose (fail: %d)", n, p.Fail)
		}
		return []byte(fmt.Sprintf("done after %d tries", n)), nil
	})
}
