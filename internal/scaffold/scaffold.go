// Package scaffold writes a new agent: its source, a grant, a README with
// the commands that build, run, replay and audit it, and a test in the form
// its language's users expect (go test for Go, make test for C and for
// Rust, whose cargo cannot find the SDK crate on its own). What it
// writes builds and runs at once, with nothing but the agentrt binary and
// the language's toolchain (agentrt new).
package scaffold

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"go/format"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/template"

	guestsdk "github.com/agentrt/agentrt/guest-sdk"
)

//go:embed templates
var templates embed.FS

// Languages are the languages an agent can be written in, the first the
// default.
var Languages = []string{"go", "c", "rust"}

// ErrNotEmpty is returned by Write for a folder that holds files, unless
// Options.Force is set.
var ErrNotEmpty = errors.New("the folder is not empty")

// Options are what Write is asked to write.
type Options struct {
	// Lang is one of Languages ("" is the first).
	Lang string
	// Name names the agent: its module, its .wasm file, its kv namespace.
	// "" is the folder's name, made fit for those uses.
	Name string
	// Module is a Go agent's module path ("" is Name).
	Module string
	// Force writes into a folder that is not empty, replacing the files
	// of the same names and leaving the others.
	Force bool
}

// data is what the templates see.
type data struct {
	Name, Module, Namespace, Wasm string
	GoVersion                     string
	SDKModule, SDKVersion         string
}

// Write writes a new agent into dir (created if need be) and returns the
// files it wrote, relative to dir (slash-separated), in order.
func Write(dir string, opts Options) ([]string, error) {
	if opts.Lang == "" {
		opts.Lang = Languages[0]
	}
	if !slices.Contains(Languages, opts.Lang) {
		return nil, fmt.Errorf("no language %q (agentrt new writes %s)", opts.Lang, strings.Join(Languages, ", "))
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	name := opts.Name
	if name == "" {
		name = Name(filepath.Base(abs))
	} else if Name(name) != name {
		return nil, fmt.Errorf("name %q: use lower-case letters, digits and '-' (e.g. %s)", name, Name(name))
	}
	d := data{
		Name: name, Module: opts.Module, Namespace: name, Wasm: name + ".wasm",
		GoVersion: goVersion(), SDKModule: guestsdk.ModulePath, SDKVersion: guestsdk.Version,
	}
	if d.Module == "" {
		d.Module = name
	} else if !modulePath.MatchString(d.Module) {
		return nil, fmt.Errorf("module path %q: write it as the go command does (example.com/hello)", d.Module)
	}
	if entries, err := os.ReadDir(abs); err == nil && len(entries) > 0 && !opts.Force {
		return nil, fmt.Errorf("%w: %s holds %s", ErrNotEmpty, dir, describe(entries))
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	files, err := render(opts.Lang, d)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, err
	}
	var names []string
	for _, f := range files {
		dst := filepath.Join(abs, filepath.FromSlash(f.name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return names, err
		}
		if err := os.WriteFile(dst, f.body, 0o644); err != nil {
			return names, err
		}
		names = append(names, f.name)
	}
	return names, nil
}

type file struct {
	name string
	body []byte
}

// render executes the templates of lang. A template's file name is its
// path less .tmpl; gitignore is .gitignore.
func render(lang string, d data) ([]file, error) {
	dir := path.Join("templates", lang)
	var files []file
	err := fs.WalkDir(templates, dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		src, err := fs.ReadFile(templates, p)
		if err != nil {
			return err
		}
		t, err := template.New(e.Name()).Option("missingkey=error").Parse(string(src))
		if err != nil {
			return err
		}
		var b bytes.Buffer
		if err := t.Execute(&b, d); err != nil {
			return err
		}
		name := strings.TrimSuffix(strings.TrimPrefix(p, dir+"/"), ".tmpl")
		if name == "gitignore" {
			name = ".gitignore"
		}
		body := b.Bytes()
		if strings.HasSuffix(name, ".go") {
			if body, err = format.Source(body); err != nil {
				return fmt.Errorf("template %s: %w", p, err)
			}
		}
		files = append(files, file{name, body})
		return nil
	})
	if err != nil {
		return nil, err
	}
	// The source first, then what goes with it.
	order := func(name string) int {
		switch base := path.Base(name); {
		case strings.HasPrefix(base, "main."):
			return 0
		case name == "grant.yaml":
			return 2
		case name == "README.md":
			return 3
		case strings.HasPrefix(name, "."):
			return 4
		}
		return 1
	}
	slices.SortStableFunc(files, func(a, b file) int { return order(a.name) - order(b.name) })
	return files, nil
}

var (
	notName    = regexp.MustCompile(`[^a-z0-9-]+`)
	modulePath = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._~-]*(/[A-Za-z0-9._~-]+)*$`)
)

// Name makes s fit to name an agent: lower case, runs of anything but
// letters, digits and '-' as one '-', no '-' at either end; "agent" when
// nothing is left.
func Name(s string) string {
	n := strings.Trim(notName.ReplaceAllString(strings.ToLower(s), "-"), "-")
	if n == "" {
		return "agent"
	}
	return n
}

// goVersion is the language version a new go.mod states: the installed go
// command's (go 1.26 from go1.26.8), else the SDK's own minimum.
func goVersion() string {
	if out, err := exec.Command("go", "env", "GOVERSION").Output(); err == nil {
		if m := regexp.MustCompile(`^go(1\.[0-9]+)`).FindSubmatch(bytes.TrimSpace(out)); m != nil {
			return string(m[1])
		}
	}
	return "1.21"
}

// describe names a few of a folder's entries.
func describe(entries []fs.DirEntry) string {
	var names []string
	for i, e := range entries {
		if i == 3 {
			names = append(names, fmt.Sprintf("and %d more", len(entries)-3))
			break
		}
		names = append(names, e.Name())
	}
	return strings.Join(names, ", ")
}
