package policy

import (
	"fmt"
	"net/netip"

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
