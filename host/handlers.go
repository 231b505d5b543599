package host

import (
	"context"

	"github.com/agentrt/agentrt/abi"
)

var opSetOutput, _ = abi.LookupOp(abi.CapRun, abi.OpRunSetOutput)

// handlers maps every op of the ABI to its handler. Each capability's
// handlers live in their own file (cap_*.go).
var handlers = map[string]handler{}

func register(name string, h handler) {
	if _, ok := abi.LookupOpName(name); !ok {
		panic("host: handler for unknown op " + name)
	}
	handlers[name] = h
}

// handlerOf returns the handler of op. Unknown ops get a handler the gate
// never lets through.
func handlerOf(op abi.Op) handler {
	if h, ok := handlers[op.Name]; ok {
		return h
	}
	return handler{serve: func(context.Context, *session, *Call) (abi.Status, []byte) {
		return errorResponse(abi.StatusBadRequest, "unknown op %s", op.Name)
	}}
}
