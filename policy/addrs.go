package policy

import (
	"net/netip"
)

// AddressRange is a block of addresses the platform policy keeps HTTP
// away from: the machine itself, its private networks, and the cloud
// metadata services that hand out its credentials. platform.cedar denies
// the IP-literal hosts in them, and the http capability's dialer applies
// DeniedAddress to every address it connects to, so a name that resolves
// into one (DNS rebinding) is refused too. TestPlatformRangesMatchCedar
// holds the two to the same table.
type AddressRange struct {
	Prefix netip.Prefix
	// Kind says what the range is, for messages: "loopback", "private", ...
	Kind string
	// Policy is the id of the platform policy that denies it.
	Policy string
	// Always: denied even when the grant names the address itself.
	// Otherwise a grant that names it (an IP literal, or localhost for
	// loopback) reaches it.
	Always bool
}

// Ids of the platform policies that deny address ranges.
const (
	PolicyMetadataAddrs = "platform.deny-metadata-addresses"
	PolicyIPv4InIPv6    = "platform.deny-ipv4-in-ipv6"
	PolicyLoopback      = "platform.deny-loopback"
	PolicyUnspecified   = "platform.deny-unspecified"
	PolicyLinkLocal     = "platform.deny-link-local"
	PolicyPrivate       = "platform.deny-private"
	PolicyMulticast     = "platform.deny-multicast-broadcast"
	PolicyNAT64         = "platform.deny-nat64"
)

func r(prefix, kind, policy string, always bool) AddressRange {
	return AddressRange{Prefix: netip.MustParsePrefix(prefix), Kind: kind, Policy: policy, Always: always}
}

// platformRanges, most specific first: DeniedAddress returns the first
// that contains an address.
var platformRanges = []AddressRange{
	// Cloud metadata services: credentials of the machine. No grant
	// reaches them, named or not.
	r("169.254.169.254/32", "cloud metadata (AWS, GCP, Azure, OpenStack and others)", PolicyMetadataAddrs, true),
	r("169.254.170.2/32", "cloud metadata (AWS ECS task credentials)", PolicyMetadataAddrs, true),
	r("169.254.170.23/32", "cloud metadata (AWS EKS pod identity)", PolicyMetadataAddrs, true),
	r("100.100.100.200/32", "cloud metadata (Alibaba Cloud)", PolicyMetadataAddrs, true),
	r("192.0.0.192/32", "cloud metadata (Oracle Cloud)", PolicyMetadataAddrs, true),
	r("fd00:ec2::254/128", "cloud metadata (AWS, IPv6)", PolicyMetadataAddrs, true),
	r("fd00:ec2::23/128", "cloud metadata (AWS EKS pod identity, IPv6)", PolicyMetadataAddrs, true),
	// IPv4 written inside IPv6. Canonical hosts never have these forms
	// (a mapped address is its IPv4 address; a compatible one is refused),
	// so they are denied whole: a request that carries one did not come
	// through canonicalization.
	r("::ffff:0:0/96", "IPv4-mapped IPv6", PolicyIPv4InIPv6, true),
	r("::1/128", "loopback", PolicyLoopback, false),
	r("::/128", "unspecified", PolicyUnspecified, false),
	r("::/96", "IPv4-compatible IPv6 (deprecated)", PolicyIPv4InIPv6, true),
	r("127.0.0.0/8", "loopback", PolicyLoopback, false),
	r("0.0.0.0/8", "unspecified (this network)", PolicyUnspecified, false),
	r("169.254.0.0/16", "link-local", PolicyLinkLocal, false),
	r("fe80::/10", "link-local", PolicyLinkLocal, false),
	r("10.0.0.0/8", "private", PolicyPrivate, false),
	r("172.16.0.0/12", "private", PolicyPrivate, false),
	r("192.168.0.0/16", "private", PolicyPrivate, false),
	r("fc00::/7", "private (unique local)", PolicyPrivate, false),
	// RFC 6598's shared space is a carrier's or a provider's internal
	// network (Tailscale, carrier-grade NAT; Alibaba's metadata is in it):
	// not the public internet, so private here.
	r("100.64.0.0/10", "private (shared address space, RFC 6598)", PolicyPrivate, false),
	r("224.0.0.0/4", "multicast", PolicyMulticast, false),
	r("ff00::/8", "multicast", PolicyMulticast, false),
	r("240.0.0.0/4", "reserved and broadcast", PolicyMulticast, false),
	// NAT64 (RFC 6052, 8215): on an IPv6-only network the gateway
	// translates these to the IPv4 address they embed. The well-known
	// prefix is checked by what it embeds (DeniedAddress); the local-use
	// prefix is a private network's own.
	r("64:ff9b:1::/48", "NAT64 local use (RFC 8215)", PolicyNAT64, false),
}

var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// PlatformRanges returns the address ranges the platform policy denies,
// most specific first.
func PlatformRanges() []AddressRange { return append([]AddressRange(nil), platformRanges...) }

// DeniedAddress returns the range of the platform policy that a holds, if
// any. An address in the NAT64 well-known prefix is judged by the IPv4
// address it embeds: its range is the NAT64 form of that address's.
func DeniedAddress(a netip.Addr) (AddressRange, bool) {
	a = a.WithZone("")
	if nat64.Contains(a) {
		b := a.As16()
		in, ok := DeniedAddress(netip.AddrFrom4([4]byte(b[12:])))
		if !ok {
			return AddressRange{}, false
		}
		var p [16]byte
		copy(p[:], b[:12])
		v4 := in.Prefix.Addr().As4()
		copy(p[12:], v4[:])
		policy := PolicyNAT64
		if in.Always {
			policy = in.Policy
		}
		return AddressRange{Prefix: netip.PrefixFrom(netip.AddrFrom16(p), 96+in.Prefix.Bits()),
			Kind: "NAT64 form of " + in.Kind, Policy: policy, Always: in.Always}, true
	}
	for _, rg := range platformRanges {
		if rg.Prefix.Contains(a) {
			return rg, true
		}
	}
	return AddressRange{}, false
}
