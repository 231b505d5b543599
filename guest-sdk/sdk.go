// Package guestsdk holds the source of the guest SDKs (Go, C and Rust),
// so that the agentrt binary carries the SDK of its own version: agentrt
// build compiles an agent in any folder, offline, against this source, and
// agentrt new writes agents that build against it.
package guestsdk

import (
	"embed"
	"io/fs"
)

// ModulePath is the Go SDK's module path: an agent's go.mod requires it.
const ModulePath = "github.com/agentrt/agentrt/guest-sdk"

// Version is the version an agent's go.mod requires the SDK at. The module
// is not published: agentrt build replaces it with the source below, so
// the version stands for "the SDK of the agentrt binary that builds it"
// (it is the version the go command itself writes for a replaced module
// that was never required).
const Version = "v0.0.0-00010101000000-000000000000"

// The Go SDK is this module (go.mod, agent/, abi/, plan/); the C SDK is its
// headers (agentrt.h, and agentrt_loop.h, the loop controller); the Rust SDK is the crate's manifest and sources (what cargo
// builds; its test driver stays out). Test files come along: the go
// command never compiles a dependency's tests.
//
//go:embed go.mod agent/*.go abi/*.go plan/*.go c/*.h rust/Cargo.toml rust/src
var source embed.FS

// Source returns the SDK's files, with paths relative to guest-sdk/: the
// Go module at its root, the C headers in c/ (agentrt.h, agentrt_loop.h), the Rust crate at
// rust/ (Cargo.toml and src/).
func Source() fs.FS { return source }
