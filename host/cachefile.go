package host

import (
	"os"
	"path/filepath"
	"time"
)

// staleTemp is the age past which a temporary file of replaceFile is
// taken for one a killed process left, and removed.
const staleTemp = time.Hour

// replaceFile writes parts, one after the other, to path with mode perm,
// whole or not at all: to a temporary file in path's folder (created if
// missing), renamed over path. It does not sync: the engine's caches
// (compiled modules, rewrites) make again a file a crash lost. Temporary
// files of the folder over staleTemp old, which a killed process left, are
// removed first.
func replaceFile(path string, perm os.FileMode, parts ...[]byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	old, _ := filepath.Glob(filepath.Join(dir, ".tmp-*"))
	for _, f := range old {
		if fi, err := os.Stat(f); err == nil && time.Since(fi.ModTime()) > staleTemp {
			os.Remove(f)
		}
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	err = f.Chmod(perm)
	for _, p := range parts {
		if err == nil {
			_, err = f.Write(p)
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}
