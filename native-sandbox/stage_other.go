//go:build !linux

package sandbox

// stageArg names stage 0, which exists only on Linux (stage_linux.go).
const stageArg = "__agentrt_sandbox_stage__"

func stageMain([]string) int { return helperExitSetup }
