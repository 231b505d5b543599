//go:build !wasip1

package agent

import "github.com/agentrt/agentrt/guest-sdk/abi"

func notWasm(uint32, []byte) (abi.Status, []byte, error) { return 0, nil, ErrNotWasm }

var (
	runTransport      = notWasm
	kvTransport       = notWasm
	httpTransport     = notWasm
	clockTransport    = notWasm
	randomTransport   = notWasm
	toolTransport     = notWasm
	llmTransport      = notWasm
	timerTransport    = notWasm
	approvalTransport = notWasm
	mcpTransport      = notWasm
	agentTransport    = notWasm
)
