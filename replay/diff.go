package replay

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/host"
)

// Change is one field that differs between the recorded request of a call
// and the request the guest sent on replay.
type Change struct {
	// Path names the field: map keys joined with ".", array indexes in
	// brackets; "" for the request as a whole.
	Path string `json:"path"`
	// Recorded and Actual are the two values, rendered for people (text
	// quoted, bytes as text when printable and hex otherwise, long values
	// cut); "(absent)" when the field is missing on that side.
	Recorded string `json:"recorded"`
	Actual   string `json:"actual"`
}

func (c Change) String() string {
	p := c.Path
	if p == "" {
		p = "(request)"
	}
	return fmt.Sprintf("%s: %s → %s", p, c.Recorded, c.Actual)
}

// maxChanges bounds the changes a diff reports: a request rewritten whole
// is one fact, not a thousand.
const maxChanges = 16

// DiffRequests compares two CBOR requests field by field. It returns nil
// when either does not decode or when they decode to the same value.
func DiffRequests(recorded, actual []byte) []Change {
	var a, b any
	if abi.Unmarshal(recorded, &a) != nil || abi.Unmarshal(actual, &b) != nil {
		return nil
	}
	var out []Change
	diffValue("", a, b, &out)
	return out
}

const absent = "(absent)"

func diffValue(path string, a, b any, out *[]Change) {
	if len(*out) >= maxChanges {
		return
	}
	switch av := a.(type) {
	case map[any]any:
		if bv, ok := b.(map[any]any); ok {
			diffMaps(path, av, bv, out)
			return
		}
	case []any:
		if bv, ok := b.([]any); ok {
			for i := 0; i < max(len(av), len(bv)); i++ {
				p := fmt.Sprintf("%s[%d]", path, i)
				switch {
				case i >= len(av):
					*out = append(*out, Change{Path: p, Recorded: absent, Actual: render(bv[i])})
				case i >= len(bv):
					*out = append(*out, Change{Path: p, Recorded: render(av[i]), Actual: absent})
				default:
					diffValue(p, av[i], bv[i], out)
				}
				if len(*out) >= maxChanges {
					return
				}
			}
			return
		}
	}
	if !reflect.DeepEqual(a, b) {
		*out = append(*out, Change{Path: path, Recorded: render(a), Actual: render(b)})
	}
}

func diffMaps(path string, a, b map[any]any, out *[]Change) {
	keys := map[string]any{}
	for k := range a {
		keys[fmt.Sprint(k)] = k
	}
	for k := range b {
		keys[fmt.Sprint(k)] = k
	}
	names := make([]string, 0, len(keys))
	for n := range keys {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		k := keys[n]
		p := n
		if path != "" {
			p = path + "." + n
		}
		av, inA := a[k]
		bv, inB := b[k]
		switch {
		case !inA:
			*out = append(*out, Change{Path: p, Recorded: absent, Actual: render(bv)})
		case !inB:
			*out = append(*out, Change{Path: p, Recorded: render(av), Actual: absent})
		default:
			diffValue(p, av, bv, out)
		}
		if len(*out) >= maxChanges {
			return
		}
	}
}

// render shows a decoded CBOR value in at most about 80 characters.
func render(v any) string {
	var s string
	switch v := v.(type) {
	case string:
		s = strconv.Quote(cut(v, 72))
	case []byte:
		if utf8.Valid(v) && printable(string(v)) {
			s = "b" + strconv.Quote(cut(string(v), 72))
		} else {
			s = "h'" + hex.EncodeToString(v[:min(len(v), 32)]) + "'"
			if len(v) > 32 {
				s += fmt.Sprintf(" (%d bytes)", len(v))
			}
		}
	case nil:
		s = "null"
	default:
		s = cut(fmt.Sprint(v), 80)
	}
	return s
}

func printable(s string) bool {
	for _, r := range s {
		if !unicode.IsPrint(r) && !unicode.IsSpace(r) {
			return false
		}
	}
	return true
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

func formatChanges(cs []Change) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = c.String()
	}
	s := strings.Join(parts, "; ")
	if len(cs) >= maxChanges {
		s += "; (more not shown)"
	}
	return s
}

// diffSource serves a replay from the recording and, when the guest sends
// another request than the recorded one at a step, replaces the
// divergence's reason with the field-level differences of the two.
type diffSource struct {
	rec      host.Recording
	requests [][]byte
	changes  []Change
}

func (d *diffSource) Len() int                         { return d.rec.Len() }
func (d *diffSource) Served() int                      { return d.rec.Served() }
func (d *diffSource) Finished() bool                   { return d.rec.Finished() }
func (d *diffSource) Unserved() (uint64, string, bool) { return d.rec.Unserved() }

func (d *diffSource) LastServed() uint64 {
	if n := d.rec.Served(); n > 0 {
		step, _ := d.rec.Step(n - 1)
		return step
	}
	return 0
}

func (d *diffSource) Serve(ctx context.Context, c *host.Call) (abi.Status, []byte, error) {
	i := d.rec.Served()
	status, resp, err := d.rec.Serve(ctx, c)
	var div *host.DivergenceError
	if err == nil || !errors.As(err, &div) || i >= len(d.requests) {
		return status, resp, err
	}
	recorded := d.requests[i]
	// Only a divergence at the same step and op is a changed request;
	// c.Request is guest memory, read now, before the call returns.
	step, op, ok := d.rec.Unserved()
	if ok && step == c.Step && op == c.Op.Name && recorded != nil && c.Request != nil && !bytes.Equal(recorded, c.Request) {
		if cs := DiffRequests(recorded, c.Request); len(cs) > 0 {
			d.changes = cs
			div.Reason = "the request differs: " + formatChanges(cs)
		}
	}
	return status, resp, err
}
