package http_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/policy"
	"golang.org/x/net/dns/dnsmessage"
)

// The egress suite: a real wasm agent (host/testdata/agents/egress) makes
// the requests an attacker would, through the http capability of a real
// host, against real servers on loopback and a real DNS server.

type egressReq struct {
	Method  string            `json:"method,omitempty"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    string            `json:"body,omitempty"`
}

// counter is an HTTP server on loopback that counts the requests it gets.
type counter struct {
	*httptest.Server
	hits  atomic.Int64
	conns atomic.Int64 // connections opened
	open  atomic.Int64 // connections open now
	port  string
}

func newCounter(t *testing.T, h http.HandlerFunc) *counter {
	c := &counter{}
	c.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.hits.Add(1)
		if h != nil {
			h(w, r)
			return
		}
		fmt.Fprint(w, "reached")
	}))
	c.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			c.conns.Add(1)
			c.open.Add(1)
		case http.StateClosed, http.StateHijacked:
			c.open.Add(-1)
		}
	}
	c.Start()
	t.Cleanup(c.Close)
	_, c.port, _ = net.SplitHostPort(c.Listener.Addr().String())
	return c
}

func egressGrant(hosts ...string) *host.Grant {
	return &host.Grant{Run: &host.RunGrant{}, HTTP: &host.HTTPGrant{Hosts: hosts}}
}

func platformPolicy(t *testing.T, customer ...string) *policy.Engine {
	t.Helper()
	var cs []policy.Source
	for i, c := range customer {
		cs = append(cs, policy.Source{Name: fmt.Sprintf("customer%d.cedar", i), Text: []byte(c)})
	}
	e, err := policy.NewEngine(policy.Platform(), cs)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// runEgress runs the egress agent with reqs under g and returns its output
// lines and the run's id.
func runEgress(t *testing.T, env *testutil.Env, g *host.Grant, reqs ...egressReq) ([]string, journal.RunID) {
	t.Helper()
	in, err := json.Marshal(reqs)
	if err != nil {
		t.Fatal(err)
	}
	res, err := env.Host.Run(context.Background(), host.RunSpec{Code: testutil.BuildGo(t, "host/testdata/agents/egress"), Grant: g, Input: in})
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("run: %v %+v", err, res)
	}
	var lines []string
	if err := json.Unmarshal(res.Output, &lines); err != nil || len(lines) != len(reqs) {
		t.Fatalf("output %s: %v", res.Output, err)
	}
	return lines, res.Run
}

// httpOutcomes returns, for each http.request step of run, the status the
// journal recorded for its outcome and whether an intent was journaled
// (the call passed the gate and was dispatched).
func httpOutcomes(t *testing.T, env *testutil.Env, run journal.RunID) (statuses []abi.Status, dispatched []bool) {
	t.Helper()
	intent := map[uint64]bool{}
	err := journal.ReadEntries(context.Background(), env.Store, run, func(e *journal.Entry, _ *journal.Record) error {
		if e.Op != "http.request" {
			return nil
		}
		switch e.Phase {
		case journal.PhaseIntent:
			intent[e.Step] = true
		case journal.PhaseCompleted, journal.PhaseFailed:
			statuses = append(statuses, abi.Status(e.Status))
			dispatched = append(dispatched, intent[e.Step])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return statuses, dispatched
}

func wantLine(t *testing.T, got string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(got, p) {
			t.Errorf("agent saw %q; want it to contain %q", got, p)
		}
	}
}

// TestAgentCannotReachTheCellsOwnListener: an agent granted 127.0.0.1 (the
// crawler's grant) cannot reach a listener of its cell on 127.0.0.1, by
// that address, by another loopback address or by localhost, with a GET or
// with the POST that would submit a run; the same grant still reaches a
// server on another port. The listener is registered after the host
// exists, and once removed it is an ordinary loopback server again.
func TestAgentCannotReachTheCellsOwnListener(t *testing.T) {
	var lns host.ListenerSet
	env := testutil.NewEnv(t, host.Deps{Policy: platformPolicy(t), Listeners: &lns}, host.Config{})
	api, site := newCounter(t, nil), newCounter(t, nil)
	remove := lns.Add("the cell API", api.Listener.Addr())

	submit := egressReq{Method: "POST", URL: api.URL + "/v1/runs", Headers: map[string]string{"Content-Type": "application/json"},
		Body: `{"module":"AGFzbQEAAAA=","grant":"capabilities: {tool: {tools: [{name: sh, exec: /bin/sh}]}}"}`}
	lines, run := runEgress(t, env, egressGrant("127.0.0.1", "127.0.0.2", "localhost"),
		egressReq{URL: api.URL + "/v1/runs"},
		submit,
		egressReq{URL: "http://127.0.0.2:" + api.port + "/v1/cell"},
		egressReq{URL: "http://LOCALHOST.:" + api.port + "/v1/cell"},
		egressReq{URL: site.URL + "/page"},
	)
	for i := range 4 {
		wantLine(t, lines[i], "denied: http.request:", "is the cell's own listener (the cell API on 127.0.0.1:"+api.port+"): no grant reaches it")
	}
	wantLine(t, lines[3], "localhost (resolved to")
	if lines[4] != "200 location= body=reached" {
		t.Errorf("the granted site: %q", lines[4])
	}
	if n := api.hits.Load() + api.conns.Load(); n != 0 {
		t.Fatalf("the cell's listener got %d requests and connections", n)
	}
	// Refused at dial: dispatched (intent journaled), answered denied.
	st, disp := httpOutcomes(t, env, run)
	for i := range 4 {
		if st[i] != abi.StatusDenied || !disp[i] {
			t.Errorf("call %d journaled %v (dispatched %v), want denied at dial", i+1, st[i], disp[i])
		}
	}
	replaysTo(t, env, run, testutil.BuildGo(t, "host/testdata/agents/egress"), mustOutput(t, lines))

	remove()
	lines, _ = runEgress(t, env, egressGrant("127.0.0.1"), egressReq{URL: api.URL + "/"})
	if lines[0] != "200 location= body=reached" {
		t.Fatalf("after the listener was removed: %q", lines[0])
	}
}

func mustOutput(t *testing.T, lines []string) []byte {
	b, err := json.Marshal(lines)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAgentCannotReachAListenerOnEveryAddress: a cell listening on the
// unspecified address is unreachable on every loopback address and every
// address of the machine's interfaces, even when the grant names them.
func TestAgentCannotReachAListenerOnEveryAddress(t *testing.T) {
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	api := &counter{Server: &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.NotFoundHandler()}}}
	api.Config.ConnState = func(net.Conn, http.ConnState) { api.conns.Add(1) }
	api.Start()
	t.Cleanup(api.Close)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	var lns host.ListenerSet
	lns.Add("the cell API", ln.Addr())
	env := testutil.NewEnv(t, host.Deps{Policy: platformPolicy(t), Listeners: &lns}, host.Config{})

	targets := []string{"127.0.0.1", "127.9.9.9", "0.0.0.0"}
	hosts := []string{"127.0.0.1", "127.9.9.9", "0.0.0.0"}
	if ifs, _ := net.InterfaceAddrs(); len(ifs) > 0 {
		for _, a := range ifs {
			if ip, ok := netip.AddrFromSlice(a.(*net.IPNet).IP); ok && ip.Unmap().Is4() && !ip.IsLoopback() {
				targets, hosts = append(targets, ip.Unmap().String()), append(hosts, ip.Unmap().String())
				break
			}
		}
	}
	if l6, err := net.Listen("tcp6", "[::1]:0"); err == nil {
		l6.Close()
		targets, hosts = append(targets, "[::1]"), append(hosts, "::1")
	}
	var reqs []egressReq
	for _, h := range targets {
		reqs = append(reqs, egressReq{URL: "http://" + h + ":" + port + "/v1/runs"})
	}
	lines, _ := runEgress(t, env, egressGrant(hosts...), reqs...)
	for i, l := range lines {
		wantLine(t, l, "denied:", "is the cell's own listener", targets[i])
	}
	if n := api.conns.Load(); n != 0 {
		t.Fatalf("the listener got %d connections", n)
	}
	t.Logf("refused on %v", targets)
}

// dnsServer answers A queries on loopback UDP from answer(name, n), n
// counting the queries for that name from 1; AAAA queries get no records.
type dnsServer struct {
	addr string
	mu   sync.Mutex
	seen map[string]int
}

func newDNS(t *testing.T, answer func(name string, n int) netip.Addr) *dnsServer {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	d := &dnsServer{addr: pc.LocalAddr().String(), seen: map[string]int{}}
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var p dnsmessage.Parser
			h, err := p.Start(buf[:n])
			if err != nil {
				continue
			}
			q, err := p.Question()
			if err != nil {
				continue
			}
			name := strings.TrimSuffix(strings.ToLower(q.Name.String()), ".")
			b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true})
			b.EnableCompression()
			b.StartQuestions()
			b.Question(q)
			b.StartAnswers()
			if q.Type == dnsmessage.TypeA {
				d.mu.Lock()
				d.seen[name]++
				k := d.seen[name]
				d.mu.Unlock()
				if a := answer(name, k); a.IsValid() {
					b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 0}, dnsmessage.AResource{A: a.As4()})
				}
			}
			msg, err := b.Finish()
			if err == nil {
				pc.WriteTo(msg, from)
			}
		}
	}()
	return d
}

func (d *dnsServer) resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var dl net.Dialer
		return dl.DialContext(ctx, "udp", d.addr)
	}}
}

// TestDNSRebindingIsRefusedAtDial: a grant names example.test, whose DNS
// answers a public address first and 127.0.0.1 after (TTL 0): a check
// that resolved the name before the request would have passed it. The
// dialer checks the address it connects to, so the request is refused,
// naming the name, the address and the range, and the loopback server
// behind it gets nothing. A grant that also names 127.0.0.1 reaches it:
// the grant named the address. Private and metadata answers are refused
// the same way.
func TestDNSRebindingIsRefusedAtDial(t *testing.T) {
	dns := newDNS(t, func(name string, n int) netip.Addr {
		switch name {
		case "example.test":
			if n == 1 {
				return netip.MustParseAddr("198.51.100.7")
			}
			return netip.MustParseAddr("127.0.0.1")
		case "private.test":
			return netip.MustParseAddr("10.0.0.1")
		case "meta.test":
			return netip.MustParseAddr("169.254.169.254")
		}
		return netip.Addr{}
	})
	env := testutil.NewEnv(t, host.Deps{Policy: platformPolicy(t), Resolver: dns.resolver()}, host.Config{})
	site := newCounter(t, nil)

	// What a check before the request would have seen.
	addrs, err := dns.resolver().LookupNetIP(context.Background(), "ip4", "example.test")
	if err != nil || len(addrs) != 1 || addrs[0] != netip.MustParseAddr("198.51.100.7") {
		t.Fatalf("first answer %v, %v: want the public address", addrs, err)
	}
	lines, run := runEgress(t, env, egressGrant("example.test", "private.test", "meta.test", "169.254.169.254"),
		egressReq{URL: "http://example.test:" + site.port + "/"},
		egressReq{URL: "http://private.test:" + site.port + "/"},
		egressReq{URL: "http://meta.test/latest/meta-data/"},
	)
	wantLine(t, lines[0], "denied: http.request: example.test (resolved to 127.0.0.1:"+site.port+") is in 127.0.0.0/8 (loopback), which the grant does not name")
	wantLine(t, lines[1], "denied: http.request: private.test (resolved to 10.0.0.1:"+site.port+") is in 10.0.0.0/8 (private)")
	wantLine(t, lines[2], "denied: http.request: meta.test (resolved to 169.254.169.254:80) is in 169.254.169.254/32 (cloud metadata", "no grant reaches it")
	if n := site.hits.Load(); n != 0 {
		t.Fatalf("the loopback server behind the rebound name got %d requests", n)
	}
	if st, disp := httpOutcomes(t, env, run); st[0] != abi.StatusDenied || !disp[0] {
		t.Fatalf("journaled %v (dispatched %v), want denied at dial", st, disp)
	}

	lines, _ = runEgress(t, env, egressGrant("example.test", "127.0.0.1"), egressReq{URL: "http://example.test:" + site.port + "/"})
	if lines[0] != "200 location= body=reached" || site.hits.Load() != 1 {
		t.Fatalf("a grant naming 127.0.0.1 too: %q, %d requests", lines[0], site.hits.Load())
	}
}

// TestOneHostManySpellings: the forms an attacker uses to dodge a check
// on 127.0.0.1 or the metadata service (IPv4-mapped IPv6, numbers in hex,
// octal, decimal, fewer parts, trailing dots, upper case) are either the
// canonical host, decided as it is, or refused as malformed; none reaches
// the server.
func TestOneHostManySpellings(t *testing.T) {
	env := testutil.NewEnv(t, host.Deps{Policy: platformPolicy(t,
		"@id(\"acme.allow\") permit (principal, action, resource);\n"+
			"@id(\"acme.no-localhost\") forbid (principal, action == Action::\"http.request\", resource == Host::\"localhost\");\n"+
			"@id(\"acme.no-loopback-ip\") forbid (principal, action == Action::\"http.request\", resource == Host::\"127.0.0.1\");\n")}, host.Config{})
	site := newCounter(t, nil)
	p := site.port
	lines, run := runEgress(t, env, egressGrant("localhost", "127.0.0.1", "metadata.google.internal", "169.254.169.254"),
		egressReq{URL: "http://[::ffff:127.0.0.1]:" + p + "/"},
		egressReq{URL: "http://0x7f000001:" + p + "/"},
		egressReq{URL: "http://2130706433:" + p + "/"},
		egressReq{URL: "http://127.1:" + p + "/"},
		egressReq{URL: "http://0177.0.0.1:" + p + "/"},
		egressReq{URL: "http://127.0.0.1.:" + p + "/"},
		egressReq{URL: "http://LOCALHOST.:" + p + "/"},
		egressReq{URL: "http://localhost.:" + p + "/"},
		egressReq{URL: "http://%6c%6fcalhost:" + p + "/"},
		egressReq{URL: "http://metadata.google.internal./computeMetadata/v1/"},
		egressReq{URL: "http://METADATA.GOOGLE.INTERNAL/computeMetadata/v1/"},
		egressReq{URL: "http://169.254.169.254/latest/meta-data/"},
		egressReq{URL: "http://[::ffff:a9fe:a9fe]/latest/meta-data/"},
	)
	byCustomer := "denied: policy: denied by customer:acme.no-loopback-ip"
	wants := [][]string{
		{byCustomer},
		{"bad_request: http.request: host \"0x7f000001\": an IPv4 address in a non-standard form", "write 127.0.0.1"},
		{"bad_request: http.request: host \"2130706433\"", "write 127.0.0.1"},
		{"bad_request: http.request: host \"127.1\"", "write 127.0.0.1"},
		{"bad_request: http.request: host \"0177.0.0.1\"", "write 127.0.0.1"},
		{byCustomer},
		{"denied: policy: denied by customer:acme.no-localhost"},
		{"denied: policy: denied by customer:acme.no-localhost"},
		{"bad_request: http.request:", "is not an absolute http(s) URL"}, // Go's URL parser refuses escapes in a host
		{"denied: policy: denied by platform:platform.deny-metadata-hosts"},
		{"denied: policy: denied by platform:platform.deny-metadata-hosts"},
		{"denied: policy: denied by platform:platform.deny-metadata-addresses"},
		{"denied: policy: denied by platform:platform.deny-metadata-addresses"},
	}
	for i, w := range wants {
		wantLine(t, lines[i], w...)
	}
	if n := site.hits.Load() + site.conns.Load(); n != 0 {
		t.Fatalf("the server got %d requests and connections", n)
	}
	if _, disp := httpOutcomes(t, env, run); strings.Contains(fmt.Sprint(disp), "true") {
		t.Fatalf("some call was dispatched: %v", disp)
	}
}

// TestModesSeeTheCanonicalHost: a permission mode rule on localhost
// applies to LOCALHOST. and localhost. alike.
func TestModesSeeTheCanonicalHost(t *testing.T) {
	modes, err := policy.ParseModes([]byte("rules:\n  - {name: no-localhost, op: http.request, resource: localhost, effect: deny}\n"))
	if err != nil {
		t.Fatal(err)
	}
	env := testutil.NewEnv(t, host.Deps{Policy: platformPolicy(t), Modes: modes}, host.Config{})
	site := newCounter(t, nil)
	lines, _ := runEgress(t, env, egressGrant("localhost"),
		egressReq{URL: "http://LOCALHOST.:" + site.port + "/"},
		egressReq{URL: "http://localhost.:" + site.port + "/"},
		egressReq{URL: "http://LocalHost:" + site.port + "/"})
	for _, l := range lines {
		wantLine(t, l, `denied: http.request is denied by permission mode rule "no-localhost"`)
	}
	if site.hits.Load() != 0 {
		t.Fatal("the server was reached")
	}
}

// TestRedirectToTheCellIsNotFollowed: a granted server answers with a
// redirect to the cell's API; the client does not follow it, the agent
// sees the 302 and where it points, and its own request there is refused.
func TestRedirectToTheCellIsNotFollowed(t *testing.T) {
	var lns host.ListenerSet
	env := testutil.NewEnv(t, host.Deps{Policy: platformPolicy(t), Listeners: &lns}, host.Config{})
	api := newCounter(t, nil)
	lns.Add("the cell API", api.Listener.Addr())
	site := newCounter(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, api.URL+"/v1/runs", http.StatusFound)
	})
	lines, _ := runEgress(t, env, egressGrant("127.0.0.1"),
		egressReq{Method: "POST", URL: site.URL + "/go", Body: "{}"},
		egressReq{Method: "POST", URL: api.URL + "/v1/runs", Body: "{}"})
	wantLine(t, lines[0], "302 location="+api.URL+"/v1/runs")
	wantLine(t, lines[1], "denied:", "the cell's own listener")
	if n := api.hits.Load() + api.conns.Load(); n != 0 {
		t.Fatalf("the redirect target got %d requests and connections", n)
	}
}

// TestEachRunHasItsOwnConnections: requests of one run share a
// connection; another run never gets it, and a run's connections are
// closed when it ends.
func TestEachRunHasItsOwnConnections(t *testing.T) {
	env := testutil.NewEnv(t, host.Deps{Policy: platformPolicy(t)}, host.Config{})
	site := newCounter(t, nil)
	get := egressReq{URL: site.URL + "/"}
	runEgress(t, env, egressGrant("127.0.0.1"), get, get, get)
	if n := site.conns.Load(); n != 1 {
		t.Fatalf("one run's three requests opened %d connections, want 1 (kept alive within the run)", n)
	}
	waitFor(t, "the first run's connection to close", func() bool { return site.open.Load() == 0 })
	runEgress(t, env, egressGrant("127.0.0.1"), get)
	if n := site.conns.Load(); n != 2 {
		t.Fatalf("the second run used %d connections in all, want a new one (2)", n)
	}
	waitFor(t, "the second run's connection to close", func() bool { return site.open.Load() == 0 })
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestHTTPPathIsCanonical: a customer policy forbids paths under /admin;
// /%61dmin, /x/../admin and /%2e%2e/admin are that path, denied before
// anything is sent. What is sent is the canonical path the policy saw.
func TestHTTPPathIsCanonical(t *testing.T) {
	env := testutil.NewEnv(t, host.Deps{Policy: platformPolicy(t,
		"@id(\"acme.allow\") permit (principal, action, resource);\n"+
			"@id(\"acme.no-admin\") forbid (principal, action == Action::\"http.request\", resource) when { context.path like \"/admin*\" };\n")}, host.Config{})
	var seen atomic.Value
	site := newCounter(t, func(w http.ResponseWriter, r *http.Request) { seen.Store(r.URL.EscapedPath()) })
	lines, _ := runEgress(t, env, egressGrant("127.0.0.1"),
		egressReq{URL: site.URL + "/%61dmin/users"},
		egressReq{URL: site.URL + "/x/../admin"},
		egressReq{URL: site.URL + "/%2e%2e/admin"},
		egressReq{URL: site.URL + "/./admin/"},
		egressReq{URL: site.URL + "/ok/./a/../%7euser"},
	)
	for _, l := range lines[:4] {
		wantLine(t, l, "denied: policy: denied by customer:acme.no-admin")
	}
	if site.hits.Load() != 1 || seen.Load() != "/ok/~user" {
		t.Fatalf("the server got %d requests, the last for %v; want one, for /ok/~user", site.hits.Load(), seen.Load())
	}
}
