// Package mcp is the mcp capability (agentrt:mcp): the tools, resources
// and prompts of the Model Context Protocol servers the grant declares,
// with the host as the MCP client.
//
//	mcp.list_tools    (abi.MCPListToolsRequest) -> abi.MCPListToolsResponse        pure
//	mcp.call_tool     (abi.MCPCallToolRequest) -> abi.MCPCallToolResponse          effect; idempotent
//	                                                                               when the grant lists
//	                                                                               the tool as such
//	mcp.read_resource (abi.MCPReadResourceRequest) -> abi.MCPReadResourceResponse  pure
//	mcp.get_prompt    (abi.MCPGetPromptRequest) -> abi.MCPGetPromptResponse        pure
//
// Every op's result is journaled, so replay and audit never reach a
// server. The gate's check stage, before anything is journaled, finds the
// server in the grant and the tool, resource prefix or prompt among those
// it allows. mcp.list_tools shows the allowed tools only, each with the
// server's annotations (shown, never trusted) and what the grant says of
// it (idempotent). A server's tool definitions are read again before every
// mcp.list_tools and mcp.call_tool; when the grant pins them (Server.Pin)
// and one no longer matches, the call is refused naming the tools that
// changed, and nothing is sent to the tool.
//
// A stdio server is launched under the host's OS sandbox (native-sandbox)
// on the run's first call to it, lives as long as the run (Instance.Close
// kills it, and with it every process it started; the sandbox dies with
// the host process too), and its stderr goes to the run's event log. An
// http server is reached at its URL's host and port only; the headers of
// its credential come from the cell (Deps.Credentials), never from the
// guest, and never reach the journal.
//
// Errors: StatusBadRequest for a malformed request (arguments that are not
// a JSON object among them); StatusDenied for a server the grant does not
// declare, a tool, resource or prompt it does not allow, or definitions
// that no longer match the pin; StatusFailed when the server cannot be
// launched or reached, or answers with a protocol error. A tool that
// reports an error (isError) is a successful call with IsError set.
//
// The grant section is mcp: {servers: [...]} (Grant, grant.go), which a
// token binds by the digest of each server's declaration (Digest); the
// policy sees the resource MCPServer::NAME and the context attribute tool,
// uri or prompt. It needs the cell's sandbox options and credentials
// (Deps).
package mcp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host/caps"
	sandbox "github.com/agentrt/agentrt/native-sandbox"
	"github.com/fxamacker/cbor/v2"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Deps are what the mcp capability needs from its host.
type Deps struct {
	// Sandbox are options for every stdio server's launch
	// (sandbox.WithBwrap, sandbox.WithHelper).
	Sandbox []sandbox.Option
	// User is the host user stdio servers run as when the host runs as
	// root; the zero value means sandbox.DefaultUser.
	User sandbox.User
	// Credentials are the cell's credentials for http servers, by the name
	// a grant's server gives (credential:).
	Credentials map[string]Credential
	// DataDir is the cell's data directory (its keys, API token, store),
	// which no stdio server may see: a server whose exec, read or write
	// path lies in it, or holds it, symbolic links resolved, is not
	// launched. Empty: none (the cell sets it).
	DataDir string
	// CacheDir is the cell's compilation cache when it lies outside
	// DataDir (--cache): its files become the code the cell executes, so
	// no stdio server may see it either. Empty: none.
	CacheDir string
}

// Credential is what the cell adds to every request to an http server
// that names it.
type Credential struct {
	// Headers are set on every request (e.g. Authorization).
	Headers map[string]string `yaml:"headers" json:"headers"`
	// Sources are headers whose values are read when a run connects
	// (LoadCredentials makes them from the cell's CredentialsFile).
	Sources map[string]HeaderSource `yaml:"-" json:"-"`
}

// IdempotencyMeta is the _meta key under which a tools/call carries the
// call's idempotency key, derived from (run, step), so that a server can
// drop a call it has already served.
const IdempotencyMeta = "io.agentrt/idempotency-key"

// Capability is the mcp capability, as the host registers it.
type Capability struct{}

// Cap names the capability.
func (Capability) Cap() abi.Capability { return abi.CapMCP }

// FromToken grants the mcp capability without servers when the token's
// claims name servers: the capability links, and every call is denied
// until a grant file given with the token declares them.
func (Capability) FromToken(c capability.Caps) (*Grant, error) {
	if c.MCP == nil {
		return nil, nil
	}
	return &Grant{}, nil
}

// Open returns the run's view of its servers; none is connected before
// the run's first call to it.
func (Capability) Open(g *Grant, d Deps, r *caps.Run) (caps.Instance, error) {
	return &instance{grant: g, deps: d, run: r, conns: map[string]*conn{}}, nil
}

type instance struct {
	grant *Grant
	deps  Deps
	run   *caps.Run

	mu     sync.Mutex
	conns  map[string]*conn
	closed bool
}

func (in *instance) Handler(op abi.Op) caps.Handler {
	switch op.Code {
	case abi.OpMCPListTools:
		return caps.Handler{Check: in.checkList, Serve: in.serveList}
	case abi.OpMCPCallTool:
		return caps.Handler{Check: in.checkCall, Serve: in.serveCall}
	case abi.OpMCPReadResource:
		return caps.Handler{Check: in.checkRead, Serve: in.serveRead}
	case abi.OpMCPGetPrompt:
		return caps.Handler{Check: in.checkPrompt, Serve: in.servePrompt}
	}
	return caps.Handler{}
}

// Facts gives the policy the server and the tool, resource URI or prompt
// the call names.
func (in *instance) Facts(c *caps.Call) (caps.Facts, error) {
	var r struct {
		Server string `cbor:"server"`
		Tool   string `cbor:"tool"`
		URI    string `cbor:"uri"`
		Name   string `cbor:"name"`
	}
	if err := cbor.Unmarshal(c.Request, &r); err != nil {
		return caps.Facts{}, err
	}
	f := caps.Facts{ResourceType: "MCPServer", ResourceID: r.Server}
	switch c.Op.Code {
	case abi.OpMCPCallTool:
		f.Attrs = []caps.Fact{{Name: "tool", Str: r.Tool, Kind: caps.FactString}}
	case abi.OpMCPReadResource:
		f.Attrs = []caps.Fact{{Name: "uri", Str: r.URI, Kind: caps.FactString}}
	case abi.OpMCPGetPrompt:
		f.Attrs = []caps.Fact{{Name: "prompt", Str: r.Name, Kind: caps.FactString}}
	}
	return f, nil
}

// Idempotent reports whether the grant lists the tool c calls as
// idempotent; the server's annotations never count.
func (in *instance) Idempotent(c *caps.Call) bool {
	var r abi.MCPCallToolRequest
	if c.Op.Code != abi.OpMCPCallTool || abi.Unmarshal(c.Request, &r) != nil {
		return false
	}
	s := in.grant.lookup(r.Server)
	return s != nil && slices.Contains(s.Idempotent, r.Tool)
}

// Close ends the run's sessions and kills its stdio servers.
func (in *instance) Close() {
	in.mu.Lock()
	conns := in.conns
	in.conns, in.closed = map[string]*conn{}, true
	in.mu.Unlock()
	for _, c := range conns {
		c.stop()
	}
}

// server returns the server the request names, or the denial.
func (in *instance) server(op, name string) (*Server, *caps.Denial) {
	if name == "" {
		return nil, caps.Deny(abi.StatusBadRequest, "%s: no server name", op)
	}
	s := in.grant.lookup(name)
	if s == nil {
		return nil, caps.Deny(abi.StatusDenied, "%s: no mcp server %q in the grant (granted: %s)", op, name, in.grant.names())
	}
	return s, nil
}

func (in *instance) checkList(c *caps.Call) *caps.Denial {
	var r abi.MCPListToolsRequest
	if d := caps.DecodeCheck(c, &r); d != nil {
		return d
	}
	_, d := in.server("mcp.list_tools", r.Server)
	return d
}

func (in *instance) checkCall(c *caps.Call) *caps.Denial {
	var r abi.MCPCallToolRequest
	if d := caps.DecodeCheck(c, &r); d != nil {
		return d
	}
	s, d := in.server("mcp.call_tool", r.Server)
	if d != nil {
		return d
	}
	if !slices.Contains(s.Tools, r.Tool) {
		return caps.Deny(abi.StatusDenied, "mcp.call_tool: tool %q of mcp server %s is not in the grant (granted: %s)", r.Tool, s.Name, orNone(s.Tools))
	}
	if r.Arguments != "" {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(r.Arguments), &obj); err != nil || obj == nil {
			return caps.Deny(abi.StatusBadRequest, "mcp.call_tool: arguments must be a JSON object, as text (e.g. {\"title\": \"x\"}): %v", errOrNull(err))
		}
	}
	return nil
}

func errOrNull(err error) error {
	if err == nil {
		return errors.New("null")
	}
	return err
}

func (in *instance) checkRead(c *caps.Call) *caps.Denial {
	var r abi.MCPReadResourceRequest
	if d := caps.DecodeCheck(c, &r); d != nil {
		return d
	}
	s, d := in.server("mcp.read_resource", r.Server)
	if d != nil {
		return d
	}
	if !s.allowsResource(r.URI) {
		return caps.Deny(abi.StatusDenied, "mcp.read_resource: resource %q of mcp server %s is not under a granted prefix (granted: %s)", r.URI, s.Name, orNone(s.Resources))
	}
	return nil
}

func (in *instance) checkPrompt(c *caps.Call) *caps.Denial {
	var r abi.MCPGetPromptRequest
	if d := caps.DecodeCheck(c, &r); d != nil {
		return d
	}
	s, d := in.server("mcp.get_prompt", r.Server)
	if d != nil {
		return d
	}
	if !slices.Contains(s.Prompts, r.Name) {
		return caps.Deny(abi.StatusDenied, "mcp.get_prompt: prompt %q of mcp server %s is not in the grant (granted: %s)", r.Name, s.Name, orNone(s.Prompts))
	}
	return nil
}

func orNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}

func (in *instance) serveList(ctx context.Context, c *caps.Call) (abi.Status, []byte) {
	var r abi.MCPListToolsRequest
	_ = abi.Unmarshal(c.Request, &r) // checked by the gate
	s, cn, st, body := in.open(ctx, c.Op.Name, r.Server)
	if cn == nil {
		return st, body
	}
	defs, err := definitions(ctx, cn.session)
	if err != nil {
		return in.failed(c.Op.Name, s, cn, err)
	}
	if msg := s.pinMismatch(defs); msg != "" {
		return caps.Error(abi.StatusDenied, "%s: %s", c.Op.Name, msg)
	}
	out := &abi.MCPListToolsResponse{Tools: []abi.MCPTool{}}
	for _, d := range defs {
		if !slices.Contains(s.Tools, d.tool.Name) {
			continue
		}
		t := abi.MCPTool{Name: d.tool.Name, Title: d.tool.Title, Description: d.tool.Description,
			InputSchema: jsonText(d.tool.InputSchema), Idempotent: slices.Contains(s.Idempotent, d.tool.Name), Hash: d.hash}
		if d.tool.OutputSchema != nil {
			t.OutputSchema = jsonText(d.tool.OutputSchema)
		}
		if d.tool.Annotations != nil {
			t.Annotations = jsonText(d.tool.Annotations)
		}
		out.Tools = append(out.Tools, t)
	}
	return caps.OK(out)
}

func (in *instance) serveCall(ctx context.Context, c *caps.Call) (abi.Status, []byte) {
	var r abi.MCPCallToolRequest
	_ = abi.Unmarshal(c.Request, &r) // checked by the gate
	s, cn, st, body := in.open(ctx, c.Op.Name, r.Server)
	if cn == nil {
		return st, body
	}
	// The definitions are read again before every call: a tool changed
	// since the last call is caught before anything is sent to it.
	defs, err := definitions(ctx, cn.session)
	if err != nil {
		return in.failed(c.Op.Name, s, cn, err)
	}
	if msg := s.pinMismatch(defs); msg != "" {
		return caps.Error(abi.StatusDenied, "%s: %s", c.Op.Name, msg)
	}
	if !slices.ContainsFunc(defs, func(d definition) bool { return d.tool.Name == r.Tool }) {
		return caps.Error(abi.StatusFailed, "%s: mcp server %s offers no tool %q (it offers: %s)", c.Op.Name, s.Name, r.Tool, defNames(defs))
	}
	p := &sdk.CallToolParams{Name: r.Tool, Meta: sdk.Meta{IdempotencyMeta: c.Key}}
	if r.Arguments != "" {
		p.Arguments = json.RawMessage(r.Arguments)
	}
	res, err := cn.session.CallTool(ctx, p)
	if err != nil {
		return in.failed(c.Op.Name, s, cn, err)
	}
	out := &abi.MCPCallToolResponse{IsError: res.IsError, Content: "[]"}
	if len(res.Content) > 0 {
		out.Content = jsonText(res.Content)
	}
	out.Text = textOf(res.Content)
	if res.StructuredContent != nil {
		out.Structured = jsonText(res.StructuredContent)
	}
	return caps.OK(out)
}

func (in *instance) serveRead(ctx context.Context, c *caps.Call) (abi.Status, []byte) {
	var r abi.MCPReadResourceRequest
	_ = abi.Unmarshal(c.Request, &r) // checked by the gate
	s, cn, st, body := in.open(ctx, c.Op.Name, r.Server)
	if cn == nil {
		return st, body
	}
	res, err := cn.session.ReadResource(ctx, &sdk.ReadResourceParams{URI: r.URI})
	if err != nil {
		return in.failed(c.Op.Name, s, cn, err)
	}
	out := &abi.MCPReadResourceResponse{Contents: []abi.MCPResourceContents{}}
	for _, rc := range res.Contents {
		if rc == nil {
			continue
		}
		out.Contents = append(out.Contents, abi.MCPResourceContents{URI: rc.URI, MIMEType: rc.MIMEType, Text: rc.Text, Blob: rc.Blob})
	}
	return caps.OK(out)
}

func (in *instance) servePrompt(ctx context.Context, c *caps.Call) (abi.Status, []byte) {
	var r abi.MCPGetPromptRequest
	_ = abi.Unmarshal(c.Request, &r) // checked by the gate
	s, cn, st, body := in.open(ctx, c.Op.Name, r.Server)
	if cn == nil {
		return st, body
	}
	p := &sdk.GetPromptParams{Name: r.Name}
	if len(r.Arguments) > 0 {
		p.Arguments = map[string]string{}
		for _, a := range r.Arguments {
			p.Arguments[a.Name] = a.Value
		}
	}
	res, err := cn.session.GetPrompt(ctx, p)
	if err != nil {
		return in.failed(c.Op.Name, s, cn, err)
	}
	out := &abi.MCPGetPromptResponse{Description: res.Description, Messages: []abi.MCPPromptMessage{}}
	for _, m := range res.Messages {
		if m == nil {
			continue
		}
		pm := abi.MCPPromptMessage{Role: string(m.Role), Content: "null"}
		if m.Content != nil {
			pm.Content = jsonText(m.Content)
			if t, ok := m.Content.(*sdk.TextContent); ok {
				pm.Text = t.Text
			}
		}
		out.Messages = append(out.Messages, pm)
	}
	return caps.OK(out)
}

// open returns the named server and its session, connecting on first use;
// on failure, conn is nil and the status and body are the call's outcome.
func (in *instance) open(ctx context.Context, op, name string) (*Server, *conn, abi.Status, []byte) {
	s := in.grant.lookup(name)
	if s == nil {
		// Only a journal whose grant changed under it gets here.
		st, b := caps.Error(abi.StatusFailed, "%s: no mcp server %q in the grant", op, name)
		return nil, nil, st, b
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		st, b := caps.Error(abi.StatusFailed, "%s: the run is ending", op)
		return s, nil, st, b
	}
	if cn := in.conns[name]; cn != nil {
		if !cn.ended() {
			return s, cn, 0, nil
		}
		// A stdio server that ended (its wall limit, a crash) is not
		// launched again within the run: say why it ended.
		st, b := caps.Error(abi.StatusFailed, "%s: mcp server %s ended: %s", op, s.Name, cn.why())
		return s, nil, st, b
	}
	cn, err := in.connect(ctx, s)
	if err != nil {
		st, b := caps.Error(abi.StatusFailed, "%s: mcp server %s: %v", op, s.Name, err)
		return s, nil, st, b
	}
	in.conns[name] = cn
	return s, cn, 0, nil
}

// failed is the outcome of a call that the server's session refused or
// lost.
func (in *instance) failed(op string, s *Server, cn *conn, err error) (abi.Status, []byte) {
	if cn.ended() {
		return caps.Error(abi.StatusFailed, "%s: mcp server %s ended: %s", op, s.Name, cn.why())
	}
	return caps.Error(abi.StatusFailed, "%s: mcp server %s: %v", op, s.Name, err)
}

// conn is the run's session with one server.
type conn struct {
	session *sdk.ClientSession
	// cancel ends a stdio server's launch; exited is closed when the
	// launch has returned, with res and err its outcome. Both are nil for
	// an http server.
	cancel context.CancelFunc
	exited chan struct{}
	res    *sandbox.Result
	err    error
	// memory is the stdio server's limits.memory, 0 for none.
	memory int64
}

// ended reports whether a stdio server's process is gone.
func (c *conn) ended() bool {
	if c.exited == nil {
		return false
	}
	select {
	case <-c.exited:
		return true
	default:
		return false
	}
}

// why says how a stdio server ended.
func (c *conn) why() string {
	switch {
	case c.err != nil:
		msg := c.err.Error()
		var re *sandbox.RefusedError
		if errors.As(c.err, &re) && re.Hint != "" {
			msg += " (hint: " + re.Hint + ")"
		}
		return msg
	case c.res == nil:
		return "no outcome"
	case c.res.TimedOut:
		return "its wall limit (stdio.limits.wall) passed and it was killed"
	case len(c.res.Exceeded) > 0:
		return fmt.Sprintf("exit status %d, over its limits: %v", c.res.ExitCode, c.res.Exceeded)
	case c.memory > 0 && reservationFailed(c.res.Stderr):
		return fmt.Sprintf("exit status %d: it could not reserve address space (hint: limits.memory, %d MiB, also caps each process's address space, RLIMIT_AS, and a Go program reserves far more than it uses at start-up; give a Go server at least 1GiB, which the memory cgroup still holds its real use to)",
			c.res.ExitCode, c.memory>>20)
	}
	return fmt.Sprintf("exit status %d", c.res.ExitCode)
}

// reservationFailed reports whether a server's stderr says its runtime
// could not reserve address space: the Go runtime's messages, and the
// C library's.
func reservationFailed(stderr []byte) bool {
	for _, m := range []string{"failed to reserve", "cannot reserve arena", "out of memory allocating heap arena", "mmap failed", "Cannot allocate memory"} {
		if bytes.Contains(stderr, []byte(m)) {
			return true
		}
	}
	return false
}

// stop closes the session and kills a stdio server with every process it
// started, waiting until they are gone.
func (c *conn) stop() {
	_ = c.session.Close()
	if c.cancel != nil {
		c.cancel()
		<-c.exited
	}
}

// client is the MCP client of every session.
func newClient() *sdk.Client {
	return sdk.NewClient(&sdk.Implementation{Name: "agentrt", Version: fmt.Sprintf("abi-%d", abi.Version)}, nil)
}

// connectTimeout bounds a session's initialization.
const connectTimeout = 30 * time.Second

func (in *instance) connect(ctx context.Context, s *Server) (*conn, error) {
	if s.Stdio != nil {
		return in.launch(ctx, s)
	}
	t, err := httpTransport(s, in.deps.Credentials)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	session, err := newClient().Connect(cctx, t, nil)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", s.URL, err)
	}
	return &conn{session: session}, nil
}

// stdioOutput is how much of a stdio server's stdout and stderr the
// sandbox keeps for its own messages; everything is streamed.
const stdioOutput = 64 << 10

// launch starts a stdio server under the sandbox and initializes its
// session. The server lives until stop (the run's end) or its wall limit.
func (in *instance) launch(ctx context.Context, s *Server) (*conn, error) {
	st := s.Stdio
	lim, err := st.Limits.parse()
	if err != nil {
		return nil, err
	}
	if msg := reachesData(st, caps.CellDirs{Data: in.deps.DataDir, Cache: in.deps.CacheDir}); msg != "" {
		return nil, errors.New(msg)
	}
	if deadline := in.run.Deadline(); !deadline.IsZero() {
		left := deadline.Sub(in.run.Now())
		if left <= 0 {
			return nil, fmt.Errorf("the run's wall-time budget (its token's wall_seconds) has run out; nothing was launched")
		}
		lim.wall = min(lim.wall, left)
		if lim.cpu == 0 || lim.cpu > left {
			lim.cpu = left
		}
	}
	spec := &sandbox.Spec{
		ReadWrite: st.Write,
		Env:       st.Env,
		Limits: sandbox.Limits{CPU: lim.cpu, Wall: lim.wall, Memory: lim.memory, Processes: lim.procs,
			Output: stdioOutput},
	}
	if !caps.WithinAny(st.Exec, st.Read) {
		spec.ReadOnly = append(spec.ReadOnly, st.Exec)
	}
	for _, p := range st.Read {
		if _, err := os.Lstat(p); err == nil {
			spec.ReadOnly = append(spec.ReadOnly, p)
		}
	}
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		return nil, err
	}
	opts := slices.Clone(in.deps.Sandbox)
	if in.deps.User != (sandbox.User{}) {
		opts = append(opts, sandbox.WithUser(in.deps.User))
	}
	opts = append(opts, sandbox.WithStdin(stdinR), sandbox.WithOutput(stdoutW, &lineWriter{w: in.run.Stderr, prefix: "mcp server " + s.Name + ": "}))
	// The server outlives the call that launched it: its context is the
	// run's, ended by stop.
	lctx, cancel := context.WithCancel(context.Background())
	c := &conn{cancel: cancel, exited: make(chan struct{}), memory: lim.memory}
	argv := append([]string{st.Exec}, st.Args...)
	go func() {
		c.res, c.err = sandbox.Launch(lctx, spec, argv, opts...)
		if errors.Is(c.err, context.Canceled) {
			c.err = nil
		}
		stdoutW.Close()
		stdinR.Close()
		close(c.exited)
	}()
	cctx, ccancel := context.WithTimeout(ctx, connectTimeout)
	defer ccancel()
	c.session, err = newClient().Connect(cctx, &sdk.IOTransport{Reader: stdoutR, Writer: stdinW}, nil)
	if err != nil {
		cancel()
		<-c.exited
		stdoutR.Close()
		stdinW.Close()
		if c.err != nil || c.res != nil && !c.res.Canceled {
			return nil, fmt.Errorf("the server ended before its session began: %s", c.why())
		}
		return nil, fmt.Errorf("initializing its session: %w", err)
	}
	return c, nil
}

// reachesData returns why a stdio server's paths reach one of the cell's
// own directories (caps.CellDirs), symbolic links resolved, or "".
func reachesData(st *Stdio, cell caps.CellDirs) string {
	reaching := cell.Reaching()
	for _, p := range append(append([]string{st.Exec}, st.Read...), st.Write...) {
		if d, ok := reaching(caps.RealPath(p)); ok {
			return fmt.Sprintf("path %q reaches %s: no mcp server may see it; nothing was launched", p, d)
		}
	}
	return ""
}

// lineWriter passes what a server writes to its stderr to the run's
// event log, each line prefixed with the server's name.
type lineWriter struct {
	w      io.Writer
	prefix string
	// bol says the next byte starts a line.
	mid bool
}

func (l *lineWriter) Write(p []byte) (int, error) {
	if l.w == nil {
		return len(p), nil
	}
	var b bytes.Buffer
	for _, line := range bytes.SplitAfter(p, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		if !l.mid {
			b.WriteString(l.prefix)
		}
		b.Write(line)
		l.mid = line[len(line)-1] != '\n'
	}
	_, err := l.w.Write(b.Bytes())
	return len(p), err
}

// httpTransport is the streamable-HTTP transport to s's URL: it dials the
// URL's host and port and nothing else, follows no redirect, ignores the
// environment's proxies and adds the credential's headers.
func httpTransport(s *Server, creds map[string]Credential) (*sdk.StreamableClientTransport, error) {
	u, err := parseServerURL(s.URL)
	if err != nil {
		return nil, err
	}
	var headers map[string]string
	if s.Credential != "" {
		cr, ok := creds[s.Credential]
		if !ok {
			return nil, fmt.Errorf("the cell has no credential %q (its mcp credentials); ask the cell's operator to add it", s.Credential)
		}
		if headers, err = cr.headers(s.Credential); err != nil {
			return nil, err
		}
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	want := net.JoinHostPort(u.Hostname(), port)
	d := &net.Dialer{Timeout: connectTimeout}
	tr := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr != want {
				return nil, fmt.Errorf("mcp: %s is not the server's address %s", addr, want)
			}
			return d.DialContext(ctx, network, addr)
		},
		ForceAttemptHTTP2:   true,
		TLSHandshakeTimeout: connectTimeout,
	}
	client := &http.Client{
		Transport:     &headerTransport{base: tr, headers: headers},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return &sdk.StreamableClientTransport{Endpoint: u.String(), HTTPClient: client}, nil
}

// headerTransport sets a credential's headers on every request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (t *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 {
		r = r.Clone(r.Context())
		for k, v := range t.headers {
			r.Header.Set(k, v)
		}
	}
	return t.base.RoundTrip(r)
}

// definition is one tool's definition as the server gave it, and its
// hash.
type definition struct {
	tool *sdk.Tool
	hash []byte
}

// definitions reads every tool definition of the server, in its order.
func definitions(ctx context.Context, s *sdk.ClientSession) ([]definition, error) {
	var out []definition
	for t, err := range s.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("listing its tools: %w", err)
		}
		h, err := DefinitionHash(t)
		if err != nil {
			return nil, fmt.Errorf("tool %q: %w", t.Name, err)
		}
		out = append(out, definition{t, h})
	}
	return out, nil
}

func defNames(defs []definition) string {
	n := make([]string, len(defs))
	for i, d := range defs {
		n[i] = d.tool.Name
	}
	return orNone(n)
}

// DefinitionHash returns the SHA-256 of a tool's definition: its JSON as
// the protocol sends it (name, title, description, input and output
// schemas, annotations, icons; not _meta), re-encoded with object keys
// sorted, numbers as sent and no insignificant white space. A grant's pin
// holds it in hex.
func DefinitionHash(t *sdk.Tool) ([]byte, error) {
	b, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v map[string]any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	delete(v, "_meta")
	canon, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(canon)
	return sum[:], nil
}

// pinMismatch returns why the server's definitions no longer match the
// grant's pin, naming every pinned tool that changed or is gone, or "".
func (s *Server) pinMismatch(defs []definition) string {
	if len(s.Pin) == 0 {
		return ""
	}
	var changed, gone []string
	for _, name := range s.Tools {
		i := slices.IndexFunc(defs, func(d definition) bool { return d.tool.Name == name })
		switch {
		case i < 0:
			gone = append(gone, name)
		case hex.EncodeToString(defs[i].hash) != s.Pin[name]:
			changed = append(changed, name)
		}
	}
	if len(changed)+len(gone) == 0 {
		return ""
	}
	var parts []string
	if len(changed) > 0 {
		parts = append(parts, "changed: "+strings.Join(changed, ", "))
	}
	if len(gone) > 0 {
		parts = append(parts, "gone: "+strings.Join(gone, ", "))
	}
	return fmt.Sprintf("mcp server %s: its tool definitions no longer match the grant's pin (%s); calls to it are refused until the pin is updated (agentrt mcp pin prints the current hashes)", s.Name, strings.Join(parts, "; "))
}

// jsonText encodes v as JSON text; a value that does not encode (none
// that the protocol decoded) gives "null".
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "null"
	}
	return string(b)
}

// textOf joins the text blocks of a result's content, one per line.
func textOf(content []sdk.Content) string {
	var parts []string
	for _, c := range content {
		if t, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}
