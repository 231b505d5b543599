package host

import (
	"bytes"
	"context"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/agentrt/agentrt/abi"
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
// The host adds an Idempotency-Key header. Redirects are not followed (the
// guest sees the 3xx and decides, and its next request passes the gate
// again). Errors: StatusBadRequest for a malformed request or URL,
// StatusDenied for a host the grant does not list, StatusFailed for a
// network error. A body over 8 MiB is cut and Truncated is set.
func init() {
	register("http.request", handler{check: checkHTTP, serve: serveHTTP})
}

func checkHTTP(s *session, c *Call) *denial {
	var r abi.HTTPRequest
	if st, b, ok := decodeRequest(c, &r); !ok {
		return &denial{st, b}
	}
	u, err := url.Parse(r.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		st, b := errorResponse(abi.StatusBadRequest, "http.request: %q is not an absolute http(s) URL without credentials", r.URL)
		return &denial{st, b}
	}
	if r.Method == "" || strings.ContainsAny(r.Method, " \r\n\t") {
		st, b := errorResponse(abi.StatusBadRequest, "http.request: bad method %q", r.Method)
		return &denial{st, b}
	}
	port := "80"
	if u.Scheme == "https" {
		port = "443"
	}
	if !s.grant.HTTP.allowsHost(u.Host, port) {
		st, b := errorResponse(abi.StatusDenied, "http.request: host %s is not in the grant (allowed: %s)", u.Host, strings.Join(s.grant.HTTP.Hosts, ", "))
		return &denial{st, b}
	}
	return nil
}

func serveHTTP(ctx context.Context, s *session, c *Call) (abi.Status, []byte) {
	var r abi.HTTPRequest
	_ = abi.Unmarshal(c.Request, &r) // checked by the gate
	req, err := http.NewRequestWithContext(ctx, r.Method, r.URL, bytes.NewReader(r.Body))
	if err != nil {
		return errorResponse(abi.StatusBadRequest, "http.request: %v", err)
	}
	for _, h := range r.Headers {
		req.Header.Add(h.Name, h.Value)
	}
	req.Header.Set(IdempotencyHeader, c.Key)
	resp, err := s.deps.HTTP.Do(req)
	if err != nil {
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

// noRedirects makes an http.Client hand 3xx responses to the guest.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// NewHTTPClient returns the client the http capability uses by default.
func NewHTTPClient() *http.Client {
	return &http.Client{CheckRedirect: noRedirects, Transport: &http.Transport{
		Proxy:               nil,
		MaxIdleConnsPerHost: 16,
	}}
}
