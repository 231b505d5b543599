package policy

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/cedar-policy/cedar-go/types"
)

// hostRequest is an http.request to a Host entity named by addr, with the
// grant naming it (explicit) or not.
func hostRequest(addr netip.Addr, explicit bool) Request {
	run := types.NewEntityUID("Run", "r1")
	host := types.NewEntityUID("Host", types.String(addr.String()))
	attrs := types.RecordMap{"name": types.String(addr.String()), "ip": types.IPAddr(netip.PrefixFrom(addr, addr.BitLen()))}
	if explicit {
		attrs["explicit"] = types.True
	}
	return Request{
		Principal: run, Action: "http.request", Resource: host,
		Context: types.NewRecord(types.RecordMap{
			"mode": types.String("unattended"), "clearance": types.Long(0), "time": types.Long(0),
			"spent":  types.NewRecord(types.RecordMap{"calls": types.Long(0), "tokens": types.Long(0), "micros": types.Long(0)}),
			"method": types.String("GET"), "scheme": types.String("http"), "port": types.Long(80), "path": types.String("/"),
		}),
		Entities: types.EntityMap{
			run:  {UID: run, Attributes: types.NewRecord(types.RecordMap{"id": types.String("r1")})},
			host: {UID: host, Attributes: types.NewRecord(attrs)},
		},
	}
}

func last(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr()
	b := a.AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	out, _ := netip.AddrFromSlice(b)
	return out
}

// TestPlatformRangesMatchCedar: the table the dialer applies
// (DeniedAddress) and the Cedar platform set decide every address alike:
// the first and last address of every range, the addresses just outside
// it, the NAT64 forms of the IPv4 ranges, with the grant naming the
// address and without.
func TestPlatformRangesMatchCedar(t *testing.T) {
	e, err := NewEngine(Platform(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var addrs []netip.Addr
	add := func(p netip.Prefix) {
		first, end := p.Masked().Addr(), last(p)
		addrs = append(addrs, first, end, first.Prev(), end.Next())
	}
	for _, rg := range PlatformRanges() {
		add(rg.Prefix)
		if rg.Prefix.Addr().Is4() {
			b := netip.MustParseAddr("64:ff9b::").As16()
			v4 := rg.Prefix.Addr().As4()
			copy(b[12:], v4[:])
			add(netip.PrefixFrom(netip.AddrFrom16(b), 96+rg.Prefix.Bits()))
		}
	}
	addrs = append(addrs, netip.MustParseAddr("8.8.8.8"), netip.MustParseAddr("2606:4700::1111"), netip.MustParseAddr("64:ff9b::808:808"))
	checked := 0
	for _, a := range addrs {
		if !a.IsValid() {
			continue
		}
		rg, denied := DeniedAddress(a)
		for _, explicit := range []bool{false, true} {
			d := e.Decide(hostRequest(a, explicit))
			want := denied && (!explicit || rg.Always)
			if d.Allowed == want {
				t.Errorf("%s (explicit %v): Cedar allowed=%v, the table says range %v (always %v)\n%s", a, explicit, d.Allowed, rg.Prefix, rg.Always, d.Explain())
				continue
			}
			if d.By == ByRequest {
				// IPv4 inside IPv6 has no canonical host: Decide
				// refuses the request before any policy runs.
				if rg.Policy != PolicyIPv4InIPv6 {
					t.Errorf("%s: denied by request: %s", a, d.Reason)
				}
			} else if want && !slices.Contains(d.Determining, SetPlatform+":"+rg.Policy) {
				t.Errorf("%s (explicit %v): Cedar's determining %q lack the table's %s", a, explicit, d.Determining, rg.Policy)
			}
			checked++
		}
	}
	// The table is not judged by itself alone: fixed points.
	for addr, want := range map[string]string{
		"127.0.0.1": PolicyLoopback, "127.255.255.255": PolicyLoopback, "::1": PolicyLoopback,
		"0.0.0.0": PolicyUnspecified, "::": PolicyUnspecified,
		"10.1.2.3": PolicyPrivate, "172.31.255.255": PolicyPrivate, "192.168.0.1": PolicyPrivate, "fd12::1": PolicyPrivate, "100.127.0.1": PolicyPrivate,
		"169.254.169.254": PolicyMetadataAddrs, "169.254.170.2": PolicyMetadataAddrs, "fd00:ec2::254": PolicyMetadataAddrs, "100.100.100.200": PolicyMetadataAddrs,
		"169.254.0.1": PolicyLinkLocal, "fe80::1": PolicyLinkLocal,
		"224.0.0.1": PolicyMulticast, "ff02::1": PolicyMulticast, "255.255.255.255": PolicyMulticast,
		"::ffff:7f00:1": PolicyIPv4InIPv6, "::7f00:1": PolicyIPv4InIPv6,
		"64:ff9b::7f00:1": PolicyNAT64, "64:ff9b::a9fe:a9fe": PolicyMetadataAddrs, "64:ff9b:1::1": PolicyNAT64,
		"8.8.8.8": "", "172.32.0.1": "", "100.128.0.1": "", "2606:4700::1111": "", "64:ff9b::808:808": "",
	} {
		rg, ok := DeniedAddress(netip.MustParseAddr(addr))
		if got := map[bool]string{true: rg.Policy}[ok]; got != want {
			t.Errorf("DeniedAddress(%s) = %q, want %q", addr, got, want)
		}
	}
	t.Logf("%d decisions compared", checked)
}

func netipMust(s string) netip.Addr { return netip.MustParseAddr(s) }

func mustIP(s string) types.IPAddr {
	a, err := types.ParseIPAddr(s)
	if err != nil {
		panic(err)
	}
	return a
}

// BenchmarkDeniedAddress: what the dialer's range check costs a
// connection (a public address walks the whole table).
func BenchmarkDeniedAddress(b *testing.B) {
	a := netip.MustParseAddr("203.0.113.9")
	for b.Loop() {
		DeniedAddress(a)
	}
}
