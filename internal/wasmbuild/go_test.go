package wasmbuild

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	guestsdk "github.com/agentrt/agentrt/guest-sdk"
)

// agentMain is a Go agent using the SDK.
const agentMain = `package main

import (
	"context"

	"github.com/agentrt/agentrt/guest-sdk/agent"
)

func main() {
	agent.Main(func(_ context.Context, in []byte) ([]byte, error) {
		if err := agent.KVPut("last", in); err != nil {
			return nil, err
		}
		return in, nil
	})
}
`

// offline makes the go command unable to fetch anything, with an empty
// module cache of its own, as for a user without network (the build
// cache stays the toolchain's, so the standard library is not compiled
// again).
func offline(t *testing.T) {
	t.Helper()
	t.Setenv("GOPROXY", "off")
	t.Setenv("GOFLAGS", "-mod=mod")
	t.Setenv("GOMODCACHE", t.TempDir())
	t.Setenv("GOWORK", "")
	t.Setenv("GONOSUMDB", "")
	t.Setenv("GOSUMDB", "off")
}

func readAll(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = b
	}
	return files
}

// TestGoOutsideTheRepository builds an agent in a folder of its own, with
// no network and an empty module cache: the SDK comes from this binary,
// and the agent's files are left exactly as they were. A go.mod that does
// not even require the SDK builds too.
func TestGoOutsideTheRepository(t *testing.T) {
	offline(t)
	for _, tc := range []struct{ name, gomod string }{
		{"requires the SDK", "module example.com/hello\n\ngo 1.21\n\nrequire " + guestsdk.ModulePath + " " + guestsdk.Version + "\n"},
		{"says nothing of it", "module hello\n\ngo 1.21\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"go.mod": tc.gomod, "main.go": agentMain})
			before := readAll(t, dir)
			var wasm [][]byte
			for i := range 2 {
				out := filepath.Join(t.TempDir(), "agent.wasm")
				if err := Go(context.Background(), dir, out); err != nil {
					t.Fatal(err)
				}
				b, err := os.ReadFile(out)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.HasPrefix(b, []byte("\x00asm")) {
					t.Fatalf("build %d wrote no wasm module", i)
				}
				if !bytes.Contains(b, []byte("agentrt:kv")) {
					t.Fatalf("build %d does not import agentrt:kv: not built against the SDK", i)
				}
				wasm = append(wasm, b)
			}
			// Each build extracts the SDK to a fresh temporary folder:
			// the bytes must not depend on it.
			if !bytes.Equal(wasm[0], wasm[1]) {
				t.Fatalf("two builds differ (%d and %d bytes)", len(wasm[0]), len(wasm[1]))
			}
			if bytes.Contains(wasm[0], []byte(os.TempDir()+string(filepath.Separator)+"agentrt-build-")) {
				t.Fatal("the module holds the path of the SDK's temporary copy")
			}
			after := readAll(t, dir)
			if len(after) != len(before) {
				t.Fatalf("the agent's folder holds %d files after the build, %d before", len(after), len(before))
			}
			for name, b := range before {
				if !bytes.Equal(after[name], b) {
					t.Fatalf("the build changed %s:\n%s", name, after[name])
				}
			}
			entries, _ := os.ReadDir(os.Getenv("GOMODCACHE"))
			if len(entries) != 0 {
				t.Fatalf("the build wrote to the module cache: %v", entries)
			}
		})
	}
}

// TestGoSDKFromTheModulesReplace: a go.mod that replaces the SDK decides
// where it comes from; agentrt build does not override it.
func TestGoSDKFromTheModulesReplace(t *testing.T) {
	offline(t)
	mine := t.TempDir()
	writeFiles(t, mine, map[string]string{"go.mod": "module " + guestsdk.ModulePath + "\n\ngo 1.21\n"})
	if err := os.MkdirAll(filepath.Join(mine, "agent"), 0o755); err != nil {
		t.Fatal(err)
	}
	// An SDK of the user's own, with a function this binary's SDK lacks.
	writeFiles(t, filepath.Join(mine, "agent"), map[string]string{"agent.go": "package agent\n\nfunc Mine() string { return \"mine\" }\n"})
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"go.mod":  "module hello\n\ngo 1.21\n\nrequire " + guestsdk.ModulePath + " v0.0.0\n\nreplace " + guestsdk.ModulePath + " => " + mine + "\n",
		"main.go": "package main\n\nimport \"github.com/agentrt/agentrt/guest-sdk/agent\"\n\nfunc main() { println(agent.Mine()) }\n",
	})
	if err := Go(context.Background(), dir, filepath.Join(t.TempDir(), "a.wasm")); err != nil {
		t.Fatalf("the module's own replace was not used: %v", err)
	}
}

// TestGoWithoutModule: a folder of Go files in no module is refused with
// the fix, not with the go command's message about GOPATH.
func TestGoWithoutModule(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"main.go": agentMain})
	err := Go(context.Background(), dir, filepath.Join(dir, "a.wasm"))
	var te *ToolchainError
	if !errors.Is(err, ErrNoGoModule) || !errors.As(err, &te) || !strings.Contains(te.Hint, "agentrt new") || !strings.Contains(te.Hint, "go mod init") {
		t.Fatalf("got %v, want ErrNoGoModule with a hint naming agentrt new and go mod init", err)
	}
}

// TestGoCompileErrorIsShown: the go command's own error reaches the user,
// without the package lines of -v.
func TestGoCompileErrorIsShown(t *testing.T) {
	offline(t)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"go.mod": "module hello\n\ngo 1.21\n", "main.go": strings.Replace(agentMain, `agent.KVPut("last", in)`, `agent.KVPutt("last", in)`, 1)})
	err := Go(context.Background(), dir, filepath.Join(t.TempDir(), "a.wasm"))
	if err == nil || !strings.Contains(err.Error(), "undefined: agent.KVPutt") {
		t.Fatalf("got %v, want the compiler's undefined: agent.KVPutt", err)
	}
	if strings.Contains(err.Error(), "\nhello\n") || strings.Contains(err.Error(), "guest-sdk/agent\n") {
		t.Fatalf("the error carries go build -v's package lines:\n%v", err)
	}
}

// TestGoFirstBuildSaysWhatItDoes builds with an empty build cache: the
// first build compiles the Go runtime for wasip1 and says so; the second,
// with the cache warm, says nothing.
func TestGoFirstBuildSaysWhatItDoes(t *testing.T) {
	offline(t)
	t.Setenv("GOCACHE", t.TempDir())
	dir := t.TempDir()
	// The smallest program, so that the test compiles the runtime and
	// little else (an agent using the SDK adds reflect, fmt and
	// encoding/json).
	writeFiles(t, dir, map[string]string{"go.mod": "module hello\n\ngo 1.21\n", "main.go": "package main\n\nfunc main() {}\n"})
	for i, want := range []string{"compiling the Go runtime for wasip1, about 5-10 s the first time (the go build cache keeps it)\n", ""} {
		var progress bytes.Buffer
		if err := GoWith(context.Background(), dir, filepath.Join(t.TempDir(), "a.wasm"), Options{Progress: &progress}); err != nil {
			t.Fatal(err)
		}
		if progress.String() != want {
			t.Fatalf("build %d said %q, want %q", i+1, progress.String(), want)
		}
	}
}

// TestWatch: what go build -v writes is sorted into progress and errors.
func TestWatch(t *testing.T) {
	in := "go: downloading golang.org/x/text v0.3.0\nunicode/utf8\nnet/url\nhello\nhello/util\nexample.com/x\n# hello\n./main.go:3:2: undefined: x\n"
	var progress bytes.Buffer
	rest := watch(strings.NewReader(in), &progress, "hello")
	if want := "go: downloading golang.org/x/text v0.3.0\ncompiling standard library packages for wasip1 (the go build cache keeps them)\n"; progress.String() != want {
		t.Fatalf("progress %q, want %q", progress.String(), want)
	}
	if want := "# hello\n./main.go:3:2: undefined: x\n"; rest != want {
		t.Fatalf("rest %q, want %q", rest, want)
	}
}
