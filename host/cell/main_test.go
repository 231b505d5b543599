package cell_test

import (
	"os"
	"testing"

	sandbox "github.com/agentrt/agentrt/native-sandbox"
)

// TestMain lets the test binary serve as the sandbox helper, as agentrt
// does: a sub-agent's tool re-executes it inside bubblewrap to apply
// Landlock and limits before the tool starts.
func TestMain(m *testing.M) {
	sandbox.HelperMain()
	os.Exit(m.Run())
}
