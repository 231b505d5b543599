package abivectors

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The WASI vectors (abi/testdata/wasi, abi/SPEC.md §11.2) are sequences of
// calls to wasi_snapshot_preview1 with the memory each call finds and what
// the virtual WASI must answer: the errno, every byte it writes, the bytes
// it sends to stdout and stderr, and the virtual clock afterwards. They are
// read here so that every runner reads them by the same rules.

// WASIFunc is one function of wasi_snapshot_preview1 as abi/SPEC.md §10.5
// lists it: its name and its parameter types, 'i' for i32 and 'I' for
// i64. Every function returns an errno (i32) except proc_exit, which
// returns nothing.
type WASIFunc struct {
	Name   string
	Params string
}

// WASIFuncs is every function the host offers, in the order of §10.5.
var WASIFuncs = []WASIFunc{
	{"args_get", "ii"}, {"args_sizes_get", "ii"}, {"environ_get", "ii"}, {"environ_sizes_get", "ii"},
	{"clock_res_get", "ii"}, {"clock_time_get", "iIi"},
	{"fd_advise", "iIIi"}, {"fd_allocate", "iII"}, {"fd_close", "i"}, {"fd_datasync", "i"},
	{"fd_fdstat_get", "ii"}, {"fd_fdstat_set_flags", "ii"}, {"fd_fdstat_set_rights", "iII"},
	{"fd_filestat_get", "ii"}, {"fd_filestat_set_size", "iI"}, {"fd_filestat_set_times", "iIIi"},
	{"fd_pread", "iiiIi"}, {"fd_prestat_get", "ii"}, {"fd_prestat_dir_name", "iii"}, {"fd_pwrite", "iiiIi"},
	{"fd_read", "iiii"}, {"fd_readdir", "iiiIi"}, {"fd_renumber", "ii"}, {"fd_seek", "iIii"},
	{"fd_sync", "i"}, {"fd_tell", "ii"}, {"fd_write", "iiii"},
	{"path_create_directory", "iii"}, {"path_filestat_get", "iiiii"}, {"path_filestat_set_times", "iiiiIIi"},
	{"path_link", "iiiiiii"}, {"path_open", "iiiiiIIii"}, {"path_readlink", "iiiiii"},
	{"path_remove_directory", "iii"}, {"path_rename", "iiiiii"}, {"path_symlink", "iiiii"},
	{"path_unlink_file", "iii"},
	{"poll_oneoff", "iiii"}, {"proc_exit", "i"}, {"proc_raise", "i"}, {"sched_yield", ""},
	{"random_get", "ii"},
	{"sock_accept", "iii"}, {"sock_recv", "iiiiii"}, {"sock_send", "iiiii"}, {"sock_shutdown", "ii"},
}

// LookupWASIFunc returns the function named name.
func LookupWASIFunc(name string) (WASIFunc, bool) {
	i := slices.IndexFunc(WASIFuncs, func(f WASIFunc) bool { return f.Name == name })
	if i < 0 {
		return WASIFunc{}, false
	}
	return WASIFuncs[i], true
}

// Span is bytes at an address of the guest's memory.
type Span struct {
	Addr uint32
	Data []byte
}

// WASIVector is one WASI vector file: the state an instance starts with,
// then its calls in order.
type WASIVector struct {
	File    string
	Comment []string
	// Guest names the program a trace was recorded from, and Toolchain
	// what built it; both informative.
	Guest, Toolchain string
	// Pages is the size of the guest's memory, in 64 KiB pages; it does
	// not change during the calls.
	Pages uint32
	// Seed is the run seed (32 bytes), Segment the segment number: they
	// seed the random stream (§10.3).
	Seed    []byte
	Segment uint32
	// WallBase is the run header's wall-clock base and Clock the virtual
	// clock when the instance starts (§10.3).
	WallBase, Clock int64
	// ModuleName is the run header's module name; argv[0] is "agent"
	// when it is empty (§10.4).
	ModuleName string
	Calls      []WASICall
}

// WASICall is one call and its expected outcome.
type WASICall struct {
	Func string
	// Args are the arguments as the file writes them: signed, one per
	// parameter; an i32 argument is taken modulo 2^32.
	Args    []int64
	Comment []string
	// Mem is stored into memory before the call.
	Mem []Span
	// End is "" when the call returns Errno, else "exit N" (proc_exit) or
	// "trap".
	End   string
	Errno uint32
	// Writes are the bytes the call changes, at their addresses: after
	// the call, memory equals memory before it with Writes applied. A
	// trap's writes are not stated (nothing of the guest survives it).
	Writes         []Span
	Stdout, Stderr []byte
	// Now is the virtual clock after the call; HasNow false: unchanged.
	Now    int64
	HasNow bool
}

// Format returns the file contents of v.
func (v *WASIVector) Format() []byte {
	var b bytes.Buffer
	for _, c := range v.Comment {
		fmt.Fprintf(&b, "comment: %s\n", c)
	}
	if v.Guest != "" {
		fmt.Fprintf(&b, "guest: %s\n", v.Guest)
	}
	if v.Toolchain != "" {
		fmt.Fprintf(&b, "toolchain: %s\n", v.Toolchain)
	}
	fmt.Fprintf(&b, "pages: %d\nseed: %x\nsegment: %d\nwall-base: %d\nclock: %d\n", v.Pages, v.Seed, v.Segment, v.WallBase, v.Clock)
	if v.ModuleName != "" {
		fmt.Fprintf(&b, "module-name: %s\n", v.ModuleName)
	}
	for _, c := range v.Calls {
		b.WriteString("\ncall: " + c.Func)
		for _, a := range c.Args {
			fmt.Fprintf(&b, " %d", a)
		}
		b.WriteByte('\n')
		for _, s := range c.Comment {
			fmt.Fprintf(&b, "comment: %s\n", s)
		}
		for _, s := range c.Mem {
			fmt.Fprintf(&b, "mem: %d %x\n", s.Addr, s.Data)
		}
		if c.End != "" {
			fmt.Fprintf(&b, "end: %s\n", c.End)
		} else {
			fmt.Fprintf(&b, "errno: %d\n", c.Errno)
		}
		for _, s := range c.Writes {
			fmt.Fprintf(&b, "write: %d %x\n", s.Addr, s.Data)
		}
		if len(c.Stdout) > 0 {
			fmt.Fprintf(&b, "stdout: %x\n", c.Stdout)
		}
		if len(c.Stderr) > 0 {
			fmt.Fprintf(&b, "stderr: %x\n", c.Stderr)
		}
		if c.HasNow {
			fmt.Fprintf(&b, "now: %d\n", c.Now)
		}
	}
	return b.Bytes()
}

// The keys of a call block, in the order they must come.
var callKeys = []string{"call", "comment", "mem", "result", "write", "stdout", "stderr", "now"}

// ParseWASI reads a WASI vector file. Every key is known, each in its
// place, and every call is checked against WASIFuncs: a runner that
// skipped what it did not understand could pass a vector it never ran.
func ParseWASI(file string, data []byte) (*WASIVector, error) {
	v := &WASIVector{File: file}
	seen := map[string]bool{}
	var cur *WASICall
	place := 0 // index into callKeys of the last key of the current call
	err := lines(file, data, func(key, val string) error {
		if cur == nil && key != "call" {
			if seen[key] && key != "comment" {
				return fmt.Errorf("header %q repeated", key)
			}
			seen[key] = true
			return v.header(key, val)
		}
		k := key
		if k == "errno" || k == "end" {
			k = "result"
		}
		i := slices.Index(callKeys, k)
		switch {
		case i < 0:
			return fmt.Errorf("unknown key %q in a call", key)
		case i == 0:
			if cur != nil && place < 3 {
				return fmt.Errorf("call %s has no errno or end", cur.Func)
			}
			if cur != nil && cur.End != "" {
				return fmt.Errorf("a call follows %s, which ended the instance (%s)", cur.Func, cur.End)
			}
			c, err := parseCall(val)
			if err != nil {
				return err
			}
			v.Calls = append(v.Calls, c)
			cur, place = &v.Calls[len(v.Calls)-1], 0
			return nil
		case i < place, i == place && i != 1 && i != 2 && i != 4:
			return fmt.Errorf("key %q out of place in call %s", key, cur.Func)
		case i > 3 && cur.End != "":
			return fmt.Errorf("%s ended the instance (%s): nothing of it is observed after", cur.Func, cur.End)
		}
		place = i
		return cur.set(key, val)
	})
	if err != nil {
		return nil, err
	}
	switch {
	case len(v.Seed) != 32:
		return nil, errors.New("seed: want 32 bytes")
	case v.Pages == 0 || v.Pages > 65536:
		return nil, errors.New("pages: want 1..65536")
	case len(v.Calls) == 0:
		return nil, errors.New("no calls")
	case place < 3:
		return nil, fmt.Errorf("call %s has no errno or end", cur.Func)
	}
	return v, nil
}

// lines calls fn with the key and value of each "key: value" line of
// data, skipping the blank lines that separate calls; an error names the
// file and the line. It reads the line format of golden.Headers, the
// reader of the journal and capability vectors, plus blank lines.
func lines(name string, data []byte, fn func(key, val string) error) error {
	for i, l := range strings.Split(string(data), "\n") {
		if l == "" {
			continue
		}
		key, val, ok := strings.Cut(l, ": ")
		if !ok {
			return fmt.Errorf("%s:%d: want 'name: value'", name, i+1)
		}
		if err := fn(key, val); err != nil {
			return fmt.Errorf("%s:%d: %v", name, i+1, err)
		}
	}
	return nil
}

func (v *WASIVector) header(key, val string) error {
	var err error
	switch key {
	case "comment":
		v.Comment = append(v.Comment, val)
	case "guest":
		v.Guest = val
	case "toolchain":
		v.Toolchain = val
	case "pages":
		var n uint64
		n, err = strconv.ParseUint(val, 10, 32)
		v.Pages = uint32(n)
	case "seed":
		v.Seed, err = lowerHex(val)
	case "segment":
		var n uint64
		n, err = strconv.ParseUint(val, 10, 32)
		v.Segment = uint32(n)
	case "wall-base":
		v.WallBase, err = strconv.ParseInt(val, 10, 64)
	case "clock":
		v.Clock, err = strconv.ParseInt(val, 10, 64)
	case "module-name":
		v.ModuleName = val
	default:
		return fmt.Errorf("unknown header %q", key)
	}
	return err
}

func parseCall(val string) (WASICall, error) {
	fields := strings.Fields(val)
	if len(fields) == 0 {
		return WASICall{}, errors.New("call names no function")
	}
	f, ok := LookupWASIFunc(fields[0])
	if !ok {
		return WASICall{}, fmt.Errorf("%q is not a function of wasi_snapshot_preview1", fields[0])
	}
	if len(fields)-1 != len(f.Params) {
		return WASICall{}, fmt.Errorf("%s takes %d arguments, the call gives %d", f.Name, len(f.Params), len(fields)-1)
	}
	c := WASICall{Func: f.Name}
	for i, s := range fields[1:] {
		a, err := strconv.ParseInt(s, 10, 64)
		if err != nil && f.Params[i] == 'I' {
			// An i64 may be written unsigned, up to 2^64-1.
			var u uint64
			u, err = strconv.ParseUint(s, 10, 64)
			a = int64(u)
		}
		if err != nil {
			return WASICall{}, fmt.Errorf("%s argument %d: %v", f.Name, i+1, err)
		}
		if f.Params[i] == 'i' && (a < math.MinInt32 || a > math.MaxUint32) {
			return WASICall{}, fmt.Errorf("%s argument %d: %d does not fit an i32", f.Name, i+1, a)
		}
		c.Args = append(c.Args, a)
	}
	return c, nil
}

func (c *WASICall) set(key, val string) error {
	var err error
	switch key {
	case "comment":
		c.Comment = append(c.Comment, val)
	case "mem", "write":
		var s Span
		s, err = parseSpan(val)
		if key == "mem" {
			c.Mem = append(c.Mem, s)
		} else {
			c.Writes = append(c.Writes, s)
		}
	case "errno":
		var n uint64
		n, err = strconv.ParseUint(val, 10, 16)
		c.Errno = uint32(n)
	case "end":
		if val != "trap" {
			code, ok := strings.CutPrefix(val, "exit ")
			if _, perr := strconv.ParseUint(code, 10, 32); !ok || perr != nil {
				return fmt.Errorf("end: want \"exit N\" or \"trap\", got %q", val)
			}
		}
		if val != "trap" && c.Func != "proc_exit" {
			return fmt.Errorf("%s cannot exit", c.Func)
		}
		c.End = val
	case "stdout":
		c.Stdout, err = lowerHex(val)
	case "stderr":
		c.Stderr, err = lowerHex(val)
	case "now":
		c.Now, err = strconv.ParseInt(val, 10, 64)
		c.HasNow = true
	}
	if err != nil {
		return fmt.Errorf("%s: %v", key, err)
	}
	return nil
}

func parseSpan(val string) (Span, error) {
	a, h, ok := strings.Cut(val, " ")
	if !ok {
		return Span{}, errors.New("want \"ADDRESS HEX\"")
	}
	addr, err := strconv.ParseUint(a, 10, 32)
	if err != nil {
		return Span{}, err
	}
	d, err := lowerHex(h)
	if err != nil {
		return Span{}, err
	}
	if len(d) == 0 || uint64(addr)+uint64(len(d)) > 1<<32 {
		return Span{}, errors.New("a span holds at least one byte, within 32-bit addresses")
	}
	return Span{uint32(addr), d}, nil
}

func lowerHex(s string) ([]byte, error) {
	if s != strings.ToLower(s) {
		return nil, errors.New("hex is not lower-case")
	}
	return hex.DecodeString(s)
}

// ReadWASI parses every .txt file in dir, in name order.
func ReadWASI(dir string) ([]*WASIVector, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var vs []*WASIVector
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".txt") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		v, err := ParseWASI(e.Name(), b)
		if err != nil {
			return nil, err
		}
		vs = append(vs, v)
	}
	if len(vs) == 0 {
		return nil, fmt.Errorf("no WASI vectors in %s", dir)
	}
	return vs, nil
}
