// A hostile test agent: it calls llm.next itself, for a stream it never
// opened, naming in the cursor a response id of its choosing (its input),
// and prints what the host answered.
package main

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/agentrt/agentrt/guest-sdk/abi"
	"github.com/agentrt/agentrt/guest-sdk/agent"
)

//go:wasmimport agentrt:llm call
func llmCall(op uint32, req unsafe.Pointer, reqLen uint32, resp unsafe.Pointer, respCap uint32) uint64

func main() {
	agent.Main(func(_ context.Context, input []byte) ([]byte, error) {
		// Step 1 is run.input: an earlier step for llm.next to name.
		cur := &abi.LLMCursor{Provider: "fake", Model: "m-test", ResponseID: string(input), MAC: make([]byte, 32)}
		req, err := abi.Marshal(&abi.LLMNextRequest{Step: 1, Cursor: cur})
		if err != nil {
			return nil, err
		}
		resp := make([]byte, 4096)
		r := llmCall(abi.OpLLMNext, unsafe.Pointer(&req[0]), uint32(len(req)), unsafe.Pointer(&resp[0]), uint32(len(resp)))
		status, n := abi.Status(r>>32), uint32(r)
		var e abi.Error
		if status != abi.StatusOK && abi.Unmarshal(resp[:n], &e) == nil {
			return []byte(fmt.Sprintf("%s: %s", status, e.Message)), nil
		}
		return []byte(fmt.Sprintf("status %s, %d bytes", status, n)), nil
	})
}
