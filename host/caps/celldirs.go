package caps

import (
	"path/filepath"
	"strings"
)

// CellDirs are the cell's own directories, which no sandboxed program (a
// tool, a stdio mcp server) may see whatever its grant says: the data
// directory, which holds the cell's keys, API token and store, and the
// compilation cache when --cache puts it outside it, whose files (compiled
// modules, rewritten modules) are code the cell executes. An empty one is
// none.
type CellDirs struct {
	Data, Cache string
}

// CellDir is the one of CellDirs a path reaches.
type CellDir struct {
	Path string // as the cell names it
	Data bool   // the data directory; false: the compilation cache
}

func (d CellDir) String() string {
	if d.Data {
		return "the cell's data directory " + d.Path + ", which holds its keys, API token and store"
	}
	return "the cell's compilation cache " + d.Path + ", which holds the code it executes"
}

// Reaching resolves d's directories (RealPath) once and returns the
// function that tells which of them the resolved path rp lies in or holds.
func (d CellDirs) Reaching() func(rp string) (CellDir, bool) {
	type dir struct {
		CellDir
		real string
	}
	var dirs []dir
	if d.Data != "" {
		dirs = append(dirs, dir{CellDir{d.Data, true}, RealPath(d.Data)})
	}
	if d.Cache != "" {
		dirs = append(dirs, dir{CellDir{d.Cache, false}, RealPath(d.Cache)})
	}
	return func(rp string) (CellDir, bool) {
		for _, d := range dirs {
			if HostWithin(rp, d.real) || HostWithin(d.real, rp) {
				return d.CellDir, true
			}
		}
		return CellDir{}, false
	}
}

// RealPath returns p absolute with every symbolic link resolved, as far as
// it exists: a path whose last elements are missing keeps them as they are
// (so that a path not made yet under a link into a cell directory is seen
// to reach it).
func RealPath(p string) string {
	p = filepath.Clean(p)
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	rest := ""
	for q := p; ; q = filepath.Dir(q) {
		if r, err := filepath.EvalSymlinks(q); err == nil {
			return filepath.Join(r, rest)
		}
		if filepath.Dir(q) == q {
			return p
		}
		rest = filepath.Join(filepath.Base(q), rest)
	}
}

// HostWithin reports whether the clean absolute host path p is root or
// lies beneath it.
func HostWithin(p, root string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}
