package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host/caps"
)

// Grant allows the MCP servers it declares, and of each only the tools,
// resources and prompts it lists. In a grant file:
//
//	mcp:
//	  servers:
//	    - name: notes
//	      stdio:
//	        exec: /usr/local/bin/notes-server
//	        args: [--dir, /srv/notes]
//	        read: [/usr/local/bin/notes-server]
//	        write: [/srv/notes]
//	        env: {LC_ALL: C}
//	        limits: {memory: 256MiB, procs: 32, cpu: 60s}
//	      tools: [add_note, list_notes, read_note]
//	      idempotent: [list_notes, read_note]
//	      resources: ["notes://"]
//	      prompts: [summarize]
//	      pin: {add_note: 3f1c…, list_notes: 9a0b…, read_note: 77de…}
//	    - name: search
//	      url: https://mcp.example.com/mcp
//	      credential: example-search
//	      tools: [search]
type Grant struct {
	Servers []Server `yaml:"servers" cbor:"servers"`
}

// Server declares one MCP server: how it is reached, and what of it the
// agent may use.
type Server struct {
	// Name is what the guest calls the server by.
	Name string `yaml:"name" cbor:"name"`
	// Stdio launches the server as a native program under the host's OS
	// sandbox, speaking MCP on its stdin and stdout; it lives as long as
	// the run that uses it. Exactly one of Stdio and URL is set.
	Stdio *Stdio `yaml:"stdio,omitempty" cbor:"stdio,omitempty"`
	// URL is a streamable-HTTP endpoint (http or https). The host connects
	// to its host and port and nowhere else: no redirect is followed, no
	// proxy from the environment is used.
	URL string `yaml:"url,omitempty" cbor:"url,omitempty"`
	// Credential names a credential of the cell (its mcp credentials,
	// Deps.Credentials) whose headers the host adds to every request to
	// URL. The secret never reaches the guest or the journal.
	Credential string `yaml:"credential,omitempty" cbor:"credential,omitempty"`
	// Tools are the server's tools the agent may see and call.
	Tools []string `yaml:"tools,omitempty" cbor:"tools,omitempty"`
	// Idempotent lists the tools whose calls a crash left in doubt may be
	// sent again. The server's own annotations (idempotentHint) never
	// count.
	Idempotent []string `yaml:"idempotent,omitempty" cbor:"idempotent,omitempty"`
	// Resources are URI prefixes of the resources the agent may read.
	Resources []string `yaml:"resources,omitempty" cbor:"resources,omitempty"`
	// Prompts are the names of the prompts the agent may get.
	Prompts []string `yaml:"prompts,omitempty" cbor:"prompts,omitempty"`
	// Pin maps each tool to the SHA-256 (hex) of its definition, as
	// agentrt mcp pin prints it. When set, it pins every tool of Tools,
	// and a tool whose definition no longer matches (or that is gone)
	// refuses every call to the server, naming the tools that changed.
	Pin map[string]string `yaml:"pin,omitempty" cbor:"pin,omitempty"`
}

// Stdio is how a stdio server is launched, declared like a native tool:
// argv only, never a shell, seeing only the paths it lists, with only
// the environment it lists and no network.
type Stdio struct {
	// Exec is the program's absolute path; it is readable in the sandbox.
	Exec string `yaml:"exec" cbor:"exec"`
	// Args are its arguments, fixed by the grant.
	Args []string `yaml:"args,omitempty" cbor:"args,omitempty"`
	// Read lists the files and directories the server may read (and
	// execute); entries this host lacks are left out.
	Read []string `yaml:"read,omitempty" cbor:"read,omitempty"`
	// Write lists the directories it may also write.
	Write []string `yaml:"write,omitempty" cbor:"write,omitempty"`
	// Env is its whole environment.
	Env map[string]string `yaml:"env,omitempty" cbor:"env,omitempty"`
	// Network must be none (or empty): a server reaches nothing but its
	// pipes.
	Network string `yaml:"network,omitempty" cbor:"network,omitempty"`
	// Limits bound the server and every process it starts.
	Limits Limits `yaml:"limits,omitempty" cbor:"limits,omitempty"`
}

// Limits bound a stdio server. Durations are Go durations; sizes bytes or
// a number with K, M, G (powers of 1024).
type Limits struct {
	// CPU is the CPU time of each process; empty: no limit.
	CPU string `yaml:"cpu,omitempty" cbor:"cpu,omitempty"`
	// Wall is how long the server may live; empty: as long as the run.
	// Past it the server is killed and later calls to it fail.
	Wall string `yaml:"wall,omitempty" cbor:"wall,omitempty"`
	// Memory bounds all its processes together; empty: no limit.
	Memory string `yaml:"memory,omitempty" cbor:"memory,omitempty"`
	// Procs is the most processes and threads at once; 0: no limit.
	Procs int `yaml:"procs,omitempty" cbor:"procs,omitempty"`
}

// Limits of MCP grants.
const (
	maxServers  = 64
	maxNames    = 256
	maxNameLen  = 128
	pinHexChars = 2 * sha256.Size
	// runLifetime is the wall limit of a stdio server without one: the
	// run's end stops it first.
	runLifetime = 100 * 365 * 24 * time.Hour
)

var serverNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Check validates every server of g and puts its lists in canonical form
// (sorted), saying what to change.
func (g *Grant) Check() error {
	if len(g.Servers) > maxServers {
		return fmt.Errorf("mcp: %d servers, at most %d", len(g.Servers), maxServers)
	}
	seen := map[string]bool{}
	for i := range g.Servers {
		s := &g.Servers[i]
		if !serverNameRE.MatchString(s.Name) {
			return fmt.Errorf("mcp: servers[%d]: name %q must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit", i, s.Name)
		}
		if seen[s.Name] {
			return fmt.Errorf("mcp server %q: declared twice", s.Name)
		}
		seen[s.Name] = true
		if err := s.check(); err != nil {
			return fmt.Errorf("mcp server %q: %w", s.Name, err)
		}
	}
	return nil
}

func (s *Server) check() error {
	switch {
	case s.Stdio == nil && s.URL == "":
		return fmt.Errorf("say how to reach it: stdio: {exec: ...} or url: https://...")
	case s.Stdio != nil && s.URL != "":
		return fmt.Errorf("stdio and url are both set; a server is one or the other")
	case s.Stdio != nil:
		if err := s.Stdio.check(); err != nil {
			return fmt.Errorf("stdio: %w", err)
		}
		if s.Credential != "" {
			return fmt.Errorf("credential: a stdio server gets no credential (give it what it needs in stdio.env)")
		}
	default:
		if _, err := parseServerURL(s.URL); err != nil {
			return fmt.Errorf("url: %w", err)
		}
		if s.Credential != "" && !serverNameRE.MatchString(s.Credential) {
			return fmt.Errorf("credential: %q must be 1-64 letters, digits, '.', '_' or '-'", s.Credential)
		}
	}
	var err error
	if s.Tools, err = checkNames("tools", s.Tools); err != nil {
		return err
	}
	if s.Idempotent, err = checkNames("idempotent", s.Idempotent); err != nil {
		return err
	}
	if s.Prompts, err = checkNames("prompts", s.Prompts); err != nil {
		return err
	}
	if s.Resources, err = checkNames("resources", s.Resources); err != nil {
		return err
	}
	if len(s.Tools)+len(s.Resources)+len(s.Prompts) == 0 {
		return fmt.Errorf("it grants nothing: list the tools (tools: [...]), resource prefixes or prompts the agent may use")
	}
	for _, t := range s.Idempotent {
		if !slices.Contains(s.Tools, t) {
			return fmt.Errorf("idempotent: %q is not among the tools", t)
		}
	}
	if len(s.Pin) > 0 {
		for _, t := range s.Tools {
			if _, ok := s.Pin[t]; !ok {
				return fmt.Errorf("pin: tool %q is not pinned; a pin covers every tool (agentrt mcp pin prints them all)", t)
			}
		}
		for t, h := range s.Pin {
			if !slices.Contains(s.Tools, t) {
				return fmt.Errorf("pin: %q is not among the tools", t)
			}
			if b, err := hex.DecodeString(h); err != nil || len(h) != pinHexChars || strings.ToLower(h) != h || len(b) != sha256.Size {
				return fmt.Errorf("pin.%s: %q is not a SHA-256 in lower-case hex (64 characters, as agentrt mcp pin prints it)", t, h)
			}
		}
	}
	return nil
}

// checkNames checks a list of names and returns it sorted.
func checkNames(field string, names []string) ([]string, error) {
	if len(names) > maxNames {
		return nil, fmt.Errorf("%s: %d entries, at most %d", field, len(names), maxNames)
	}
	out := slices.Clone(names)
	slices.Sort(out)
	for i, n := range out {
		if n == "" || len(n) > maxNameLen || strings.ContainsRune(n, 0) || !utf8.ValidString(n) {
			return nil, fmt.Errorf("%s: %q must be 1-%d bytes of UTF-8 without NUL", field, n, maxNameLen)
		}
		if i > 0 && out[i-1] == n {
			return nil, fmt.Errorf("%s: %q is listed twice", field, n)
		}
	}
	return out, nil
}

func (st *Stdio) check() error {
	if err := caps.CheckGrantPath("exec", st.Exec); err != nil {
		return err
	}
	for i, a := range st.Args {
		if strings.ContainsRune(a, 0) || !utf8.ValidString(a) {
			return fmt.Errorf("args[%d]: must be UTF-8 without NUL", i)
		}
	}
	for i, p := range st.Read {
		if err := caps.CheckGrantPath(fmt.Sprintf("read[%d]", i), p); err != nil {
			return err
		}
	}
	for i, p := range st.Write {
		if err := caps.CheckGrantPath(fmt.Sprintf("write[%d]", i), p); err != nil {
			return err
		}
		if caps.IsWholeHost(p) {
			return fmt.Errorf("write[%d]: %q would make the whole host writable; list only the directories the server writes", i, p)
		}
	}
	if st.Network != "" && st.Network != "none" {
		return fmt.Errorf("network: %q is not supported; write network: none (a stdio server reaches the world through its pipes, and a network allowlist needs a filtering proxy the sandbox does not have)", st.Network)
	}
	if err := caps.CheckEnv(st.Env); err != nil {
		return err
	}
	_, err := st.Limits.parse()
	return err
}

// parseServerURL checks an http server's URL.
func parseServerURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%q is not an absolute http(s) URL", raw)
	}
	if u.User != nil {
		return nil, fmt.Errorf("%q holds credentials; give them to the cell and name them with credential:", raw)
	}
	if u.Fragment != "" {
		return nil, fmt.Errorf("%q has a fragment", raw)
	}
	return u, nil
}

// limits are Limits parsed.
type limits struct {
	cpu, wall time.Duration
	memory    int64
	procs     int
}

func (l *Limits) parse() (*limits, error) {
	out := &limits{wall: runLifetime, procs: l.Procs}
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
	switch {
	case out.memory > 0 && out.memory < caps.MinSandboxMemory:
		return nil, fmt.Errorf("limits.memory: %s is too little for any program to start; give at least 16MiB", l.Memory)
	case l.Procs < 0 || l.Procs > 0 && l.Procs < caps.MinSandboxProcs:
		return nil, fmt.Errorf("limits.procs: %d is too few for the sandbox's helper to start; give at least %d, or 0 for no limit", l.Procs, caps.MinSandboxProcs)
	}
	return out, nil
}

// lookup returns the server named name, or nil.
func (g *Grant) lookup(name string) *Server {
	for i := range g.Servers {
		if g.Servers[i].Name == name {
			return &g.Servers[i]
		}
	}
	return nil
}

// names lists the declared servers, for messages.
func (g *Grant) names() string {
	if len(g.Servers) == 0 {
		return "none; a grant file declares them"
	}
	n := make([]string, len(g.Servers))
	for i, s := range g.Servers {
		n[i] = s.Name
	}
	return strings.Join(n, ", ")
}

// allowsResource reports whether uri starts with one of s's prefixes.
func (s *Server) allowsResource(uri string) bool {
	return slices.ContainsFunc(s.Resources, func(p string) bool { return strings.HasPrefix(uri, p) })
}

// Digest returns the digest a token binds s by: the SHA-256 of the
// canonical CBOR of its (checked) declaration.
func Digest(s *Server) (capability.Digest, error) {
	b, err := abi.Marshal(s)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	return sum[:], nil
}

// Token sets the mcp capability of a token: each server's name, bound to
// the digest of its declaration.
func (g *Grant) Token(c *capability.Caps) error {
	servers := make(map[string]capability.Digest, len(g.Servers))
	for i := range g.Servers {
		d, err := Digest(&g.Servers[i])
		if err != nil {
			return fmt.Errorf("mcp server %q: %w", g.Servers[i].Name, err)
		}
		servers[g.Servers[i].Name] = d
	}
	c.MCP = &capability.MCP{Servers: servers}
	return nil
}

// DeclarationError names the server a grant file declares otherwise than
// its token binds it.
type DeclarationError struct {
	Server       string
	Token, Grant capability.Digest
}

func (e *DeclarationError) Error() string {
	return fmt.Sprintf("the grant file declares mcp server %q otherwise than the token binds it: the token binds declaration %s, the grant file's is %s (stdio, url, credential, tools, idempotent, resources, prompts and pin all count)",
		e.Server, e.Token, e.Grant)
}

// CheckToken requires every server of g that the token names to be
// declared exactly as the token binds it.
func (g *Grant) CheckToken(c capability.Caps) error {
	if c.MCP == nil {
		return nil
	}
	for i := range g.Servers {
		s := &g.Servers[i]
		bound, ok := c.MCPDigest(s.Name)
		if !ok {
			continue // Within names it
		}
		d, err := Digest(s)
		if err != nil {
			return err
		}
		if string(d) != string(bound) {
			return &DeclarationError{Server: s.Name, Token: bound, Grant: d}
		}
	}
	return nil
}
