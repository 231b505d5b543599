package abivectors

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentrt/agentrt/internal/golden"
)

// ModuleVector is one file of abi/testdata/modules (abi/SPEC.md §11.3): a
// WebAssembly module and whether a host must run it (accept) or refuse it
// before any of it runs (refuse).
type ModuleVector struct {
	File string
	// Feature names what the module uses: a WebAssembly feature, or a
	// limit it is at or over.
	Feature string
	Expect  string // accept or refuse
	Comment []string
	Wasm    []byte
}

// Format returns the file contents of v.
func (v *ModuleVector) Format() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "feature: %s\nexpect: %s\n", v.Feature, v.Expect)
	for _, c := range v.Comment {
		fmt.Fprintf(&b, "comment: %s\n", c)
	}
	fmt.Fprintf(&b, "wasm: %x\n", v.Wasm)
	return []byte(b.String())
}

// ParseModule reads a module vector file; wasm comes last.
func ParseModule(file string, data []byte) (*ModuleVector, error) {
	v := &ModuleVector{File: file}
	err := golden.Headers(file, data, func(key, val string) error {
		if v.Wasm != nil {
			return errors.New("nothing may follow wasm")
		}
		switch key {
		case "feature":
			v.Feature = val
		case "expect":
			if val != "accept" && val != "refuse" {
				return fmt.Errorf("expect is %q, not accept or refuse", val)
			}
			v.Expect = val
		case "comment":
			v.Comment = append(v.Comment, val)
		case "wasm":
			b, err := lowerHex(val)
			if err != nil {
				return err
			}
			if len(b) < 8 || string(b[:4]) != "\x00asm" {
				return errors.New("wasm is not a WebAssembly binary")
			}
			v.Wasm = b
		default:
			return fmt.Errorf("unknown header %q", key)
		}
		return nil
	})
	switch {
	case err != nil:
		return nil, err
	case v.Feature == "" || v.Expect == "" || v.Wasm == nil:
		return nil, errors.New("feature, expect and wasm are required")
	}
	return v, nil
}

// ReadModules parses every .txt file in dir, in name order.
func ReadModules(dir string) ([]*ModuleVector, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil {
		return nil, err
	}
	var vs []*ModuleVector
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		v, err := ParseModule(filepath.Base(f), b)
		if err != nil {
			return nil, err
		}
		vs = append(vs, v)
	}
	if len(vs) == 0 {
		return nil, fmt.Errorf("no module vectors in %s", dir)
	}
	return vs, nil
}
