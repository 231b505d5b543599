// Package termtext makes text from an untrusted source, a guest's output,
// log lines and errors, safe to show on a terminal: every byte or
// character a terminal would act on rather than print is written out
// visibly instead (ESC as \x1b, a bidi override as \u202e), so that a
// guest cannot move the cursor, hide text, rewrite what the operator
// reads, retitle the window or write the clipboard (OSC 52).
//
// It escapes the C0 controls but tab and newline (and a carriage return
// that ends a line, CRLF), DEL, the C1 controls (U+0080-U+009F, which some
// terminals take as ESC sequences), bytes that are not UTF-8 (a terminal
// in an 8-bit locale takes 0x9b as CSI), the bidirectional embeddings,
// overrides, isolates and marks (the "Trojan Source" characters, which
// reorder what is shown), and the Unicode line and paragraph separators.
// Everything else, other languages and emoji included, passes unchanged.
// It never touches the bytes kept: journals and event logs hold exactly
// what the guest wrote; only their display is escaped.
package termtext

import (
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"
)

// unsafeRune reports whether r, a decoded rune, must be escaped.
func unsafeRune(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true // bidi marks, embeddings, overrides, isolates
	case r == 0x2028, r == 0x2029:
		return true
	}
	return false
}

// appendEscaped appends b to dst, escaped; with line set, a newline and a
// tab are escaped too (one line of text, such as a log message). Bytes at
// the end that may begin a character or a CRLF not complete yet are
// escaped as they are unless keep is set, in which case appendEscaped
// stops before them and returns how many bytes of b it consumed.
func appendEscaped(dst, b []byte, line, keep bool) ([]byte, int) {
	i := 0
	for i < len(b) {
		c := b[i]
		if c >= 0x20 && c < 0x7f {
			dst = append(dst, c)
			i++
			continue
		}
		switch c {
		case '\n', '\t':
			switch {
			case !line:
				dst = append(dst, c)
			case c == '\n':
				dst = append(dst, `\n`...)
			default:
				dst = append(dst, `\t`...)
			}
			i++
			continue
		case '\r':
			if !line && i+1 < len(b) && b[i+1] == '\n' {
				dst = append(dst, '\r', '\n')
				i += 2
				continue
			}
			if !line && keep && i+1 == len(b) {
				return dst, i
			}
		}
		if c < 0x80 {
			dst = fmt.Appendf(dst, `\x%02x`, c)
			i++
			continue
		}
		if keep && !utf8.FullRune(b[i:]) {
			return dst, i
		}
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = fmt.Appendf(dst, `\x%02x`, c)
		case unsafeRune(r):
			dst = fmt.Appendf(dst, `\u%04x`, r)
		default:
			dst = append(dst, b[i:i+size]...)
		}
		i += size
	}
	return dst, i
}

// Escape returns b with everything a terminal would act on escaped;
// newlines and tabs stay.
func Escape(b []byte) []byte {
	out, _ := appendEscaped(make([]byte, 0, len(b)), b, false, false)
	return out
}

// String is Escape for a string.
func String(s string) string { return string(Escape([]byte(s))) }

// Line returns s escaped as one line: newlines and tabs are escaped too,
// so that a message cannot begin a line that looks like another.
func Line(s string) string {
	out, _ := appendEscaped(make([]byte, 0, len(s)), []byte(s), true, false)
	return string(out)
}

// Quote returns s as a Go string literal: quoted, with every control,
// format and invalid byte escaped. For one value shown among trusted
// text, such as the resource of an approval prompt.
func Quote(s string) string { return strconv.Quote(s) }

// Writer escapes what is written to it for the terminal behind w. A
// character or a CRLF split between two writes is kept until the next one
// completes it (or Flush), so that it is shown as itself.
type Writer struct {
	w       io.Writer
	pending []byte
	buf     []byte
}

// NewWriter returns a Writer to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write escapes p and writes it; it reports all of p written unless w
// fails.
func (w *Writer) Write(p []byte) (int, error) {
	in := p
	if len(w.pending) > 0 {
		in = append(w.pending, p...)
	}
	var n int
	w.buf, n = appendEscaped(w.buf[:0], in, false, true)
	w.pending = append(w.pending[:0:0], in[n:]...)
	if _, err := w.w.Write(w.buf); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes what is kept of an incomplete character, escaped.
func (w *Writer) Flush() error {
	if len(w.pending) == 0 {
		return nil
	}
	out, _ := appendEscaped(nil, w.pending, false, false)
	w.pending = w.pending[:0]
	_, err := w.w.Write(out)
	return err
}

// JSON returns the JSON text b with the characters Escape would escape
// written as \u escapes, and bytes that are not UTF-8 as \ufffd. In valid
// JSON such characters stand only inside strings, where the escape means
// the same character: the value is unchanged (but for invalid UTF-8, which
// JSON does not allow), while a terminal showing the text sees no control.
// encoding/json already escapes the C0 controls; it leaves DEL, C1, the
// bidi characters and invalid bytes in a json.RawMessage as they are.
func JSON(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); {
		c := b[i]
		if c < 0x80 && c != 0x7f {
			out = append(out, c)
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			out = append(out, `\ufffd`...)
		case unsafeRune(r):
			out = fmt.Appendf(out, `\u%04x`, r)
		default:
			out = append(out, b[i:i+size]...)
		}
		i += size
	}
	return out
}
