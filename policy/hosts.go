package policy

import (
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"

	"github.com/agentrt/agentrt/capability"
	"github.com/cedar-policy/cedar-go/types"
)

const hostType = types.EntityType("Host")

// CanonicalizeHosts puts the Host resource of r, and every Host entity,
// in canonical form (capability.CanonicalHost), so that a request spelled
// "METADATA.google.internal." is decided as "metadata.google.internal":
// the uid and the name attribute become the canonical host, and an IP
// literal gets its ip attribute when the entity has none. The gate builds
// its requests canonical; ParseRequest and RequestJSON call this, and
// Decide denies a Host resource that is not canonical.
func CanonicalizeHosts(r *Request) error {
	if r.Resource.Type == hostType {
		id, err := capability.CanonicalHost(string(r.Resource.ID))
		if err != nil {
			return fmt.Errorf("request: resource: %w", err)
		}
		r.Resource.ID = types.String(id)
	}
	out := make(types.EntityMap, len(r.Entities))
	for uid, ent := range r.Entities {
		if uid.Type != hostType {
			out[uid] = ent
			continue
		}
		id, err := capability.CanonicalHost(string(uid.ID))
		if err != nil {
			return fmt.Errorf("request: entity %s: %w", uid, err)
		}
		attrs := ent.Attributes.Map()
		if v, ok := attrs["name"].(types.String); ok {
			name, err := capability.CanonicalHost(string(v))
			if err != nil {
				return fmt.Errorf("request: entity %s: name: %w", uid, err)
			}
			attrs["name"] = types.String(name)
		}
		if ip, err := netip.ParseAddr(id); err == nil {
			if _, ok := attrs["ip"]; !ok {
				attrs["ip"] = types.IPAddr(netip.PrefixFrom(ip, ip.BitLen()))
			}
		}
		uid.ID = types.String(id)
		if _, dup := out[uid]; dup {
			return fmt.Errorf("request: two Host entities are one host, %s", id)
		}
		ent.UID = uid
		ent.Attributes = types.NewRecord(attrs)
		out[uid] = ent
	}
	r.Entities = out
	return nil
}

// checkHost returns why the Host resource of a request is not as the gate
// builds it (canonical, its name its id, an IP literal's ip attribute that
// address), or "".
func checkHost(r Request) string {
	id := string(r.Resource.ID)
	if canon, err := capability.CanonicalHost(id); err != nil {
		return err.Error()
	} else if canon != id {
		return fmt.Sprintf("host %q is not in canonical form (%q): canonicalize the request first", id, canon)
	}
	attrs := r.Entities[r.Resource].Attributes
	if v, ok := attrs.Get("name"); ok && v != types.String(id) {
		return fmt.Sprintf("host %q has the name %s: a Host's name is its id", id, v.String())
	}
	if ip, err := netip.ParseAddr(id); err == nil {
		v, ok := attrs.Get("ip")
		if a, isIP := v.(types.IPAddr); !ok || !isIP || a.Prefix() != netip.PrefixFrom(ip, ip.BitLen()) {
			return fmt.Sprintf("host %q is an IP address, and its ip attribute must be that address", id)
		}
	}
	return ""
}

// hostLiteral finds the Host entity references in a policy's canonical
// text (an unescaped quote after Host:: only starts an entity id: quotes
// inside string literals are escaped).
var hostLiteral = regexp.MustCompile(`(?:^|[^A-Za-z0-9_:])Host::"((?:[^"\\]|\\.)*)"`)

// hostLiterals returns why a policy names a Host in a form no request
// has (requests are canonical, so such a policy would never match:
// a forbid on Host::"LOCALHOST." would let localhost through), or "".
func hostLiterals(text string) string {
	for _, m := range hostLiteral.FindAllStringSubmatch(text, -1) {
		raw := unescapeCedar(m[1])
		canon, err := capability.CanonicalHost(raw)
		switch {
		case err != nil:
			return fmt.Sprintf("Host::%q can never match: requests name hosts in canonical form, and %v", raw, err)
		case canon != raw:
			return fmt.Sprintf("Host::%q can never match: requests name hosts in canonical form; write Host::%q", raw, canon)
		}
	}
	return ""
}

// unescapeCedar undoes the escapes of a Cedar string literal (\\u{HEX}
// and Rust's single-character escapes), best effort: what it cannot read
// stays as it is and fails canonicalization.
func unescapeCedar(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch c := s[i]; c {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case '0':
			b.WriteByte(0)
		case 'u':
			end := strings.IndexByte(s[i:], '}')
			if end > 2 && s[i+1] == '{' {
				if n, err := strconv.ParseUint(s[i+2:i+end], 16, 32); err == nil {
					b.WriteRune(rune(n))
					i += end
					continue
				}
			}
			b.WriteString(`\u`)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
