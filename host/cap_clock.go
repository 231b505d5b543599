package host

import (
	"context"

	"github.com/agentrt/agentrt/abi"
)

// The clock capability: the host's real wall time, on explicit request.
//
//	clock.now () -> ClockNowResponse   pure (no effect), journaled
//
// The guest's ordinary clock (WASI clock_time_get) is virtual and
// deterministic; this op is how an agent asks for the real time, and its
// answer is recorded so replay returns the same instant.
func init() {
	register("clock.now", handler{serve: func(_ context.Context, s *session, c *Call) (abi.Status, []byte) {
		if st, b, ok := decodeRequest(c, &abi.Empty{}); !ok {
			return st, b
		}
		return okResponse(&abi.ClockNowResponse{UnixNano: s.deps.Now().UnixNano()})
	}})
}
