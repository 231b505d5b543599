package capability

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// Canonical hosts. One host has one spelling in agentrt: a grant, a token,
// the policy and the permission modes all compare the strings these
// functions return, so "LOCALHOST.", "ｌｏｃａｌｈｏｓｔ" and "localhost" are
// one resource and get one decision. The core and the edge runtime share
// them; policy/testdata/parity/README.md states the rules for other
// implementations:
//
//   - names: IDNA (UTS #46, non-transitional, as for lookup) to ASCII,
//     which also lower-cases them and maps full-width forms and ideographic
//     full stops; one trailing dot (the DNS root) removed; labels of 1 to
//     63 characters from a-z, 0-9, '-' and '_', at most 253 in all;
//   - IPv4: the dotted quad netip prints; a name whose last label is a
//     number (127.1, 0x7f.1, 2130706433, 0177.0.0.1) is refused, naming the
//     address it means, since resolvers disagree on such forms;
//   - IPv6: without brackets, as RFC 5952 prints it (netip); an IPv4-mapped
//     address is its IPv4 address; zones and IPv4-compatible addresses
//     (::a.b.c.d, deprecated) are refused;
//   - ports: decimal, 1 to 65535, without leading zeros.

// ErrHost is wrapped by every error of the canonicalization functions: the
// text is not a host (or host:port) that agentrt can give one spelling.
var ErrHost = errors.New("not a host agentrt accepts")

// HostError says why a host was refused and, when the host means one that
// has a canonical spelling (an IPv4 address written in hex, say), what to
// write instead.
type HostError struct {
	Host   string
	Reason string
	// Want is the spelling to write instead; empty when there is none.
	Want string
}

func (e *HostError) Error() string {
	s := fmt.Sprintf("host %q: %s", e.Host, e.Reason)
	if e.Want != "" {
		s += fmt.Sprintf("; write %s", e.Want)
	}
	return s
}

// Is makes every *HostError match ErrHost.
func (e *HostError) Is(target error) bool { return target == ErrHost }

func hostErr(h, reason, want string) error { return &HostError{Host: h, Reason: reason, Want: want} }

// maxHostInput bounds the text the functions look at: no canonical host is
// longer than 253 bytes, and IDNA mapping should not run on megabytes.
const maxHostInput = 1024

// lookup is the IDNA profile of host names: UTS #46 mapping for lookup,
// non-transitional (as browsers and IDNA 2008: "ß" stays itself), with
// the Bidi rule and label validation. The STD3 ASCII rules are left to
// CanonicalHost, which allows '_' (service names use it) and nothing else.
var lookup = idna.New(idna.MapForLookup(), idna.BidiRule(), idna.Transitional(false), idna.StrictDomainName(false))

// CanonicalHost returns the canonical spelling of a host: a DNS name, an
// IPv4 address, or an IPv6 address with or without brackets (no port).
// The error is a *HostError.
func CanonicalHost(h string) (string, error) {
	switch {
	case h == "":
		return "", hostErr(h, "empty", "")
	case len(h) > maxHostInput:
		return "", hostErr(h[:32]+"...", fmt.Sprintf("%d bytes, longer than any host name", len(h)), "")
	case strings.HasPrefix(h, "["):
		if !strings.HasSuffix(h, "]") {
			return "", hostErr(h, "an opening bracket without its closing one", "")
		}
		return canonicalIPv6(h, h[1:len(h)-1])
	case strings.Contains(h, ":"):
		return canonicalIPv6(h, h)
	}
	// IDNA first: it maps "１２７.０.０.１" to digits and "。" to a dot, so
	// the checks below see what a resolver would.
	a, err := lookup.ToASCII(h)
	if err != nil {
		return "", hostErr(h, "not a valid host name ("+strings.TrimPrefix(err.Error(), "idna: ")+")", "")
	}
	a = strings.TrimSuffix(a, ".")
	if a == "" {
		return "", hostErr(h, "no labels", "")
	}
	labels := strings.Split(a, ".")
	if numeric(labels[len(labels)-1]) {
		return canonicalIPv4(h, a)
	}
	if len(a) > 253 {
		return "", hostErr(h, fmt.Sprintf("%d characters, more than the 253 of a DNS name", len(a)), "")
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return "", hostErr(h, "a label is empty or longer than 63 characters", "")
		}
		for i := 0; i < len(l); i++ {
			if c := l[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", hostErr(h, fmt.Sprintf("%q is not allowed in a host name", c), "")
			}
		}
	}
	return a, nil
}

// numeric reports whether a label is a number as the WHATWG URL parser
// sees one (decimal digits, or 0x and hex digits), which makes the whole
// host an IPv4 address to it and to inet_aton.
func numeric(l string) bool {
	if l == "" {
		return false
	}
	digits := "0123456789"
	if strings.HasPrefix(l, "0x") {
		l, digits = l[2:], "0123456789abcdef"
	}
	return strings.Trim(l, digits) == ""
}

func canonicalIPv4(h, a string) (string, error) {
	if ip, err := netip.ParseAddr(a); err == nil && ip.Is4() {
		return ip.String(), nil
	}
	if ip, ok := looseIPv4(a); ok {
		return "", hostErr(h, "an IPv4 address in a non-standard form (hex, octal or fewer than four parts), which resolvers read differently", ip.String())
	}
	return "", hostErr(h, "its last label is a number, but it is not an IPv4 address", "")
}

// looseIPv4 parses the forms inet_aton and the WHATWG URL parser accept:
// one to four parts, each decimal, octal (leading 0) or hex (0x), the last
// filling the remaining bytes.
func looseIPv4(a string) (netip.Addr, bool) {
	parts := strings.Split(a, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var v uint64
	for i, p := range parts {
		base := 10
		switch {
		case strings.HasPrefix(p, "0x"):
			p, base = p[2:], 16
			if p == "" {
				p = "0"
			}
		case len(p) > 1 && p[0] == '0':
			p, base = p[1:], 8
		}
		n, err := strconv.ParseUint(p, base, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		if i < len(parts)-1 {
			if n > 255 {
				return netip.Addr{}, false
			}
			v = v<<8 | n
			continue
		}
		rest := uint(8 * (4 - i))
		if n >= 1<<rest {
			return netip.Addr{}, false
		}
		v = v<<rest | n
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

func canonicalIPv6(h, s string) (string, error) {
	if i := strings.IndexByte(s, '%'); i >= 0 {
		return "", hostErr(h, "an IPv6 zone ("+s[i:]+") names an interface of one machine, not a host", "")
	}
	ip, err := netip.ParseAddr(s)
	if err != nil {
		return "", hostErr(h, "not an IPv6 address", "")
	}
	switch {
	case ip.Is4():
		return "", hostErr(h, "an IPv4 address in brackets", ip.String())
	case ip.Is4In6():
		// The mapped form is the IPv4 address: the kernel and Go's
		// dialer connect to it as one.
		return ip.Unmap().String(), nil
	case netip.MustParsePrefix("::/96").Contains(ip) && !ip.IsUnspecified() && !ip.IsLoopback():
		b := ip.As16()
		v4 := netip.AddrFrom4([4]byte(b[12:]))
		return "", hostErr(h, "an IPv4-compatible IPv6 address (deprecated by RFC 4291)", v4.String()+" if the IPv4 address is meant")
	}
	return ip.String(), nil
}

// CanonicalPort returns the canonical spelling of a port: decimal, 1 to
// 65535, without leading zeros.
func CanonicalPort(p string) (string, error) {
	t := strings.TrimLeft(p, "0")
	if p == "" || strings.Trim(p, "0123456789") != "" || len(t) > 5 {
		return "", fmt.Errorf("%w: port %q: want a number from 1 to 65535", ErrHost, p)
	}
	n, _ := strconv.Atoi(t)
	if n < 1 || n > 65535 {
		return "", fmt.Errorf("%w: port %q: want a number from 1 to 65535", ErrHost, p)
	}
	return strconv.Itoa(n), nil
}

// CanonicalHostPort splits and canonicalizes "host", "host:port",
// "[v6]", "[v6]:port" or a bare IPv6 address. port is "" when s has none.
// (A bare IPv6 address cannot carry a port: "::1:80" is the address ::1:80;
// write [::1]:80.)
func CanonicalHostPort(s string) (host, port string, err error) {
	h := s
	switch {
	case strings.HasPrefix(s, "["):
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", "", hostErr(s, "an opening bracket without its closing one", "")
		}
		h = s[:end+1]
		if rest := s[end+1:]; rest != "" {
			if rest[0] != ':' {
				return "", "", hostErr(s, "text after the closing bracket that is not :PORT", "")
			}
			port = rest[1:]
			if port == "" {
				return "", "", hostErr(s, "an empty port", "")
			}
		}
	case strings.Count(s, ":") == 1:
		h, port, _ = strings.Cut(s, ":")
		if port == "" {
			return "", "", hostErr(s, "an empty port", "")
		}
	}
	if host, err = CanonicalHost(h); err != nil {
		return "", "", err
	}
	if port != "" {
		if port, err = CanonicalPort(port); err != nil {
			return "", "", fmt.Errorf("host %q: %w", s, err)
		}
	}
	return host, port, nil
}

// CanonicalHostEntry returns the canonical spelling of a host list entry
// ("host" or "host:port", as HTTP.Hosts holds them).
func CanonicalHostEntry(s string) (string, error) {
	h, p, err := CanonicalHostPort(s)
	if err != nil {
		return "", err
	}
	return JoinHost(h, p), nil
}

// JoinHost joins a canonical host and port ("" for none) into an entry:
// "host", "host:port", or "[v6]:port".
func JoinHost(host, port string) string {
	if port == "" {
		return host
	}
	return net.JoinHostPort(host, port)
}

// CanonicalURLPath returns the one spelling of a URL path (as it is sent,
// percent-encoded), by RFC 3986's normalizations that keep its meaning
// (section 6.2.2): percent-encoded unreserved characters (letters, digits,
// "-", ".", "_", "~") decoded, other percent-encodings in upper case, then
// the "." and ".." segments removed (section 5.2.4), so "/a/./b/../%63"
// and "/a/c" are one path. Empty segments ("//") are kept: servers may
// tell them apart. A path that is not valid percent-encoding is an error.
func CanonicalURLPath(p string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(p) || !ishex(p[i+1]) || !ishex(p[i+2]) {
			return "", fmt.Errorf("path %q: %q is not a percent-encoding", p, p[i:min(i+3, len(p))])
		}
		v := unhex(p[i+1])<<4 | unhex(p[i+2])
		if unreserved(v) {
			b.WriteByte(v)
		} else {
			b.WriteString(strings.ToUpper(p[i : i+3]))
		}
		i += 2
	}
	out := removeDotSegments(b.String())
	if out == "" || out[0] != '/' {
		out = "/" + out
	}
	return out, nil
}

func ishex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}

func unreserved(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

// removeDotSegments is RFC 3986 section 5.2.4 for an absolute path.
func removeDotSegments(p string) string {
	var out []string
	segs := strings.Split(p, "/")
	for i, s := range segs {
		last := i == len(segs)-1
		switch s {
		case ".":
			if last {
				out = append(out, "")
			}
		case "..":
			if len(out) > 1 {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, s)
		}
	}
	return strings.Join(out, "/")
}
