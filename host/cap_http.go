package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/capability"
)

// Limits of the http capability.
const (
	maxHTTPBody = 8 << 20
	// IdempotencyHeader carries the call's idempotency key, derived from
	// (run, step), so a server can drop a request it has already served.
	IdempotencyHeader = "Idempotency-Key"
)

// The http capability: requests to the hosts the grant lists.
//
//	http.request (HTTPRequest) -> HTTPResponse   effect, not idempotent
//
// The URL's host and path are put in canonical form
// (capability.CanonicalHost, CanonicalURLPath) before the grant, the policy
// and the modes see them, and the request is sent in that form. The host
// adds an Idempotency-Key header. Redirects are not followed (the guest
// sees the 3xx and decides, and its next request passes the gate again);
// proxies from the environment are ignored; every connection is checked as
// it is dialled (egress.go). Errors:
// StatusBadRequest for a malformed request or URL (a host with no canonical
// form among them), StatusDenied for a host the grant does not list or a
// connection the egress rules refuse (the cell's own listeners, an address
// in the platform's ranges the grant does not name), StatusFailed for a
// network error. A body over 8 MiB is cut and Truncated is set.
func init() {
	register("http.request", handler{check: checkHTTP, serve: serveHTTP})
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

func checkHTTP(s *session, c *Call) *denial {
	var r abi.HTTPRequest
	if st, b, ok := decodeRequest(c, &r); !ok {
		return &denial{st, b}
	}
	t, err := parseTarget(r.URL)
	if err != nil {
		st, b := errorResponse(abi.StatusBadRequest, "http.request: %v", err)
		return &denial{st, b}
	}
	if r.Method == "" || strings.ContainsAny(r.Method, " \r\n\t") {
		st, b := errorResponse(abi.StatusBadRequest, "http.request: bad method %q", r.Method)
		return &denial{st, b}
	}
	if !s.grant.HTTP.allows(t.host, t.port) {
		st, b := errorResponse(abi.StatusDenied, "http.request: host %s is not in the grant (allowed: %s)", capability.JoinHost(t.host, t.port), strings.Join(s.grant.HTTP.Hosts, ", "))
		return &denial{st, b}
	}
	return nil
}

func serveHTTP(ctx context.Context, s *session, c *Call) (abi.Status, []byte) {
	var r abi.HTTPRequest
	_ = abi.Unmarshal(c.Request, &r) // checked by the gate
	t, err := parseTarget(r.URL)
	if err != nil {
		return errorResponse(abi.StatusBadRequest, "http.request: %v", err)
	}
	log := &dialLog{}
	req, err := http.NewRequestWithContext(context.WithValue(ctx, dialLogKey{}, log), r.Method, t.url.String(), bytes.NewReader(r.Body))
	if err != nil {
		return errorResponse(abi.StatusBadRequest, "http.request: %v", err)
	}
	for _, h := range r.Headers {
		req.Header.Add(h.Name, h.Value)
	}
	req.Header.Set(IdempotencyHeader, c.Key)
	resp, err := s.httpClient().Do(req)
	if err != nil {
		// A refused address denies the call, even when the name had
		// others that failed for another reason.
		var ee *EgressError
		if errors.As(err, &ee) || log.first() != nil {
			if ee == nil {
				ee = log.first()
			}
			return errorResponse(abi.StatusDenied, "http.request: %v", ee)
		}
		return errorResponse(abi.StatusFailed, "http.request: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxHTTPBody+1))
	if err != nil {
		return errorResponse(abi.StatusFailed, "http.request: reading body: %v", err)
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
	return okResponse(out)
}
