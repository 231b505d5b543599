package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/agentrt/agentrt/internal/yamlkeys"
	"go.yaml.in/yaml/v3"
)

// DefaultOutputCap is the per-stream output cap when Limits.Output is zero:
// the launcher holds a tool's output in memory, so it is never unbounded.
const DefaultOutputCap = 1 << 20

// Spec says what one launch of a native program may see and use. It is
// platform-neutral; each launcher maps it to its OS mechanism, and refuses
// what it cannot enforce. Paths are host paths and appear at the same place
// inside the sandbox. The zero value of a limit means no limit, except Wall,
// which is required, and Output, which defaults to DefaultOutputCap.
type Spec struct {
	// ReadOnly lists the files and directories the tool may read and execute.
	ReadOnly []string
	// ReadWrite lists the directories the tool may also write.
	ReadWrite []string
	// Protected lists sub-paths of ReadWrite that stay read-only (e.g.
	// ".git"). A relative entry applies inside every ReadWrite root; an
	// absolute one must lie inside one of them.
	Protected []string
	// Workdir is the working directory; it must lie inside a listed path.
	// Empty means the first ReadWrite root, else "/".
	Workdir string
	// Path is the list of directories a bare program name is looked up in,
	// in order; without it argv[0] must be absolute. When Env has no PATH,
	// the tool's PATH is these directories.
	Path []string
	// Env is the tool's whole environment. Nothing of the host's is passed.
	Env map[string]string
	// Network is the network the tool may reach: none (the zero value) or an
	// allowlist.
	Network Network
	// Limits bound the tool and everything it starts.
	Limits Limits
	// RequireLandlock makes the absence of Landlock (Linux) a refusal rather
	// than a missing layer of depth.
	RequireLandlock bool
}

// Network is a network policy: no network at all when Allow is empty, else
// only the listed "host:port" destinations.
type Network struct {
	Allow []string
}

// None reports whether the policy is no network at all.
func (n Network) None() bool { return len(n.Allow) == 0 }

// Limits bound a launch. Zero means unlimited except where Spec says.
type Limits struct {
	// CPU is the CPU time of each process, rounded up to whole seconds.
	CPU time.Duration
	// Wall is the wall-clock time of the whole launch; when it passes, every
	// process the tool started is killed. Required.
	Wall time.Duration
	// Memory bounds, in bytes, everything the sandbox holds in memory, all
	// its processes together: anonymous memory, page cache, and the pages
	// of its tmpfs (/tmp, /dev/shm) and memfds, which RLIMIT_AS never
	// counts. Linux enforces it with a memory cgroup and refuses the launch
	// where none can be made; Windows with the job's memory limit; macOS
	// refuses it. Each process's address space (RLIMIT_AS) is capped at it
	// too, so an allocation past it fails with ENOMEM first.
	Memory int64
	// Processes is the number of processes and threads alive at once.
	Processes int
	// Output is the number of bytes kept of each of stdout and stderr; the
	// rest is read and discarded, and the cut is reported.
	Output int64
	// FileSize is the largest file the tool may write, in bytes
	// (RLIMIT_FSIZE: a write past it fails with EFBIG, and SIGXFSZ ends any
	// process but the first). A file of the tool's that reaches it is
	// reported.
	FileSize int64
	// Disk is the most the tool may add to its read-write roots, all
	// together, in bytes of disk allocated (so a sparse file counts what it
	// holds, not its size). A watchdog samples the roots and kills the
	// whole sandbox past it; see disk.go for the overshoot.
	Disk int64
}

// SpecError is returned by Validate, Parse and Load when a spec is invalid.
// Field names the offending setting as it is spelled in a spec file.
type SpecError struct {
	Field string
	Msg   string
	// Err is the cause when it is an error of its own: a
	// *yamlkeys.UnknownKeyError for a key a spec does not have, which names
	// the file and line, the keys allowed there and the nearest one.
	Err error
}

func (e *SpecError) Error() string {
	if e.Err != nil {
		return "sandbox spec: " + e.Err.Error()
	}
	if e.Field == "" {
		return "sandbox spec: " + e.Msg
	}
	return fmt.Sprintf("sandbox spec: %s: %s", e.Field, e.Msg)
}

// Unwrap returns Err.
func (e *SpecError) Unwrap() error { return e.Err }

func specErr(field, format string, args ...any) error {
	return &SpecError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// fileSpec is the file form of a Spec: sizes and durations as text.
type fileSpec struct {
	ReadOnly        []string          `yaml:"read_only"`
	ReadWrite       []string          `yaml:"read_write"`
	Protected       []string          `yaml:"protected"`
	Workdir         string            `yaml:"workdir"`
	Path            []string          `yaml:"path"`
	Env             map[string]string `yaml:"env"`
	Network         yaml.Node         `yaml:"network"`
	Limits          fileLimits        `yaml:"limits"`
	RequireLandlock bool              `yaml:"require_landlock"`
}

type fileLimits struct {
	CPU       string `yaml:"cpu"`
	Wall      string `yaml:"wall"`
	Memory    string `yaml:"memory"`
	Processes int    `yaml:"processes"`
	Output    string `yaml:"output"`
	FileSize  string `yaml:"file_size"`
	Disk      string `yaml:"disk"`
}

// Load reads a spec file (YAML or JSON) and validates it.
func Load(file string) (*Spec, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	s, err := Parse(data)
	var uk *yamlkeys.UnknownKeyError
	if errors.As(err, &uk) {
		// The message names the file and line: tool.yaml:7: unknown key ...
		uk.File = file
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return s, nil
}

// Parse decodes a spec from YAML or JSON, rejecting unknown keys, and
// validates it.
func Parse(data []byte) (*Spec, error) {
	var f fileSpec
	if err := yamlkeys.Check(data, reflect.TypeOf(f)); err != nil {
		var uk *yamlkeys.UnknownKeyError
		errors.As(err, &uk)
		return nil, &SpecError{Field: uk.Path, Msg: err.Error(), Err: err}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, &SpecError{Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	s := &Spec{
		ReadOnly:        f.ReadOnly,
		ReadWrite:       f.ReadWrite,
		Protected:       f.Protected,
		Workdir:         f.Workdir,
		Path:            f.Path,
		Env:             f.Env,
		RequireLandlock: f.RequireLandlock,
	}
	var err error
	if s.Network, err = parseNetwork(&f.Network); err != nil {
		return nil, err
	}
	l := &s.Limits
	if l.CPU, err = parseDuration("limits.cpu", f.Limits.CPU); err != nil {
		return nil, err
	}
	if l.Wall, err = parseDuration("limits.wall", f.Limits.Wall); err != nil {
		return nil, err
	}
	if l.Memory, err = parseSize("limits.memory", f.Limits.Memory); err != nil {
		return nil, err
	}
	if l.Output, err = parseSize("limits.output", f.Limits.Output); err != nil {
		return nil, err
	}
	if l.FileSize, err = parseSize("limits.file_size", f.Limits.FileSize); err != nil {
		return nil, err
	}
	if l.Disk, err = parseSize("limits.disk", f.Limits.Disk); err != nil {
		return nil, err
	}
	l.Processes = f.Limits.Processes
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return s, nil
}

func parseNetwork(n *yaml.Node) (Network, error) {
	switch n.Kind {
	case 0:
		return Network{}, nil
	case yaml.ScalarNode:
		if n.Value == "none" {
			return Network{}, nil
		}
	case yaml.MappingNode:
		var net Network
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value != "allow" {
				uk := yamlkeys.NewUnknownKey(k.Line, k.Value, "network", []string{"allow"})
				return Network{}, &SpecError{Field: "network", Msg: uk.Error(), Err: uk}
			}
			if err := v.Decode(&net.Allow); err != nil {
				return Network{}, specErr("network.allow", "want a list of host:port strings")
			}
		}
		return net, nil
	}
	return Network{}, specErr("network", "write network: none, or network: {allow: [host:port, ...]}")
}

func parseDuration(field, v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, specErr(field, "%q is not a duration; write e.g. 30s or 2m", v)
	}
	return d, nil
}

var sizeRE = regexp.MustCompile(`^([0-9]+)\s*(|B|K|KB|KiB|M|MB|MiB|G|GB|GiB)$`)

// parseSize reads a byte count: a plain number or one with a binary unit
// (K, M, G, with or without "iB"; all are powers of 1024).
func parseSize(field, v string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	m := sizeRE.FindStringSubmatch(strings.TrimSpace(v))
	if m == nil {
		return 0, specErr(field, "%q is not a size; write bytes, or e.g. 64KiB, 512MiB, 2GiB", v)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return 0, specErr(field, "%q is too large", v)
	}
	var shift uint
	if u := m[2]; u != "" && u != "B" {
		shift = map[byte]uint{'K': 10, 'M': 20, 'G': 30}[u[0]]
	}
	if n > (1<<62)>>shift {
		return 0, specErr(field, "%q is too large", v)
	}
	return n << shift, nil
}

// Validate checks the spec once, saying what to change. Launch validates
// again, so a Spec built in code is checked too.
func (s *Spec) Validate() error {
	if s == nil {
		return specErr("", "no spec")
	}
	for i, p := range s.ReadOnly {
		if err := checkPath(fmt.Sprintf("read_only[%d]", i), p); err != nil {
			return err
		}
	}
	for i, p := range s.ReadWrite {
		f := fmt.Sprintf("read_write[%d]", i)
		if err := checkPath(f, p); err != nil {
			return err
		}
		if isRoot(p) {
			return specErr(f, "%q would make the whole host writable; list only the directories the tool writes", p)
		}
	}
	for i, p := range s.Protected {
		f := fmt.Sprintf("protected[%d]", i)
		if len(s.ReadWrite) == 0 {
			return specErr(f, "protected paths live inside read_write roots, and there are none; remove it or add a read_write root")
		}
		if !isAbs(p) {
			if p == "" || strings.ContainsRune(p, 0) || path.Clean(p) != p || p == "." || p == ".." || strings.HasPrefix(p, "../") {
				return specErr(f, "%q must be a clean relative path inside each read_write root (like .git) or an absolute path inside one", p)
			}
			continue
		}
		if err := checkPath(f, p); err != nil {
			return err
		}
		if !under(p, s.ReadWrite) {
			return specErr(f, "%q is not inside any read_write root; protected paths only make sense there", p)
		}
	}
	if s.Workdir != "" {
		if err := checkPath("workdir", s.Workdir); err != nil {
			return err
		}
		if !under(s.Workdir, s.ReadWrite) && !under(s.Workdir, s.ReadOnly) {
			return specErr("workdir", "%q is not inside a read_only or read_write path, so it would not exist in the sandbox; list it", s.Workdir)
		}
	}
	for i, p := range s.Path {
		f := fmt.Sprintf("path[%d]", i)
		if err := checkPath(f, p); err != nil {
			return err
		}
		if !under(p, s.ReadWrite) && !under(p, s.ReadOnly) {
			return specErr(f, "%q is not inside a read_only or read_write path, so nothing could be found there; list it under read_only", p)
		}
	}
	for _, k := range sortedKeys(s.Env) {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return specErr("env", "%q is not a valid variable name (no '=', no NUL, not empty)", k)
		}
		if strings.ContainsRune(s.Env[k], 0) {
			return specErr("env."+k, "the value contains a NUL byte")
		}
	}
	for i, a := range s.Network.Allow {
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" {
			return specErr(fmt.Sprintf("network.allow[%d]", i), "%q is not host:port (e.g. api.example.com:443)", a)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return specErr(fmt.Sprintf("network.allow[%d]", i), "%q has no valid port (1-65535)", a)
		}
	}
	l := s.Limits
	switch {
	case l.Wall <= 0:
		return specErr("limits.wall", "is required: every launch needs a deadline; set e.g. wall: 30s")
	case l.CPU < 0:
		return specErr("limits.cpu", "must not be negative")
	case l.Memory < 0:
		return specErr("limits.memory", "must not be negative")
	case l.Memory > 0 && l.Memory < 16<<20:
		return specErr("limits.memory", "%d bytes is too little for any program to start; give at least 16MiB", l.Memory)
	case l.Processes < 0:
		return specErr("limits.processes", "must not be negative")
	case l.Processes > 0 && l.Processes < minProcesses:
		return specErr("limits.processes", "%d is too few for the sandbox's own helper to start; give at least %d", l.Processes, minProcesses)
	case l.Output < 0:
		return specErr("limits.output", "must not be negative")
	case l.FileSize < 0:
		return specErr("limits.file_size", "must not be negative")
	case l.Disk < 0:
		return specErr("limits.disk", "must not be negative")
	case l.Disk > 0 && len(s.ReadWrite) == 0:
		return specErr("limits.disk", "bounds what the tool writes in its read_write paths, and there are none; drop it or list them")
	}
	return nil
}

// minProcesses is the fewest processes a limit may allow: the helper, a Go
// program, runs a few threads before it execs the tool.
const minProcesses = 4

// outputCap is the effective per-stream output cap.
func (s *Spec) outputCap() int64 {
	if s.Limits.Output > 0 {
		return s.Limits.Output
	}
	return DefaultOutputCap
}

// workdir is the effective working directory.
func (s *Spec) workdir() string {
	switch {
	case s.Workdir != "":
		return s.Workdir
	case len(s.ReadWrite) > 0:
		return s.ReadWrite[0]
	}
	return "/"
}

// protectedPaths expands Protected into absolute paths, in order.
func (s *Spec) protectedPaths() []string {
	var out []string
	for _, p := range s.Protected {
		if isAbs(p) {
			out = append(out, p)
			continue
		}
		for _, root := range s.ReadWrite {
			out = append(out, joinPath(root, p))
		}
	}
	return out
}

// env returns the tool's environment as sorted NAME=value pairs, with PATH
// from Spec.Path when Env has none.
func (s *Spec) env(sep string) []string {
	var out []string
	for _, k := range sortedKeys(s.Env) {
		out = append(out, k+"="+s.Env[k])
	}
	if _, ok := s.Env["PATH"]; !ok && len(s.Path) > 0 {
		out = append(out, "PATH="+strings.Join(s.Path, sep))
		sort.Strings(out)
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// checkPath requires an absolute, clean path. Paths are checked in the
// syntax of both families so one spec can be explained for any platform.
func checkPath(field, p string) error {
	switch {
	case p == "":
		return specErr(field, "is empty")
	case strings.ContainsRune(p, 0):
		return specErr(field, "contains a NUL byte")
	case !isAbs(p):
		return specErr(field, "%q is not absolute; give the full path", p)
	case strings.HasPrefix(p, "/") && path.Clean(p) != p:
		return specErr(field, "%q is not clean; write it as %q", p, path.Clean(p))
	case isWinAbs(p) && strings.Contains(strings.ReplaceAll(p, "/", `\`), `\..`):
		return specErr(field, "%q contains '..'; give the path without it", p)
	}
	return nil
}

var winAbsRE = regexp.MustCompile(`^[A-Za-z]:[\\/]`)

func isWinAbs(p string) bool { return winAbsRE.MatchString(p) }

func isAbs(p string) bool { return strings.HasPrefix(p, "/") || isWinAbs(p) }

func isRoot(p string) bool {
	return p == "/" || (isWinAbs(p) && len(strings.TrimRight(p, `\/`)) <= 2)
}

// joinPath joins a relative slash path under root in root's syntax.
func joinPath(root, rel string) string {
	if isWinAbs(root) {
		return strings.TrimRight(root, `\/`) + `\` + strings.ReplaceAll(rel, "/", `\`)
	}
	return path.Join(root, rel)
}

// within reports whether p is root or lies beneath it.
func within(p, root string) bool {
	if isWinAbs(root) {
		p, root = strings.ToLower(strings.ReplaceAll(p, "/", `\`)), strings.ToLower(strings.TrimRight(strings.ReplaceAll(root, "/", `\`), `\`))
		return p == root || strings.HasPrefix(p, root+`\`)
	}
	if root == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == root || strings.HasPrefix(p, root+"/")
}

func under(p string, roots []string) bool {
	for _, r := range roots {
		if within(p, r) {
			return true
		}
	}
	return false
}
