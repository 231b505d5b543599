package caps_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/agentrt/agentrt/"

// TestCapabilitiesImportOnlyTheSeam: a capability package imports this
// package and nothing of the host or of another capability (its own
// external tests may drive it through a host, and are not looked at).
func TestCapabilitiesImportOnlyTheSeam(t *testing.T) {
	dirs, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range dirs {
		if !d.IsDir() || d.Name() == "testdata" {
			continue
		}
		files, _ := filepath.Glob(filepath.Join(d.Name(), "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				src, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(src), "package "+d.Name()+"\n") {
					continue // an external test package
				}
			}
			af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			n++
			for _, im := range af.Imports {
				p, _ := strconv.Unquote(im.Path.Value)
				if p == module+"host" || strings.HasPrefix(p, module+"host/") && p != module+"host/caps" && p != module+"host/budget" && !strings.HasPrefix(p, module+"host/caps/"+d.Name()+"/") {
					t.Errorf("%s imports %s: a capability imports host/caps (and the budget it meters in, host/budget) and nothing else of the host", f, p)
				}
			}
		}
	}
	if n < 6 {
		t.Fatalf("looked at %d files; want every capability package's", n)
	}
}
