// Package looptest runs the guest SDKs' loop controllers (agent.Loop in
// Go, agentrt_loop in C) as real wasm agents on the real host, against
// internal/fakellm on loopback: the loop's caps reach the host through
// run.limit and are journaled, the host enforces them on a guest that
// ignores its loop, and the concluding call reaches the provider without
// tools. It holds tests only.
package looptest
