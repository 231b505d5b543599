package caps_test

import (
	"strings"
	"testing"

	"github.com/agentrt/agentrt/host/caps"
)

// TestCheckGrantPath: a grant path is absolute and clean in the syntax of
// either family, so that a grant written for Windows is checked the same
// on Linux, where it is replayed or audited.
func TestCheckGrantPath(t *testing.T) {
	for _, tc := range []struct{ p, want string }{
		{"/usr/bin/grep", ""},
		{"/", ""},
		{`C:\tools\grep.exe`, ""},
		{`c:/tools`, ""},
		{"", "a path is required"},
		{"bin/grep", "is not absolute"},
		{`tools\grep.exe`, "is not absolute"},
		{"/usr/../etc", `not clean; write it as "/etc"`},
		{"/usr/bin/", "not clean"},
		{`C:\tools\..\Windows`, "contains '..'"},
		{`C:/tools/../Windows`, "contains '..'"},
		{"/a\x00b", "without NUL"},
		{"/a\xffb", "UTF-8"},
	} {
		err := caps.CheckGrantPath("exec", tc.p)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("CheckGrantPath(%q) = %v, want nil", tc.p, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "exec: ")):
			t.Errorf("CheckGrantPath(%q) = %v, want an error naming exec and saying %q", tc.p, err, tc.want)
		}
	}
}

func TestWithinAny(t *testing.T) {
	for _, tc := range []struct {
		p     string
		roots []string
		want  bool
	}{
		{"/srv/data/x", []string{"/srv/data"}, true},
		{"/srv/data", []string{"/srv/data"}, true},
		{"/srv/database", []string{"/srv/data"}, false},
		{"/etc", []string{"/"}, true},
		{"/etc", []string{"/srv", "/etc"}, true},
		{"/etc", nil, false},
		{`C:\Data\Keys`, []string{`c:\data`}, true},
		{`C:/Data/Keys`, []string{`C:\Data\`}, true},
		{`C:\Database`, []string{`C:\Data`}, false},
		{`C:\anything`, []string{`C:\`}, true},
		{`D:\Data`, []string{`C:\Data`}, false},
		{"/srv/data", []string{`C:\srv`}, false},
	} {
		if got := caps.WithinAny(tc.p, tc.roots); got != tc.want {
			t.Errorf("WithinAny(%q, %q) = %v, want %v", tc.p, tc.roots, got, tc.want)
		}
	}
}

func TestIsWholeHost(t *testing.T) {
	for p, want := range map[string]bool{
		"/": true, `C:\`: true, "C:/": true, `c:\\`: true,
		"/tmp": false, `C:\tmp`: false, "": false,
	} {
		if got := caps.IsWholeHost(p); got != want {
			t.Errorf("IsWholeHost(%q) = %v, want %v", p, got, want)
		}
	}
}
