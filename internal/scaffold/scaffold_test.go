package scaffold

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestName(t *testing.T) {
	for in, want := range map[string]string{"hello": "hello", "Hello World": "hello-world", "my_agent.v2": "my-agent-v2", "--": "agent", "日本": "agent"} {
		if got := Name(in); got != want {
			t.Errorf("Name(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestWrite: each language writes its files, named after the folder; the
// templates leave nothing unfilled.
func TestWrite(t *testing.T) {
	for lang, want := range map[string][]string{
		"go":   {"main.go", "agent_test.go", "go.mod", "grant.yaml", "README.md", ".gitignore"},
		"c":    {"main.c", "Makefile", "grant.yaml", "README.md", ".gitignore"},
		"rust": {"src/main.rs", "Cargo.lock", "Cargo.toml", "Makefile", "grant.yaml", "README.md", ".gitignore"},
	} {
		t.Run(lang, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "My Agent")
			got, err := Write(dir, Options{Lang: lang})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("wrote %v, want %v", got, want)
			}
			for _, f := range got {
				b, err := os.ReadFile(filepath.Join(dir, f))
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(string(b), "{{") || strings.Contains(string(b), "<no value>") {
					t.Fatalf("%s holds an unfilled template:\n%s", f, b)
				}
			}
			g, _ := os.ReadFile(filepath.Join(dir, "grant.yaml"))
			if !strings.Contains(string(g), "namespace: my-agent}") {
				t.Fatalf("grant.yaml:\n%s", g)
			}
			r, _ := os.ReadFile(filepath.Join(dir, "README.md"))
			if !strings.Contains(string(r), "agentrt build . -o my-agent.wasm") {
				t.Fatalf("README.md:\n%s", r)
			}
		})
	}
}

// TestWriteRefusesAFolderWithFiles: a folder with files is left as it was
// unless Force, which replaces files of the same name and keeps the rest.
func TestWriteRefusesAFolderWithFiles(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{"main.go": "mine", "notes.txt": "keep"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := Write(dir, Options{})
	if !errors.Is(err, ErrNotEmpty) || !strings.Contains(err.Error(), "main.go, notes.txt") {
		t.Fatalf("got %v, want ErrNotEmpty naming main.go, notes.txt", err)
	}
	entries, _ := os.ReadDir(dir)
	if b, _ := os.ReadFile(filepath.Join(dir, "main.go")); len(entries) != 2 || string(b) != "mine" {
		t.Fatalf("the refusal changed the folder: %d entries, main.go %q", len(entries), b)
	}
	if _, err := Write(dir, Options{Force: true}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "main.go")); string(b) == "mine" {
		t.Fatal("--force left main.go as it was")
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "notes.txt")); string(b) != "keep" {
		t.Fatalf("--force changed notes.txt: %q", b)
	}
}

func TestWriteRefusesBadOptions(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{Lang: "cobol"}, `no language "cobol" (agentrt new writes go, c, rust)`},
		{Options{Name: "My Agent"}, `name "My Agent": use lower-case letters, digits and '-' (e.g. my-agent)`},
		{Options{Module: "exa mple.com/x"}, `module path "exa mple.com/x"`},
	} {
		dir := filepath.Join(t.TempDir(), "a")
		if _, err := Write(dir, tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want %q", tc.opts, err, tc.want)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%+v: the refusal created %s", tc.opts, dir)
		}
	}
}
