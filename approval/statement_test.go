package approval

import (
	"bytes"
	"strings"
	"testing"
)

const goodStatement = "agentrt-approval/1\n" +
	"run 0123456789abcdeffedcba9876543210\n" +
	"step 7\n" +
	"op tool.call\n" +
	"group release\n" +
	"digest 00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n" +
	"vote approve\n"

// TestStatementRoundTrip: Marshal and ParseStatement are inverses.
func TestStatementRoundTrip(t *testing.T) {
	s, err := ParseStatement([]byte(goodStatement))
	if err != nil {
		t.Fatal(err)
	}
	if s.Run != testRun || s.Step != 7 || s.Op != "tool.call" || s.Group != "release" || !s.Approve || s.Digest[31] != 0xff {
		t.Fatalf("parsed %+v", s)
	}
	if got := string(s.Marshal()); got != goodStatement {
		t.Fatalf("Marshal gave\n%s", got)
	}
	s.Approve, s.Step = false, 18446744073709551615
	back, err := ParseStatement(s.Marshal())
	if err != nil || *back != *s {
		t.Fatalf("round trip of %+v: %+v, %v", s, back, err)
	}
}

// TestParseStatementRefuses: every byte sequence but Marshal's is refused,
// naming the line.
func TestParseStatementRefuses(t *testing.T) {
	replace := func(old, new string) string { return strings.Replace(goodStatement, old, new, 1) }
	cases := []struct {
		name, in, want string
	}{
		{"empty", "", "statement: empty"},
		{"no final newline", strings.TrimSuffix(goodStatement, "\n"), "the last line does not end in a newline"},
		{"an extra line", goodStatement + "note hi\n", "8 lines, want 7"},
		{"a blank line at the end", goodStatement + "\n", "8 lines, want 7"},
		{"CR line ends", strings.ReplaceAll(goodStatement, "\n", "\r\n"), "statement line 1: byte 0xd at column 19"},
		{"another version", replace("approval/1", "approval/2"), `statement line 1: "agentrt-approval/2", want "agentrt-approval/1"`},
		{"uppercase hex", replace("abcdef", "ABCDEF"), `statement line 2: 'A' at column 11 is not a lowercase hex digit`},
		{"a short run", replace("3210\n", "321\n"), "statement line 2: 31 hex digits, want 32"},
		{"two spaces", replace("step 7", "step  7"), `statement line 3: step " 7"`},
		{"a trailing space", replace("step 7", "step 7 "), `statement line 3: step "7 "`},
		{"a leading zero", replace("step 7", "step 07"), "statement line 3: step \"07\", want a decimal number without sign or leading zero"},
		{"a sign", replace("step 7", "step +7"), "statement line 3: step \"+7\""},
		{"a step over 2^64", replace("step 7", "step 18446744073709551616"), "is not a decimal number below 2^64"},
		{"lines out of order", replace("step 7\nop tool.call\n", "op tool.call\nstep 7\n"), `statement line 3: "op tool.call", want "step"`},
		{"a tab", replace("op tool.call", "op\ttool.call"), "statement line 4: byte 0x9 at column 3"},
		{"an op with a space", replace("op tool.call", "op tool call"), "statement line 4: op name \"tool call\" has byte 0x20"},
		{"an op too long", replace("op tool.call", "op "+strings.Repeat("x", MaxOp+1)), "op name of 129 bytes"},
		{"an uppercase group", replace("group release", "group Release"), `statement line 5: group name "Release"`},
		{"an unknown vote", replace("vote approve", "vote yes"), `statement line 7: vote "yes", want approve or deny`},
		{"an uppercase vote", replace("vote approve", "vote APPROVE"), `statement line 7: vote "APPROVE"`},
		{"non-UTF-8", replace("op tool.call", "op tool.\xff"), "statement line 4: byte 0xff at column 9"},
		{"UTF-8 outside ASCII", replace("op tool.call", "op tool.é"), "statement line 4: byte 0xc3"},
		{"too long", goodStatement + strings.Repeat("x", MaxStatement), "more than the 4096 a statement may have"},
		{"a missing key", replace("digest ", "digest"), `statement line 6: "digest0011`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseStatement([]byte(c.in))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
}

// FuzzParseStatement: whatever ParseStatement accepts, Marshal writes back
// byte for byte, so a signed statement has one reading.
func FuzzParseStatement(f *testing.F) {
	f.Add([]byte(goodStatement))
	f.Add([]byte(strings.Replace(goodStatement, "approve", "deny", 1)))
	f.Add([]byte(strings.Replace(goodStatement, "step 7", "step 0", 1)))
	f.Add([]byte(strings.ReplaceAll(goodStatement, "\n", "\r\n")))
	f.Add([]byte("agentrt-approval/1\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseStatement(b)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "statement") {
				t.Fatalf("an error that does not say where: %v", err)
			}
			return
		}
		if again := s.Marshal(); !bytes.Equal(again, b) {
			t.Fatalf("parsed %q, marshalled %q", b, again)
		}
	})
}
