// Package abi is the guest's side of the agentrt ABI: the import module
// and function names, op and status codes and the CBOR request and
// response types of github.com/agentrt/agentrt/abi, with a CBOR codec of
// the standard library's own, so that the guest SDK is a module with no
// dependencies that any agent can build offline.
//
// Every file but this one and codec.go is generated from the host's abi
// package (go generate ./internal/guestabi, in the agentrt repository),
// and a test there fails when the two differ; abi/SPEC.md is the normative
// text for both. Agents use the agent package, which names these types;
// this package is for code that speaks the ABI itself.
package abi
