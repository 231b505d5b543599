package host

import (
	"fmt"

	"github.com/agentrt/agentrt/abi"
)

// runIndex is the index of the run capability, whose set_output the
// session watches.
var runIndex = capIndex(abi.CapRun)

// numCaps is the number of capabilities of the ABI; capabilities are
// indexed by their position in abi.Capabilities.
const numCaps = 6

// maxOpCode bounds the op codes of every capability.
const maxOpCode = 8

func init() {
	if len(abi.Capabilities) != numCaps {
		panic("host: numCaps does not match abi.Capabilities")
	}
	for _, op := range abi.Ops {
		if op.Code >= maxOpCode {
			panic("host: maxOpCode is too small for " + op.Name)
		}
	}
}

// slot is an op with its handler, found by capability index and op code in
// one array lookup on every call.
type slot struct {
	op    abi.Op
	h     handler
	known bool
}

var slots [numCaps][maxOpCode]slot

// capIndex returns the index of c in abi.Capabilities.
func capIndex(c abi.Capability) int {
	for i, k := range abi.Capabilities {
		if k == c {
			return i
		}
	}
	panic("host: unknown capability " + string(c))
}

// register installs the handler of an op. Each capability's handlers live
// in their own file (cap_*.go).
func register(name string, h handler) {
	op, ok := abi.LookupOpName(name)
	if !ok {
		panic("host: handler for unknown op " + name)
	}
	slots[capIndex(op.Cap)][op.Code] = slot{op, h, true}
}

// lookup returns the op and handler of a code in capability ci. An unknown
// code gets a placeholder op, which the gate answers with StatusBadRequest.
func lookup(ci int, code uint32) *slot {
	if code < maxOpCode {
		if sl := &slots[ci][code]; sl.known {
			return sl
		}
	}
	c := abi.Capabilities[ci]
	return &slot{op: abi.Op{Cap: c, Code: code, Name: fmt.Sprintf("%s.#%d", c, code), Class: abi.Pure, Idempotent: true}}
}
