package agent

import "github.com/agentrt/agentrt/guest-sdk/abi"

// ToolResult is the outcome of a native tool's run (tool.run): its exit
// status, its output and the files it wrote, by hash.
type ToolResult = abi.ToolRunResponse

// ToolFile is a file a tool wrote in its read-write area: its path, size
// and SHA-256, or, when the host did not hash it, Unhashed saying why
// (abi.UnhashedSparse, abi.UnhashedLimit, abi.UnhashedStopped). Path holds
// the name's bytes as the tool made them, which need not be UTF-8.
type ToolFile = abi.ToolFile

// Tool runs the native tool the grant registers as name with args, after
// the grant's fixed arguments, under the host's OS sandbox. Each argument
// is one argv element: nothing goes through a shell, so quotes, '*', '$'
// and ';' reach the tool as they are. The host checks every argument
// against the tool's schema first: a refused one gives an error matching
// ErrDenied that names the argument and the rule, and nothing runs.
//
// A tool that ran is a success whatever its exit status: check
// ToolResult.Exit (and TimedOut, Limits). The call is an effect, journaled
// before the tool starts; if the run crashes while the tool runs, a resume
// runs it again only when the grant declares it idempotent, and otherwise
// returns an error matching ErrInDoubt. ErrFailed means the sandbox could
// not be set up and the tool did not run.
func Tool(name string, args ...string) (*ToolResult, error) {
	return ToolWithStdin(name, nil, args...)
}

// ToolWithStdin is Tool with stdin as the tool's standard input (by
// default the tool reads an empty one).
func ToolWithStdin(name string, stdin []byte, args ...string) (*ToolResult, error) {
	var r abi.ToolRunResponse
	err := call(toolTransport, abi.CapTool, abi.OpToolRun, &abi.ToolRunRequest{Name: name, Args: args, Stdin: stdin}, &r)
	if err != nil {
		return nil, err
	}
	return &r, nil
}
