// Package agent is the Go SDK for agentrt agents. Build agents with
// GOOS=wasip1 GOARCH=wasm (agentrt build does this); every function here
// reaches the host through one capability import module, and a module
// imports only the modules whose functions it calls, so its import section
// states exactly which capabilities it needs.
//
// A minimal agent:
//
//	func main() {
//		agent.Main(func(ctx context.Context, input []byte) ([]byte, error) {
//			agent.Log(agent.Info, "hello")
//			return input, nil
//		})
//	}
//
// Errors from the host are *HostError values; compare them with errors.Is
// against ErrNotFound, ErrDenied, ErrInDoubt and the others below.
//
// Outside wasip1 the package compiles (so tools and docs work) but every
// call returns ErrNotWasm.
package agent
