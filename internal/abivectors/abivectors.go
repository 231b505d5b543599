// Package abivectors reads and writes the ABI test vector files of
// abi/testdata/vectors, so that every runner of the vectors (the Go SDK's,
// the C header's) reads them by the same rules. abi/SPEC.md describes the
// format.
package abivectors

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Vector is one vector file.
type Vector struct {
	File    string // base name
	Op      string
	Kind    string // request, response or error
	Expect  string // valid or invalid
	Reason  string // for invalid vectors: why they are invalid
	Comment string
	Diag    string // CBOR diagnostic notation, informative
	Data    []byte
}

// Format returns the file contents of v.
func (v *Vector) Format() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "op: %s\nkind: %s\nexpect: %s\n", v.Op, v.Kind, v.Expect)
	if v.Reason != "" {
		fmt.Fprintf(&b, "reason: %s\n", v.Reason)
	}
	if v.Comment != "" {
		fmt.Fprintf(&b, "comment: %s\n", v.Comment)
	}
	if v.Diag != "" {
		fmt.Fprintf(&b, "diag: %s\n", v.Diag)
	}
	fmt.Fprintf(&b, "hex: %s\n", hex.EncodeToString(v.Data))
	return b.Bytes()
}

// Parse reads a vector file. Every header is known and appears at most
// once, and hex comes last: a runner that skipped an unknown header could
// pass a vector it does not understand.
func Parse(file string, b []byte) (*Vector, error) {
	v := &Vector{File: file}
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 16<<20)
	sawHex := false
	for sc.Scan() {
		line := sc.Text()
		if sawHex {
			return nil, fmt.Errorf("line %q after hex", line)
		}
		key, val, ok := strings.Cut(line, ": ")
		if !ok && strings.HasSuffix(line, ":") {
			key, val, ok = strings.TrimSuffix(line, ":"), "", true
		}
		if !ok {
			return nil, fmt.Errorf("line %q is not 'key: value'", line)
		}
		if seen[key] {
			return nil, fmt.Errorf("header %q repeated", key)
		}
		seen[key] = true
		switch key {
		case "op":
			v.Op = val
		case "kind":
			v.Kind = val
		case "expect":
			v.Expect = val
		case "reason":
			v.Reason = val
		case "comment":
			v.Comment = val
		case "diag":
			v.Diag = val
		case "hex":
			d, err := hex.DecodeString(val)
			if err != nil || val != strings.ToLower(val) {
				return nil, fmt.Errorf("hex is not lowercase hex: %v", err)
			}
			v.Data, sawHex = d, true
		default:
			return nil, fmt.Errorf("unknown header %q", key)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	switch {
	case !sawHex:
		return nil, errors.New("no hex line")
	case v.Op == "" || v.Kind == "":
		return nil, errors.New("op and kind are required")
	case v.Expect != "valid" && v.Expect != "invalid":
		return nil, fmt.Errorf("expect is %q, not valid or invalid", v.Expect)
	case (v.Expect == "invalid") != (v.Reason != ""):
		return nil, errors.New("a reason belongs to every invalid vector and only there")
	}
	return v, nil
}

// Read parses every file in dir.
func Read(dir string) ([]*Vector, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var vs []*Vector
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		v, err := Parse(e.Name(), b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
		vs = append(vs, v)
	}
	if len(vs) == 0 {
		return nil, fmt.Errorf("no vectors in %s", dir)
	}
	return vs, nil
}
