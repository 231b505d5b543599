package cell

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"os"
	"os/user"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// SocketName is the cell API's unix socket in a data directory. A process
// that holds the directory serves it: the daemon the whole API, a
// foreground run reading and cancelling.
const SocketName = "agentrt.sock"

// SocketPath returns the API socket of the cell in dataDir.
func SocketPath(dataDir string) string { return filepath.Join(dataDir, SocketName) }

// SocketHost is the Host a request on the unix socket names (http://cell/...).
const SocketHost = "cell"

// maxSocketPath is the longest unix socket path every platform takes
// (sockaddr_un holds 104 bytes on macOS, 108 on Linux, with the NUL).
const maxSocketPath = 103

// ErrSocketPath is returned by ListenSocket for a path too long for a unix
// socket.
var ErrSocketPath = errors.New("cell: socket path too long for a unix socket")

// ListenSocket listens on the unix socket at path, readable and writable by
// this user only. The caller holds the cell's data directory (its store's
// lock), so a socket file left there by a killed process is stale and is
// replaced.
func ListenSocket(path string) (net.Listener, error) {
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("%w: %s (%d bytes, at most %d)", ErrSocketPath, path, len(path), maxSocketPath)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// ListenLoopback listens on addr, which must be a loopback address: the
// API is never offered beyond this machine. Requests on it must carry the
// API token (see Endpoint).
func ListenLoopback(addr string) (net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("cell: listen address %q: %w", addr, err)
	}
	if host == "localhost" {
		host = "127.0.0.1"
		addr = net.JoinHostPort(host, port)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("cell: listen address %q is not a loopback address (127.0.0.1, ::1): the cell API is served on this machine only", addr)
	}
	return net.Listen("tcp", addr)
}

// Endpoint returns an HTTP server for the API on ln, with the checks ln
// needs; serve it with Serve(ln), stop it with Shutdown or Close.
//
// On a TCP listener, which must be a loopback one, every request carries
// the API token (ServerOptions.APIToken) as "Authorization: Bearer TOKEN"
// and names the listener's own address as its Host (127.0.0.1:PORT,
// [::1]:PORT, localhost:PORT): a page whose name was rebound to 127.0.0.1
// sends its own name. On a unix socket the Host is "cell", and the peer's
// uid must be this process's or root's where the platform reports it (the
// socket's file mode is checked first, by the kernel). On every listener a
// request a browser made (an Origin header, Sec-Fetch-Site other than
// "none") is refused, a POST that sends a body must send JSON, and a path
// that ServeMux would clean (.., //) is an error, never a redirect.
func (s *Server) Endpoint(ln net.Listener) (*http.Server, error) {
	g := &guard{next: s.handler()}
	switch a := ln.Addr().(type) {
	case *net.UnixAddr:
		g.unix = true
		g.hosts = map[string]bool{SocketHost: true}
	case *net.TCPAddr:
		if !a.IP.IsLoopback() {
			return nil, fmt.Errorf("cell: %s is not a loopback address: the cell API is served on this machine only", a)
		}
		if s.token == "" {
			return nil, fmt.Errorf("%w: a TCP listener needs ServerOptions.APIToken", ErrNoAPIToken)
		}
		g.token, g.ident = s.token, tokenIdentity(s.token)
		port := strconv.Itoa(a.Port)
		g.hosts = map[string]bool{}
		for _, h := range []string{a.IP.String(), "localhost"} {
			g.hosts[net.JoinHostPort(h, port)] = true
			if port == "80" {
				g.hosts[h] = true // a client leaves the default port out
			}
		}
	default:
		return nil, fmt.Errorf("cell: cannot serve the API on a %s listener", ln.Addr().Network())
	}
	return &http.Server{
		Handler:           g,
		ReadHeaderTimeout: 10 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if uc, ok := c.(*net.UnixConn); ok {
				uid, err := peerUID(uc)
				return context.WithValue(ctx, peerKey{}, peer{uid: uid, err: err})
			}
			return ctx
		},
	}, nil
}

// guard makes the checks of Endpoint before a request reaches the API.
type guard struct {
	next  http.Handler
	unix  bool
	hosts map[string]bool
	// token is the TCP listener's credential; ident names its holder.
	token, ident string
}

type peerKey struct{}

// errNoPeerCred is returned by peerUID where the platform does not report
// a unix socket's peer.
var errNoPeerCred = errors.New("peer credentials are not available on this platform")

// peer is a unix socket client as the kernel reports it; uid is -1 where
// the platform does not report peers (err says so).
type peer struct {
	uid int
	err error
}

type identityKey struct{}

// identity returns the name of the credential a request came with, as an
// approval records it: "unix:USER(uid N)" or "token:api#FINGERPRINT".
func identity(ctx context.Context) string {
	s, _ := ctx.Value(identityKey{}).(string)
	return s
}

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hook := r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, HookPrefix)
	switch {
	case r.Method == http.MethodGet, r.Method == http.MethodHead, r.Method == http.MethodPost:
	case r.Method == http.MethodDelete && strings.HasPrefix(r.URL.Path, "/v1/triggers/"):
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		writeError(w, http.StatusMethodNotAllowed, fmt.Errorf("method %s is not served", r.Method), "the API takes GET and POST (see host/cell/API.md)")
		return
	}
	// Browsers send these; the CLI and the client never do. A page that
	// reaches the port (a cross-origin form, DNS rebinding) is refused
	// before anything else is looked at.
	if _, ok := r.Header["Origin"]; ok {
		writeError(w, http.StatusForbidden, errors.New("a request with an Origin header is refused: the cell API does not serve browsers"), "call the API from a program that sends no Origin header (agentrt, curl)")
		return
	}
	if sfs := r.Header.Get("Sec-Fetch-Site"); sfs != "" && sfs != "none" {
		writeError(w, http.StatusForbidden, fmt.Errorf("a request with Sec-Fetch-Site %q is refused: the cell API does not serve browsers", sfs), "call the API from a program, not a web page")
		return
	}
	if hook {
		// A webhook is signed with its trigger's secret, which the
		// handler checks; it carries no credential of the API, and may
		// come through a proxy that keeps its own Host.
		if p := r.URL.EscapedPath(); cleanPath(p) != p {
			writeError(w, http.StatusBadRequest, fmt.Errorf("path %q is not in canonical form", p), "POST to /v1/hooks/NAME")
			return
		}
		g.next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), identityKey{}, "webhook")))
		return
	}
	if !g.hosts[strings.ToLower(r.Host)] {
		hint := "address the listener by its own loopback address: http://127.0.0.1:PORT/"
		if g.unix {
			hint = "on the unix socket, address the API as http://" + SocketHost + "/ (curl --unix-socket DATA/agentrt.sock http://cell/v1/runs)"
		}
		writeError(w, http.StatusForbidden, fmt.Errorf("host %q is not this listener's", r.Host), hint)
		return
	}
	ctx := r.Context()
	if g.unix {
		p, _ := ctx.Value(peerKey{}).(peer)
		who, err := unixIdentity(p)
		if err != nil {
			writeError(w, http.StatusForbidden, err, "connect as the user the daemon runs as (or root)")
			return
		}
		ctx = context.WithValue(ctx, identityKey{}, who)
	} else {
		if !g.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="agentrt cell"`)
			writeError(w, http.StatusUnauthorized, errors.New("the cell API on TCP needs its token: send Authorization: Bearer TOKEN"),
				"the token is the file "+APITokenFile+" in the cell's data directory: agentrt finds it there (--data) or in $"+EnvAPIToken)
			return
		}
		ctx = context.WithValue(ctx, identityKey{}, g.ident)
	}
	if p := r.URL.EscapedPath(); cleanPath(p) != p {
		writeError(w, http.StatusBadRequest, fmt.Errorf("path %q is not in canonical form (no . or .. segments, no //)", p), "name endpoints as host/cell/API.md writes them")
		return
	}
	if r.Method == http.MethodPost && r.ContentLength != 0 {
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "application/json" {
			writeError(w, http.StatusUnsupportedMediaType, fmt.Errorf("a POST body must be application/json, not %q", r.Header.Get("Content-Type")), "send Content-Type: application/json")
			return
		}
	}
	g.next.ServeHTTP(w, r.WithContext(ctx))
}

// authorized compares the request's bearer token with the listener's in
// constant time.
func (g *guard) authorized(r *http.Request) bool {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), []byte(g.token)) == 1
}

// unixIdentity names a unix socket peer, or refuses it: a peer whose uid
// is neither this process's nor root's got past a socket mode someone
// loosened.
func unixIdentity(p peer) (string, error) {
	me := os.Geteuid()
	if p.uid < 0 {
		if !errors.Is(p.err, errNoPeerCred) {
			return "", fmt.Errorf("the unix socket peer's credentials: %v", p.err)
		}
		// No peer credentials here: the socket's mode (0600) let only
		// its owner in.
		return "unix:" + userName(me) + "(socket owner)", nil
	}
	if p.uid != me && p.uid != 0 {
		return "", fmt.Errorf("the unix socket peer runs as uid %d, neither the daemon's (%d) nor root's", p.uid, me)
	}
	return fmt.Sprintf("unix:%s(uid %d)", userName(p.uid), p.uid), nil
}

func userName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil && u.Username != "" {
		return u.Username
	}
	if uid < 0 {
		return "?"
	}
	return strconv.Itoa(uid)
}

// cleanPath is the path ServeMux would route p to: rooted, without . and
// .. segments or repeated slashes, keeping a trailing slash.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		np += "/"
	}
	return np
}
