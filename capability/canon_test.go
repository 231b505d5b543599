package capability

import (
	"errors"
	"strings"
	"testing"
)

// TestCanonicalHost: every spelling of a host gives the one canonical
// form, and the spellings resolvers read differently are refused, naming
// the address they mean.
func TestCanonicalHost(t *testing.T) {
	for in, want := range map[string]string{
		"localhost":                 "localhost",
		"LOCALHOST.":                "localhost",
		"LocalHost":                 "localhost",
		"ｌｏｃａｌｈｏｓｔ":                 "localhost", // full-width
		"metadata.google.internal.": "metadata.google.internal",
		"METADATA.Google.Internal":  "metadata.google.internal",
		"Bücher.Example":            "xn--bcher-kva.example",
		"xn--bcher-kva.example":     "xn--bcher-kva.example",
		"faß.de":                    "xn--fa-hia.de", // non-transitional
		"a.b。c":                     "a.b.c",         // ideographic full stop
		"my_svc.internal":           "my_svc.internal",
		"1.2.3.com":                 "1.2.3.com",
		"127.0.0.1":                 "127.0.0.1",
		"127.0.0.1.":                "127.0.0.1",
		"１２７.０.０.１":                 "127.0.0.1",
		"[::1]":                     "::1",
		"::1":                       "::1",
		"[0:0:0:0:0:0:0:1]":         "::1",
		"[FE80::1]":                 "fe80::1",
		"[::ffff:127.0.0.1]":        "127.0.0.1",
		"::ffff:7f00:1":             "127.0.0.1",
		"[::ffff:a9fe:a9fe]":        "169.254.169.254",
		"[::]":                      "::",
		"2001:DB8::0:1":             "2001:db8::1",
	} {
		got, err := CanonicalHost(in)
		if err != nil || got != want {
			t.Errorf("CanonicalHost(%q) = %q, %v; want %q", in, got, err, want)
		}
		if again, err := CanonicalHost(got); err != nil || again != got {
			t.Errorf("CanonicalHost(%q) = %q, %v: the canonical form is not a fixed point", got, again, err)
		}
	}
	for in, wantErr := range map[string]string{
		"":                                "empty",
		".":                               "no labels",
		"a..b":                            "label is empty",
		"a b":                             `' ' is not allowed`,
		"a%2fb":                           `'%' is not allowed`,
		"exa*mple.com":                    `'*' is not allowed`,
		"-a.com":                          "not a valid host name",
		"xn--zz.example":                  "not a valid host name",
		"\u202eevil.com":                  "not a valid host name",
		"127.1":                           "write 127.0.0.1",
		"0x7f.1":                          "write 127.0.0.1",
		"0x7f000001":                      "write 127.0.0.1",
		"2130706433":                      "write 127.0.0.1",
		"0177.0.0.1":                      "write 127.0.0.1",
		"127.000.000.001":                 "write 127.0.0.1",
		"0":                               "write 0.0.0.0",
		"0xa9fea9fe":                      "write 169.254.169.254",
		"1.2.3.256":                       "not an IPv4 address",
		"1.2.3.4.5":                       "not an IPv4 address",
		"[1.2.3.4]":                       "write 1.2.3.4",
		"[fe80::1%eth0]":                  "zone",
		"fe80::1%25eth0":                  "zone",
		"[::127.0.0.1]":                   "IPv4-compatible",
		"[::1":                            "bracket",
		"[gg::1]":                         "not an IPv6 address",
		strings.Repeat("a", 64) + ".com":  "longer than 63",
		strings.Repeat("a.", 127) + "com": "more than the 253",
	} {
		got, err := CanonicalHost(in)
		if err == nil || !errors.Is(err, ErrHost) || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("CanonicalHost(%q) = %q, %v; want an ErrHost naming %q", in, got, err, wantErr)
		}
	}
}

func TestCanonicalHostEntry(t *testing.T) {
	for in, want := range map[string]string{
		"Example.COM.":          "example.com",
		"example.com:0443":      "example.com:443",
		"[::1]:8080":            "[::1]:8080",
		"[::ffff:127.0.0.1]:80": "127.0.0.1:80",
		"::1":                   "::1",
		"LOCALHOST.:7070":       "localhost:7070",
	} {
		if got, err := CanonicalHostEntry(in); err != nil || got != want {
			t.Errorf("CanonicalHostEntry(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"example.com:", "example.com:0", "example.com:65536", "example.com:http", "[::1]x", "[::1]:", "0x7f.1:80"} {
		if got, err := CanonicalHostEntry(in); !errors.Is(err, ErrHost) {
			t.Errorf("CanonicalHostEntry(%q) = %q, %v; want ErrHost", in, got, err)
		}
	}
}

// TestHostsAreCanonicalInTokens: Normalize gives hosts their canonical
// form, Check refuses any other, and AllowsHost matches every spelling of
// a granted host.
func TestHostsAreCanonicalInTokens(t *testing.T) {
	c := Caps{HTTP: &HTTP{Hosts: []string{"LOCALHOST.", "Bücher.example:0443", "[::ffff:10.0.0.1]"}}}
	c.Normalize()
	if got, want := strings.Join(c.HTTP.Hosts, " "), "10.0.0.1 localhost xn--bcher-kva.example:443"; got != want {
		t.Fatalf("normalized hosts %q, want %q", got, want)
	}
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"Localhost", "localhost.", "[::1]", "example.com:080"} {
		if err := (Caps{HTTP: &HTTP{Hosts: []string{bad}}}).Check(); err == nil || !strings.Contains(err.Error(), "canonical") {
			t.Errorf("Check accepted the non-canonical host %q (%v)", bad, err)
		}
	}
	for hostport, want := range map[string]bool{
		"localhost:80":              true,
		"LOCALHOST.:8080":           true,
		"[::ffff:10.0.0.1]:80":      true,
		"BÜCHER.example.:443":       true,
		"xn--bcher-kva.example:443": true,
		"xn--bcher-kva.example:80":  false,
		"0x0a000001:80":             false, // refused, not matched to 10.0.0.1
		"localhost.localdomain:80":  false,
	} {
		if got := c.AllowsHost(hostport, "443"); got != want {
			t.Errorf("AllowsHost(%q) = %v, want %v", hostport, got, want)
		}
	}
}

func TestCanonicalURLPath(t *testing.T) {
	for in, want := range map[string]string{
		"":              "/",
		"/":             "/",
		"/a/b":          "/a/b",
		"/a/./b":        "/a/b",
		"/a/../b":       "/b",
		"/../../a":      "/a",
		"/a/b/..":       "/a/",
		"/a/b/.":        "/a/b/",
		"/%61dmin":      "/admin",
		"/%2e%2E/admin": "/admin",
		"/a%2fb":        "/a%2Fb", // an encoded slash stays encoded: it is not a separator
		"/a%2Fb":        "/a%2Fb",
		"//admin":       "//admin",
		"/x/%7e/%41":    "/x/~/A",
		"/caf%c3%a9":    "/caf%C3%A9",
	} {
		got, err := CanonicalURLPath(in)
		if err != nil || got != want {
			t.Errorf("CanonicalURLPath(%q) = %q, %v; want %q", in, got, err, want)
		}
		if again, _ := CanonicalURLPath(got); again != got {
			t.Errorf("CanonicalURLPath(%q) = %q: not a fixed point", got, again)
		}
	}
	for _, bad := range []string{"/%", "/%4", "/%zz"} {
		if _, err := CanonicalURLPath(bad); err == nil {
			t.Errorf("CanonicalURLPath(%q) accepted", bad)
		}
	}
}
