//go:build wasip1

// Command agent is the agentrt side of make bench-peers: a Go agent built
// with the guest SDK that makes as many durable steps as its input says
// (a decimal number), each one kv.put, committed (fsynced) to the cell's
// journal before the next call starts. It is the equal of the DBOS
// workflow in ../dbosflow.
package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/agentrt/agentrt/guest-sdk/agent"
)

func main() {
	agent.Main(func(_ context.Context, input []byte) ([]byte, error) {
		n, err := strconv.Atoi(strings.TrimSpace(string(input)))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("input %q: want the number of steps", input)
		}
		value := []byte("done")
		for i := range n {
			if err := agent.KVPut("step-"+strconv.Itoa(i), value); err != nil {
				return nil, fmt.Errorf("step %d: %w", i, err)
			}
		}
		return []byte(strconv.Itoa(n)), nil
	})
}
