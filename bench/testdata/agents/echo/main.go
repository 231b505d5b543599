//go:build wasip1

// Command echo is the Go agent of the cold-start benchmark: a real Go
// wasip1 module built with the guest SDK that returns its input as output.
package main

import (
	"context"

	"github.com/agentrt/agentrt/guest-sdk/agent"
)

func main() {
	agent.Main(func(_ context.Context, input []byte) ([]byte, error) { return input, nil })
}
