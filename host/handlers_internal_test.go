package host

import (
	"testing"

	"github.com/agentrt/agentrt/abi"
)

// TestEveryOpHasAHandler: an op of the ABI without a handler would reach
// guests as "unknown op".
func TestEveryOpHasAHandler(t *testing.T) {
	for _, op := range abi.Ops {
		sl := lookup(capIndex(op.Cap), op.Code)
		if !sl.known || sl.op != op || (sl.h.serve == nil && sl.h.stage == nil) {
			t.Errorf("%s has no handler", op.Name)
		}
	}
	if sl := lookup(capIndex(abi.CapKV), 7); sl.known || sl.op.Name != "kv.#7" {
		t.Errorf("an unknown kv op code gives %+v", sl.op)
	}
}
