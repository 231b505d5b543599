// Package tool is the tool capability (agentrt:tool): native programs the
// grant registers, each run under the host's OS sandbox (native-sandbox)
// with argv only, never a shell.
//
//	tool.run (abi.ToolRunRequest) -> abi.ToolRunResponse   effect; idempotent
//	                                                       when the grant's
//	                                                       tool says so
//
// The gate's check stage, before anything is journaled as intent, finds the
// tool in the grant and checks every argument against its schema (flags,
// positional patterns, paths inside the tool's areas). Then the host
// journals intent and executing durably and launches exec + fixed + the
// guest's arguments. The response carries the exit status, the signal, the
// captured output with its truncation flags, the limits run into and the
// files the tool created or changed in its read-write area, by hash. A tool
// that ran is a successful call whatever its exit status.
//
// The host's work after the launch is bounded too: it hashes at most the
// tool's limits.hash of the files, never reads a file with holes, and stops
// at a cancel, a drain or the run's end; such files are listed with their
// size and why they have no hash (abi.ToolFile.Unhashed).
//
// Errors: StatusBadRequest for a malformed request, an empty name or an
// argument holding NUL; StatusDenied for a tool the grant does not register,
// a tool whose paths reach the cell's data directory (Deps.DataDir), or
// an argument its schema refuses, naming the argument and the rule;
// StatusFailed when the sandbox cannot be set up as the grant demands (no
// bubblewrap, no user namespaces, a missing executable, an unsupported
// platform): nothing ran, and nothing ever runs unsandboxed.
//
// The grant section is tool: {tools: [...]} (Grant, grant.go), which a
// token binds by the digest of each tool's declaration (Digest); the
// policy sees the resource Tool::NAME and the context attributes args and
// paths (the path arguments in canonical form). It needs the cell's
// workspaces, data directory, sandbox options and tool user (Deps).
package tool

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host/caps"
	sandbox "github.com/agentrt/agentrt/native-sandbox"
	"github.com/fxamacker/cbor/v2"
)

// Deps are what the tool capability needs from its host.
type Deps struct {
	// Workspaces is the directory under which each run that uses a tool
	// with workspace: true gets its own, <Workspaces>/<run id>. Empty:
	// agentrt-work under the system's temporary directory. The cell sets
	// DATA/work.
	Workspaces string
	// DataDir is the cell's data directory (its keys, API token, store),
	// which no tool may reach: a tool whose exec, read, write or workdir
	// path lies in it, or holds it, is denied at the gate, except for paths
	// in the run's own workspace. Empty: no such directory (the cell sets
	// it).
	DataDir string
	// CacheDir is the cell's compilation cache when it lies outside
	// DataDir (--cache): its files become the code the cell executes
	// (compiled modules, rewritten modules), so no tool may reach it
	// either. Empty: none.
	CacheDir string
	// Sandbox are options for every launch (sandbox.WithBwrap,
	// sandbox.WithHelper).
	Sandbox []sandbox.Option
	// User is the host user and group tools run as when the host runs as
	// root; the zero value means sandbox.DefaultUser (nobody, 65534:65534).
	// Run workspaces are given to it. A host that is not root runs tools
	// as itself, and refuses a User naming anyone else.
	User sandbox.User
}

// sandboxOptions returns the options of every launch.
func (d *Deps) sandboxOptions() []sandbox.Option {
	opts := slices.Clone(d.Sandbox)
	if d.User != (sandbox.User{}) {
		opts = append(opts, sandbox.WithUser(d.User))
	}
	return opts
}

// Capability is the tool capability, as the host registers it.
type Capability struct{}

// Cap names the capability.
func (Capability) Cap() abi.Capability { return abi.CapTool }

// FromToken grants the tool capability without tools when the token's
// claims name tools: the capability links, and every call is denied until
// a grant file given with the token declares them.
func (Capability) FromToken(c capability.Caps) (*Grant, error) {
	if c.Tool == nil {
		return nil, nil
	}
	return &Grant{}, nil
}

// Open returns the run's view of its tools.
func (Capability) Open(g *Grant, d Deps, r *caps.Run) (caps.Instance, error) {
	return &instance{grant: g, deps: d, run: r}, nil
}

type instance struct {
	grant *Grant
	deps  Deps
	run   *caps.Run
}

func (in *instance) Handler(op abi.Op) caps.Handler {
	if op.Code != abi.OpToolRun {
		return caps.Handler{}
	}
	return caps.Handler{Check: in.check, Serve: in.serve}
}

// Facts gives the policy the tool and its arguments: all of them, and the
// path arguments in canonical form (absolute, clean, as the capability
// layer checked them against the tool's areas), so that a policy on
// /srv/repo/secret sees ./secret and /srv/repo//secret as that path.
func (in *instance) Facts(c *caps.Call) (caps.Facts, error) {
	var r struct {
		Name string   `cbor:"name"`
		Args []string `cbor:"args"`
	}
	if err := cbor.Unmarshal(c.Request, &r); err != nil {
		return caps.Facts{}, err
	}
	paths := []string{}
	if t := in.grant.lookup(r.Name); t != nil {
		plan := in.plan(t)
		if msg := plan.checkArgs(r.Args); msg == "" {
			paths = plan.paths
		}
	}
	return caps.Facts{ResourceType: "Tool", ResourceID: r.Name,
		Attrs: []caps.Fact{{Name: "args", Set: r.Args, Kind: caps.FactSet}, {Name: "paths", Set: paths, Kind: caps.FactSet}}}, nil
}

// Close holds nothing: a tool's processes end with its call.
func (*instance) Close() {}

// Limits of the files a tool run reports.
const (
	// maxToolFiles is the most files a response lists; past it, Limits
	// says "files".
	maxToolFiles = 1000
	// maxToolScan is the most directory entries looked at in the
	// read-write area, before and after a run.
	maxToolScan = 100000
)

// limitFiles is the limit a response names when it lists maxToolFiles
// files and more were written (or the area was too large to scan).
const limitFiles = "files"

// limitHash is the limit a response names when it left files unhashed at
// the tool's hash limit (limits.hash).
const limitHash = "hash"

// toolPlan is where one run of a tool sees the world: its areas and working
// directory, as host paths.
type toolPlan struct {
	tool *Spec
	// workspace is the run's workspace, when the tool has one.
	workspace string
	workdir   string
	// ro and rw are the areas path arguments may name: the grant's read
	// paths, and its write paths plus the workspace.
	ro, rw []string
	// paths collects, as checkArgs accepts them, the canonical form of
	// the path arguments (absolute, clean): what the policy sees
	// (Facts).
	paths []string
}

func (in *instance) plan(t *Spec) *toolPlan {
	p := &toolPlan{tool: t, ro: t.Read, rw: slices.Clone(t.Write)}
	if t.Workspace {
		root := in.deps.Workspaces
		if root == "" {
			root = filepath.Join(os.TempDir(), "agentrt-work")
		}
		if abs, err := filepath.Abs(root); err == nil {
			root = abs
		}
		p.workspace = filepath.Join(root, in.run.ID.String())
		p.rw = append(p.rw, p.workspace)
	}
	switch {
	case t.Workdir != "":
		p.workdir = t.Workdir
	case p.workspace != "":
		p.workdir = p.workspace
	case len(t.Write) > 0:
		p.workdir = t.Write[0]
	case len(t.Read) > 0:
		p.workdir = t.Read[0]
	}
	return p
}

// check is the gate's capability stage: a registered tool, and arguments
// its schema admits.
func (in *instance) check(c *caps.Call) *caps.Denial {
	var r abi.ToolRunRequest
	if d := caps.DecodeCheck(c, &r); d != nil {
		return d
	}
	if r.Name == "" {
		return caps.Deny(abi.StatusBadRequest, "tool.run: no tool name")
	}
	for i, a := range r.Args {
		if strings.ContainsRune(a, 0) {
			return caps.Deny(abi.StatusBadRequest, "tool.run: argument %d holds a NUL byte, which no argv can carry", i+1)
		}
	}
	t := in.grant.lookup(r.Name)
	if t == nil {
		return caps.Deny(abi.StatusDenied, "tool.run: no tool %q in the grant (granted: %s)", r.Name, in.grant.names())
	}
	p := in.plan(t)
	if msg := p.reachesData(caps.CellDirs{Data: in.deps.DataDir, Cache: in.deps.CacheDir}); msg != "" {
		return caps.Deny(abi.StatusDenied, "tool.run: tool %s: %s", t.Name, msg)
	}
	if msg := p.checkArgs(r.Args); msg != "" {
		return caps.Deny(abi.StatusDenied, "tool.run: tool %s: %s", t.Name, msg)
	}
	return nil
}

// reachesData returns why the tool's paths reach one of the cell's own
// directories (caps.CellDirs), or "": its exec, read, write and workdir
// paths, symbolic links resolved, must neither lie in one nor hold it,
// except inside the run's own workspace. The grant decides what a tool
// sees, but never the keys, the API token or the store a cell keeps in its
// data directory, nor the code it executes from its cache.
func (p *toolPlan) reachesData(cell caps.CellDirs) string {
	if cell == (caps.CellDirs{}) {
		return ""
	}
	reaching := cell.Reaching()
	ws := ""
	if p.workspace != "" {
		ws = caps.RealPath(p.workspace)
	}
	check := func(field, path string) string {
		rp := caps.RealPath(path)
		if ws != "" && caps.HostWithin(rp, ws) {
			return ""
		}
		d, ok := reaching(rp)
		if !ok {
			return ""
		}
		via := ""
		if rp != filepath.Clean(path) {
			via = " (" + rp + ")"
		}
		msg := fmt.Sprintf("%s %q%s reaches %s: no tool may see it", field, path, via, d)
		if d.Data {
			msg += " (a tool's workspace is the one place there it may use)"
		}
		return msg
	}
	t := p.tool
	if msg := check("exec", t.Exec); msg != "" {
		return msg
	}
	for i, r := range t.Read {
		if msg := check(fmt.Sprintf("read[%d]", i), r); msg != "" {
			return msg
		}
	}
	for i, w := range t.Write {
		if msg := check(fmt.Sprintf("write[%d]", i), w); msg != "" {
			return msg
		}
	}
	if t.Workdir != "" {
		return check("workdir", t.Workdir)
	}
	return ""
}

// checkArgs checks the guest's arguments against the tool's schema and
// returns what is wrong, naming the argument (by its 1-based position in
// the request) and the rule, or "".
func (p *toolPlan) checkArgs(args []string) string {
	a := &p.tool.Args
	most := a.Max
	if most == 0 {
		most = len(a.Positional)
	}
	npos := 0
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if len(arg) > 1 && arg[0] == '-' {
			name, value, inline := arg, "", false
			if strings.HasPrefix(arg, "--") {
				if k, v, ok := strings.Cut(arg, "="); ok {
					name, value, inline = k, v, true
				}
			}
			f := p.flag(name)
			if f == nil {
				return fmt.Sprintf("argument %d %q: flag %s is not in the tool's schema (allowed: %s)", i+1, arg, name, p.flagNames())
			}
			if f.Value == "" && f.Path == "" {
				if inline {
					return fmt.Sprintf("argument %d %q: flag %s takes no value", i+1, arg, name)
				}
				continue
			}
			if !inline {
				if i+1 == len(args) {
					return fmt.Sprintf("argument %d %q: flag %s needs a value (as the next argument, or %s=VALUE)", i+1, arg, name, name)
				}
				i++
				value = args[i]
			}
			if msg := p.checkValue(value, f.Value, f.Path); msg != "" {
				return fmt.Sprintf("argument %d %q: the value of flag %s %s", i+1, args[i], name, msg)
			}
			continue
		}
		npos++
		if npos > most {
			if most == 0 {
				return fmt.Sprintf("argument %d %q: the tool takes no positional values (only flags: %s)", i+1, arg, p.flagNames())
			}
			return fmt.Sprintf("argument %d %q: more than %d positional values (args.max)", i+1, arg, most)
		}
		slot := a.Positional[min(npos, len(a.Positional))-1]
		if msg := p.checkValue(arg, slot.Pattern, slot.Path); msg != "" {
			return fmt.Sprintf("argument %d %q: positional value %d %s", i+1, arg, npos, msg)
		}
	}
	return ""
}

func (p *toolPlan) flag(name string) *Flag {
	for i := range p.tool.Args.Flags {
		if p.tool.Args.Flags[i].Name == name {
			return &p.tool.Args.Flags[i]
		}
	}
	return nil
}

func (p *toolPlan) flagNames() string {
	if len(p.tool.Args.Flags) == 0 {
		return "none"
	}
	names := make([]string, len(p.tool.Args.Flags))
	for i, f := range p.tool.Args.Flags {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}

// checkValue checks a positional or flag value against a pattern (none:
// any value) and, when kind is "ro" or "rw", as a path in that area.
func (p *toolPlan) checkValue(v, pattern, kind string) string {
	if pattern != "" {
		re, err := compileArgPattern(pattern)
		if err != nil {
			return err.Error() // Check refused such a grant; kept for safety
		}
		if !re.MatchString(v) {
			return fmt.Sprintf("does not match the pattern %q", pattern)
		}
	}
	if kind == "" {
		return ""
	}
	if v == "" {
		return "is empty, not a path"
	}
	for _, el := range strings.FieldsFunc(v, func(r rune) bool { return r < 0x80 && os.IsPathSeparator(uint8(r)) }) {
		if el == ".." {
			return "holds a '..' element; give the path without it"
		}
	}
	abs := v
	if !filepath.IsAbs(v) {
		if p.workdir == "" {
			return "is a relative path, and the tool has no working directory to resolve it in"
		}
		abs = filepath.Join(p.workdir, v)
	}
	abs = filepath.Clean(abs)
	areas, what := p.rw, "read-write"
	if kind == "ro" {
		areas, what = append(slices.Clone(p.ro), p.rw...), "readable"
	}
	for _, root := range areas {
		if caps.HostWithin(abs, root) {
			p.paths = append(p.paths, abs)
			return ""
		}
	}
	if len(areas) == 0 {
		return fmt.Sprintf("is a path (%s), and the tool has no %s area", abs, what)
	}
	return fmt.Sprintf("is a path (%s) outside the tool's %s area (%s)", abs, what, strings.Join(areas, ", "))
}

func (in *instance) serve(ctx context.Context, c *caps.Call) (abi.Status, []byte) {
	var r abi.ToolRunRequest
	_ = abi.Unmarshal(c.Request, &r) // checked by the gate
	t := in.grant.lookup(r.Name)
	if t == nil {
		// Only a journal whose grant changed under it gets here.
		return caps.Error(abi.StatusFailed, "tool.run: no tool %q in the grant", r.Name)
	}
	p := in.plan(t)
	// Checked again at launch: a path the gate saw may have become a
	// symbolic link into the data directory since.
	if msg := p.reachesData(caps.CellDirs{Data: in.deps.DataDir, Cache: in.deps.CacheDir}); msg != "" {
		return caps.Error(abi.StatusFailed, "tool.run: tool %s: %s", t.Name, msg)
	}
	lim, err := t.Limits.parse()
	if err != nil {
		return caps.Error(abi.StatusFailed, "tool.run: tool %s: %v", t.Name, err)
	}
	// The run's token may bound its wall time: no launch may outlast what
	// is left of it, whatever the tool's own limits say.
	if deadline := in.run.Deadline(); !deadline.IsZero() {
		left := deadline.Sub(in.run.Now())
		if left <= 0 {
			return caps.Error(abi.StatusFailed, "tool.run: tool %s: the run's wall-time budget (its token's wall_seconds) has run out; nothing was launched", t.Name)
		}
		lim.wall = minPositive(lim.wall, left)
		lim.cpu = minPositive(lim.cpu, left)
	}
	opts := in.deps.sandboxOptions()
	if p.workspace != "" {
		if err := makeWorkspace(p.workspace, opts); err != nil {
			return caps.Error(abi.StatusFailed, "tool.run: tool %s: workspace: %v", t.Name, err)
		}
	}
	spec := &sandbox.Spec{
		ReadWrite: p.rw,
		Workdir:   p.workdir,
		Env:       t.Env,
		Limits: sandbox.Limits{CPU: lim.cpu, Wall: lim.wall, Memory: lim.memory, Processes: lim.procs,
			Output: lim.output, FileSize: lim.fileSize, Disk: lim.disk},
	}
	if !caps.WithinAny(t.Exec, t.Read) {
		spec.ReadOnly = append(spec.ReadOnly, t.Exec)
	}
	for _, rp := range t.Read {
		// A read path this host lacks holds nothing to read: leaving it
		// out narrows nothing, and lets one grant serve hosts with and
		// without, say, /lib64.
		if _, err := os.Lstat(rp); err == nil {
			spec.ReadOnly = append(spec.ReadOnly, rp)
		}
	}
	argv := append(append([]string{t.Exec}, t.Args.Fixed...), r.Args...)
	if len(r.Stdin) > 0 {
		opts = append(opts, sandbox.WithStdin(bytes.NewReader(r.Stdin)))
	}
	before := scanArea(p.rw)
	res, err := sandbox.Launch(ctx, spec, argv, opts...)
	if err != nil {
		msg := err.Error()
		var re *sandbox.RefusedError
		if errors.As(err, &re) && re.Hint != "" {
			msg += " (hint: " + re.Hint + ")"
		}
		return caps.Error(abi.StatusFailed, "tool.run: tool %s: %s", t.Name, msg)
	}
	out := &abi.ToolRunResponse{
		Exit:            int64(res.ExitCode),
		Stdout:          nonNil(res.Stdout),
		Stderr:          nonNil(res.Stderr),
		StdoutTruncated: res.StdoutTruncated,
		StderrTruncated: res.StderrTruncated,
		TimedOut:        res.TimedOut,
	}
	if res.Signal != 0 {
		out.Signal = signalName(res.Signal)
	}
	for _, l := range res.Exceeded {
		out.Limits = append(out.Limits, string(l))
	}
	var more bool
	h := &hashing{ctx: ctx, halt: in.run.Halt, budget: lim.hash}
	out.Files, more = writtenFiles(h, before, scanArea(p.rw), p.workdir)
	if more || before.more {
		out.Limits = append(out.Limits, limitFiles)
	}
	if h.limited {
		out.Limits = append(out.Limits, limitHash)
	}
	return caps.OK(out)
}

// makeWorkspace creates a run's workspace (0700) and, when this host is
// root, gives it to the user tools run as: the tool is never root to the
// kernel, so a workspace owned by root would be read-only to it.
func makeWorkspace(dir string, opts []sandbox.Option) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := sandbox.ToolUser(opts...)
	if err != nil {
		return err
	}
	return os.Chown(dir, u.UID, u.GID)
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// Idempotent reports whether the tool c runs is declared idempotent in
// the grant, so that a run a crash left in doubt may be launched again.
func (in *instance) Idempotent(c *caps.Call) bool {
	var r abi.ToolRunRequest
	if abi.Unmarshal(c.Request, &r) != nil {
		return false
	}
	t := in.grant.lookup(r.Name)
	return t != nil && t.Idempotent
}

// stamp is what tells a file changed: its size, modification time and
// mode. A tool's launch takes far longer than the file system's timestamp
// granularity, so a rewrite during the run changes the time.
type stamp struct {
	size, mtime int64
	mode        fs.FileMode
}

// area is a scan of the regular files of the read-write roots.
type area struct {
	files map[string]stamp
	// more says the scan stopped at maxToolScan entries.
	more bool
}

// scanArea stats every regular file under roots (not following symbolic
// links).
func scanArea(roots []string) *area {
	a := &area{files: map[string]stamp{}}
	n := 0
	for _, root := range roots {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil // an unreadable entry is not reported; the rest is
			}
			if n++; n > maxToolScan {
				a.more = true
				return filepath.SkipAll
			}
			if !d.Type().IsRegular() {
				return nil
			}
			fi, err := d.Info()
			if err != nil {
				return nil
			}
			a.files[p] = stamp{fi.Size(), fi.ModTime().UnixNano(), fi.Mode()}
			return nil
		})
	}
	return a
}

// hashing is the bound on the host's work after a tool ran: it reads at
// most budget bytes to hash the files the tool wrote, and stops when the
// run's context ends or the run is asked to stop (cancel, drain).
type hashing struct {
	ctx    context.Context
	halt   <-chan struct{}
	budget int64
	// limited says a file was left unhashed at the budget.
	limited bool
}

// stopped reports whether the run is ending.
func (h *hashing) stopped() bool {
	select {
	case <-h.halt:
		return true
	default:
	}
	return h.ctx.Err() != nil
}

// writtenFiles lists the files of after that are new or changed since
// before, sorted by path, with their hashes as far as h allows; more says
// some were left out.
func writtenFiles(h *hashing, before, after *area, workdir string) ([]abi.ToolFile, bool) {
	var paths []string
	for p, st := range after.files {
		if old, ok := before.files[p]; !ok || old != st {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	more := after.more
	if len(paths) > maxToolFiles {
		paths, more = paths[:maxToolFiles], true
	}
	var out []abi.ToolFile
	for _, p := range paths {
		f, ok := h.file(p)
		if !ok {
			continue // gone, or no longer a regular file, since the scan
		}
		f.Path = filepath.ToSlash(p)
		if workdir != "" && caps.HostWithin(p, workdir) {
			if rel, err := filepath.Rel(workdir, p); err == nil {
				f.Path = filepath.ToSlash(rel)
			}
		}
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b abi.ToolFile) int { return strings.Compare(a.Path, b.Path) })
	return out, more
}

// hashChunk is how much is read between two checks for a stop.
const hashChunk = 1 << 20

// file describes the file at p: its size and its hash, or why it has none.
// It opens p without following a symbolic link or blocking on a FIFO (a
// tool of another run sharing the area could have swapped either in since
// the scan) and reads nothing of a file with holes.
func (h *hashing) file(p string) (abi.ToolFile, bool) {
	f, err := openRegular(p)
	if err != nil {
		return abi.ToolFile{}, false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return abi.ToolFile{}, false
	}
	size := fi.Size()
	out := abi.ToolFile{Size: uint64(size)}
	holes, err := hasHoles(f, size)
	if err != nil {
		return abi.ToolFile{}, false
	}
	switch {
	case h.stopped():
		out.Unhashed = abi.UnhashedStopped
		return out, true
	case holes:
		out.Unhashed = abi.UnhashedSparse
		return out, true
	case size > h.budget:
		out.Unhashed, h.limited = abi.UnhashedLimit, true
		return out, true
	}
	sum := sha256.New()
	var n int64
	for n < size {
		if h.stopped() {
			out.Unhashed = abi.UnhashedStopped
			return out, true
		}
		k, err := io.CopyN(sum, f, min(hashChunk, size-n))
		n += k
		if err == io.EOF {
			break // it shrank since the stat: the hash is of what is there
		}
		if err != nil {
			return abi.ToolFile{}, false
		}
	}
	h.budget -= n
	out.Size, out.SHA256 = uint64(n), sum.Sum(nil)
	return out, true
}

// minPositive returns the smaller of a limit (0: none) and a ceiling.
func minPositive(limit, ceiling time.Duration) time.Duration {
	if limit <= 0 || limit > ceiling {
		return ceiling
	}
	return limit
}
