module github.com/agentrt/agentrt/guest-sdk

// The first Go release with GOOS=wasip1 and go:wasmimport. The module uses
// the standard library alone, so that agentrt build compiles an agent
// against it offline, in any folder (RATIONALE.md).
go 1.21
