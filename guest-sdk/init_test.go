package guestsdk

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// cheapAtInit are the only functions the Go SDK's package-level variables
// may call. Everything a package-level initializer does runs in every
// agent's start, in wasm, before the agent's first call: compiling one
// regexp there (`^[A-Za-z0-9_-]{1,64}$`) once cost 1.8 to 4.5 ms of each
// run. Work a package needs goes where it is used, or behind a sync.Once.
var cheapAtInit = map[string]bool{"errors.New": true, "make": true, "reflect.TypeOf": true}

// TestSDKInitIsCheap walks the package-level variables of the Go SDK's
// packages (not their tests) and fails on a call in an initializer that
// is not in cheapAtInit, and on an init function.
func TestSDKInitIsCheap(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*/*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && fn.Name.Name == "init" {
				t.Errorf("%s: an init function runs at every agent's start", fset.Position(fn.Pos()))
			}
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				for _, v := range spec.(*ast.ValueSpec).Values {
					ast.Inspect(v, func(n ast.Node) bool {
						if _, ok := n.(*ast.FuncLit); ok {
							return false // runs when called, not at init
						}
						call, ok := n.(*ast.CallExpr)
						if !ok {
							return true
						}
						if callee := calleeName(call.Fun); !cheapAtInit[callee] {
							t.Errorf("%s: a package-level variable calls %s at every agent's start; compute it where it is used (or add it to cheapAtInit if it is cheap)", fset.Position(call.Pos()), callee)
						}
						return true
					})
				}
			}
		}
	}
	if checked < 10 {
		t.Fatalf("checked %d files of the SDK's packages; the glob found %v", checked, files)
	}
}

// calleeName is what a call calls, as written: "make", "regexp.MustCompile".
func calleeName(fun ast.Expr) string {
	switch f := fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		return calleeName(f.X) + "." + f.Sel.Name
	case *ast.IndexExpr:
		return calleeName(f.X)
	}
	return "an expression"
}
