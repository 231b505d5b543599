// Package agent is the Go SDK for agentrt agents. Build agents with
// GOOS=wasip1 GOARCH=wasm (agentrt build does this, in any folder, with this
// SDK at the version of the agentrt binary); every function here reaches
// the host through one capability import module, and a module imports only
// the modules whose functions it calls, so its import section states
// exactly which capabilities it needs. A module that imports a capability
// its grant lacks is refused before it runs.
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
// # The calls, by capability
//
//   - run (every run has it): Main and MainJSON (the input in, the output
//     out), Input, SetOutput, Log and Logf, Introspect (an
//     IntrospectResponse), State and Checkpoint (continue as new), Limit
//     (lower the run's own budget ceilings, which the host then enforces;
//     a call that does not fit one fails with ErrBudget).
//   - kv: KVGet, KVPut, KVDelete, KVList: durable key/value state in the
//     grant's namespace. A write commits with its journal entries, exactly
//     once.
//   - http: HTTPGet and HTTPDo (an HTTPRequest, with Headers, answered by
//     an HTTPResponse): an effect, journaled before it is sent with an
//     Idempotency-Key.
//   - clock: Now, the host's wall time.
//   - random: RandomBytes, the host's entropy.
//   - tool: Tool and ToolWithStdin, a native program under the host's OS
//     sandbox, answered by a ToolResult with its ToolFile list.
//   - llm: LLMComplete and LLMStream, one model call (an LLMRequest,
//     answered by an LLMResponse), journaled before it is sent.
//
// # The loop controller
//
// Loop drives a StepFunc (ToolStep is the common one: a model call, the
// tool calls it asks for run by name from a map of ToolFunc, their
// results fed back) until the LoopConfig's Done predicate holds or a cap
// ends it: MaxIterations, MaxInputTokens, MaxOutputTokens, MaxMicroUSD,
// MaxWall (by a Clock, agent.Now) or MaxToolCalls, or a model that repeats
// a call three times (the same Fingerprint) or ping-pongs between two. At
// a cap it makes one concluding call without tools, asking for a final
// answer, and it returns a LoopResult with its LoopReason. It hands the
// caps it can to the host first (Limit), so the host's budget holds them
// even for a step that ignores them. guest-sdk/c/agentrt_loop.h is the
// same loop for C guests.
//
// Everything an agent gets from the host is journaled, so a replay of the
// run gives the agent the same answers. time.Now and math/rand need no
// capability: they read the run's virtual clock and its seeded stream,
// which are deterministic.
//
// Errors from the host are *HostError values; compare them with errors.Is
// against ErrNotFound, ErrDenied, ErrInDoubt and the others below.
//
// Outside wasip1 the package compiles (so tools and docs work) but every
// call returns ErrNotWasm.
package agent
