package capability

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/internal/golden"
)

// The vectors in testdata/tools give a tool declaration as a grant file
// writes it (entry, one line of JSON, which is YAML too), its canonical
// CBOR (decl) and its digest, so that another implementation can check the
// hash input byte for byte. TestGenerateVectors's -rewrite writes them
// from toolVectors; host's TestToolVectorsFromGrantEntries checks that the
// host's grant parser turns each entry into exactly decl.

const toolVectorDir = "testdata/tools"

type toolVector struct {
	name    string
	comment []string
	entry   string
	decl    []byte
	digest  []byte
}

// toolVectors are the declarations of the vectors, each with the grant
// entry that declares it.
func toolVectors() []struct {
	name, comment, entry string
	decl                 ToolDecl
} {
	return []struct {
		name, comment, entry string
		decl                 ToolDecl
	}{
		{"minimal", "only the two required members", `{"name": "date", "exec": "/usr/bin/date"}`,
			ToolDecl{Name: "date", Exec: "/usr/bin/date"}},
		{"empty-members", "empty lists, maps and limits, false and 0 are left out: the same bytes and digest as minimal",
			`{"name": "date", "exec": "/usr/bin/date", "args": {"fixed": [], "flags": [], "max": 0}, "read": [], "write": [], "env": {}, "limits": {}, "workspace": false, "idempotent": false}`,
			ToolDecl{Name: "date", Exec: "/usr/bin/date", Args: &ToolArgsDecl{}, Read: []string{}, Write: []string{}, Env: map[string]string{}, Limits: &ToolLimitsDecl{}}},
		{"count-todo", "the README's tool: every member, in the order a grant file writes them; lists keep their order",
			`{"name": "count-todo", "exec": "/usr/bin/grep", "args": {"fixed": ["-c", "-e", "TODO"], "flags": [{"name": "-i"}, {"name": "--max-count", "value": "[0-9]{1,4}"}], "positional": [{"pattern": "[A-Za-z0-9._/-]+", "path": "ro"}], "max": 16}, "read": ["/usr", "/lib", "/lib64", "/srv/repo"], "write": ["/srv/out"], "workspace": true, "workdir": "/srv/repo", "network": "none", "env": {"LC_ALL": "C", "EMPTY": ""}, "limits": {"wall": "30s", "cpu": "10s", "memory": "256MiB", "procs": 16, "output": "1MiB"}, "idempotent": true}`,
			ToolDecl{Name: "count-todo", Exec: "/usr/bin/grep",
				Args: &ToolArgsDecl{Fixed: []string{"-c", "-e", "TODO"},
					Flags:      []ToolFlagDecl{{Name: "-i"}, {Name: "--max-count", Value: "[0-9]{1,4}"}},
					Positional: []ToolPositionalDecl{{Pattern: "[A-Za-z0-9._/-]+", Path: "ro"}}, Max: 16},
				Read: []string{"/usr", "/lib", "/lib64", "/srv/repo"}, Write: []string{"/srv/out"}, Workspace: true,
				Workdir: "/srv/repo", Network: "none", Env: map[string]string{"LC_ALL": "C", "EMPTY": ""},
				Limits:     &ToolLimitsDecl{Wall: "30s", CPU: "10s", Memory: "256MiB", Procs: 16, Output: "1MiB"},
				Idempotent: true}},
		{"count-todo-as-tee", "the tool name of count-todo declared as tee writing a directory: another digest",
			`{"name": "count-todo", "exec": "/usr/bin/tee", "args": {"positional": [{"pattern": ".*", "path": "rw"}]}, "read": ["/usr", "/lib", "/lib64"], "write": ["/home"]}`,
			ToolDecl{Name: "count-todo", Exec: "/usr/bin/tee", Args: &ToolArgsDecl{Positional: []ToolPositionalDecl{{Pattern: ".*", Path: "rw"}}},
				Read: []string{"/usr", "/lib", "/lib64"}, Write: []string{"/home"}}},
	}
}

func (v *toolVector) marshal() []byte {
	var b bytes.Buffer
	for _, c := range v.comment {
		fmt.Fprintf(&b, "comment: %s\n", c)
	}
	fmt.Fprintf(&b, "entry: %s\n", v.entry)
	fmt.Fprintf(&b, "decl: %x\n", v.decl)
	fmt.Fprintf(&b, "digest: %x\n", v.digest)
	return b.Bytes()
}

func parseToolVector(name string, data []byte) (*toolVector, error) {
	v := &toolVector{name: name}
	err := golden.Headers(name, data, func(key, val string) error {
		var err error
		switch key {
		case "comment":
			v.comment = append(v.comment, val)
		case "entry":
			v.entry = val
		case "decl":
			v.decl, err = hex.DecodeString(val)
		case "digest":
			v.digest, err = hex.DecodeString(val)
		default:
			err = fmt.Errorf("unknown header %q", key)
		}
		return err
	})
	if err == nil && (v.entry == "" || v.decl == nil || len(v.digest) != DigestSize) {
		err = fmt.Errorf("%s: entry, decl and a %d-byte digest are required", name, DigestSize)
	}
	return v, err
}

// TestToolVectors: each decl decodes as a tool-decl, re-encodes to the
// same bytes, and hashes to the digest.
func TestToolVectors(t *testing.T) {
	for _, v := range golden.Files(t, toolVectorDir, "*.txt", parseToolVector) {
		t.Run(strings.TrimSuffix(v.name, ".txt"), func(t *testing.T) {
			var d ToolDecl
			if err := decMode.Unmarshal(v.decl, &d); err != nil {
				t.Fatalf("decl does not decode as a tool declaration: %v", err)
			}
			again, err := d.Canonical()
			if err != nil || !bytes.Equal(again, v.decl) {
				t.Fatalf("decl is not canonical: re-encoded as %x", again)
			}
			if sum := sha256.Sum256(v.decl); !bytes.Equal(sum[:], v.digest) {
				t.Fatalf("digest %x, want %x", v.digest, sum)
			}
		})
	}
}

func generateToolVectors(tb testing.TB) map[string][]byte {
	out := map[string][]byte{}
	for _, tv := range toolVectors() {
		decl, err := tv.decl.Canonical()
		if err != nil {
			tb.Fatal(err)
		}
		d, err := tv.decl.Digest()
		if err != nil {
			tb.Fatal(err)
		}
		v := &toolVector{comment: []string{tv.comment}, entry: tv.entry, decl: decl, digest: d}
		out[tv.name+".txt"] = v.marshal()
	}
	return out
}

func TestGenerateToolVectors(t *testing.T) {
	golden.Sync(t, toolVectorDir, "*.txt", generateToolVectors(t), *rewrite)
}

// TestToolDigestNormalizes: absent and empty members are one declaration;
// any change of a member, and of the order of a list, is another.
func TestToolDigestNormalizes(t *testing.T) {
	vs := toolVectors()
	if digestOf(vs[0].decl).String() != digestOf(vs[1].decl).String() {
		t.Fatalf("empty members change the digest")
	}
	base := vs[2].decl
	changes := map[string]func(d *ToolDecl){
		"exec":            func(d *ToolDecl) { d.Exec = "/usr/bin/tee" },
		"fixed order":     func(d *ToolDecl) { d.Args.Fixed = []string{"-e", "-c", "TODO"} },
		"an empty fixed":  func(d *ToolDecl) { d.Args.Fixed = append(d.Args.Fixed, "") },
		"flag value":      func(d *ToolDecl) { d.Args.Flags = []ToolFlagDecl{{Name: "-i"}, {Name: "--max-count", Value: ".*"}} },
		"positional path": func(d *ToolDecl) { d.Args.Positional = []ToolPositionalDecl{{Pattern: "[A-Za-z0-9._/-]+", Path: "rw"}} },
		"max":             func(d *ToolDecl) { d.Args.Max = 17 },
		"read order":      func(d *ToolDecl) { d.Read = []string{"/lib", "/usr", "/lib64", "/srv/repo"} },
		"write":           func(d *ToolDecl) { d.Write = []string{"/"} },
		"workspace":       func(d *ToolDecl) { d.Workspace = false },
		"workdir":         func(d *ToolDecl) { d.Workdir = "/srv/out" },
		"network":         func(d *ToolDecl) { d.Network = "" },
		"env value":       func(d *ToolDecl) { d.Env = map[string]string{"LC_ALL": "C"} },
		"limits":          func(d *ToolDecl) { d.Limits = &ToolLimitsDecl{Wall: "30s"} },
		"idempotent":      func(d *ToolDecl) { d.Idempotent = false },
	}
	seen := map[string]string{digestOf(base).String(): "base"}
	for name, change := range changes {
		d := base
		a, l := *base.Args, *base.Limits
		d.Args, d.Limits = &a, &l
		change(&d)
		sum := digestOf(d).String()
		if other, dup := seen[sum]; dup {
			t.Errorf("%s: the same digest as %s", name, other)
		}
		seen[sum] = name
	}
}
