package agent

import (
	"fmt"

	"github.com/agentrt/agentrt/guest-sdk/abi"
)

// Level is the severity of a log line.
type Level = uint8

// Log levels.
const (
	Debug Level = abi.LevelDebug
	Info  Level = abi.LevelInfo
	Warn  Level = abi.LevelWarn
	Error Level = abi.LevelError
)

// Input returns the run's input (run.input).
func Input() ([]byte, error) {
	var r abi.InputResponse
	err := call(runTransport, abi.CapRun, abi.OpRunInput, nil, &r)
	return r.Input, err
}

// SetOutput records the run's output; the last call wins (run.set_output).
func SetOutput(output []byte) error {
	return call(runTransport, abi.CapRun, abi.OpRunSetOutput, &abi.SetOutputRequest{Output: output}, nil)
}

// Log writes a line to the run's event log (run.log).
func Log(level Level, msg string) error {
	return call(runTransport, abi.CapRun, abi.OpRunLog, &abi.LogRequest{Level: level, Message: msg}, nil)
}

// Logf formats and logs at level Info.
func Logf(format string, args ...any) error { return Log(Info, fmt.Sprintf(format, args...)) }

// IntrospectResponse says who the run is (Introspect).
type IntrospectResponse = abi.IntrospectResponse

// Introspect says who the run is: its id, module, grant and steps so far
// (run.introspect).
func Introspect() (*IntrospectResponse, error) {
	var r abi.IntrospectResponse
	err := call(runTransport, abi.CapRun, abi.OpRunIntrospect, nil, &r)
	return &r, err
}

// State returns the state the run continues from after a Checkpoint, and
// the number of its segment (run.input): 0, and a nil state, in the first
// segment.
func State() (state []byte, segment uint32, err error) {
	var r abi.InputResponse
	err = call(runTransport, abi.CapRun, abi.OpRunInput, nil, &r)
	return r.State, r.Segment, err
}

// Checkpoint ends this segment of the run and continues it as new from
// state (run.checkpoint): the host journals state, then runs the module
// again from main, where State returns it. A run that checkpoints resumes
// after a crash from its last checkpoint, replaying only the calls made
// since, so a long-running agent should checkpoint every so often with what
// it needs to go on (its loop counter, its results so far).
//
// Like os.Exit, Checkpoint does not return when it succeeds: nothing after
// it runs, and deferred functions do not run. It returns the error of a
// checkpoint the host refused (ErrTooLarge for a state over the request
// limit, 1 MiB by default).
func Checkpoint(state []byte) error {
	if state == nil {
		state = []byte{}
	}
	err := call(runTransport, abi.CapRun, abi.OpRunCheckpoint, &abi.CheckpointRequest{State: state}, nil)
	if err != nil {
		return err
	}
	panic("agent: run.checkpoint returned: the host did not start the next segment")
}

// BudgetLimit is an amount of one budget dimension (abi.BudgetLimit): in a
// Limit call, at most Amount more of Dim from now on; in its answer, Dim's
// ceiling.
type BudgetLimit = abi.BudgetLimit

// LimitResponse lists the run's budget ceilings (Limit).
type LimitResponse = abi.LimitResponse

// Limit lowers the run's own budget ceilings (run.limit): for each limit,
// the host allows at most Amount more of Dim from now on ("tool_calls",
// "http_requests", "steps", "wall_seconds", "model_calls",
// "input_tokens", "output_tokens", "micro_usd"), and never raises a
// ceiling. It returns the ceilings now in force, which the host enforces
// whatever the guest does next: a loop controller sets its caps here so
// that they hold even for code that ignores the loop. With no limits it
// changes nothing and reports the ceilings.
func Limit(limits ...BudgetLimit) (*LimitResponse, error) {
	var r abi.LimitResponse
	err := call(runTransport, abi.CapRun, abi.OpRunLimit, &abi.LimitRequest{Limits: limits}, &r)
	return &r, err
}
