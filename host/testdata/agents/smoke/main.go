//go:build wasip1

// Command smoke exercises every capability once; the host tests run it.
package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/agentrt/agentrt/guest-sdk/agent"
)

func main() {
	agent.Main(func(ctx context.Context, input []byte) ([]byte, error) {
		var out strings.Builder
		fmt.Fprintf(&out, "input=%s\n", input)
		agent.Logf("starting at virtual %s", time.Now().UTC().Format(time.RFC3339Nano))
		if _, err := agent.KVGet("missing"); !errors.Is(err, agent.ErrNotFound) {
			return nil, fmt.Errorf("kv get of a missing key: %v", err)
		}
		for i := range 3 {
			if err := agent.KVPut(fmt.Sprintf("k%d", i), []byte(strings.Repeat("v", i+1))); err != nil {
				return nil, err
			}
		}
		keys, more, err := agent.KVList("k", "", 0)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&out, "keys=%v more=%v\n", keys, more)
		v, err := agent.KVGet("k2")
		fmt.Fprintf(&out, "k2=%s err=%v\n", v, err)
		big := make([]byte, 40000)
		if err := agent.KVPut("big", big); err != nil {
			return nil, err
		}
		v, err = agent.KVGet("big")
		fmt.Fprintf(&out, "big=%d err=%v\n", len(v), err)
		fmt.Fprintf(&out, "rand=%d\n", rand.IntN(1000000))
		fmt.Println("to stdout")
		return []byte(out.String()), nil
	})
}
