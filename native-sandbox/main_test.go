package sandbox

import (
	"os"
	"testing"
)

// childEnv names a scenario that a test runs in a re-executed copy of the
// test binary (in another namespace, under another seccomp filter, ...).
const childEnv = "AGENTRT_SANDBOX_TEST_CHILD"

// childScenarios are filled in by platform test files.
var childScenarios = map[string]func() int{}

// cleanups run after all tests (shared build outputs).
var cleanups []func()

// TestMain lets the test binary serve as the sandbox helper, as agentrt
// does, and run child scenarios.
func TestMain(m *testing.M) {
	HelperMain()
	if name := os.Getenv(childEnv); name != "" {
		os.Exit(childScenarios[name]())
	}
	code := m.Run()
	for _, f := range cleanups {
		f()
	}
	os.Exit(code)
}
