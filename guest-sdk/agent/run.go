package agent

import (
	"fmt"

	"github.com/agentrt/agentrt/abi"
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

// Introspect says who the run is: its id, module, grant and steps so far
// (run.introspect).
func Introspect() (*abi.IntrospectResponse, error) {
	var r abi.IntrospectResponse
	err := call(runTransport, abi.CapRun, abi.OpRunIntrospect, nil, &r)
	return &r, err
}
