package approval

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
)

// StatementVersion is the first line of every statement.
const StatementVersion = "agentrt-approval/1"

// Limits on what a statement and an op name may hold.
const (
	// MaxStatement is the most bytes a statement may have.
	MaxStatement = 4 << 10
	// MaxOp is the longest op name a statement may carry.
	MaxOp = 128
)

// Statement is the text an approver signs: one vote, for or against one
// call of one run. Marshal writes it and ParseStatement reads it; each is
// the other's exact inverse, so the signed bytes have one meaning only.
//
//	agentrt-approval/1
//	run <32 lowercase hex>
//	step <decimal>
//	op <op name>
//	group <group name>
//	digest <64 lowercase hex>
//	vote approve|deny
type Statement struct {
	Run  [16]byte
	Step uint64
	// Op is the call's op, printable ASCII without spaces, at most MaxOp
	// bytes.
	Op string
	// Group is the approver group asked (ValidGroupName).
	Group string
	// Digest is the call's ActionDigest.
	Digest [32]byte
	// Approve is the vote: true for approve, false for deny.
	Approve bool
}

// Marshal returns the statement's text, each line ending in "\n".
func (s *Statement) Marshal() []byte {
	vote := "deny"
	if s.Approve {
		vote = "approve"
	}
	return fmt.Appendf(nil, "%s\nrun %x\nstep %d\nop %s\ngroup %s\ndigest %x\nvote %s\n",
		StatementVersion, s.Run[:], s.Step, s.Op, s.Group, s.Digest[:], vote)
}

// ParseStatement reads a statement as Marshal writes it and refuses any
// other byte sequence: a missing, extra or reordered line, a CR, a space
// too many, uppercase hex, a step with a sign or a leading zero, an
// unknown vote, a missing final newline, more than MaxStatement bytes.
// The error names the line.
func ParseStatement(b []byte) (*Statement, error) {
	if len(b) > MaxStatement {
		return nil, fmt.Errorf("statement: %d bytes, more than the %d a statement may have", len(b), MaxStatement)
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("statement: empty (want %d lines, the first %q)", 7, StatementVersion)
	}
	if b[len(b)-1] != '\n' {
		return nil, fmt.Errorf("statement: the last line does not end in a newline")
	}
	lines := bytes.Split(b[:len(b)-1], []byte("\n"))
	keys := []string{"", "run", "step", "op", "group", "digest", "vote"}
	if len(lines) != len(keys) {
		return nil, fmt.Errorf("statement: %d lines, want %d (%s, then run, step, op, group, digest, vote)", len(lines), len(keys), StatementVersion)
	}
	var s Statement
	for i, raw := range lines {
		n := i + 1
		line := string(raw)
		if j := bytes.IndexFunc(raw, func(r rune) bool { return r < 0x20 || r > 0x7e }); j >= 0 {
			return nil, fmt.Errorf("statement line %d: byte %#x at column %d; a statement is printable ASCII only", n, raw[j], j+1)
		}
		if i == 0 {
			if line != StatementVersion {
				return nil, fmt.Errorf("statement line 1: %q, want %q", shorten(line), StatementVersion)
			}
			continue
		}
		key, val, ok := bytes.Cut(raw, []byte(" "))
		if !ok || string(key) != keys[i] {
			return nil, fmt.Errorf("statement line %d: %q, want %q followed by one space and its value", n, shorten(line), keys[i])
		}
		v := string(val)
		var err error
		switch keys[i] {
		case "run":
			err = parseHex(s.Run[:], v)
		case "step":
			s.Step, err = parseStep(v)
		case "op":
			if err = checkOp(v); err == nil {
				s.Op = v
			}
		case "group":
			if err = checkGroupName(v); err == nil {
				s.Group = v
			}
		case "digest":
			err = parseHex(s.Digest[:], v)
		case "vote":
			switch v {
			case "approve":
				s.Approve = true
			case "deny":
			default:
				err = fmt.Errorf("vote %q, want approve or deny", shorten(v))
			}
		}
		if err != nil {
			return nil, fmt.Errorf("statement line %d: %w", n, err)
		}
	}
	return &s, nil
}

// parseHex fills dst from exactly 2*len(dst) lowercase hex digits.
func parseHex(dst []byte, v string) error {
	if len(v) != 2*len(dst) {
		return fmt.Errorf("%d hex digits, want %d", len(v), 2*len(dst))
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return fmt.Errorf("%q at column %d is not a lowercase hex digit", c, i+1)
		}
	}
	_, err := hex.Decode(dst, []byte(v))
	return err
}

// parseStep reads a decimal uint64 with no sign and no leading zero.
func parseStep(v string) (uint64, error) {
	if v == "" || v[0] < '0' || v[0] > '9' || (v[0] == '0' && len(v) > 1) {
		return 0, fmt.Errorf("step %q, want a decimal number without sign or leading zero", shorten(v))
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("step %q is not a decimal number below 2^64", shorten(v))
	}
	return n, nil
}

// checkOp accepts an op name: 1 to MaxOp printable ASCII bytes, no space.
func checkOp(op string) error {
	if op == "" || len(op) > MaxOp {
		return fmt.Errorf("op name of %d bytes; it must have 1 to %d", len(op), MaxOp)
	}
	for i := 0; i < len(op); i++ {
		if c := op[i]; c <= 0x20 || c > 0x7e {
			return fmt.Errorf("op name %q has byte %#x at %d; it must be printable ASCII without spaces", shorten(op), c, i+1)
		}
	}
	return nil
}

var groupName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// ValidGroupName reports whether name may name a group:
// [a-z0-9][a-z0-9._-]{0,63}, which is also a safe file name.
func ValidGroupName(name string) bool { return groupName.MatchString(name) }

func checkGroupName(name string) error {
	if !ValidGroupName(name) {
		return fmt.Errorf("group name %q; a group name is 1 to 64 of a-z, 0-9, '.', '_', '-', starting with a letter or digit", shorten(name))
	}
	return nil
}

// shorten cuts s for an error message.
func shorten(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}
