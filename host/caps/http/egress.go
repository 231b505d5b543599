package http

import (
	"context"
	"errors"
	"fmt"
	"net"
	nethttp "net/http"
	"net/netip"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/agentrt/agentrt/policy"
)

// What the http capability can reach. The gate decides on the URL (the
// grant's hosts, then the policy on its canonical host); the dialer decides
// on every address it actually connects to, after DNS, so a name that
// resolves into the machine or its networks (DNS rebinding) is refused as
// the address itself would be:
//
//  1. never a listener of this cell (Deps.Listeners), whatever the grant
//     says: its address, and for a listener on a loopback or unspecified
//     address its port on any loopback address (and, for unspecified, on
//     any address of this machine's interfaces);
//  2. never an address of the platform's ranges (policy.DeniedAddress:
//     loopback, private, link-local, metadata, ...) unless the run's grant
//     names that address itself (an IP literal among its hosts, or
//     localhost for a loopback address), and never a metadata address.
//
// Each run has its own transport, closed when the run ends: a connection
// opened under one run's grant never carries another run's request.
// Redirects are not followed and proxies from the environment are ignored.

// Listener is an address the cell listens on, and what listens there.
type Listener struct {
	Addr netip.AddrPort
	What string // e.g. "the cell API"
}

// Listeners tells the http capability where the cell itself listens, so
// that no agent reaches the cell's own API, metrics or UI. It is asked at
// every connection, so a listener registered after the host started
// (ListenerSet.Add) is refused from then on.
type Listeners interface {
	Listening() []Listener
}

// ListenerSet is a Listeners that listeners are added to and removed from
// as they open and close. The zero value is empty and ready to use.
type ListenerSet struct {
	mu   sync.RWMutex
	next int
	set  map[int]Listener
}

// Add registers the TCP address a (a listener's Addr) as the cell's own,
// described by what, and returns the function that removes it. Addresses
// that are not TCP (a unix socket) are no destination of the http
// capability and are not registered.
func (l *ListenerSet) Add(what string, a net.Addr) (remove func()) {
	ap, err := netip.ParseAddrPort(a.String())
	if a.Network() != "tcp" || err != nil {
		return func() {}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.set == nil {
		l.set = map[int]Listener{}
	}
	id := l.next
	l.next++
	l.set[id] = Listener{Addr: netip.AddrPortFrom(ap.Addr().Unmap().WithZone(""), ap.Port()), What: what}
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.set, id)
	}
}

// Listening returns the registered listeners.
func (l *ListenerSet) Listening() []Listener {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]Listener, 0, len(l.set))
	for _, v := range l.set {
		out = append(out, v)
	}
	return out
}

// ErrEgress is wrapped by every *EgressError.
var ErrEgress = errors.New("connection refused by the egress rules")

// EgressError is a connection the http capability's dialer refused: the
// name the URL gave, the address it resolved to, and the rule.
type EgressError struct {
	Name string
	Addr netip.AddrPort
	// Listener is the cell's own listener the address reaches, when that
	// is the reason.
	Listener *Listener
	// Range is the platform range the address is in, otherwise.
	Range policy.AddressRange
}

func (e *EgressError) Error() string {
	where := e.Addr.String()
	if e.Name != e.Addr.Addr().String() {
		where = fmt.Sprintf("%s (resolved to %s)", e.Name, e.Addr)
	}
	if e.Listener != nil {
		return fmt.Sprintf("%s is the cell's own listener (%s on %s): no grant reaches it", where, e.Listener.What, e.Listener.Addr)
	}
	if e.Range.Always {
		return fmt.Sprintf("%s is in %s (%s): no grant reaches it (policy %s)", where, e.Range.Prefix, e.Range.Kind, e.Range.Policy)
	}
	return fmt.Sprintf("%s is in %s (%s), which the grant does not name (policy %s; a grant reaches such an address only by listing it, e.g. \"%s\")",
		where, e.Range.Prefix, e.Range.Kind, e.Range.Policy, e.Addr.Addr())
}

// Is makes every *EgressError match ErrEgress.
func (e *EgressError) Is(target error) bool { return target == ErrEgress }

// egressGuard applies the rules to the addresses one run connects to.
type egressGuard struct {
	grant     *Grant
	listeners Listeners
	// localAddrs lists this machine's interface addresses; a variable so
	// that tests can see it called.
	localAddrs func() []netip.Addr
}

// check returns the *EgressError refusing a connection to ap for name, or
// nil.
func (g *egressGuard) check(name string, ap netip.AddrPort) error {
	ap = netip.AddrPortFrom(ap.Addr().Unmap().WithZone(""), ap.Port())
	if l := g.ownListener(ap); l != nil {
		return &EgressError{Name: name, Addr: ap, Listener: l}
	}
	if rg, ok := policy.DeniedAddress(ap.Addr()); ok && (rg.Always || !g.grant.namesAddr(ap.Addr(), ap.Port())) {
		return &EgressError{Name: name, Addr: ap, Range: rg}
	}
	return nil
}

// ownListener returns the cell's listener that a connection to ap would
// reach, if any.
func (g *egressGuard) ownListener(ap netip.AddrPort) *Listener {
	if g.listeners == nil {
		return nil
	}
	a := ap.Addr()
	var local []netip.Addr
	for _, l := range g.listeners.Listening() {
		if l.Addr.Port() != ap.Port() {
			continue
		}
		la := l.Addr.Addr()
		// Connecting to the unspecified address reaches this machine.
		hit := la == a || a.IsUnspecified()
		switch {
		case la.IsLoopback():
			hit = hit || a.IsLoopback()
		case la.IsUnspecified():
			// A listener on 0.0.0.0 or [::] (dual stack) takes every
			// address of the machine.
			if !hit && !a.IsLoopback() && local == nil {
				local = g.localAddrs()
			}
			hit = hit || a.IsLoopback() || slices.Contains(local, a)
		}
		if hit {
			return &l
		}
	}
	return nil
}

// interfaceAddrs returns the addresses of this machine's interfaces.
func interfaceAddrs() []netip.Addr {
	addrs, err := net.InterfaceAddrs()
	out := []netip.Addr{}
	if err != nil {
		return out
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out
}

// dialLog collects the refusals of one request's dials: a name with
// several addresses is dialled address by address, and when none
// connects the refusals say why the request is denied.
type dialLog struct {
	mu      sync.Mutex
	refused []*EgressError
}

type dialLogKey struct{}

func (l *dialLog) add(e *EgressError) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refused = append(l.refused, e)
}

func (l *dialLog) first() *EgressError {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.refused) == 0 {
		return nil
	}
	return l.refused[0]
}

// runEgress is the http client of one run: its own transport, whose
// dialer applies the run's guard to every connection.
type runEgress struct {
	guard     egressGuard
	transport *nethttp.Transport
	client    *nethttp.Client
}

const dialTimeout = 30 * time.Second

func newRunEgress(grant *Grant, deps Deps) *runEgress {
	e := &runEgress{guard: egressGuard{grant: grant, listeners: deps.Listeners, localAddrs: interfaceAddrs}}
	e.transport = &nethttp.Transport{
		Proxy: nil, // never from the environment
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return e.dial(ctx, deps.Resolver, network, addr)
		},
		ForceAttemptHTTP2:     true,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	e.client = &nethttp.Client{CheckRedirect: noRedirects, Transport: e.transport}
	return e
}

// dial connects to addr ("name:port") checking each address the name
// resolves to as it is connected: the Control hook sees the IP and port of
// the socket about to connect, after resolution, so what is checked is
// what is dialled.
func (e *runEgress) dial(ctx context.Context, resolver *net.Resolver, network, addr string) (net.Conn, error) {
	name, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	log, _ := ctx.Value(dialLogKey{}).(*dialLog)
	d := net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second, Resolver: resolver,
		ControlContext: func(_ context.Context, _, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("%w: the dialled address %q is not an IP address and port", ErrEgress, address)
			}
			if err := e.guard.check(name, ap); err != nil {
				if ee := (*EgressError)(nil); errors.As(err, &ee) && log != nil {
					log.add(ee)
				}
				return err
			}
			return nil
		}}
	return d.DialContext(ctx, network, addr)
}

// close ends the run's connections.
func (e *runEgress) close() { e.transport.CloseIdleConnections() }

// noRedirects makes an nethttp.Client hand 3xx responses to the guest, whose
// next request passes the gate again.
func noRedirects(*nethttp.Request, []*nethttp.Request) error { return nethttp.ErrUseLastResponse }
