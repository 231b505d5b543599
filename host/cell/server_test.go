package cell_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/cellkey"
)

// newServer opens a cell in a fresh directory and serves its API on a
// loopback TCP listener, which takes the cell's API token.
func newServer(t *testing.T, opts cell.ServerOptions) (*cell.Cell, *cell.Client) {
	t.Helper()
	return newServerIn(t, t.TempDir(), opts)
}

// newServerIn is newServer on the data directory dir, whose cell asks
// opts.Approvals, when set, about the calls its permission modes park.
func newServerIn(t *testing.T, dir string, opts cell.ServerOptions) (*cell.Cell, *cell.Client) {
	t.Helper()
	a := serveAPI(t, dir, opts)
	return a.cell, a.tcp
}

// api is a cell serving its API on both kinds of listener, as the daemon
// does, with a client for each.
type api struct {
	cell      *cell.Cell
	srv       *cell.Server
	token     string
	addr      string // the TCP listener's host:port
	socket    string // the unix socket's path
	tcp, unix *cell.Client
}

func serveAPI(t testing.TB, dir string, opts cell.ServerOptions) *api {
	t.Helper()
	return serveAPIWith(t, dir, opts, cached(cell.Options{}))
}

// serveAPIWith is serveAPI on a cell opened with copts.
func serveAPIWith(t testing.TB, dir string, opts cell.ServerOptions, copts cell.Options) *api {
	t.Helper()
	ctx := context.Background()
	if opts.Approvals != nil {
		copts.Approver = opts.Approvals
	}
	c, err := cell.Open(ctx, dir, copts)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := cell.LoadOrCreateAPIToken(dir)
	if err != nil {
		t.Fatal(err)
	}
	opts.Logf, opts.APIToken = t.Logf, tok
	srv := cell.NewServer(c, opts)
	c.AddSink(srv.Sink)
	a := &api{cell: c, srv: srv, token: tok, socket: cell.SocketPath(dir)}
	tl, err := cell.ListenLoopback("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ul, err := cell.ListenSocket(a.socket)
	if err != nil {
		t.Fatal(err)
	}
	var servers []*http.Server
	for _, ln := range []net.Listener{tl, ul} {
		hs, err := srv.Endpoint(ln)
		if err != nil {
			t.Fatal(err)
		}
		go hs.Serve(ln)
		servers = append(servers, hs)
	}
	t.Cleanup(func() {
		for _, hs := range servers {
			hs.Close()
		}
		srv.Shutdown(ctx)
		c.Close(ctx)
	})
	a.addr = tl.Addr().String()
	if a.tcp, err = cell.DialWith("http://"+a.addr, cell.DialOptions{Token: tok}); err != nil {
		t.Fatal(err)
	}
	if a.unix, err = cell.Dial("unix:" + a.socket); err != nil {
		t.Fatal(err)
	}
	return a
}

// raw sends one request to the TCP listener as given, with the API token
// unless header names an Authorization of its own ("" for none), and
// returns the status, the header and the body.
func (a *api) raw(t *testing.T, method, path string, header map[string]string, body []byte) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+a.addr+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		switch {
		case k == "Host":
			req.Host = v
		case v == "":
			req.Header.Del(k)
		default:
			req.Header.Set(k, v)
		}
	}
	return do(t, http.DefaultTransport, req)
}

// do sends req without following redirects: a redirect is an answer too.
func do(t *testing.T, rt http.RoundTripper, req *http.Request) (int, http.Header, string) {
	t.Helper()
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return resp.StatusCode, resp.Header, b.String()
}

// runCount returns how many runs the cell's store holds.
func runCount(t *testing.T, c *cell.Cell) int {
	t.Helper()
	runs, err := c.Store.Runs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return len(runs)
}

// jsonError decodes an API error body, failing unless it is one.
func jsonError(t *testing.T, body string) cell.APIError {
	t.Helper()
	var e cell.APIError
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error == "" {
		t.Fatalf("not a JSON error: %q (%v)", body, err)
	}
	return e
}

const smokeGrant = "capabilities:\n  run: {}\n  kv: {namespace: smoke}\n"

// TestSubmitFollowStreamsTheRunToItsEnd submits the smoke agent with
// ?follow=1: the stream opens with the run id, carries the guest's output
// and ends with the completed run; the run is then listed and its stored
// events read back.
func TestSubmitFollowStreamsTheRunToItsEnd(t *testing.T) {
	ctx := context.Background()
	_, cl := newServer(t, cell.ServerOptions{})
	code := testutil.BuildGo(t, "host/testdata/agents/smoke")
	st, err := cl.SubmitFollow(ctx, cell.Submission{Module: code, Name: "smoke.wasm", Input: []byte("hello"), Grant: smokeGrant})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var run string
	var out strings.Builder
	var end *cell.RunInfo
	for end == nil {
		l, err := st.Next()
		if err != nil {
			t.Fatalf("stream ended without the run's end: %v (so far %q)", err, out.String())
		}
		switch {
		case l.RunID != "":
			run = l.RunID
		case l.End != nil:
			end = l.End
		default:
			out.WriteString(l.Data)
		}
	}
	if run == "" || end.RunID != run || end.Status != journal.StatusCompleted || end.Live {
		t.Fatalf("stream of %q ended with %+v", run, end)
	}
	if !strings.Contains(out.String(), "to stdout") || !strings.Contains(string(end.Output), "input=hello") {
		t.Fatalf("the stream carried %q and output %s, want the guest's stdout and output", out.String(), end.Output)
	}
	runs, err := cl.Runs(ctx)
	if err != nil || len(runs) != 1 || runs[0].RunID != run {
		t.Fatalf("runs: %+v %v", runs, err)
	}
	ev, err := cl.Events(ctx, run[:8], false)
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	var stored strings.Builder
	for {
		l, err := ev.Next()
		if errors.Is(err, cell.ErrStreamEnd) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		stored.WriteString(l.Data)
	}
	if stored.String() != out.String() {
		t.Fatalf("stored events %q differ from the streamed %q", stored.String(), out.String())
	}
	if _, err := cl.Cancel(ctx, run); err == nil || !strings.Contains(err.Error(), "has finished") {
		t.Fatalf("cancel of a finished run: %v", err)
	}
}

// TestBadSubmissionsGetClearErrors: each bad request gets its status, an
// error that names the problem, and a hint where one is known; nothing is
// stored.
func TestBadSubmissionsGetClearErrors(t *testing.T) {
	ctx := context.Background()
	c, cl := newServer(t, cell.ServerOptions{})
	code := testutil.BuildGo(t, "host/testdata/agents/smoke")
	for _, tc := range []struct {
		name string
		sub  cell.Submission
		code int
		want string
	}{
		{"not wasm", cell.Submission{Module: []byte("#!/bin/sh\necho hi\n")}, http.StatusUnprocessableEntity, "not a WebAssembly module"},
		{"missing capability", cell.Submission{Module: code}, http.StatusUnprocessableEntity, "imports capabilities its grant lacks: kv"},
		{"bad grant", cell.Submission{Module: code, Grant: "capabilities: {kv: {}}"}, http.StatusBadRequest, "grant: kv: a non-empty UTF-8 namespace"},
		{"bad seed", cell.Submission{Module: code, Grant: smokeGrant, Seed: "abc"}, http.StatusBadRequest, `seed "abc" is not 32 bytes of hex`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cl.Submit(ctx, tc.sub)
			var re *cell.RemoteError
			if !errors.As(err, &re) || re.Code != tc.code || !strings.Contains(re.Error(), tc.want) {
				t.Fatalf("got %v, want %d %q", err, tc.code, tc.want)
			}
		})
	}
	// Only the module its grant refused is journaled (a start and a failed
	// end); malformed submissions store nothing.
	if runs, err := c.Store.Runs(ctx); err != nil || len(runs) != 1 || runs[0].Status != journal.StatusFailed {
		t.Fatalf("refused submissions stored runs %+v (%v), want the one refused by its grant", runs, err)
	}
}

// TestControlOnlyServesNoSubmissions: a foreground run's control socket
// reads and cancels, and refuses to start runs with a hint.
func TestControlOnlyServesNoSubmissions(t *testing.T) {
	_, cl := newServer(t, cell.ServerOptions{ControlOnly: true})
	_, err := cl.Submit(context.Background(), cell.Submission{Module: []byte{0, 'a', 's', 'm'}})
	var re *cell.RemoteError
	if !errors.As(err, &re) || re.Code != http.StatusNotFound || !strings.Contains(re.Hint(), "agentrt cell serve") {
		t.Fatalf("submission to a control socket: %v", err)
	}
}

// TestRawRequests sends what a client library would not: unknown fields,
// broken JSON, a body over the limit, a module over the limit, an unknown
// run, paths ServeMux would clean or redirect, other methods, bodies where
// none belongs. Each gets its status and a JSON error; none a redirect.
func TestRawRequests(t *testing.T) {
	a := serveAPI(t, t.TempDir(), cell.ServerOptions{})
	bigModule, _ := json.Marshal(cell.Submission{Module: make([]byte, cell.MaxModule+1)})
	for _, tc := range []struct {
		method, path string
		header       map[string]string
		body         []byte
		code         int
		want         string
	}{
		{"POST", "/v1/runs", nil, []byte(`{"module": "AGFzbQ==", "moduel": 1}`), 400, `unknown field \"moduel\"`},
		{"POST", "/v1/runs", nil, []byte(`{"module": `), 400, "submission: unexpected EOF"},
		{"POST", "/v1/runs", nil, bytes.Repeat([]byte(" "), cell.MaxSubmission+1), 413, "submission: over 64 MiB"},
		{"POST", "/v1/runs", nil, bigModule, 413, "module over the cell's limit of 32 MiB (this one is 33554433 bytes)"},
		{"GET", "/v1/runs/ffffffffffffffffffffffffffffffff", nil, nil, 404, "not found"},
		{"GET", "/v1/runs/xyz", nil, nil, 400, "run id"},
		{"POST", "/v1/runs/last/cancel", nil, nil, 404, "no runs yet"},
		{"GET", "/v2/whatever", nil, nil, 404, "no endpoint GET /v2/whatever"},
		{"GET", "/v1/runs/../cell", nil, nil, 400, `path \"/v1/runs/../cell\" is not in canonical form`},
		{"GET", "/v1/runs/%2e%2e/cell", nil, nil, 404, "no endpoint GET /v1/runs/../cell"},
		{"GET", "//v1/runs", nil, nil, 400, "not in canonical form"},
		{"GET", "/v1/./runs", nil, nil, 400, "not in canonical form"},
		{"POST", "/v1/runs/../runs", nil, []byte(`{}`), 400, "not in canonical form"},
		{"DELETE", "/v1/runs/last", nil, nil, 405, "method DELETE is not served"},
		{"PUT", "/v1/runs", nil, []byte(`{}`), 405, "method PUT is not served"},
		{"POST", "/v1/runs/last/cancel", nil, []byte(`{"x":1}`), 400, "takes no body"},
		{"POST", "/v1/runs/last/resume", nil, []byte(`{}`), 400, "takes no body"},
		{"POST", "/v1/runs", map[string]string{"Content-Type": ""}, []byte(`{}`), 415, `a POST body must be application/json, not \"\"`},
		{"POST", "/v1/runs", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, []byte(`module=AGFzbQ`), 415, "must be application/json"},
		{"POST", "/v1/runs", map[string]string{"Content-Type": "application/json; charset=utf-8"}, []byte(`{"module": `), 400, "unexpected EOF"},
	} {
		code, hdr, body := a.raw(t, tc.method, tc.path, tc.header, tc.body)
		if code != tc.code || !strings.Contains(body, tc.want) || hdr.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: %d %s %s, want %d with %q", tc.method, tc.path, code, hdr.Get("Content-Type"), body, tc.code, tc.want)
			continue
		}
		jsonError(t, body)
	}
	if n := runCount(t, a.cell); n != 0 {
		t.Errorf("refused requests stored %d runs", n)
	}
}

// TestListenRefusesWhatIsNotLocal: the API is never offered beyond
// loopback, and Endpoint refuses a TCP listener without a token; a socket
// path too long is refused by name.
func TestListenRefusesWhatIsNotLocal(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", "10.1.2.3:7070", "[::]:0", "example.com:80", "7070"} {
		if ln, err := cell.ListenLoopback(addr); err == nil {
			ln.Close()
			t.Errorf("listen on %s was allowed", addr)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "localhost:0"} {
		ln, err := cell.ListenLoopback(addr)
		if err != nil {
			t.Errorf("listen on %s: %v", addr, err)
			continue
		}
		ln.Close()
	}
	ln, err := cell.ListenLoopback("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := cell.Open(context.Background(), t.TempDir(), cell.Options{NoCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if _, err := cell.NewServer(c, cell.ServerOptions{}).Endpoint(ln); !errors.Is(err, cell.ErrNoAPIToken) {
		t.Errorf("a TCP endpoint without a token: %v, want ErrNoAPIToken", err)
	}
	long := filepath.Join(t.TempDir(), strings.Repeat("d", 120), cell.SocketName)
	if _, err := cell.ListenSocket(long); !errors.Is(err, cell.ErrSocketPath) {
		t.Errorf("a %d-byte socket path: %v, want ErrSocketPath", len(long), err)
	}
}

// TestApprovalsThroughTheAPI: with a permission mode that asks before
// kv.put of key k0, a run on the daemon parks at that call, the stream says
// so, the API lists it and the run's info shows it. An answer that names
// its own approver ("by") is refused and answers nothing; a plain one lets
// the call through, and the journal records who approved it as the
// request's credential names it: the API token on TCP, the peer's user on
// the unix socket. A denial fails the smoke agent, which needs the write.
func TestApprovalsThroughTheAPI(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, cell.ModesFile), []byte("rules:\n  - {name: ask-k0, op: kv.put, resource: smoke, effect: ask}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := serveAPI(t, dir, cell.ServerOptions{Approvals: cell.NewApprovals()})
	sum := sha256.Sum256([]byte(a.token))
	tokenWho := "token:api#" + hex.EncodeToString(sum[:4])
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	unixWho := fmt.Sprintf("unix:%s(uid %d)", me.Username, os.Geteuid())
	code := testutil.BuildGo(t, "host/testdata/agents/smoke")
	for _, tc := range []struct {
		approve bool
		via     *cell.Client
		who     string
	}{{true, a.tcp, tokenWho}, {false, a.tcp, tokenWho}, {true, a.unix, unixWho}} {
		st, err := a.tcp.SubmitFollow(ctx, cell.Submission{Module: code, Name: "smoke.wasm", Input: []byte("x"), Grant: smokeGrant})
		if err != nil {
			t.Fatal(err)
		}
		var run string
		var end *cell.RunInfo
		for end == nil {
			l, err := st.Next()
			if err != nil {
				t.Fatalf("stream: %v", err)
			}
			switch {
			case l.RunID != "":
				run = l.RunID
			case l.Kind == cell.EventApproval:
				ri, err := a.tcp.Run(ctx, run)
				if err != nil || len(ri.Waiting) != 1 || ri.Waiting[0].Op != "kv.put" || ri.Waiting[0].Rule != "ask-k0" {
					t.Fatalf("the parked run's info: %+v %v", ri.Waiting, err)
				}
				if list, err := a.unix.Approvals(ctx); err != nil || len(list) != 1 {
					t.Fatalf("approvals: %+v %v", list, err)
				}
				// A forged approver: refused, and the call still waits.
				code, _, body := a.raw(t, "POST", "/v1/runs/"+run+"/approve", nil, []byte(`{"approve": true, "by": "alice"}`))
				if code != http.StatusBadRequest || !strings.Contains(jsonError(t, body).Hint, `leave "by" out`) {
					t.Fatalf("an answer naming its approver: %d %s, want 400 with a hint", code, body)
				}
				if list, err := a.tcp.Approvals(ctx); err != nil || len(list) != 1 {
					t.Fatalf("after the refused answer, approvals: %+v %v, want the call still waiting", list, err)
				}
				ai, err := tc.via.Approve(ctx, run, cell.Answer{Approve: tc.approve})
				if err != nil || ai.Approver != tc.who {
					t.Fatalf("approve: %+v %v, want the approver %q", ai, err, tc.who)
				}
			case l.End != nil:
				end = l.End
			}
		}
		st.Close()
		want := journal.StatusCompleted
		if !tc.approve {
			want = journal.StatusFailed
		}
		if end.Status != want {
			t.Fatalf("approve=%v: the run ended %s (%s), want %s", tc.approve, end.Status, end.Error, want)
		}
		id, _ := journal.ParseRunID(run)
		var rec *host.GateRecord
		journal.ReadEntries(ctx, a.cell.Store, id, func(e *journal.Entry, _ *journal.Record) error {
			var g host.GateRecord
			if rec == nil && e.Op == "kv.put" && len(e.Gate) > 0 && abi.Unmarshal(e.Gate, &g) == nil && g.Mode == "ask" {
				rec = &g
			}
			return nil
		})
		if rec == nil || rec.Approved != tc.approve || rec.Approver != tc.who {
			t.Fatalf("approve=%v: gate record %+v, want approver %q", tc.approve, rec, tc.who)
		}
	}
	if _, err := a.tcp.Approve(ctx, "last", cell.Answer{Approve: true}); err == nil || !strings.Contains(err.Error(), "no call of the run is waiting") {
		t.Fatalf("answering nothing: %v", err)
	}
}

// TestTCPListenerNeedsTheToken: a request on the TCP listener without the
// API token, with a wrong one, or with another scheme is 401 with a hint
// that names the token file, and a submission made so creates no run; the
// token itself (any case of "Bearer") gets through.
func TestTCPListenerNeedsTheToken(t *testing.T) {
	a := serveAPI(t, t.TempDir(), cell.ServerOptions{})
	code := testutil.BuildGo(t, "host/testdata/agents/smoke")
	sub, _ := json.Marshal(cell.Submission{Module: code, Grant: smokeGrant})
	wrong := strings.Repeat("0", 64)
	for _, auth := range []string{"", "Bearer " + wrong, "Bearer " + a.token[:63], "Basic " + a.token, a.token, "Bearer  "} {
		for _, req := range []struct {
			method, path string
			body         []byte
		}{{"GET", "/v1/cell", nil}, {"GET", "/v1/runs", nil}, {"POST", "/v1/runs", sub}, {"POST", "/v1/runs/last/approve", []byte(`{"approve":true}`)}, {"GET", "/v1/store/blobs/" + wrong, nil}} {
			code, hdr, body := a.raw(t, req.method, req.path, map[string]string{"Authorization": auth}, req.body)
			e := jsonError(t, body)
			if code != http.StatusUnauthorized || !strings.Contains(e.Hint, cell.APITokenFile) || !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s %s with Authorization %q: %d %s, want 401 naming %s", req.method, req.path, auth, code, body, cell.APITokenFile)
			}
			if strings.Contains(body, a.token) {
				t.Errorf("the 401 answer carries the token: %s", body)
			}
		}
	}
	if n := runCount(t, a.cell); n != 0 {
		t.Fatalf("unauthenticated submissions created %d runs", n)
	}
	for _, auth := range []string{"Bearer " + a.token, "bearer " + a.token} {
		if code, _, body := a.raw(t, "GET", "/v1/cell", map[string]string{"Authorization": auth}, nil); code != http.StatusOK {
			t.Errorf("Authorization %q: %d %s, want 200", auth, code, body)
		}
	}
	// The client finds the token in the data directory, or in
	// $AGENTRT_API_TOKEN, which comes first.
	cl, err := cell.DialWith("http://"+a.addr, cell.DialOptions{DataDir: a.cell.Dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Cell(context.Background()); err != nil {
		t.Fatalf("a client with the data directory's token: %v", err)
	}
	t.Setenv(cell.EnvAPIToken, wrong)
	cl, err = cell.DialWith("http://"+a.addr, cell.DialOptions{DataDir: a.cell.Dir})
	if err != nil {
		t.Fatal(err)
	}
	var re *cell.RemoteError
	if _, err := cl.Cell(context.Background()); !errors.As(err, &re) || re.Code != http.StatusUnauthorized {
		t.Fatalf("a client with a wrong $%s: %v, want 401", cell.EnvAPIToken, err)
	}
	t.Setenv(cell.EnvAPIToken, "")
	if _, err := cell.DialWith("http://"+a.addr, cell.DialOptions{DataDir: t.TempDir()}); !errors.Is(err, cell.ErrNoAPIToken) || !strings.Contains(err.Error(), cell.APITokenFile) {
		t.Fatalf("a client with no token to find: %v, want ErrNoAPIToken naming the file", err)
	}
}

// TestBrowserAndRebindingRequestsAreRefused: what a web page can send to a
// loopback port (a cross-origin text/plain POST, a fetch with Origin and
// Sec-Fetch-Site, a name rebound to 127.0.0.1 sent as Host) is refused on
// every listener, even with the token (which a page cannot have), and
// creates nothing.
func TestBrowserAndRebindingRequestsAreRefused(t *testing.T) {
	a := serveAPI(t, t.TempDir(), cell.ServerOptions{})
	code := testutil.BuildGo(t, "host/testdata/agents/smoke")
	sub, _ := json.Marshal(cell.Submission{Module: code, Grant: smokeGrant})
	_, port, _ := net.SplitHostPort(a.addr)
	uc := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", a.socket)
	}}
	for _, tc := range []struct {
		name   string
		header map[string]string
		code   int
		want   string
	}{
		// A <form enctype=text/plain> or fetch(no-cors) from a page.
		{"cross-origin text/plain", map[string]string{"Origin": "http://evil.example", "Content-Type": "text/plain", "Authorization": ""}, 403, "Origin header"},
		{"cross-origin text/plain, with the token", map[string]string{"Origin": "http://evil.example", "Content-Type": "text/plain"}, 403, "Origin header"},
		{"Origin null", map[string]string{"Origin": "null"}, 403, "Origin header"},
		{"Sec-Fetch-Site cross-site", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403, `Sec-Fetch-Site \"cross-site\"`},
		{"Sec-Fetch-Site same-origin", map[string]string{"Sec-Fetch-Site": "same-origin"}, 403, "Sec-Fetch-Site"},
		{"text/plain without Origin", map[string]string{"Content-Type": "text/plain"}, 415, "must be application/json"},
		// DNS rebinding: the page's own name, now resolving to 127.0.0.1.
		{"rebound host", map[string]string{"Host": "evil.example:" + port}, 403, `host \"evil.example:` + port + `\" is not this listener's`},
		{"rebound host without a port", map[string]string{"Host": "evil.example"}, 403, "is not this listener's"},
		{"another loopback port", map[string]string{"Host": "127.0.0.1:1"}, 403, "is not this listener's"},
	} {
		code, _, body := a.raw(t, "POST", "/v1/runs", tc.header, sub)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s, want %d with %q", tc.name, code, body, tc.code, tc.want)
		}
		// The same on the unix socket (whose Host is "cell").
		req, _ := http.NewRequest("POST", "http://cell/v1/runs", bytes.NewReader(sub))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range tc.header {
			if k != "Host" && k != "Authorization" {
				req.Header.Set(k, v)
			}
		}
		if tc.header["Host"] != "" {
			req.Host = tc.header["Host"]
		}
		if code, _, body := do(t, uc, req); code != tc.code {
			t.Errorf("%s on the unix socket: %d %s, want %d", tc.name, code, body, tc.code)
		}
	}
	if n := runCount(t, a.cell); n != 0 {
		t.Fatalf("refused requests created %d runs", n)
	}
	// What the CLI and curl send gets through: the listener's own names,
	// Sec-Fetch-Site none (a URL typed into the address bar).
	for _, h := range []map[string]string{{"Host": "localhost:" + port}, {"Host": "LOCALHOST:" + port}, {"Sec-Fetch-Site": "none"}} {
		if code, _, body := a.raw(t, "GET", "/v1/cell", h, nil); code != http.StatusOK {
			t.Errorf("%v: %d %s, want 200", h, code, body)
		}
	}
	req, _ := http.NewRequest("GET", "http://localhost/v1/cell", nil)
	if code, _, body := do(t, uc, req); code != http.StatusForbidden || !strings.Contains(body, "http://cell/") {
		t.Errorf("Host localhost on the unix socket: %d %s, want 403 naming http://cell/", code, body)
	}
}

// TestAPITokenFile: the token is created once (0600, 64 hex digits) and
// reused; a file others may read, or one that holds no token, is refused
// by the daemon and by clients, with the fix named.
func TestAPITokenFile(t *testing.T) {
	dir := t.TempDir()
	tok, err := cell.LoadOrCreateAPIToken(dir)
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(cell.APITokenPath(dir))
	if err != nil || info.Mode().Perm() != 0o600 || len(tok) != 64 {
		t.Fatalf("token %q in a file of mode %v (%v), want 64 hex digits, 0600", tok, info.Mode(), err)
	}
	if _, err := hex.DecodeString(tok); err != nil {
		t.Fatalf("token %q: %v", tok, err)
	}
	again, err := cell.LoadOrCreateAPIToken(dir)
	if err != nil || again != tok {
		t.Fatalf("second load: %q %v, want the same token", again, err)
	}
	if other, _ := cell.LoadOrCreateAPIToken(t.TempDir()); other == tok {
		t.Fatal("two cells drew the same token")
	}
	os.Chmod(cell.APITokenPath(dir), 0o644)
	if _, err := cell.LoadOrCreateAPIToken(dir); !errors.Is(err, cell.ErrBadAPIToken) || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a token file others may read: %v, want ErrBadAPIToken with chmod 600", err)
	}
	if _, err := cell.DialWith("http://127.0.0.1:1", cell.DialOptions{DataDir: dir}); !errors.Is(err, cell.ErrBadAPIToken) {
		t.Fatalf("a client given a token file others may read: %v", err)
	}
	os.WriteFile(cell.APITokenPath(dir), []byte("not a token\n"), 0o600)
	os.Chmod(cell.APITokenPath(dir), 0o600)
	if _, err := cell.LoadOrCreateAPIToken(dir); !errors.Is(err, cell.ErrBadAPIToken) || !strings.Contains(err.Error(), "64 hex digits") {
		t.Fatalf("a malformed token file: %v", err)
	}
	if _, err := cell.DialWith("http://127.0.0.1:1", cell.DialOptions{Token: "xyz"}); !errors.Is(err, cell.ErrBadAPIToken) {
		t.Fatalf("a malformed token given: %v", err)
	}
}

// TestSubmittedTokensGet400Or403: a capability token that does not decode
// is the submitter's malformed request (400), one that decodes but that
// verification refuses (another issuer) is forbidden (403); never a 500.
func TestSubmittedTokensGet400Or403(t *testing.T) {
	a := serveAPI(t, t.TempDir(), cell.ServerOptions{})
	code := testutil.BuildGo(t, "host/testdata/agents/smoke")
	_, other, _ := ed25519.GenerateKey(nil)
	now := time.Now()
	foreign, err := capability.Issue(other, capability.Claims{NotBefore: now.Add(-time.Minute), Expires: now.Add(time.Hour),
		Caps: capability.Caps{Run: &capability.Unit{}, KV: &capability.KV{Namespaces: []string{"smoke"}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		token []byte
		code  int
		want  string
	}{
		{"garbage", []byte("garbage"), http.StatusBadRequest, "malformed token"},
		{"empty CBOR array", []byte{0x80}, http.StatusBadRequest, "malformed token"},
		{"truncated", foreign[:len(foreign)-5], http.StatusBadRequest, "malformed token"},
		// Untrusted today; whatever class verification refuses it by, 403.
		{"another issuer", foreign, http.StatusForbidden, "capability token"},
	} {
		_, err := a.tcp.Submit(context.Background(), cell.Submission{Module: code, Token: tc.token})
		var re *cell.RemoteError
		if !errors.As(err, &re) || re.Code != tc.code || !strings.Contains(re.Error(), tc.want) {
			t.Errorf("%s: %v, want %d with %q", tc.name, err, tc.code, tc.want)
		}
	}
}

// TestConcurrentCancelAndResumeAnswer409: a cancel and a resume of the same
// stopped run (drained: running, executing nowhere), sent at once, race
// for its journal; each answers 200/202, or 409 when the other moved the
// run on first, never 500 "append conflict".
func TestConcurrentCancelAndResumeAnswer409(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, cell.ModesFile), []byte("rules:\n  - {name: ask, op: kv.put, effect: ask}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := serveAPI(t, dir, cell.ServerOptions{Approvals: cell.NewApprovals()})
	code := testutil.BuildGo(t, "host/testdata/agents/smoke")
	run, err := a.tcp.Submit(ctx, cell.Submission{Module: code, Input: []byte("x"), Grant: smokeGrant})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := journal.ParseRunID(run)
	waitFor := func(what string, ok func(cell.RunInfo) bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			if ri, err := a.tcp.Run(ctx, run); err == nil && ok(ri) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the run never %s", what)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	parked := func(ri cell.RunInfo) bool { return len(ri.Waiting) == 1 }
	statuses := map[string]int{}
	for i := 0; i < 30; i++ {
		waitFor("parked", parked)
		// Stop it where a killed daemon would leave it: running, live
		// nowhere.
		if err := a.cell.Host.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		waitFor("stopped", func(ri cell.RunInfo) bool { return !ri.Live })
		var wg sync.WaitGroup
		paths := []string{"/cancel", "/resume", "/cancel", "/resume"}
		codes := make([]int, len(paths))
		bodies := make([]string, len(paths))
		for j, path := range paths {
			wg.Add(1)
			go func() {
				defer wg.Done()
				codes[j], _, bodies[j] = a.raw(t, "POST", "/v1/runs/"+run+path, nil, nil)
			}()
		}
		wg.Wait()
		for j, path := range paths {
			statuses[fmt.Sprintf("%s %d", path, codes[j])]++
			want := http.StatusOK
			if path == "/resume" {
				want = http.StatusAccepted
			}
			if codes[j] != want && codes[j] != http.StatusConflict {
				t.Fatalf("round %d: cancel and resume at once answered %v: %q", i, codes, bodies)
			}
			if codes[j] == http.StatusConflict {
				statuses[jsonError(t, bodies[j]).Error]++
			}
		}
		// Whatever won, the run is resumable; put it back to parked.
		if !a.cell.Host.Live(id) {
			if _, err := a.tcp.Resume(ctx, run); err != nil {
				t.Fatalf("round %d: resume after the race: %v", i, err)
			}
		}
	}
	t.Logf("outcomes over 30 rounds: %v", statuses)
}

// TestStatusOfEachLifecycleError: the errors of starting, resuming and
// stopping a run map to the status that says whose fault it is, however
// deeply wrapped; a lost race for the journal is a conflict, not a fault
// of the cell.
func TestStatusOfEachLifecycleError(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int
	}{
		{fmt.Errorf("host: resume r: %w", journal.ErrConflict), http.StatusConflict},
		{fmt.Errorf("host: cancel r: %w", journal.ErrConflict), http.StatusConflict},
		{fmt.Errorf("%w: r", host.ErrActive), http.StatusConflict},
		{fmt.Errorf("%w: r ended completed", host.ErrFinished), http.StatusConflict},
		{fmt.Errorf("host: token: %w", &capability.Error{Class: capability.ErrDecode, Link: -1}), http.StatusBadRequest},
		{fmt.Errorf("host: token: %w", &capability.Error{Class: capability.ErrNonCanonical, Link: 0}), http.StatusBadRequest},
		{fmt.Errorf("host: token: %w", &capability.Error{Class: capability.ErrSignature, Link: 1}), http.StatusForbidden},
		{fmt.Errorf("host: token: %w", &capability.Error{Class: capability.ErrReplay, Link: 0}), http.StatusForbidden},
		{fmt.Errorf("host: token: %w", &capability.Error{Class: capability.ErrVersion, Link: -1}), http.StatusBadRequest},
		{fmt.Errorf("host: %w: steps", host.ErrUnenforcedCeiling), http.StatusForbidden},
		{fmt.Errorf("host: token: %w", &host.ToolDeclarationError{}), http.StatusForbidden},
		{fmt.Errorf("host: token: %w", host.ErrGrantWidensToken), http.StatusForbidden},
		{fmt.Errorf("host: %w", host.ErrNotWasm), http.StatusUnprocessableEntity},
		{fmt.Errorf("x: %w", journal.ErrNotFound), http.StatusNotFound},
		{errors.New("disk on fire"), http.StatusInternalServerError},
	} {
		if got := cell.StartErrorCode(tc.err); got != tc.code {
			t.Errorf("%v: %d, want %d", tc.err, got, tc.code)
		}
	}
}

// secrets returns what must never appear in an answer of the API: the
// cell's private key (its seed and the whole key, in hex and every base64
// alphabet), every base64 line of its OpenSSH file and the file's text,
// and the API token.
func secrets(t *testing.T, c *cell.Cell, token string) map[string]string {
	t.Helper()
	out := map[string]string{"api token": token}
	for name, b := range map[string][]byte{"seed": c.Key.Seed(), "private key": c.Key} {
		// Raw: the answers of frames (records, bundles) are binary.
		out[name+" (raw)"] = string(b)
		out[name+" (hex)"] = hex.EncodeToString(b)
		out[name+" (HEX)"] = strings.ToUpper(hex.EncodeToString(b))
		for enc, e := range map[string]*base64.Encoding{"std": base64.StdEncoding, "raw": base64.RawStdEncoding, "url": base64.URLEncoding, "rawurl": base64.RawURLEncoding} {
			out[name+" (base64 "+enc+")"] = e.EncodeToString(b)
		}
	}
	file, err := os.ReadFile(filepath.Join(c.Dir, cellkey.FileName))
	if err != nil {
		t.Fatal(err)
	}
	out["key file"] = string(file)
	for i, line := range strings.Split(string(file), "\n") {
		if len(line) >= 16 && !strings.HasPrefix(line, "-----") {
			out[fmt.Sprintf("key file line %d", i+1)] = line
		}
	}
	return out
}

// leaks returns the names of the secrets text holds, raw or as a JSON
// string would carry it.
func leaks(text string, secrets map[string]string) []string {
	var found []string
	for name, s := range secrets {
		quoted, _ := json.Marshal(s)
		if strings.Contains(text, s) || strings.Contains(text, strings.Trim(string(quoted), `"`)) {
			found = append(found, name)
		}
	}
	slices.Sort(found)
	return found
}

// TestNoAnswerCarriesKeyMaterial runs the whole API surface, on both
// listeners: every endpoint, every stream (stored and followed, a run
// parked, approved, cancelled, resumed, denied), the reads of the store
// (records, index records, events, modules, lineage rows) and what the
// cell signs for them (a bundle, a checkpoint), and every kind of error
// answer (401, 403, 404, 405, 409, 413, 415, 400, 422), and greps every
// status line, header and body for the cell's private key and the API
// token. The grep is checked to find each secret when one is planted.
func TestNoAnswerCarriesKeyMaterial(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, cell.ModesFile), []byte("rules:\n  - {name: ask, op: kv.put, effect: ask}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := serveAPI(t, dir, cell.ServerOptions{Approvals: cell.NewApprovals()})
	sec := secrets(t, a.cell, a.token)
	for name, s := range sec {
		if got := leaks("x"+s+"x", sec); !slices.Contains(got, name) {
			t.Fatalf("the grep does not find the %s when planted", name)
		}
	}
	uc := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", a.socket)
	}}
	var mu sync.Mutex
	var answers strings.Builder
	n := 0
	record := func(what string, code int, hdr http.Header, body string) {
		mu.Lock()
		defer mu.Unlock()
		n++
		fmt.Fprintf(&answers, "== %s: %d\n", what, code)
		hdr.Write(&answers)
		answers.WriteString(body + "\n")
	}
	// send sends one request on the TCP listener (or the socket) and
	// records the answer.
	send := func(unix bool, method, path string, header map[string]string, body []byte) (int, string) {
		var code int
		var hdr http.Header
		var b string
		if unix {
			req, _ := http.NewRequest(method, "http://cell"+path, bytes.NewReader(body))
			if body != nil {
				req.Header.Set("Content-Type", "application/json")
			}
			for k, v := range header {
				req.Header.Set(k, v)
			}
			code, hdr, b = do(t, uc, req)
		} else {
			code, hdr, b = a.raw(t, method, path, header, body)
		}
		record(fmt.Sprintf("unix=%v %s %s", unix, method, path), code, hdr, b)
		return code, b
	}
	code := testutil.BuildGo(t, "host/testdata/agents/smoke")
	sub, _ := json.Marshal(cell.Submission{Module: code, Name: "smoke.wasm", Input: []byte("x"), Grant: smokeGrant})
	waitParked := func(run string) {
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			if ri, err := a.tcp.Run(ctx, run); err == nil && len(ri.Waiting) == 1 {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Fatalf("run %s never parked", run)
	}
	// answer answers each call of run that parks until the run ends.
	answer := func(unix bool, run string, approve bool) {
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			_, body := send(unix, "GET", "/v1/runs/"+run, nil, nil)
			var ri cell.RunInfo
			json.Unmarshal([]byte(body), &ri)
			if ri.Status.Finished() {
				return
			}
			if len(ri.Waiting) > 0 {
				send(unix, "POST", "/v1/runs/"+run+"/approve", nil, []byte(fmt.Sprintf(`{"approve": %v}`, approve)))
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Fatalf("run %s did not end", run)
	}
	// The tasks' token carries its key: neither may show in an answer.
	g, err := host.ParseGrant([]byte(smokeGrant))
	if err != nil {
		t.Fatal(err)
	}
	caps, err := g.TokenCaps()
	if err != nil {
		t.Fatal(err)
	}
	tok, err := capability.Issue(a.cell.Key, capability.Claims{Audience: a.cell.Public(), Caps: caps,
		NotBefore: time.Now().Add(-time.Minute), Expires: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	ptok, err := capability.Parse(tok)
	if err != nil || len(ptok.Proof.Seed) == 0 {
		t.Fatalf("the token carries no key: %v", err)
	}
	for name, b := range map[string][]byte{"task token": tok, "task token key": ptok.Proof.Seed} {
		sec[name+" (hex)"] = hex.EncodeToString(b)
		sec[name+" (base64)"] = base64.StdEncoding.EncodeToString(b)
	}
	tsub, _ := json.Marshal(cell.TaskSubmission{Module: code, Name: "smoke.wasm", Objective: "x", Grant: smokeGrant, Token: tok,
		Caps: capability.Budget{Steps: capability.Limit(1000)}})
	for _, unix := range []bool{false, true} {
		send(unix, "GET", "/v1/cell", nil, nil)
		// A run followed from its submission, parked, listed, streamed,
		// approved.
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); send(unix, "POST", "/v1/runs?follow=1", nil, sub) }()
		var runs []cell.RunInfo
		deadline := time.Now().Add(30 * time.Second)
		for len(runs) == 0 || len(runs[0].Waiting) == 0 {
			if time.Now().After(deadline) {
				t.Fatal("the run never parked")
			}
			_, body := send(unix, "GET", "/v1/runs", nil, nil)
			json.Unmarshal([]byte(body), &runs)
			time.Sleep(5 * time.Millisecond)
		}
		run := runs[0].RunID
		send(unix, "GET", "/v1/runs/"+run, nil, nil)
		send(unix, "GET", "/v1/runs/last", nil, nil)
		send(unix, "GET", "/v1/approvals", nil, nil)
		send(unix, "GET", "/v1/runs/"+run+"/events", nil, nil)
		wg.Add(1)
		go func() { defer wg.Done(); send(unix, "GET", "/v1/runs/"+run+"/events?follow=1", nil, nil) }()
		answer(unix, run, true)
		wg.Wait()
		// Finished: cancel and resume are conflicts.
		send(unix, "POST", "/v1/runs/"+run+"/cancel", nil, nil)
		send(unix, "POST", "/v1/runs/"+run+"/resume", nil, nil)
		send(unix, "POST", "/v1/runs/"+run+"/approve", nil, []byte(`{"approve": true}`))
		// A run cancelled while parked, resumed (followed), denied.
		c, body := send(unix, "POST", "/v1/runs", nil, sub)
		var s cell.Submitted
		if json.Unmarshal([]byte(body), &s); c != http.StatusCreated {
			t.Fatalf("submission: %d %s", c, body)
		}
		waitParked(s.RunID)
		send(unix, "POST", "/v1/runs/"+s.RunID+"/cancel", nil, nil)
		wg.Add(1)
		go func() { defer wg.Done(); send(unix, "POST", "/v1/runs/"+s.RunID+"/resume?follow=1", nil, nil) }()
		waitParked(s.RunID)
		send(unix, "POST", "/v1/runs/"+s.RunID+"/resume", nil, nil) // 409: executing
		answer(unix, s.RunID, false)
		wg.Wait()
		send(unix, "GET", "/v1/runs/"+s.RunID+"/events?follow=1", nil, nil)
		// A task granted by a bearer token: its run parked, the task
		// listed and shown, cancelled, resumed, its run answered.
		c, body = send(unix, "POST", "/v1/tasks", nil, tsub)
		var tk cell.Task
		if json.Unmarshal([]byte(body), &tk); c != http.StatusCreated {
			t.Fatalf("task submission: %d %s", c, body)
		}
		trun := tk.Attempts[0].Run
		waitParked(trun)
		send(unix, "GET", "/v1/tasks", nil, nil)
		send(unix, "GET", "/v1/tasks/"+tk.ID, nil, nil)
		send(unix, "POST", "/v1/tasks/"+tk.ID+"/cancel", nil, nil)
		send(unix, "POST", "/v1/tasks/"+tk.ID+"/resume", nil, nil)
		waitParked(trun)
		send(unix, "GET", "/v1/tasks/last", nil, nil)
		answer(unix, trun, true)
		send(unix, "POST", "/v1/tasks/"+tk.ID+"/cancel", nil, nil) // 409: completed
		send(unix, "GET", "/v1/tasks/ffff", nil, nil)
		send(unix, "POST", "/v1/tasks", nil, []byte(`{"objective": "x"}`))
		// The reads of the store, and what the cell signs for them.
		for _, path := range []string{
			"/v1/store/runs", "/v1/store/runs/" + run, "/v1/store/runs/" + run + "/records", "/v1/store/runs/" + run + "/records?from=2",
			"/v1/store/runs/" + run + "/events", "/v1/store/modules/" + runs[0].ModuleSHA256, "/v1/runs/" + run + "/bundle",
			"/v1/runs/last/checkpoint", "/v1/lineage/calls", "/v1/lineage/calls?op=kv.&limit=2", "/v1/lineage/consumers?hash=" + strings.Repeat("00", 32),
			"/v1/store/runs/zz", "/v1/store/runs/" + strings.Repeat("0", 32), "/v1/store/modules/00", "/v1/store/modules/" + strings.Repeat("00", 32),
			"/v1/runs/ffff/bundle", "/v1/runs/ffff/checkpoint", "/v1/lineage/calls?limit=x", "/v1/lineage/consumers?hash=zz",
			"/v1/store/blobs/00", "/v1/store/blobs/" + strings.Repeat("00", 32),
		} {
			send(unix, "GET", path, nil, nil)
		}
		send(unix, "POST", "/v1/lineage/index", nil, nil)
		send(unix, "POST", "/v1/lineage/reindex", nil, nil)
		send(unix, "POST", "/v1/lineage/index", nil, []byte(`{}`))
		// Errors of every kind.
		for _, e := range []struct {
			method, path string
			header       map[string]string
			body         []byte
		}{
			{"GET", "/v1/cell", map[string]string{"Authorization": "Bearer " + strings.Repeat("f", 64)}, nil},
			{"GET", "/v1/cell", map[string]string{"Origin": "http://evil.example"}, nil},
			{"GET", "/v1/cell", map[string]string{"Host": "evil.example"}, nil},
			{"GET", "/v1/runs/ffff", nil, nil},
			{"GET", "/v1/runs/zz", nil, nil},
			{"GET", "/v1/runs/../cell", nil, nil},
			{"GET", "/nowhere", nil, nil},
			{"DELETE", "/v1/runs/last", nil, nil},
			{"POST", "/v1/runs", map[string]string{"Content-Type": "text/plain"}, sub},
			{"POST", "/v1/runs", nil, []byte(`{"module": "AGFzbQ==", "grant": "capabilities: {kv: {}}"}`)},
			{"POST", "/v1/runs", nil, []byte(`{"module": "AGFzbQ=="}`)},
			{"POST", "/v1/runs", nil, []byte(`{"module": "` + base64.StdEncoding.EncodeToString(code) + `"}`)},
			{"POST", "/v1/runs", nil, []byte(`{"module": "` + base64.StdEncoding.EncodeToString(code) + `", "token": "Z2FyYmFnZQ=="}`)},
			{"POST", "/v1/runs", nil, []byte(`{"module": "AGFzbQ==", "seed": "00"}`)},
			{"POST", "/v1/runs", nil, bytes.Repeat([]byte(" "), cell.MaxSubmission+1)},
			{"POST", "/v1/runs/last/approve", nil, []byte(`{"approve": true, "by": "x"}`)},
			{"POST", "/v1/runs/last/cancel", nil, []byte(`{}`)},
		} {
			send(unix, e.method, e.path, e.header, e.body)
		}
	}
	// The API token travels in requests; the unix socket's answers must not
	// echo it back either.
	send(true, "GET", "/v1/cell", map[string]string{"Authorization": "Bearer " + a.token}, nil)
	text := answers.String()
	for _, status := range []string{": 200\n", ": 201\n", ": 202\n", ": 400\n", ": 401\n", ": 403\n", ": 404\n", ": 405\n", ": 409\n", ": 413\n", ": 415\n", ": 422\n"} {
		if !strings.Contains(text, status) {
			t.Errorf("no answer had status %s; the surface was not all covered", strings.Trim(status, ": \n"))
		}
	}
	if found := leaks(text, sec); len(found) > 0 {
		t.Fatalf("the API's answers carry %v", found)
	}
	t.Logf("%d answers, %d bytes, none with key material or the token", n, len(text))
}
