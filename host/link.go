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
	// take, and of WASI functions this host does not provide.
	BadFuncs []string
	// BadKinds lists imports that are not functions (tables, memories,
	// globals): the host provides functions only.
	BadKinds []string
	// BadTypes lists function imports whose type is not the one the host
	// provides.
	BadTypes []string
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
	if len(e.BadKinds) > 0 {
		parts = append(parts, "imports "+strings.Join(e.BadKinds, ", ")+" (the host provides functions only)")
	}
	if len(e.BadTypes) > 0 {
		parts = append(parts, "imports functions with the wrong type: "+strings.Join(e.BadTypes, ", "))
	}
	return "module refused: " + strings.Join(parts, "; ")
}

// malformed says the module imports what no grant could give: unknown
// modules, functions or types, or things other than functions. A module
// refused only for missing capabilities is well formed.
func (e *LinkError) malformed() bool {
	return len(e.Unknown)+len(e.BadFuncs)+len(e.BadKinds)+len(e.BadTypes) > 0
}

// Import is one import of a module.
type Import struct {
	Module, Name string
	// Kind is what is imported: kindFunc, kindTable, kindMemory or
	// kindGlobal.
	Kind byte
	// sig is a function's type (sigOf's letters).
	sig string
}

// Signatures of the functions the host provides, as sigLetter writes
// them: every capability module's call and take, and WASI's functions.
const (
	sigCall = "iiiii>I"
	sigTake = "ii>I"
)

// wasiSigs maps each WASI function the host provides to its type.
var wasiSigs = func() map[string]string {
	m := map[string]string{}
	for _, f := range preview1Funcs {
		// The params' letters are sigLetter's; every function but
		// proc_exit returns an errno.
		m[f.name] = f.params + ">i"
		if f.name == "proc_exit" {
			m[f.name] = f.params + ">"
		}
	}
	return m
}()

// readableSig writes a signature string as WebAssembly text does.
func readableSig(sig string) string {
	names := map[rune]string{'i': "i32", 'I': "i64", 'f': "f32", 'F': "f64", 'v': "v128", 'r': "funcref", 'x': "externref"}
	params, results, _ := strings.Cut(sig, ">")
	list := func(s string) string {
		var out []string
		for _, c := range s {
			out = append(out, names[c])
		}
		return "(" + strings.Join(out, ", ") + ")"
	}
	return list(params) + " -> " + list(results)
}

// checkLink compares a module's imports with its grant, and with what the
// host provides.
func checkLink(imports []Import, g *Grant) error {
	var le LinkError
	for _, im := range imports {
		if im.Kind != kindFunc {
			le.BadKinds = append(le.BadKinds, fmt.Sprintf("a %s (%s.%s)", kindNames[im.Kind], im.Module, im.Name))
			continue
		}
		if im.Module == wasiModule {
			switch want, ok := wasiSigs[im.Name]; {
			case !ok:
				le.BadFuncs = append(le.BadFuncs, fmt.Sprintf("%s.%s", im.Module, im.Name))
			case im.sig != want:
				le.BadTypes = append(le.BadTypes, fmt.Sprintf("%s.%s is %s, not %s", im.Module, im.Name, readableSig(im.sig), readableSig(want)))
			}
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
		if want := map[string]string{abi.FuncCall: sigCall, abi.FuncTake: sigTake}[im.Name]; im.sig != want {
			le.BadTypes = append(le.BadTypes, fmt.Sprintf("%s.%s is %s, not %s", im.Module, im.Name, readableSig(im.sig), readableSig(want)))
			continue
		}
		if !g.Has(c) && !slices.Contains(le.Missing, c) {
			le.Missing = append(le.Missing, c)
		}
	}
	if len(le.Missing)+len(le.Unknown)+len(le.BadFuncs)+len(le.BadKinds)+len(le.BadTypes) == 0 {
		return nil
	}
	return &le
}
