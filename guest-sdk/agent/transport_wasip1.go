//go:build wasip1

package agent

import (
	"unsafe"

	"github.com/agentrt/agentrt/guest-sdk/abi"
)

//go:wasmimport agentrt:run call
func runCall(op uint32, req unsafe.Pointer, reqLen uint32, resp unsafe.Pointer, respCap uint32) uint64

//go:wasmimport agentrt:run take
func runTake(resp unsafe.Pointer, respCap uint32) uint64

//go:wasmimport agentrt:kv call
func kvCall(op uint32, req unsafe.Pointer, reqLen uint32, resp unsafe.Pointer, respCap uint32) uint64

//go:wasmimport agentrt:kv take
func kvTake(resp unsafe.Pointer, respCap uint32) uint64

//go:wasmimport agentrt:http call
func httpCall(op uint32, req unsafe.Pointer, reqLen uint32, resp unsafe.Pointer, respCap uint32) uint64

//go:wasmimport agentrt:http take
func httpTake(resp unsafe.Pointer, respCap uint32) uint64

//go:wasmimport agentrt:clock call
func clockCall(op uint32, req unsafe.Pointer, reqLen uint32, resp unsafe.Pointer, respCap uint32) uint64

//go:wasmimport agentrt:clock take
func clockTake(resp unsafe.Pointer, respCap uint32) uint64

//go:wasmimport agentrt:random call
func randomCall(op uint32, req unsafe.Pointer, reqLen uint32, resp unsafe.Pointer, respCap uint32) uint64

//go:wasmimport agentrt:random take
func randomTake(resp unsafe.Pointer, respCap uint32) uint64

//go:wasmimport agentrt:tool call
func toolCall(op uint32, req unsafe.Pointer, reqLen uint32, resp unsafe.Pointer, respCap uint32) uint64

//go:wasmimport agentrt:tool take
func toolTake(resp unsafe.Pointer, respCap uint32) uint64

//go:wasmimport agentrt:timer call
func timerCall(op uint32, req unsafe.Pointer, reqLen uint32, resp unsafe.Pointer, respCap uint32) uint64

//go:wasmimport agentrt:timer take
func timerTake(resp unsafe.Pointer, respCap uint32) uint64

//go:wasmimport agentrt:approval call
func approvalCall(op uint32, req unsafe.Pointer, reqLen uint32, resp unsafe.Pointer, respCap uint32) uint64

//go:wasmimport agentrt:approval take
func approvalTake(resp unsafe.Pointer, respCap uint32) uint64

//go:wasmimport agentrt:mcp call
func mcpCall(op uint32, req unsafe.Pointer, reqLen uint32, resp unsafe.Pointer, respCap uint32) uint64

//go:wasmimport agentrt:mcp take
func mcpTake(resp unsafe.Pointer, respCap uint32) uint64

//go:wasmimport agentrt:agent call
func agentCall(op uint32, req unsafe.Pointer, reqLen uint32, resp unsafe.Pointer, respCap uint32) uint64

//go:wasmimport agentrt:agent take
func agentTake(resp unsafe.Pointer, respCap uint32) uint64

//go:wasmimport agentrt:llm call
func llmCall(op uint32, req unsafe.Pointer, reqLen uint32, resp unsafe.Pointer, respCap uint32) uint64

//go:wasmimport agentrt:llm take
func llmTake(resp unsafe.Pointer, respCap uint32) uint64

// One transport per capability, each naming its imports directly, so the
// linker keeps only the import modules an agent reaches.
func runTransport(op uint32, req []byte) (abi.Status, []byte, error) {
	return roundTrip(runCall, runTake, op, req)
}

func kvTransport(op uint32, req []byte) (abi.Status, []byte, error) {
	return roundTrip(kvCall, kvTake, op, req)
}

func httpTransport(op uint32, req []byte) (abi.Status, []byte, error) {
	return roundTrip(httpCall, httpTake, op, req)
}

func clockTransport(op uint32, req []byte) (abi.Status, []byte, error) {
	return roundTrip(clockCall, clockTake, op, req)
}

func timerTransport(op uint32, req []byte) (abi.Status, []byte, error) {
	return roundTrip(timerCall, timerTake, op, req)
}

func approvalTransport(op uint32, req []byte) (abi.Status, []byte, error) {
	return roundTrip(approvalCall, approvalTake, op, req)
}

func mcpTransport(op uint32, req []byte) (abi.Status, []byte, error) {
	return roundTrip(mcpCall, mcpTake, op, req)
}

func agentTransport(op uint32, req []byte) (abi.Status, []byte, error) {
	return roundTrip(agentCall, agentTake, op, req)
}

func randomTransport(op uint32, req []byte) (abi.Status, []byte, error) {
	return roundTrip(randomCall, randomTake, op, req)
}

func toolTransport(op uint32, req []byte) (abi.Status, []byte, error) {
	return roundTrip(toolCall, toolTake, op, req)
}

func llmTransport(op uint32, req []byte) (abi.Status, []byte, error) {
	return roundTrip(llmCall, llmTake, op, req)
}

func ptr(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(unsafe.SliceData(b))
}

// scratch is the response buffer reused by every call; responses larger
// than it are fetched with take into a buffer of their own size.
var scratch = make([]byte, 16<<10)

func roundTrip(
	callFn func(op uint32, req unsafe.Pointer, reqLen uint32, resp unsafe.Pointer, respCap uint32) uint64,
	takeFn func(resp unsafe.Pointer, respCap uint32) uint64,
	op uint32, req []byte,
) (abi.Status, []byte, error) {
	r := abi.Result(callFn(op, ptr(req), uint32(len(req)), ptr(scratch), uint32(len(scratch))))
	if r.Status() != abi.StatusPending {
		return r.Status(), scratch[:r.Len()], nil
	}
	buf := make([]byte, r.Len())
	r = abi.Result(takeFn(ptr(buf), uint32(len(buf))))
	if r.Status() == abi.StatusNoPending || r.Status() == abi.StatusBufferTooSmall {
		return r.Status(), nil, &abi.Error{Code: r.Status(), Message: "take of a pending response failed"}
	}
	return r.Status(), buf[:r.Len()], nil
}
