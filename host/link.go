package host

import (
	"fmt"
	"slices"
	"strings"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/journal"
)

// wasiModule is the only import module besides the agentrt capabilities
// that a guest may import; the host serves it from a virtual WASI.
const wasiModule = "wasi_snapshot_preview1"

// LinkError is returned when a module imports what its grant does not
// include. The module is refused before any of it runs.
type LinkError struct {
	// Missing lists the capabilities imported but not granted.
	Missing []abi.Capability
	// Unknown lists import modules that are neither a capability of this
	// ABI nor WASI.
	Unknown []string
	// BadFuncs lists imports of a capability module other than call and
	// take.
	BadFuncs []string
	// Run is the run whose journal records the refusal (a start and a
	// failed end), when one was started.
	Run journal.RunID
}

func (e *LinkError) Error() string {
	var parts []string
	if len(e.Missing) > 0 {
		names := make([]string, len(e.Missing))
		for i, c := range e.Missing {
			names[i] = string(c)
		}
		parts = append(parts, "imports capabilities its grant lacks: "+strings.Join(names, ", "))
	}
	if len(e.Unknown) > 0 {
		parts = append(parts, "imports unknown modules: "+strings.Join(e.Unknown, ", "))
	}
	if len(e.BadFuncs) > 0 {
		parts = append(parts, "imports unknown functions: "+strings.Join(e.BadFuncs, ", "))
	}
	return "module refused: " + strings.Join(parts, "; ")
}

// Import is one import of a module.
type Import struct {
	Module, Name string
	// Kind is what is imported: kindFunc, kindTable, kindMemory or
	// kindGlobal.
	Kind byte
	// sig is a function's type (sigLetter's letters).
	sig string
}

// checkLink compares a module's imports with its grant.
func checkLink(imports []Import, g *Grant) error {
	var le LinkError
	for _, im := range imports {
		if im.Module == wasiModule {
			continue
		}
		c, ok := abi.CapabilityOfModule(im.Module)
		if !ok || !c.Known() {
			if !slices.Contains(le.Unknown, im.Module) {
				le.Unknown = append(le.Unknown, im.Module)
			}
			continue
		}
		if im.Name != abi.FuncCall && im.Name != abi.FuncTake {
			le.BadFuncs = append(le.BadFuncs, fmt.Sprintf("%s.%s", im.Module, im.Name))
			continue
		}
		if !g.Has(c) && !slices.Contains(le.Missing, c) {
			le.Missing = append(le.Missing, c)
		}
	}
	if len(le.Missing)+len(le.Unknown)+len(le.BadFuncs) == 0 {
		return nil
	}
	return &le
}
