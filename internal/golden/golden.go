// Package golden keeps a directory of generated test files in step with the
// generator that writes them: a test either checks that the directory holds
// exactly what the generator writes or, with its -rewrite flag, rewrites it.
package golden

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Sync checks that the files matching pattern in dir are exactly want (name
// to content): none missing, none extra, none different. With rewrite set
// it makes them so instead: it writes every file of want and removes the
// others.
func Sync(t testing.TB, dir, pattern string, want map[string][]byte, rewrite bool) {
	t.Helper()
	have, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		t.Fatal(err)
	}
	if rewrite {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range have {
			if _, keep := want[filepath.Base(f)]; !keep {
				if err := os.Remove(f); err != nil {
					t.Fatal(err)
				}
			}
		}
		for name, b := range want {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	for _, f := range have {
		if _, ok := want[filepath.Base(f)]; !ok {
			t.Errorf("%s is not written by the generator (rerun with -rewrite to remove it)", f)
		}
	}
	for name, b := range want {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("%v (rerun with -rewrite)", err)
			continue
		}
		if !bytes.Equal(got, b) {
			t.Errorf("%s differs from what the generator writes (rerun with -rewrite after a deliberate change)", name)
		}
	}
}
