package wasmbuild

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDetect(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		want    string
		wantErr string
	}{
		{"go", map[string]string{"main.go": "package main", "main_test.go": ""}, "go", ""},
		{"c", map[string]string{"main.c": "", "util.c": "", "agentrt.h": ""}, "c", ""},
		{"c with a go test", map[string]string{"main.c": "", "main_test.go": ""}, "c", ""},
		{"both", map[string]string{"main.c": "", "main.go": ""}, "", "both .go sources and a C or Rust agent"},
		{"rust", map[string]string{"Cargo.toml": "", "Cargo.lock": "", "x_test.go": ""}, "rust", ""},
		{"rust with C of its own", map[string]string{"Cargo.toml": "", "shim.c": ""}, "rust", ""},
		{"go and rust", map[string]string{"Cargo.toml": "", "main.go": ""}, "", "both .go sources"},
		{"neither", map[string]string{"README.md": "", "x_test.go": ""}, "", "no .go or .c sources and no Cargo.toml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tt.files)
			got, err := Detect(dir)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Detect = %q, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Detect = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestCReproducible builds the same sources from two directories: the
// module bytes must not depend on where the sources lie, or the module hash
// in a run header would.
func TestCReproducible(t *testing.T) {
	src := map[string]string{
		"main.c": `#include "agentrt.h"
#include "util.h"
int main(void) { return agentrt_log(AGENTRT_LEVEL_INFO, where()) != AGENTRT_STATUS_OK; }
`,
		"util.h": "const char *where(void);\n",
		// __FILE__ would carry the source path into the module unless
		// the build maps it away.
		"util.c": "#include \"util.h\"\nconst char *where(void) { return __FILE__; }\n",
	}
	var builds [][]byte
	var dirs []string
	for range 2 {
		dir := t.TempDir()
		writeFiles(t, dir, src)
		out := filepath.Join(dir, "agent.wasm")
		if err := C(context.Background(), dir, out); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		builds, dirs = append(builds, b), append(dirs, dir)
	}
	if !bytes.Equal(builds[0], builds[1]) {
		t.Fatalf("two builds of the same sources differ (%d and %d bytes)", len(builds[0]), len(builds[1]))
	}
	if bytes.Contains(builds[0], []byte(dirs[0])) {
		t.Fatalf("the module holds its source path %s", dirs[0])
	}
	if !bytes.Contains(builds[0], []byte("./util.c")) {
		t.Fatalf("the module lacks __FILE__ as ./util.c; did the file prefix map change?")
	}
}

func TestCWithoutClang(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("AGENTRT_CLANG", "")
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"main.c": "int main(void) { return 0; }\n"})
	err := C(context.Background(), dir, filepath.Join(dir, "x.wasm"))
	var te *ToolchainError
	if !errors.Is(err, ErrNoClang) || !errors.As(err, &te) || !strings.Contains(te.Hint, "make deps") {
		t.Fatalf("got %v, want ErrNoClang with a hint naming make deps", err)
	}
}

func TestCWithoutSources(t *testing.T) {
	if err := C(context.Background(), t.TempDir(), "x.wasm"); err == nil || !strings.Contains(err.Error(), "no .c files") {
		t.Fatalf("got %v, want a no .c files error", err)
	}
}

// TestCOutsideACheckout builds a C agent in a folder of its own, below a
// guest-sdk/c/agentrt.h that is not an agentrt checkout's (planted, and
// broken): the headers this binary carries are used, and the module is the
// one the checkout's header gives, byte for byte.
func TestCOutsideACheckout(t *testing.T) {
	top := t.TempDir()
	if err := os.MkdirAll(filepath.Join(top, "guest-sdk", "c"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, filepath.Join(top, "guest-sdk", "c"), map[string]string{"agentrt.h": "#error a planted header\n"})
	dir := filepath.Join(top, "agent")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// agentrt_loop.h, which includes agentrt.h, comes with it.
	main := `#include "agentrt_loop.h"
int main(void) { return agentrt_log(AGENTRT_LEVEL_INFO, agentrt_loop_reason_name(AGENTRT_LOOP_DONE)) != AGENTRT_STATUS_OK; }
`
	writeFiles(t, dir, map[string]string{"main.c": main})
	out := filepath.Join(t.TempDir(), "a.wasm")
	if err := C(context.Background(), dir, out); err != nil {
		t.Fatalf("the planted header was used, or none: %v", err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	// The same source inside the checkout, built against guest-sdk/c.
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.MkdirTemp(repo, ".ctest-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(in)
	writeFiles(t, in, map[string]string{"main.c": main})
	out2 := filepath.Join(t.TempDir(), "b.wasm")
	if err := C(context.Background(), in, out2); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(out2)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("built against the binary's header: %d bytes; against the checkout's: %d bytes", len(got), len(want))
	}
}
