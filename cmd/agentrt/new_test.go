package main

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/internal/scaffold"
)

// TestNewAgentsRunAnywhere is the acceptance test of writing agents as a
// new user would (issue 11): for each language, agentrt new writes an agent,
// which is copied to a folder outside the repository and, with no network
// (GOPROXY=off, GOFLAGS=-mod=mod) and an empty module cache of its own (the
// toolchain's build cache is reused), built, run twice, replayed and audited
// with the real CLI; then the README's commands run as written, and the
// agent's own test (go test, make test) passes. The agent's files are left
// as agentrt new wrote them (a Rust build adds cargo's target directory).
func TestNewAgentsRunAnywhere(t *testing.T) {
	if _, err := exec.LookPath("agentrt"); err != nil {
		t.Fatal("agentrt is not on PATH: TestMain puts this test binary there as agentrt")
	}
	for _, lang := range scaffold.Languages {
		t.Run(lang, func(t *testing.T) {
			modcache := t.TempDir()
			t.Setenv("GOPROXY", "off")
			t.Setenv("GOFLAGS", "-mod=mod")
			t.Setenv("GOMODCACHE", modcache)
			t.Setenv("AGENTRT_DATA", filepath.Join(t.TempDir(), "data"))

			written := filepath.Join(t.TempDir(), "hello")
			runCLI(t, "", "new", written, "--lang", lang)
			dir := filepath.Join(t.TempDir(), "hello")
			copyTree(t, written, dir)
			before := tree(t, dir)

			wasm := filepath.Join(t.TempDir(), "hello.wasm")
			runCLI(t, dir, "build", ".", "-o", wasm)
			input, outputs := `{"name":"Ada"}`, []string{`{"greeting":"Hello, Ada!","times":1}`, `{"greeting":"Hello, Ada!","times":2}`}
			if lang != "go" {
				input, outputs = "Ada", []string{"Hello, Ada! (greeting 1)", "Hello, Ada! (greeting 2)"}
			}
			for _, want := range outputs {
				if got := runCLI(t, dir, "run", wasm, "--grant", "grant.yaml", "--input", input); got != want {
					t.Fatalf("output %q, want %q", got, want)
				}
			}
			if got := runCLI(t, dir, "replay", "last"); !strings.HasPrefix(got, "verified ") {
				t.Fatalf("replay: %s", got)
			}
			bundle := filepath.Join(t.TempDir(), "run.bundle")
			runCLI(t, dir, "audit", "export", "last", "-o", bundle)
			keys := filepath.Join(t.TempDir(), "cell.keys")
			if err := os.WriteFile(keys, []byte(runCLI(t, dir, "keys")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if got := runCLI(t, dir, "audit", "verify", bundle, "--trust", keys); !strings.Contains(got, "verified:   OK") {
				t.Fatalf("audit verify:\n%s", got)
			}
			if after := tree(t, dir); !sameTree(before, after) {
				t.Fatalf("building and running changed the agent's folder:\nbefore %v\nafter  %v", names(before), names(after))
			}

			// The README's commands, as a user pastes them.
			for _, line := range readmeCommands(t, filepath.Join(dir, "README.md")) {
				sh(t, dir, line)
			}
			// The agent's own test.
			test := "go test -count=1 ./..."
			if lang != "go" {
				test = "make test"
			}
			sh(t, dir, test)

			after := tree(t, dir)
			for name, b := range before {
				if !bytes.Equal(after[name], b) {
					t.Fatalf("%s changed:\n%s", name, after[name])
				}
			}
			if _, ok := after["go.sum"]; ok {
				t.Fatal("a go.sum appeared in the agent's folder")
			}
			if entries, _ := os.ReadDir(modcache); len(entries) != 0 {
				t.Fatalf("the module cache was written: %v", entries)
			}
		})
	}
}

// runCLI runs the agentrt binary in dir and returns its stdout, trimmed.
func runCLI(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("agentrt", args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("agentrt %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

// sh runs a command line with sh in dir.
func sh(t *testing.T, dir, line string) {
	t.Helper()
	cmd := exec.Command("sh", "-c", line)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
}

// readmeCommands returns the lines of the first sh block of a README.
func readmeCommands(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	in := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		switch l := sc.Text(); {
		case l == "```sh" && lines == nil:
			in = true
		case l == "```" && in:
			return lines
		case in && strings.TrimSpace(l) != "":
			lines = append(lines, l)
		}
	}
	t.Fatalf("%s has no sh block", file)
	return nil
}

func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// tree returns the files below dir by relative path, but cargo's target
// directory, which a Rust build makes there (it is cargo's, and ignored by
// the agent's .gitignore).
func tree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && p == filepath.Join(dir, "target") {
			return filepath.SkipDir
		}
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		files[rel] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func sameTree(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}

func names(m map[string][]byte) []string {
	var n []string
	for k := range m {
		n = append(n, k)
	}
	return n
}
