package cell_test

import (
	"os"
	"testing"

	sandbox "github.com/agentrt/agentrt/native-sandbox"
)

// TestMain lets the test binary serve as the sandbox helper, as agentrt
// does: a sub-agent's tool re-executes it inside bubblewrap to apply
// Landlock and limits before the tool starts. It removes the dashboard
// tests' shared compilation cache when they are done.
func TestMain(m *testing.M) {
	sandbox.HelperMain()
	code := m.Run()
	if uiCache != "" {
		os.RemoveAll(uiCache)
	}
	os.Exit(code)
}
