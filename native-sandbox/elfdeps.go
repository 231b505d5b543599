package sandbox

import (
	"bytes"
	"debug/elf"
	"io"
	"os"
	"path/filepath"
	"runtime"
)

// elfDeps returns the ELF interpreter and the shared libraries a dynamically
// linked helper needs, which must exist inside the sandbox for it to start.
// A static helper needs none.
func elfDeps(bin string) ([]string, error) {
	f, err := elf.Open(bin)
	if err != nil {
		return nil, refused("", "reading the helper %s: %v", bin, err)
	}
	defer f.Close()
	var interp string
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b, err := io.ReadAll(p.Open())
			if err != nil {
				return nil, refused("", "reading the helper's interpreter: %v", err)
			}
			interp = string(bytes.TrimRight(b, "\x00"))
		}
	}
	if interp == "" {
		return nil, nil
	}
	triplet := map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}[runtime.GOARCH]
	dirs := []string{"/lib/" + triplet, "/usr/lib/" + triplet, "/lib64", "/usr/lib64", "/lib", "/usr/lib"}
	out := []string{interp}
	seen := map[string]bool{interp: true}
	queue := []*elf.File{f}
	for len(queue) > 0 {
		lf := queue[0]
		queue = queue[1:]
		needed, err := lf.ImportedLibraries()
		if err != nil {
			return nil, refused("", "reading the helper's libraries: %v", err)
		}
		for _, n := range needed {
			found := ""
			for _, d := range dirs {
				if _, err := os.Stat(filepath.Join(d, n)); err == nil {
					found = filepath.Join(d, n)
					break
				}
			}
			if found == "" {
				return nil, refused("build agentrt with CGO_ENABLED=0 for a static helper", "the helper needs %s, which is not in %v", n, dirs)
			}
			if seen[found] {
				continue
			}
			seen[found] = true
			out = append(out, found)
			if nf, err := elf.Open(found); err == nil {
				defer nf.Close()
				queue = append(queue, nf)
			}
		}
	}
	return out, nil
}
