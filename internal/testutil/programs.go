package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	programsMu  sync.Mutex
	programsDir string
	programs    = map[string]*program{}
)

type program struct {
	once sync.Once
	path string
	err  error
}

// BuildProgram builds the Go command pkg (a path from the repository
// root, such as "./cmd/agentrt") once per test binary, without cgo, and
// returns the path of the binary: a program the test runs as a process of
// its own, one it can kill. The binaries live in a directory of the test
// process that RemovePrograms deletes; a package's TestMain calls it after
// m.Run.
func BuildProgram(t testing.TB, pkg string) string {
	t.Helper()
	programsMu.Lock()
	if programsDir == "" {
		dir, err := os.MkdirTemp("", "agentrt-test-programs-")
		if err != nil {
			programsMu.Unlock()
			t.Fatal(err)
		}
		programsDir = dir
	}
	p := programs[pkg]
	if p == nil {
		p = &program{}
		programs[pkg] = p
	}
	dir := programsDir
	programsMu.Unlock()
	p.once.Do(func() {
		p.path = filepath.Join(dir, strings.ReplaceAll(strings.Trim(pkg, "./"), "/", "-"))
		cmd := exec.Command("go", "build", "-o", p.path, pkg)
		cmd.Dir = RepoRoot()
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			p.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	})
	if p.err != nil {
		t.Fatal(p.err)
	}
	return p.path
}

// RemovePrograms deletes the binaries BuildProgram built.
func RemovePrograms() {
	programsMu.Lock()
	defer programsMu.Unlock()
	if programsDir != "" {
		os.RemoveAll(programsDir)
	}
}
