package tool

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host/caps"
)

// Grant allows the tool capability: running the native programs it
// registers, each under the host's OS sandbox, with the arguments its
// schema admits. In a grant file:
//
//	tool:
//	  tools:
//	    - name: count-todo
//	      exec: /usr/bin/grep
//	      args:
//	        fixed: [-c, TODO]
//	        flags: [{name: -i}, {name: --max-count, value: '[0-9]{1,4}'}]
//	        positional: [{pattern: '[A-Za-z0-9._/-]+', path: ro}]
//	        max: 8
//	      read: [/usr, /lib, /lib64, /srv/repo]
//	      workspace: true
//	      env: {LC_ALL: C}
//	      limits: {wall: 30s, cpu: 10s, memory: 256MiB, procs: 16, output: 1MiB, file_size: 64MiB, disk: 256MiB}
//	      idempotent: true
//	  delegable:
//	    - {name: deploy, exec: /usr/local/bin/deploy, read: [/usr, /lib]}
//
// Delegable declares tools the run may not run itself but may hand to its
// sub-agents (agent.spawn): a child's caps may declare one of them,
// exactly so, and the child runs it under that declaration's sandbox.
type Grant struct {
	Tools     []Spec `yaml:"tools" cbor:"tools"`
	Delegable []Spec `yaml:"delegable,omitempty" cbor:"delegable,omitempty"`
}

// Spec registers one tool: what runs, with which arguments, seeing
// which paths, within which limits.
type Spec struct {
	// Name is what the guest calls the tool by.
	Name string `yaml:"name" cbor:"name"`
	// Exec is the program's absolute path. It is readable in the sandbox.
	Exec string `yaml:"exec" cbor:"exec"`
	// Args is the argument schema.
	Args Args `yaml:"args" cbor:"args"`
	// Read lists the files and directories the tool may read (and
	// execute). Entries that do not exist on the host are left out of
	// the sandbox, so one grant serves hosts with and without /lib64.
	Read []string `yaml:"read" cbor:"read"`
	// Write lists the directories the tool may also write.
	Write []string `yaml:"write" cbor:"write"`
	// Workspace gives each run a writable directory of its own,
	// <workspaces>/<run id> (the cell's DATA/work/<run id>), shared by
	// every tool of the run that asks for one and kept after the run.
	Workspace bool `yaml:"workspace,omitempty" cbor:"workspace,omitempty"`
	// Workdir is the working directory. Empty: the workspace, else the
	// first Write path, else the first Read path.
	Workdir string `yaml:"workdir,omitempty" cbor:"workdir,omitempty"`
	// Network is "none" (or empty). Allowlists are refused: the sandbox
	// cannot enforce them yet.
	Network string `yaml:"network,omitempty" cbor:"network,omitempty"`
	// Env is the tool's whole environment; nothing of the host's passes.
	Env map[string]string `yaml:"env" cbor:"env"`
	// Limits bound each run of the tool.
	Limits Limits `yaml:"limits" cbor:"limits"`
	// Idempotent says running the tool again with the same arguments does
	// no harm, so a run a crash left in doubt is launched again on
	// resume. Otherwise the guest is told it is in doubt.
	Idempotent bool `yaml:"idempotent,omitempty" cbor:"idempotent,omitempty"`
}

// Args is a tool's argument schema. The program gets Fixed, then the
// guest's arguments, each of which must pass: an argument starting with
// '-' (other than "-" alone) is a flag and must be one of Flags; any other
// is a positional value and must match its slot of Positional.
type Args struct {
	// Fixed arguments always come first, before the guest's.
	Fixed []string `yaml:"fixed" cbor:"fixed"`
	// Flags lists the flags the guest may pass, each any number of times.
	Flags []Flag `yaml:"flags" cbor:"flags"`
	// Positional lists the positional slots in order; positional values
	// past the last slot match the last slot.
	Positional []Positional `yaml:"positional" cbor:"positional"`
	// Max is the most positional values; 0: one per slot.
	Max int `yaml:"max,omitempty" cbor:"max,omitempty"`
}

// Flag is one allowed flag. A flag with neither Value nor Path takes no
// value. One with a value takes it as "--name=value" or as the next
// argument ("-n 5").
type Flag struct {
	// Name is the flag as written, with its dashes: "-n", "--max-count".
	Name string `yaml:"name" cbor:"name"`
	// Value is the pattern (an RE2 regexp matched against the whole value)
	// its value must match.
	Value string `yaml:"value,omitempty" cbor:"value,omitempty"`
	// Path, "ro" or "rw", makes the value a path that must lie inside the
	// tool's read-only or read-write area.
	Path string `yaml:"path,omitempty" cbor:"path,omitempty"`
}

// Positional is one positional slot.
type Positional struct {
	// Pattern is an RE2 regexp matched against the whole value.
	Pattern string `yaml:"pattern" cbor:"pattern"`
	// Path, "ro" or "rw", makes the value a path that must lie inside the
	// tool's read-only or read-write area (relative paths are joined to the
	// working directory; ".." elements are refused).
	Path string `yaml:"path,omitempty" cbor:"path,omitempty"`
}

// Limits bound one run of a tool and every process it starts. Durations
// are Go durations ("30s"); sizes are bytes or a number with K, M, G (KiB,
// MiB, GiB: powers of 1024).
type Limits struct {
	// CPU is the CPU time of each process; empty: no limit.
	CPU string `yaml:"cpu,omitempty" cbor:"cpu,omitempty"`
	// Wall is the wall-clock time of the whole run; empty: 60s.
	Wall string `yaml:"wall,omitempty" cbor:"wall,omitempty"`
	// Memory bounds everything the tool holds in memory, all its processes
	// together, tmpfs, shared memory and memfds included (a memory cgroup;
	// each process's address space is capped at it too); empty: no limit.
	Memory string `yaml:"memory,omitempty" cbor:"memory,omitempty"`
	// Procs is the most processes and threads at once; 0: no limit.
	Procs int `yaml:"procs,omitempty" cbor:"procs,omitempty"`
	// Output is the bytes kept of each of stdout and stderr; empty: 1MiB.
	Output string `yaml:"output,omitempty" cbor:"output,omitempty"`
	// FileSize is the largest file the tool may write; empty: no limit.
	FileSize string `yaml:"file_size,omitempty" cbor:"file_size,omitempty"`
	// Disk is the most disk space one run of the tool may add to its
	// write paths and workspace, all together; empty: no limit.
	Disk string `yaml:"disk,omitempty" cbor:"disk,omitempty"`
	// Hash is the most the host reads to hash the files one run wrote;
	// files past it are listed without a hash. Empty: 256MiB.
	Hash string `yaml:"hash,omitempty" cbor:"hash,omitempty"`
}

// Limits of tool grants.
const (
	defaultToolWall = 60 * time.Second
	defaultToolHash = 256 << 20
	maxToolHash     = 16 << 30
	maxToolOutput   = 16 << 20
	maxToolMax      = 1024
)

var toolNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Check validates every tool of g, saying what to change. A section without
// tools is valid: the capability links and every call is denied (what a
// capability token naming tools gives without a grant file that defines
// them).
func (g *Grant) Check() error {
	seen := map[string]bool{}
	for _, list := range []struct {
		what  string
		specs []Spec
	}{{"tools", g.Tools}, {"delegable", g.Delegable}} {
		for i := range list.specs {
			t := &list.specs[i]
			if !toolNameRE.MatchString(t.Name) {
				return fmt.Errorf("tool: %s[%d]: name %q must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit", list.what, i, t.Name)
			}
			if seen[t.Name] {
				return fmt.Errorf("tool %q: registered twice (a tool is either run or delegated)", t.Name)
			}
			seen[t.Name] = true
			if err := t.check(); err != nil {
				return fmt.Errorf("tool %q: %w", t.Name, err)
			}
		}
	}
	return nil
}

func (t *Spec) check() error {
	if err := caps.CheckGrantPath("exec", t.Exec); err != nil {
		return err
	}
	for i, p := range t.Read {
		if err := caps.CheckGrantPath(fmt.Sprintf("read[%d]", i), p); err != nil {
			return err
		}
	}
	for i, p := range t.Write {
		if err := caps.CheckGrantPath(fmt.Sprintf("write[%d]", i), p); err != nil {
			return err
		}
		if caps.IsWholeHost(p) {
			return fmt.Errorf("write[%d]: %q would make the whole host writable; list only the directories the tool writes, or use workspace: true", i, p)
		}
	}
	if t.Workdir != "" {
		if err := caps.CheckGrantPath("workdir", t.Workdir); err != nil {
			return err
		}
		if !caps.WithinAny(t.Workdir, t.Read) && !caps.WithinAny(t.Workdir, t.Write) {
			return fmt.Errorf("workdir: %q is not inside a read or write path, so it would not exist in the sandbox", t.Workdir)
		}
	}
	if t.Network != "" && t.Network != "none" {
		return fmt.Errorf("network: %q is not supported; write network: none (the sandbox refuses network allowlists today: enforcing one needs a filtering proxy, and a full network would fail open)", t.Network)
	}
	if err := caps.CheckEnv(t.Env); err != nil {
		return err
	}
	lim, err := t.Limits.parse()
	if err != nil {
		return err
	}
	if lim.disk > 0 && len(t.Write) == 0 && !t.Workspace {
		return fmt.Errorf("limits.disk: %s bounds what the tool writes, and it writes nowhere (no write paths, no workspace); drop it", t.Limits.Disk)
	}
	a := &t.Args
	for i, f := range a.Fixed {
		if strings.ContainsRune(f, 0) || !utf8.ValidString(f) {
			return fmt.Errorf("args.fixed[%d]: must be UTF-8 without NUL", i)
		}
	}
	for i, f := range a.Flags {
		field := fmt.Sprintf("args.flags[%d]", i)
		if len(f.Name) < 2 || f.Name[0] != '-' || strings.ContainsAny(f.Name, "= \t\n\x00") || !utf8.ValidString(f.Name) {
			return fmt.Errorf("%s: name %q must start with '-' and hold no '=' or space (write the value's pattern under value:)", field, f.Name)
		}
		if _, err := compileArgPattern(f.Value); err != nil {
			return fmt.Errorf("%s: value: %w", field, err)
		}
		if err := checkPathKind(field, f.Path); err != nil {
			return err
		}
	}
	for i, p := range a.Positional {
		field := fmt.Sprintf("args.positional[%d]", i)
		if p.Pattern == "" {
			return fmt.Errorf("%s: a pattern is required (e.g. pattern: '[A-Za-z0-9._/-]+')", field)
		}
		if _, err := compileArgPattern(p.Pattern); err != nil {
			return fmt.Errorf("%s: pattern: %w", field, err)
		}
		if err := checkPathKind(field, p.Path); err != nil {
			return err
		}
	}
	if a.Max < 0 || a.Max > maxToolMax {
		return fmt.Errorf("args.max: %d is not in 0..%d", a.Max, maxToolMax)
	}
	if a.Max > 0 && len(a.Positional) == 0 {
		return fmt.Errorf("args.max: %d positional values, but no positional slot says what they may be; add positional: [{pattern: ...}]", a.Max)
	}
	return nil
}

func checkPathKind(field, kind string) error {
	if kind != "" && kind != "ro" && kind != "rw" {
		return fmt.Errorf("%s: path: %q is not ro or rw", field, kind)
	}
	return nil
}

// compileArgPattern compiles a schema pattern so that it must match the
// whole value: a pattern without anchors never admits a value that merely
// contains a match.
func compileArgPattern(p string) (*regexp.Regexp, error) {
	if !utf8.ValidString(p) {
		return nil, fmt.Errorf("the pattern is not UTF-8")
	}
	re, err := regexp.Compile(`^(?:` + p + `)$`)
	if err != nil {
		return nil, fmt.Errorf("%q is not an RE2 regexp: %v", p, err)
	}
	return re, nil
}

// toolLimits are Limits parsed.
type toolLimits struct {
	cpu, wall                            time.Duration
	memory, output, fileSize, disk, hash int64
	procs                                int
}

func (l *Limits) parse() (*toolLimits, error) {
	out := &toolLimits{wall: defaultToolWall, procs: l.Procs, hash: defaultToolHash}
	var err error
	if out.cpu, err = caps.ParseDuration("limits.cpu", l.CPU); err != nil {
		return nil, err
	}
	if l.Wall != "" {
		if out.wall, err = caps.ParseDuration("limits.wall", l.Wall); err != nil {
			return nil, err
		}
	}
	if out.memory, err = caps.ParseSize("limits.memory", l.Memory); err != nil {
		return nil, err
	}
	if out.output, err = caps.ParseSize("limits.output", l.Output); err != nil {
		return nil, err
	}
	if out.fileSize, err = caps.ParseSize("limits.file_size", l.FileSize); err != nil {
		return nil, err
	}
	if out.disk, err = caps.ParseSize("limits.disk", l.Disk); err != nil {
		return nil, err
	}
	if l.Hash != "" {
		if out.hash, err = caps.ParseSize("limits.hash", l.Hash); err != nil {
			return nil, err
		}
	}
	switch {
	case out.memory > 0 && out.memory < caps.MinSandboxMemory:
		return nil, fmt.Errorf("limits.memory: %s is too little for any program to start; give at least 16MiB", l.Memory)
	case out.hash > maxToolHash:
		return nil, fmt.Errorf("limits.hash: %s is over the most the host hashes for one run, 16GiB", l.Hash)
	case out.output > maxToolOutput:
		return nil, fmt.Errorf("limits.output: %s is over the most a response carries, 16MiB per stream", l.Output)
	case l.Procs < 0 || l.Procs > 0 && l.Procs < caps.MinSandboxProcs:
		return nil, fmt.Errorf("limits.procs: %d is too few for the sandbox's helper to start; give at least %d, or 0 for no limit", l.Procs, caps.MinSandboxProcs)
	}
	return out, nil
}

// lookup returns the tool named name, or nil.
func (g *Grant) lookup(name string) *Spec {
	for i := range g.Tools {
		if g.Tools[i].Name == name {
			return &g.Tools[i]
		}
	}
	return nil
}

// names lists the registered tools, for messages.
func (g *Grant) names() string {
	if len(g.Tools) == 0 {
		return "none; a grant file defines them"
	}
	n := make([]string, len(g.Tools))
	for i, t := range g.Tools {
		n[i] = t.Name
	}
	return strings.Join(n, ", ")
}

// ErrDeclaration is returned, as a *DeclarationError, when a grant
// file given with a token declares one of the token's tools otherwise than
// the token binds it.
var ErrDeclaration = errors.New("tool declared otherwise than the token binds it")

// DeclarationError names the tool a grant file declares otherwise than
// its token, and both declarations' digests. A digest does not say which
// field differs: the token binds the declaration, it does not carry it.
type DeclarationError struct {
	Tool         string
	Token, Grant capability.Digest
}

func (e *DeclarationError) Error() string {
	return fmt.Sprintf("the grant file declares tool %q otherwise than the token binds it: the token binds declaration %s, the grant file's is %s (exec, args, read, write, workspace, workdir, network, env, limits and idempotent all count)",
		e.Tool, e.Token, e.Grant)
}

// Unwrap returns ErrDeclaration.
func (e *DeclarationError) Unwrap() error { return ErrDeclaration }

// Decl returns t's declaration as a token binds it (capability/SPEC.md,
// "Tool declarations"). Every field of Spec is in it: a test sets each
// in turn and requires the digest to change.
func Decl(t *Spec) capability.ToolDecl {
	d := capability.ToolDecl{
		Name: t.Name, Exec: t.Exec, Read: t.Read, Write: t.Write, Workspace: t.Workspace,
		Workdir: t.Workdir, Network: t.Network, Env: t.Env, Idempotent: t.Idempotent,
		Args: &capability.ToolArgsDecl{Fixed: t.Args.Fixed, Max: uint64(max(t.Args.Max, 0))},
		Limits: &capability.ToolLimitsDecl{CPU: t.Limits.CPU, Wall: t.Limits.Wall, Memory: t.Limits.Memory,
			Procs: uint64(max(t.Limits.Procs, 0)), Output: t.Limits.Output,
			FileSize: t.Limits.FileSize, Disk: t.Limits.Disk, Hash: t.Limits.Hash},
	}
	for _, f := range t.Args.Flags {
		d.Args.Flags = append(d.Args.Flags, capability.ToolFlagDecl{Name: f.Name, Value: f.Value, Path: f.Path})
	}
	for _, p := range t.Args.Positional {
		d.Args.Positional = append(d.Args.Positional, capability.ToolPositionalDecl{Pattern: p.Pattern, Path: p.Path})
	}
	return d
}

// Digest returns the digest a token binds t by.
func Digest(t *Spec) (capability.Digest, error) { return Decl(t).Digest() }

// Digests maps each tool of g to the digest of its declaration.
func (g *Grant) Digests() (map[string]capability.Digest, error) {
	return digests(g.Tools)
}

func digests(specs []Spec) (map[string]capability.Digest, error) {
	out := make(map[string]capability.Digest, len(specs))
	for i := range specs {
		d, err := Digest(&specs[i])
		if err != nil {
			return nil, fmt.Errorf("tool %q: %w", specs[i].Name, err)
		}
		out[specs[i].Name] = d
	}
	return out, nil
}

// Token sets the tool capability of a token: each tool's name, bound to
// the digest of its declaration, runnable or delegable.
func (g *Grant) Token(c *capability.Caps) error {
	tools, err := g.Digests()
	if err != nil {
		return err
	}
	c.Tool = &capability.Tool{Tools: tools}
	if len(g.Delegable) > 0 {
		if c.Tool.Delegable, err = digests(g.Delegable); err != nil {
			return err
		}
	}
	return nil
}

// CheckToken requires every tool of g that the token names to be declared
// exactly as the token binds it: a *DeclarationError names the first that
// is not.
func (g *Grant) CheckToken(c capability.Caps) error {
	if c.Tool == nil {
		return nil
	}
	for i := range len(g.Tools) + len(g.Delegable) {
		var t *Spec
		var bound capability.Digest
		var ok bool
		if i < len(g.Tools) {
			t = &g.Tools[i]
			bound, ok = c.ToolDigest(t.Name)
		} else {
			t = &g.Delegable[i-len(g.Tools)]
			bound, ok = c.Tool.Delegable[t.Name]
		}
		if !ok {
			continue // Within names it
		}
		d, err := Digest(t)
		if err != nil {
			return err
		}
		if !bytes.Equal(d, bound) {
			return &DeclarationError{Tool: t.Name, Token: bound, Grant: d}
		}
	}
	return nil
}

// ValidName reports whether name is a tool name a grant may register: 1-64
// letters, digits, '.', '_' or '-', starting with a letter or digit.
func ValidName(name string) bool { return toolNameRE.MatchString(name) }
