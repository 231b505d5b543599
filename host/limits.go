package host

import "time"

// CompileLimits bound what compiling a module may cost the host: a module
// over one is refused before any engine compiles it, by a check that
// costs one pass over its bytes, and a compilation that outlasts Timeout
// is stopped. They are the engine's (EngineConfig.Compile), not a run's:
// a module is compiled once for every run of it. Zero fields take the
// defaults of DefaultCompileLimits.
type CompileLimits struct {
	// ModuleBytes is the largest module.
	ModuleBytes int
	// FunctionBytes is the largest function body.
	FunctionBytes int
	// Nesting is the deepest nesting of blocks, loops and ifs in a
	// function (the body counts as one).
	Nesting int
	// Branches is the most instructions in a function that start or end
	// a basic block: block, loop, if, else, br, br_if, return,
	// unreachable, and br_table with each of its targets. wazero's
	// compiler spends time quadratic in them: one function of 100 000
	// br_if took it 7 minutes here, 10 000 took 1.2 s, and 100 000
	// blocks in a row over 2 minutes (one nested 30 000 deep, 3.8 s).
	Branches int
	// Locals is the most locals a function declares (wasmparser's and
	// V8's limit too): an engine allocates them when it compiles.
	Locals int
	// Timeout is the longest a compilation may take. wazero is stopped
	// between two functions when it passes; wasmtime, whose compilation
	// cannot be stopped, is bounded by the other limits only.
	Timeout time.Duration
}

// DefaultCompileLimits are the compile limits of an engine configured
// with none. Real guests sit well below them: the crawler example (Go, 5.4
// MB) nests 550 deep at most, with at most 2 785 branches and 20 locals in
// a function and none over 50 KB; the C example 32 deep, 696 branches and
// 38 locals. At the limits, one function compiles in about a second on
// wazero here; the timeout bounds the sum.
func DefaultCompileLimits() CompileLimits {
	return CompileLimits{ModuleBytes: 64 << 20, FunctionBytes: 8 << 20, Nesting: 2000, Branches: 10000, Locals: 50000, Timeout: 30 * time.Second}
}

func (c CompileLimits) withDefaults() CompileLimits {
	d := DefaultCompileLimits()
	if c.ModuleBytes <= 0 {
		c.ModuleBytes = d.ModuleBytes
	}
	if c.FunctionBytes <= 0 {
		c.FunctionBytes = d.FunctionBytes
	}
	if c.Nesting <= 0 {
		c.Nesting = d.Nesting
	}
	if c.Branches <= 0 {
		c.Branches = d.Branches
	}
	if c.Locals <= 0 {
		c.Locals = d.Locals
	}
	if c.Timeout <= 0 {
		c.Timeout = d.Timeout
	}
	return c
}
