package host

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

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

// Limits bound what one run's guest may take of its host. A cell has
// limits for every run (Config.Limits); a grant file's limits section may
// lower them, never raise them. The limits a run gets are recorded in its
// run header, in its grant, so that a replay or a resume applies the same
// ones. A zero field in Config.Limits takes the default of DefaultLimits;
// a zero field in a grant's limits leaves the cell's.
type Limits struct {
	// MemoryPages is the most 64 KiB pages of linear memory: memory.grow
	// beyond fails (returns -1), and a module that starts with more is
	// refused.
	MemoryPages uint32 `cbor:"memory_pages,omitempty" json:"memory_pages,omitempty"`
	// TableElements is the most elements of each table: table.grow
	// beyond fails (returns -1), and a module whose table starts with
	// more is refused.
	TableElements uint32 `cbor:"table_elements,omitempty" json:"table_elements,omitempty"`
	// Tables is the most tables a module may have.
	Tables uint32 `cbor:"tables,omitempty" json:"tables,omitempty"`
	// Calls is the most import calls (steps) of the run, over every
	// segment and resume: the call past it ends the run, failed.
	Calls uint64 `cbor:"calls,omitempty" json:"calls,omitempty"`
	// JournalBytes is the most bytes of requests and responses the run's
	// journal may hold: the call that would pass it ends the run, failed.
	JournalBytes uint64 `cbor:"journal_bytes,omitempty" json:"journal_bytes,omitempty"`
	// LogBytes is the most bytes of stdout, stderr and log messages kept
	// in the run's event log; what is written past it is dropped, and
	// the drop is logged once.
	LogBytes uint64 `cbor:"log_bytes,omitempty" json:"log_bytes,omitempty"`
}

// DefaultLimits are the limits of a cell configured with none: memory
// 1 GiB, 1 048 576 elements in each of at most 4 tables, 10 million
// calls, 1 GiB of journal, 64 MiB of logs.
func DefaultLimits() Limits {
	return Limits{MemoryPages: 16384, TableElements: 1 << 20, Tables: 4, Calls: 10_000_000, JournalBytes: 1 << 30, LogBytes: 64 << 20}
}

// withDefaults fills the zero fields of l from d.
func (l Limits) withDefaults(d Limits) Limits {
	if l.MemoryPages == 0 {
		l.MemoryPages = d.MemoryPages
	}
	if l.TableElements == 0 {
		l.TableElements = d.TableElements
	}
	if l.Tables == 0 {
		l.Tables = d.Tables
	}
	if l.Calls == 0 {
		l.Calls = d.Calls
	}
	if l.JournalBytes == 0 {
		l.JournalBytes = d.JournalBytes
	}
	if l.LogBytes == 0 {
		l.LogBytes = d.LogBytes
	}
	return l
}

// ErrLimitRaised is wrapped by the error Start returns for a grant whose
// limits ask for more than the cell allows.
var ErrLimitRaised = errors.New("a grant's limits may only lower the cell's")

// within returns the limits of a run whose grant asks for g (nil: none)
// on a cell with limits cell (complete), or an error naming the first
// limit g raises.
func (g *Limits) within(cell Limits) (Limits, error) {
	if g == nil {
		return cell, nil
	}
	out := g.withDefaults(cell)
	for _, c := range []struct {
		name      string
		got, cell uint64
	}{
		{"memory", uint64(out.MemoryPages) * 65536, uint64(cell.MemoryPages) * 65536},
		{"table_elements", uint64(out.TableElements), uint64(cell.TableElements)},
		{"tables", uint64(out.Tables), uint64(cell.Tables)},
		{"calls", out.Calls, cell.Calls},
		{"journal", out.JournalBytes, cell.JournalBytes},
		{"log", out.LogBytes, cell.LogBytes},
	} {
		if c.got > c.cell {
			return Limits{}, fmt.Errorf("limits.%s: %d is above this cell's limit of %d: %w", c.name, c.got, c.cell, ErrLimitRaised)
		}
	}
	return out, nil
}

// recordedLimits returns the limits a recorded run had: those its grant
// records, with the defaults for any it does not (a run recorded before
// limits were recorded).
func (g *Grant) recordedLimits() Limits {
	if g.Limits == nil {
		return DefaultLimits()
	}
	return g.Limits.withDefaults(DefaultLimits())
}

func (l Limits) module() moduleLimits {
	return moduleLimits{memoryPages: l.MemoryPages, tableElements: l.TableElements, tables: l.Tables}
}

// grantLimits is the limits section of a grant file:
//
//	limits:
//	  memory: 256MiB          # a multiple of 64KiB
//	  table_elements: 100000
//	  tables: 1
//	  calls: 100000
//	  journal: 64MiB
//	  log: 4MiB
type grantLimits struct {
	Memory        string `yaml:"memory"`
	TableElements uint32 `yaml:"table_elements"`
	Tables        uint32 `yaml:"tables"`
	Calls         uint64 `yaml:"calls"`
	Journal       string `yaml:"journal"`
	Log           string `yaml:"log"`
}

// limits converts a grant file's limits section.
func (gl *grantLimits) limits() (*Limits, error) {
	var l Limits
	mem, err := parseBytes("limits.memory", gl.Memory)
	if err != nil {
		return nil, err
	}
	if mem%65536 != 0 {
		return nil, fmt.Errorf("limits.memory: %s is not a multiple of 64KiB, the size of a WebAssembly page", gl.Memory)
	}
	if mem/65536 > 65536 {
		return nil, fmt.Errorf("limits.memory: %s is over 4GiB, the most a 32-bit memory has", gl.Memory)
	}
	l.MemoryPages = uint32(mem / 65536)
	l.TableElements, l.Tables, l.Calls = gl.TableElements, gl.Tables, gl.Calls
	if l.JournalBytes, err = parseBytes("limits.journal", gl.Journal); err != nil {
		return nil, err
	}
	if l.LogBytes, err = parseBytes("limits.log", gl.Log); err != nil {
		return nil, err
	}
	if l == (Limits{}) {
		return nil, errors.New("limits: the section sets no limit (memory, table_elements, tables, calls, journal, log)")
	}
	return &l, nil
}

var bytesRE = regexp.MustCompile(`^([0-9]+)(|B|K|KB|KiB|M|MB|MiB|G|GB|GiB)$`)

// parseBytes reads a byte count: a number, or one with a binary unit (K,
// M, G, with or without "iB"; all powers of 1024). Empty is 0.
func parseBytes(field, v string) (uint64, error) {
	if v == "" {
		return 0, nil
	}
	m := bytesRE.FindStringSubmatch(strings.TrimSpace(v))
	if m == nil {
		return 0, fmt.Errorf("%s: %q is not a size; write bytes, or e.g. 64KiB, 512MiB, 2GiB", field, v)
	}
	n, err := strconv.ParseUint(m[1], 10, 64)
	shift := map[byte]uint{'K': 10, 'M': 20, 'G': 30}[(m[2] + "B")[0]]
	if err != nil || n > (1<<62)>>shift {
		return 0, fmt.Errorf("%s: %q is too large", field, v)
	}
	if n == 0 {
		return 0, fmt.Errorf("%s: 0 would allow nothing; leave the limit out to keep the cell's", field)
	}
	return n << shift, nil
}
