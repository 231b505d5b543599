package agent

import (
	"bytes"
	"crypto/sha256"
	"sort"
)

// Fingerprint names a tool call by what it asks for: the SHA-256 of the
// tool's name, a zero byte and the canonical form of its arguments. Two
// calls with the same fingerprint ask the same thing, however the model
// spaced or ordered their JSON; Loop counts them to find a model that
// repeats itself. guest-sdk/c/agentrt_loop.h computes the same bytes.
//
// The canonical form of JSON arguments drops insignificant whitespace and
// sorts every object's members by their keys' bytes as written, between
// the quotes (escapes as the model wrote them, a stable sort); strings, numbers and literals are kept as
// written. Empty arguments are "{}"; arguments that are not JSON are
// hashed as they are.
func Fingerprint(call LLMPart) [32]byte {
	h := sha256.New()
	h.Write([]byte(call.Name))
	h.Write([]byte{0})
	h.Write(canonicalArguments(call.Arguments))
	var fp [32]byte
	h.Sum(fp[:0])
	return fp
}

// maxJSONDepth bounds the nesting canonicalArguments follows, as the C
// loop's recursion must; deeper arguments are hashed as they are.
const maxJSONDepth = 64

// canonicalArguments returns the canonical form of args (Fingerprint).
func canonicalArguments(args []byte) []byte {
	if len(args) == 0 {
		return []byte("{}")
	}
	p := &jsonCanon{in: args}
	var out bytes.Buffer
	if !p.value(&out, 0) {
		return args
	}
	p.space()
	if p.i != len(p.in) {
		return args
	}
	return out.Bytes()
}

// jsonCanon is a scanner of one JSON text, writing its canonical form.
type jsonCanon struct {
	in []byte
	i  int
}

func (p *jsonCanon) space() {
	for p.i < len(p.in) {
		switch p.in[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonCanon) value(out *bytes.Buffer, depth int) bool {
	p.space()
	if p.i >= len(p.in) || depth > maxJSONDepth {
		return false
	}
	switch c := p.in[p.i]; {
	case c == '{':
		return p.object(out, depth)
	case c == '[':
		p.i++
		out.WriteByte('[')
		p.space()
		if p.i < len(p.in) && p.in[p.i] == ']' {
			p.i++
			out.WriteByte(']')
			return true
		}
		for {
			if !p.value(out, depth+1) {
				return false
			}
			p.space()
			if p.i >= len(p.in) {
				return false
			}
			switch p.in[p.i] {
			case ',':
				p.i++
				out.WriteByte(',')
			case ']':
				p.i++
				out.WriteByte(']')
				return true
			default:
				return false
			}
		}
	case c == '"':
		s, ok := p.str()
		out.Write(s)
		return ok
	default:
		return p.scalar(out)
	}
}

// member is one name/value pair of an object, in canonical form.
type member struct{ key, value []byte }

func (p *jsonCanon) object(out *bytes.Buffer, depth int) bool {
	p.i++
	var ms []member
	p.space()
	if p.i < len(p.in) && p.in[p.i] == '}' {
		p.i++
		out.WriteString("{}")
		return true
	}
	for {
		p.space()
		if p.i >= len(p.in) || p.in[p.i] != '"' {
			return false
		}
		k, ok := p.str()
		if !ok {
			return false
		}
		p.space()
		if p.i >= len(p.in) || p.in[p.i] != ':' {
			return false
		}
		p.i++
		var v bytes.Buffer
		if !p.value(&v, depth+1) {
			return false
		}
		ms = append(ms, member{k, v.Bytes()})
		p.space()
		if p.i >= len(p.in) {
			return false
		}
		if p.in[p.i] == '}' {
			p.i++
			break
		}
		if p.in[p.i] != ',' {
			return false
		}
		p.i++
	}
	// By the key's bytes between its quotes, as written.
	sort.SliceStable(ms, func(a, b int) bool {
		ka, kb := ms[a].key, ms[b].key
		return bytes.Compare(ka[1:len(ka)-1], kb[1:len(kb)-1]) < 0
	})
	out.WriteByte('{')
	for j, m := range ms {
		if j > 0 {
			out.WriteByte(',')
		}
		out.Write(m.key)
		out.WriteByte(':')
		out.Write(m.value)
	}
	out.WriteByte('}')
	return true
}

// str returns the string at p.i as written, quotes included.
func (p *jsonCanon) str() ([]byte, bool) {
	start := p.i
	p.i++
	for p.i < len(p.in) {
		switch p.in[p.i] {
		case '\\':
			p.i += 2
		case '"':
			p.i++
			return p.in[start:p.i], true
		default:
			p.i++
		}
	}
	return nil, false
}

// scalar copies a number or a literal as written.
func (p *jsonCanon) scalar(out *bytes.Buffer) bool {
	start := p.i
	for p.i < len(p.in) {
		c := p.in[p.i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c == '-' || c == '+' || c == '.' || c == 'E') {
			break
		}
		p.i++
	}
	tok := p.in[start:p.i]
	switch string(tok) {
	case "true", "false", "null":
	default:
		if len(tok) == 0 || !isNumber(tok) {
			return false
		}
	}
	out.Write(tok)
	return true
}

// isNumber reports whether tok is a JSON number (RFC 8259 section 6).
func isNumber(tok []byte) bool {
	i := 0
	if tok[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(tok) && tok[i] >= '0' && tok[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(tok) && tok[i] == '0' {
		i++
	} else if digits() == 0 {
		return false
	}
	if i < len(tok) && tok[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(tok) && (tok[i] == 'e' || tok[i] == 'E') {
		i++
		if i < len(tok) && (tok[i] == '+' || tok[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(tok)
}
