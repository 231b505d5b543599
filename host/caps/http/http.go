// Package http is the http capability (agentrt:http): requests to the hosts
// the grant lists.
//
//	http.request (abi.HTTPRequest) -> abi.HTTPResponse   effect, not idempotent
//	             (re-sent after a crash only when the grant says its servers
//	             honour Idempotency-Key: idempotent: true)
//
// The URL's host and path are put in canonical form
// (capability.CanonicalHost, CanonicalURLPath) before the grant, the policy
// and the modes see them, and the request is sent in that form. The host
// adds an Idempotency-Key header (the call's key, from run and step).
// Redirects are not followed (the guest sees the 3xx and decides, and its
// next request passes the gate again); proxies from the environment are
// ignored; every connection is checked as it is dialled (egress.go).
//
// Errors: StatusBadRequest for a malformed request or URL (a host with no
// canonical form among them) or a bad method, StatusDenied for a host the
// grant does not list or a connection the egress rules refuse (the cell's
// own listeners, an address in the platform's ranges the grant does not
// name), StatusFailed for a network error. A body over 8 MiB is cut and
// Truncated is set.
//
// The grant section is http: {hosts: [...], idempotent: BOOL}; the policy
// sees the resource Host::NAME (with its ip, and explicit when the grant
// names that address) and the context attributes method, scheme, port and
// path. It needs the cell's resolver and listeners (Deps); each run has
// its own transport, closed when the run ends (Instance.Close).
package http

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	nethttp "net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host/caps"
)

// Limits of the http capability.
const (
	maxHTTPBody = 8 << 20
	// IdempotencyHeader carries the call's idempotency key, derived from
	// (run, step), so a server can drop a request it has already served.
	IdempotencyHeader = "Idempotency-Key"
)

// Grant allows HTTP requests to the listed hosts.
type Grant struct {
	// Hosts are "host" (any port) or "host:port" entries, in canonical
	// form (capability.CanonicalHostEntry; Check puts them in it);
	// requests to any other host are denied. An IP address or localhost
	// among them is what lets the run reach that address (localhost: any
	// loopback address) past the platform's private-range rules.
	Hosts []string `yaml:"hosts" cbor:"hosts"`
	// Idempotent says the servers honour the Idempotency-Key header (they
	// serve a repeated key once), so a request a crash left in doubt may
	// be sent again with the same key. Otherwise it is not re-sent and the
	// guest is told it is in doubt.
	Idempotent bool `yaml:"idempotent,omitempty" cbor:"idempotent,omitempty"`
}

// Check requires hosts and puts them in canonical form in place
// (LOCALHOST. becomes localhost), so that the grant, the token, the policy
// and the modes compare one spelling.
func (g *Grant) Check() error {
	if len(g.Hosts) == 0 {
		return fmt.Errorf("http: list the allowed hosts (http: {hosts: [\"example.com\"]})")
	}
	for i, h := range g.Hosts {
		canon, err := capability.CanonicalHostEntry(h)
		if err != nil {
			return fmt.Errorf("http: %w (want host or host:port)", err)
		}
		g.Hosts[i] = canon
	}
	return nil
}

// Token sets the http capability of a token: the hosts and the idempotent
// flag.
func (g *Grant) Token(c *capability.Caps) error {
	c.HTTP = &capability.HTTP{Hosts: slices.Clone(g.Hosts), Idempotent: g.Idempotent}
	return nil
}

// CheckToken has nothing beyond Within to check.
func (*Grant) CheckToken(capability.Caps) error { return nil }

// allows reports whether an HTTP request to the canonical host and port is
// allowed: an entry names the host, at any port or at this one.
func (g *Grant) allows(host, port string) bool {
	return slices.ContainsFunc(g.Hosts, func(entry string) bool {
		eh, ep := splitEntry(entry)
		return eh == host && (ep == "" || ep == port)
	})
}

// namesAddr reports whether g names the address a at port itself, which
// lets the run reach it past the platform's private-range rules: an entry
// that is a, or localhost when a is a loopback address, at any port or at
// this one. A name that resolves to a never names it.
func (g *Grant) namesAddr(a netip.Addr, port uint16) bool {
	if g == nil {
		return false
	}
	p := strconv.Itoa(int(port))
	return slices.ContainsFunc(g.Hosts, func(entry string) bool {
		eh, ep := splitEntry(entry)
		if ep != "" && ep != p {
			return false
		}
		if eh == "localhost" {
			return a.IsLoopback()
		}
		ip, err := netip.ParseAddr(eh)
		return err == nil && ip == a
	})
}

// splitEntry splits a canonical hosts entry into host and port ("" for
// any): "[v6]:port" and "name:port" have one, a bare IPv6 address none.
func splitEntry(entry string) (host, port string) {
	if h, p, err := net.SplitHostPort(entry); err == nil {
		return h, p
	}
	return entry, ""
}

// Deps is what the capability needs from its cell.
type Deps struct {
	// Resolver resolves the names of requests; nil: the system's. Every
	// address it returns is checked as it is dialled.
	Resolver *net.Resolver
	// Listeners are the addresses the cell itself listens on, which no
	// request reaches whatever the grant says; nil: none.
	Listeners Listeners
}

// Capability is the http capability, as the host registers it.
type Capability struct{}

// Cap names the capability.
func (Capability) Cap() abi.Capability { return abi.CapHTTP }

// FromToken grants the token's hosts.
func (Capability) FromToken(c capability.Caps) (*Grant, error) {
	if c.HTTP == nil {
		return nil, nil
	}
	return &Grant{Hosts: slices.Clone(c.HTTP.Hosts), Idempotent: c.HTTP.Idempotent}, nil
}

// Open returns the run's http client, whose transport is made on the
// run's first request.
func (Capability) Open(g *Grant, d Deps, _ *caps.Run) (caps.Instance, error) {
	return &instance{grant: g, deps: d}, nil
}

type instance struct {
	grant *Grant
	deps  Deps
	// egress is the run's http client (egress.go), made on the first
	// request and closed when the run ends.
	egress *runEgress
}

func (in *instance) Handler(op abi.Op) caps.Handler {
	if op.Code != abi.OpHTTPRequest {
		return caps.Handler{}
	}
	return caps.Handler{Check: in.check, Serve: in.serve}
}

// Idempotent reports whether the grant says its servers honour
// Idempotency-Key.
func (in *instance) Idempotent(*caps.Call) bool { return in.grant.Idempotent }

// Close ends the run's connections; the run is over.
func (in *instance) Close() {
	if in.egress != nil {
		in.egress.close()
		in.egress = nil
	}
}

// client returns the run's http client, made on first use.
func (in *instance) client() *nethttp.Client {
	if in.egress == nil {
		in.egress = newRunEgress(in.grant, in.deps)
	}
	return in.egress.client
}

// Facts gives the policy the canonical host and the request's method,
// scheme, port and path.
func (in *instance) Facts(c *caps.Call) (caps.Facts, error) {
	var f caps.Facts
	var r abi.HTTPRequest
	if err := abi.Unmarshal(c.Request, &r); err != nil {
		return f, err
	}
	// The canonical target, as the grant saw it and the dialer will: one
	// spelling of the host for the policy and the modes.
	t, err := parseTarget(r.URL)
	if err != nil {
		return f, err
	}
	p, _ := strconv.Atoi(t.port)
	path := t.url.EscapedPath() // canonical: never empty
	if t.ip.IsValid() {
		f.IP = t.ip.String()
		f.Explicit = in.grant.namesAddr(t.ip, uint16(p))
	}
	f.ResourceType, f.ResourceID = "Host", t.host
	f.Method = strings.ToUpper(r.Method)
	f.Attrs = []caps.Fact{{Name: "method", Str: f.Method, Kind: caps.FactString}, {Name: "scheme", Str: t.url.Scheme, Kind: caps.FactString},
		{Name: "port", Num: int64(p), Kind: caps.FactNumber}, {Name: "path", Str: path, Kind: caps.FactString}}
	return f, nil
}

// httpTarget is a request URL in canonical form: what the grant, the
// policy, the modes and the dialer all see.
type httpTarget struct {
	url  *url.URL   // with the canonical host and path, and the port only when not the scheme's default
	host string     // canonical, without brackets
	port string     // explicit, or the scheme's default
	ip   netip.Addr // valid when host is an IP address
}

func parseTarget(raw string) (*httpTarget, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return nil, fmt.Errorf("%q is not an absolute http(s) URL without credentials", raw)
	}
	host, err := capability.CanonicalHost(u.Hostname())
	if err != nil {
		return nil, err
	}
	def := "80"
	if u.Scheme == "https" {
		def = "443"
	}
	port := def
	if p := u.Port(); p != "" {
		if port, err = capability.CanonicalPort(p); err != nil {
			return nil, err
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return nil, fmt.Errorf("%q has an empty port", raw)
	}
	path, err := capability.CanonicalURLPath(u.EscapedPath())
	if err != nil {
		return nil, err
	}
	if u.Path, err = url.PathUnescape(path); err != nil {
		return nil, err
	}
	u.RawPath = path
	t := &httpTarget{url: u, host: host, port: port}
	t.ip, _ = netip.ParseAddr(host)
	if port == def {
		port = ""
	}
	u.Host = capability.JoinHost(host, port)
	if t.ip.Is6() && port == "" {
		u.Host = "[" + host + "]"
	}
	return t, nil
}

// check is the gate's capability stage: a well-formed request to a host
// the grant lists.
func (in *instance) check(c *caps.Call) *caps.Denial {
	var r abi.HTTPRequest
	if d := caps.DecodeCheck(c, &r); d != nil {
		return d
	}
	t, err := parseTarget(r.URL)
	if err != nil {
		return caps.Deny(abi.StatusBadRequest, "http.request: %v", err)
	}
	if r.Method == "" || strings.ContainsAny(r.Method, " \r\n\t") {
		return caps.Deny(abi.StatusBadRequest, "http.request: bad method %q", r.Method)
	}
	if !in.grant.allows(t.host, t.port) {
		return caps.Deny(abi.StatusDenied, "http.request: host %s is not in the grant (allowed: %s)", capability.JoinHost(t.host, t.port), strings.Join(in.grant.Hosts, ", "))
	}
	return nil
}

func (in *instance) serve(ctx context.Context, c *caps.Call) (abi.Status, []byte) {
	var r abi.HTTPRequest
	_ = abi.Unmarshal(c.Request, &r) // checked by the gate
	t, err := parseTarget(r.URL)
	if err != nil {
		return caps.Error(abi.StatusBadRequest, "http.request: %v", err)
	}
	log := &dialLog{}
	req, err := nethttp.NewRequestWithContext(context.WithValue(ctx, dialLogKey{}, log), r.Method, t.url.String(), bytes.NewReader(r.Body))
	if err != nil {
		return caps.Error(abi.StatusBadRequest, "http.request: %v", err)
	}
	for _, h := range r.Headers {
		req.Header.Add(h.Name, h.Value)
	}
	req.Header.Set(IdempotencyHeader, c.Key)
	resp, err := in.client().Do(req)
	if err != nil {
		// A refused address denies the call, even when the name had
		// others that failed for another reason.
		var ee *EgressError
		if errors.As(err, &ee) || log.first() != nil {
			if ee == nil {
				ee = log.first()
			}
			return caps.Error(abi.StatusDenied, "http.request: %v", ee)
		}
		return caps.Error(abi.StatusFailed, "http.request: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxHTTPBody+1))
	if err != nil {
		return caps.Error(abi.StatusFailed, "http.request: reading body: %v", err)
	}
	out := &abi.HTTPResponse{Status: uint16(resp.StatusCode), Body: body, Headers: []abi.Header{}}
	if len(body) > maxHTTPBody {
		out.Body, out.Truncated = body[:maxHTTPBody], true
	}
	// Sorted names keep the response, and so its output hash, independent
	// of map order.
	for _, name := range slices.Sorted(maps.Keys(resp.Header)) {
		for _, v := range resp.Header[name] {
			// Text in the ABI is UTF-8; a server's Latin-1 header bytes
			// become U+FFFD rather than an undecodable response.
			out.Headers = append(out.Headers, abi.Header{Name: strings.ToValidUTF8(name, "\uFFFD"), Value: strings.ToValidUTF8(v, "\uFFFD")})
		}
	}
	return caps.OK(out)
}
