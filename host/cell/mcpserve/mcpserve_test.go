package mcpserve_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/approval"
	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/host/cell/mcpserve"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/crypto/ssh"
)

// waiterGrant grants what the waiter agent imports; it parks on
// approval.request until the release group's quorum votes.
const waiterGrant = "capabilities:\n  run: {}\n  kv: {namespace: waiter}\n  http: {hosts: [\"127.0.0.1\"]}\n  timer: {}\n  approval: {groups: [release]}\n"

type approver struct {
	name   string
	signer ssh.Signer
}

func newApprover(t *testing.T, name string) approver {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return approver{name, s}
}

// env is a cell with the release group of two approvers (quorum 2), the
// waiter module in its library, and a go-sdk client connected to the
// cell's MCP server under a token for the waiter's grant.
type env struct {
	t          *testing.T
	cell       *cell.Cell
	srv        *mcpserve.Server
	client     *sdk.ClientSession
	module     string
	token      []byte
	alice, bob approver
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{t: t, alice: newApprover(t, "alice"), bob: newApprover(t, "bob")}
	if err := os.MkdirAll(filepath.Join(dir, cell.ApproversDir), 0o700); err != nil {
		t.Fatal(err)
	}
	var members strings.Builder
	for _, a := range []approver{e.alice, e.bob} {
		members.WriteString(strings.TrimSpace(string(ssh.MarshalAuthorizedKey(a.signer.PublicKey()))) + " " + a.name + "\n")
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, cell.ApproversDir, "release"), members.String())
	write(filepath.Join(dir, "approvals.yaml"), "groups:\n  release: {quorum: 2, expires: 1h}\n")
	ctx := context.Background()
	c, err := cell.Open(ctx, dir, cell.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e.cell = c
	code := testutil.BuildC(t, "host/testdata/agents/waiter")
	sum := sha256.Sum256(code)
	if err := c.Journal.PutModule(ctx, sum[:], code); err != nil {
		t.Fatal(err)
	}
	e.module = hex.EncodeToString(sum[:])

	g, err := host.ParseGrant([]byte(waiterGrant))
	if err != nil {
		t.Fatal(err)
	}
	caps, err := g.TokenCaps()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, err := capability.Issue(c.Key, capability.Claims{Audience: c.Public(), Caps: caps, NotBefore: now.Add(-time.Minute), Expires: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	e.token = tok
	e.srv, e.client = serve(t, c, tok)
	t.Cleanup(func() {
		e.client.Close()
		e.srv.Close()
		c.Close(context.Background())
	})
	return e
}

// serve connects a go-sdk client to the cell's MCP server for tok.
func serve(t *testing.T, c *cell.Cell, tok []byte) (*mcpserve.Server, *sdk.ClientSession) {
	t.Helper()
	srv, err := mcpserve.New(c, mcpserve.Options{Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	ct, st := sdk.NewInMemoryTransports()
	ctx := context.Background()
	if _, err := srv.MCP("test").Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test-client", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	return srv, cs
}

// answers are every tool answer the tests got, which checkNoSecrets
// searches.
var answers []*sdk.CallToolResult

// checkNoSecrets fails the test if an answer holds the cell's private
// key, or the client's token, in hex or base64.
func (e *env) checkNoSecrets() {
	e.t.Helper()
	all, err := json.Marshal(answers)
	if err != nil {
		e.t.Fatal(err)
	}
	if len(answers) == 0 {
		e.t.Fatal("no answers to search")
	}
	for name, secret := range map[string][]byte{"the cell's key": e.cell.Key.Seed(), "the client's token": e.token} {
		for _, form := range []string{hex.EncodeToString(secret), base64.StdEncoding.EncodeToString(secret), base64.RawURLEncoding.EncodeToString(secret)} {
			if strings.Contains(string(all), form[:32]) {
				e.t.Errorf("an answer holds %s", name)
			}
		}
	}
}

// call calls a tool and decodes its structured answer into out; it
// returns the tool's error text, or "".
func call(t *testing.T, cs *sdk.ClientSession, tool string, args, out any) string {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	answers = append(answers, res)
	if res.IsError {
		return res.Content[0].(*sdk.TextContent).Text
	}
	if out != nil {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: %s: %v", tool, b, err)
		}
	}
	return ""
}

// waitStatus waits until list_runs shows run with status, for a minute.
func (e *env) waitStatus(run, status string) mcpserve.RunOut {
	e.t.Helper()
	var last mcpserve.RunsOut
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if msg := call(e.t, e.client, "list_runs", map[string]any{}, &last); msg != "" {
			e.t.Fatal(msg)
		}
		for _, r := range last.Runs {
			if r.Run == run && r.Status == status {
				return r
			}
		}
	}
	e.t.Fatalf("run %s never reached %s: %+v", run, status, last)
	return mcpserve.RunOut{}
}

// TestServeStartListApproveVerify drives the cell through its MCP tools:
// start a run that parks on an approval; list it and its approval; relay
// two approvers' signed votes (a vote signed by no approver of the cell
// is refused); the run goes on and completes; its summary and its
// verification (a replay) agree.
func TestServeStartListApproveVerify(t *testing.T) {
	e := newEnv(t)
	input, _ := json.Marshal(map[string]any{"action": "deploy v2", "group": "release"})
	var started mcpserve.RunOut
	if msg := call(t, e.client, "start_run", map[string]any{"module_sha256": e.module, "input": string(input), "grant": waiterGrant}, &started); msg != "" {
		t.Fatalf("start_run: %s", msg)
	}
	parked := e.waitStatus(started.Run, string(journal.StatusParked))
	if parked.Waiting == 0 {
		t.Fatalf("the run parked for no approval: %+v", parked)
	}

	var pending mcpserve.ApprovalsOut
	if msg := call(t, e.client, "list_approvals", map[string]any{}, &pending); msg != "" || len(pending.Approvals) != 1 {
		t.Fatalf("list_approvals: %q %+v", msg, pending)
	}
	a := pending.Approvals[0]
	if a.Run != started.Run || a.Step != parked.Waiting || a.Action != "deploy v2" || a.Group != "release" || a.State != "pending" {
		t.Fatalf("the approval: %+v", a)
	}
	vote := func(who approver) string {
		sig, err := approval.Sign(who.signer, []byte(a.Approve))
		if err != nil {
			t.Fatal(err)
		}
		var out mcpserve.VoteOut
		msg := call(t, e.client, "answer_approval", map[string]any{"run_id": a.Run, "step": a.Step, "statement": a.Approve, "signature": string(sig)}, &out)
		if msg != "" {
			return msg
		}
		return out.State
	}
	// The client cannot cast a vote of its own: a key that is no
	// approver's is refused, and nothing is counted.
	if got := vote(newApprover(t, "mcp-client")); !strings.Contains(got, "the vote was not counted") {
		t.Fatalf("a vote signed by no approver: %q", got)
	}
	if got := vote(e.alice); got != "pending" {
		t.Fatalf("alice's vote: %q", got)
	}
	if got := vote(e.bob); got != "approved" {
		t.Fatalf("bob's vote: %q", got)
	}
	done := e.waitStatus(started.Run, string(journal.StatusCompleted))
	var out struct {
		Approved  bool
		Approvers []string
	}
	if err := json.Unmarshal([]byte(done.Output), &out); err != nil || !out.Approved || strings.Join(out.Approvers, ",") != "alice,bob" {
		t.Fatalf("the agent's output %q: %v", done.Output, err)
	}

	var sum mcpserve.SummaryOut
	if msg := call(t, e.client, "run_summary", map[string]any{"run_id": started.Run}, &sum); msg != "" {
		t.Fatal(msg)
	}
	ops := map[string]int{}
	for _, o := range sum.Ops {
		ops[o.Op] = o.Calls
	}
	if sum.Status != "completed" || sum.Unsigned != 0 || sum.Seals == 0 || ops["approval.request"] != 1 {
		t.Fatalf("run_summary: %+v", sum)
	}
	var ver mcpserve.VerifyOut
	if msg := call(t, e.client, "verify_run", map[string]any{"run_id": started.Run}, &ver); msg != "" {
		t.Fatalf("verify_run: %s", msg)
	}
	if !ver.Verified || ver.Output != done.Output || ver.Entries != sum.Entries {
		t.Fatalf("verify_run: %+v; the run's output %q, %d entries", ver, done.Output, sum.Entries)
	}
	e.checkNoSecrets()
}

// TestServeTokenRefuses: the client's token is the ceiling. A run whose
// grant asks for more is refused before it starts; runs another client
// started are not this client's to list, summarize, verify or vote on;
// a token of another cell, or sealed, serves nothing.
func TestServeTokenRefuses(t *testing.T) {
	e := newEnv(t)
	wider := strings.Replace(waiterGrant, `hosts: ["127.0.0.1"]`, `hosts: ["127.0.0.1", "example.com"]`, 1)
	var out mcpserve.RunOut
	msg := call(t, e.client, "start_run", map[string]any{"module_sha256": e.module, "input": "{}", "grant": wider}, &out)
	if !strings.Contains(msg, "the run was refused") || !strings.Contains(msg, "example.com") {
		t.Fatalf("a grant wider than the token: %q %+v", msg, out)
	}
	var runs mcpserve.RunsOut
	if call(t, e.client, "list_runs", map[string]any{}, &runs); len(runs.Runs) != 0 {
		t.Fatalf("a refused start left runs: %+v", runs)
	}

	// A run started outside this client (the cell's operator, another
	// client) is not this client's.
	code, err := e.cell.Journal.Module(context.Background(), mustHex(t, e.module))
	if err != nil {
		t.Fatal(err)
	}
	g, _ := host.ParseGrant([]byte(waiterGrant))
	res, err := e.cell.Host.Run(context.Background(), host.RunSpec{Code: code, Input: []byte(`{"counter": true}`), Grant: g})
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"run_summary", "verify_run"} {
		if msg := call(t, e.client, tool, map[string]any{"run_id": res.Run.String()}, nil); !strings.Contains(msg, "was not started by this client") {
			t.Errorf("%s of another's run: %q", tool, msg)
		}
	}
	if msg := call(t, e.client, "answer_approval", map[string]any{"run_id": res.Run.String(), "step": 1, "statement": "x", "signature": "y"}, nil); !strings.Contains(msg, "was not started by this client") {
		t.Errorf("a vote on another's run: %q", msg)
	}
	if call(t, e.client, "list_runs", map[string]any{}, &runs); len(runs.Runs) != 0 {
		t.Fatalf("list_runs shows another's run: %+v", runs)
	}

	// Tokens the cell refuses to serve.
	other, otherKey, _ := ed25519.GenerateKey(rand.Reader)
	now := time.Now()
	foreign, err := capability.Issue(otherKey, capability.Claims{Audience: other, Caps: capability.Caps{Run: &capability.Unit{}}, NotBefore: now.Add(-time.Minute), Expires: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mcpserve.New(e.cell, mcpserve.Options{Token: foreign}); err == nil {
		t.Error("a token of another cell was served")
	}
	own, err := capability.Issue(e.cell.Key, capability.Claims{Audience: e.cell.Public(), Caps: capability.Caps{Run: &capability.Unit{}}, NotBefore: now.Add(-time.Minute), Expires: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := capability.Seal(own, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mcpserve.New(e.cell, mcpserve.Options{Token: sealed}); err == nil || !strings.Contains(err.Error(), "sealed") {
		t.Errorf("a sealed token: %v", err)
	}
}

func mustHex(t *testing.T, s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type headerRT struct {
	headers map[string]string
}

func (h headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestServeHTTP: over streamable HTTP, a go-sdk client with the client's
// bearer reaches the tools; without it, with another's, or from a page
// (an Origin header) it is refused before the MCP handler; a listen
// address that is not loopback is refused.
func TestServeHTTP(t *testing.T) {
	e := newEnv(t)
	ts := httptest.NewServer(e.srv.Handler("test"))
	defer ts.Close()
	tok := e.token
	connect := func(headers map[string]string) (*sdk.ClientSession, error) {
		tr := &sdk.StreamableClientTransport{Endpoint: ts.URL + "/mcp", HTTPClient: &http.Client{Transport: headerRT{headers}}}
		return sdk.NewClient(&sdk.Implementation{Name: "http-client", Version: "1"}, nil).Connect(context.Background(), tr, nil)
	}
	bearer := "Bearer " + mcpserve.Bearer(tok)
	for name, h := range map[string]map[string]string{
		"no bearer":      {},
		"another bearer": {"Authorization": "Bearer " + mcpserve.Bearer([]byte("another token"))},
		"a page":         {"Authorization": bearer, "Origin": "https://evil.example"},
	} {
		if cs, err := connect(h); err == nil {
			cs.Close()
			t.Errorf("%s: connected", name)
		}
	}
	cs, err := connect(map[string]string{"Authorization": bearer})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var runs mcpserve.RunsOut
	if msg := call(t, cs, "list_runs", map[string]any{}, &runs); msg != "" || runs.Runs == nil {
		t.Fatalf("list_runs over HTTP: %q %+v", msg, runs)
	}
	// The raw refusals' statuses.
	for _, tc := range []struct {
		headers map[string]string
		want    int
	}{
		{map[string]string{}, http.StatusUnauthorized},
		{map[string]string{"Authorization": bearer, "Origin": "https://evil.example"}, http.StatusForbidden},
		{map[string]string{"Authorization": bearer, "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
	} {
		req, _ := http.NewRequest("POST", ts.URL+"/mcp", strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range tc.headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%v: %d, want %d", tc.headers, resp.StatusCode, tc.want)
		}
	}
	for _, addr := range []string{"0.0.0.0:8765", "192.168.1.2:80", "localhost:80", "[::]:80"} {
		if err := mcpserve.CheckListen(addr); err == nil {
			t.Errorf("listen address %s accepted", addr)
		}
	}
	if err := mcpserve.CheckListen("127.0.0.1:0"); err != nil {
		t.Error(err)
	}
}
