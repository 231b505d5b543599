package termtext

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"
)

// TestEscape: what a hostile guest prints, as the terminal is shown it.
func TestEscape(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain text, tabs\tand\nnewlines\n", "plain text, tabs\tand\nnewlines\n"},
		{"héllo wörld, 日本語, 🙂", "héllo wörld, 日本語, 🙂"},
		{"\x1b[8mhidden\x1b[0m", `\x1b[8mhidden\x1b[0m`},
		{"\x1b]52;c;ZWNobyBwd25lZA==\x07", `\x1b]52;c;ZWNobyBwd25lZA==\x07`},
		{"\x1b]0;title\x1b\\", `\x1b]0;title\x1b\`},
		{"allow it? [y/N] \ry", `allow it? [y/N] \x0dy`},
		{"windows\r\nline\r\n", "windows\r\nline\r\n"},
		{"back\bspace\x00nul\x7fdel", `back\x08space\x00nul\x7fdel`},
		{"c1 \u009b2J csi", `c1 \u009b2J csi`},
		{"raw \x9b2J csi", `raw \x9b2J csi`},
		{"bidi \u202egnp.exe\u202c and \u2066iso\u2069 \u200f", `bidi \u202egnp.exe\u202c and \u2066iso\u2069 \u200f`},
		{"line\u2028sep", `line\u2028sep`},
		{"cut \xe6\x97", `cut \xe6\x97`},
	} {
		if got := String(tc.in); got != tc.want {
			t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got, want := Line("one\ntwo\tthree\r\n"), `one\ntwo\tthree\x0d\n`; got != want {
		t.Errorf("Line: %q, want %q", got, want)
	}
	if got, want := Quote("http://x/\x1b[8m\u202e"), `"http://x/\x1b[8m\u202e"`; got != want {
		t.Errorf("Quote: %q, want %q", got, want)
	}
}

// safe fails unless s could go to a terminal: no control but newline and
// tab (and CR before a newline), no DEL, C1, bidi or invalid UTF-8.
func safe(t *rapid.T, s []byte) {
	if !utf8.Valid(s) {
		t.Fatalf("not UTF-8: %q", s)
	}
	for i, r := range string(s) {
		if r == '\n' || r == '\t' || (r == '\r' && i+1 < len(s) && s[i+1] == '\n') {
			continue
		}
		if unsafeRune(r) {
			t.Fatalf("%U at %d in %q", r, i, s)
		}
	}
}

// TestEscapeProperties: for any bytes, Escape's output and Line's are
// safe, and a Writer fed the same bytes in any split writes what Escape
// returns for them at once.
func TestEscapeProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := rapid.SliceOf(rapid.SampledFrom([]byte("a\n\t\r\x1b\x07\x00\x7f\x80\x9b\xc2\xe2\x80\xae\xe6\x97\xa5\xf0\x9f\x99\x82[]; "))).Draw(t, "in")
		out := Escape(in)
		safe(t, out)
		var buf bytes.Buffer
		w := NewWriter(&buf)
		for rest := in; len(rest) > 0; {
			n := rapid.IntRange(1, len(rest)).Draw(t, "n")
			if k, err := w.Write(rest[:n]); k != n || err != nil {
				t.Fatalf("Write: %d %v", k, err)
			}
			rest = rest[n:]
		}
		w.Flush()
		if !bytes.Equal(buf.Bytes(), out) {
			t.Fatalf("written in pieces: %q, at once: %q", buf.Bytes(), out)
		}
		if in := []byte(strings.ToValidUTF8(string(in), "")); utf8.Valid(in) {
			safe(t, []byte(Line(string(in))))
		}
	})
}

// TestJSONKeepsTheValue: JSON text of any string, passed through JSON,
// decodes to the same string (invalid UTF-8 aside) and shows no control.
func TestJSONKeepsTheValue(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.StringOf(rapid.SampledFrom([]rune("a\n\x1b\x7f\u0085\u009b\u202e\u2066\u2028é🙂\"\\"))).Draw(t, "s")
		b, _ := json.Marshal(map[string]string{"k": s})
		out := JSON(b)
		safe(t, out)
		var back map[string]string
		if err := json.Unmarshal(out, &back); err != nil || back["k"] != s {
			t.Fatalf("%q -> %q -> %q (%v)", s, out, back["k"], err)
		}
	})
	if got := string(JSON(json.RawMessage("[\"\x9b\x7f\"]"))); got != `["\ufffd\u007f"]` {
		t.Errorf("JSON of invalid UTF-8 and DEL: %s", got)
	}
}
