package cell_test

import (
	"os"
	"testing"

	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/testutil"
	sandbox "github.com/agentrt/agentrt/native-sandbox"
)

// TestMain lets the test binary serve as the sandbox helper, as agentrt
// does: a sub-agent's tool re-executes it inside bubblewrap to apply
// Landlock and limits before the tool starts.
func TestMain(m *testing.M) {
	sandbox.HelperMain()
	os.Exit(m.Run())
}

// cached is opts with the compilation cache the tests' engines share
// (testutil.CompileCache), so that each guest is compiled once, not once
// by every cell a test opens: under the race detector a compilation of a
// Go guest takes half a minute. These tests are not about compiling
// (host's are); the cells whose opening they test without a guest keep
// NoCache.
func cached(opts cell.Options) cell.Options {
	opts.CacheDir = testutil.CompileCache()
	return opts
}
