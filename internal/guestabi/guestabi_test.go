package guestabi

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/internal/testutil"
)

// TestCopyIsCurrent fails when guest-sdk/abi is not what abi/ generates:
// a field, a constant or a status added to the host's ABI and not to the
// guest's, or a hand edit of a generated file.
func TestCopyIsCurrent(t *testing.T) {
	root := testutil.RepoRoot()
	want, err := Generate(filepath.Join(root, "abi"))
	if err != nil {
		t.Fatal(err)
	}
	if len(want) == 0 {
		t.Fatal("abi/ generated no files")
	}
	dir := filepath.Join(root, "guest-sdk", "abi")
	for name, b := range want {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("%v: run go generate ./internal/guestabi", err)
			continue
		}
		if !bytes.Equal(got, b) {
			t.Errorf("guest-sdk/abi/%s is not what abi/%s generates: run go generate ./internal/guestabi", name, name)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := want[e.Name()]; !ok && IsGenerated(b) {
			t.Errorf("guest-sdk/abi/%s is generated from a file abi/ no longer has: run go generate ./internal/guestabi", e.Name())
		}
	}
}

// TestGenerateRefusesHostCodec: a declaration that reaches the host's
// codec is refused by name rather than copied into a package that does
// not compile, and an import outside the standard library is refused.
func TestGenerateRefusesHostCodec(t *testing.T) {
	root := testutil.RepoRoot()
	for _, tc := range []struct{ name, src, want string }{
		{"codec", "package abi\n\n// Raw is encoded by hand.\nfunc Raw(v any) ([]byte, error) { return encMode.Marshal(v) }\n",
			"uses encMode of the host's codec"},
		{"import", "package abi\n\nimport \"github.com/fxamacker/cbor/v2\"\n\n// Raw is a raw message.\ntype Raw = cbor.RawMessage\n",
			"imports github.com/fxamacker/cbor/v2: the guest SDK depends on the standard library alone"},
		{"group", "package abi\n\ntype (\n\tfileName string\n\tKept string\n)\n",
			"groups names the guest keeps with names it does not"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range []string{"codec.go", "types.go"} {
				b, err := os.ReadFile(filepath.Join(root, "abi", f))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(dir, "extra.go"), []byte(tc.src), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Generate(dir)
			if err == nil || !strings.Contains(err.Error(), "abi/extra.go: ") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Generate: %v, want an error about abi/extra.go: %s", err, tc.want)
			}
		})
	}
}

// TestCopyKeepsEveryDeclaration: the copy declares every exported name of
// abi/ but those of the host's codec, so nothing of the ABI is lost on
// the way (a name dropped by a cut that went too far).
func TestCopyKeepsEveryDeclaration(t *testing.T) {
	root := testutil.RepoRoot()
	host := exportedNames(t, filepath.Join(root, "abi"), hostCodecFile)
	guest := exportedNames(t, filepath.Join(root, "guest-sdk", "abi"), "codec.go")
	if len(host) < 50 {
		t.Fatalf("abi/ declares only %d exported names: %v", len(host), host)
	}
	if !slices.Equal(host, guest) {
		t.Fatalf("exported names differ:\n host: %v\nguest: %v", host, guest)
	}
}

// exportedNames returns the exported names (methods as Type.Name) that the
// non-test files of dir but skip declare, less the host-only ones.
func exportedNames(t *testing.T, dir, skip string) []string {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") || e.Name() == skip {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			for _, n := range declNames(d) {
				last := n[strings.LastIndex(n, ".")+1:]
				if !hostOnly[n] && ast.IsExported(last) {
					names = append(names, n)
				}
			}
		}
	}
	slices.Sort(names)
	return names
}
