package host

import (
	"context"

	"github.com/agentrt/agentrt/abi"
)

// The run capability: the run's own input, output, log and identity. Every
// op is pure.
//
//	run.input      () -> InputResponse
//	run.set_output (SetOutputRequest) -> ()     the last call wins
//	run.log        (LogRequest) -> ()           goes to the run's event log
//	run.introspect () -> IntrospectResponse
//	run.checkpoint (CheckpointRequest) -> CheckpointResponse
//	               journals the state, ends the guest's instance and runs
//	               the module again from _start (the next segment), where
//	               run.input carries the state: continue-as-new
//
// Errors: StatusBadRequest for a malformed request.
func init() {
	register("run.input", handler{serve: func(_ context.Context, s *session, c *Call) (abi.Status, []byte) {
		if st, b, ok := decodeRequest(c, &abi.Empty{}); !ok {
			return st, b
		}
		return okResponse(&abi.InputResponse{Input: s.header.Input, State: s.seg.state, Segment: s.seg.number})
	}})
	register("run.set_output", handler{serve: func(_ context.Context, _ *session, c *Call) (abi.Status, []byte) {
		var r abi.SetOutputRequest
		if st, b, ok := decodeRequest(c, &r); !ok {
			return st, b
		}
		return abi.StatusOK, nil
	}})
	register("run.log", handler{serve: func(_ context.Context, s *session, c *Call) (abi.Status, []byte) {
		var r abi.LogRequest
		if st, b, ok := decodeRequest(c, &r); !ok {
			return st, b
		}
		if r.Level > abi.LevelError {
			return errorResponse(abi.StatusBadRequest, "run.log: level %d is not 0..3", r.Level)
		}
		s.events.add(Event{Kind: EventRunLog, Level: r.Level, Data: []byte(r.Message)})
		return abi.StatusOK, nil
	}})
	register("run.checkpoint", handler{serve: func(_ context.Context, s *session, c *Call) (abi.Status, []byte) {
		var r abi.CheckpointRequest
		if st, b, ok := decodeRequest(c, &r); !ok {
			return st, b
		}
		return okResponse(&abi.CheckpointResponse{Segment: s.seg.number + 1, Clock: s.clock.now, Header: s.startHash, Journal: s.journaled})
	}})
	register("run.introspect", handler{serve: func(_ context.Context, s *session, c *Call) (abi.Status, []byte) {
		if st, b, ok := decodeRequest(c, &abi.Empty{}); !ok {
			return st, b
		}
		var caps []string
		for _, cp := range s.grant.Capabilities() {
			caps = append(caps, string(cp))
		}
		return okResponse(&abi.IntrospectResponse{
			RunID:        s.run.String(),
			ModuleSHA256: s.header.ModuleSHA256,
			ABI:          abi.Version,
			Capabilities: caps,
			Steps:        c.Step - 1,
		})
	}})
}
