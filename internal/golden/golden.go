// Package golden keeps a directory of generated test files in step with the
// generator that writes them: a test either checks that the directory holds
// exactly what the generator writes or, with its -rewrite flag, rewrites it.
package golden

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// Files parses every file matching pattern in dir, in name order, with
// parse, which gets the file's base name; it fails the test on any error,
// and when there is no file at all.
func Files[T any](tb testing.TB, dir, pattern string, parse func(name string, data []byte) (T, error)) []T {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		tb.Fatal(err)
	}
	if len(files) == 0 {
		tb.Fatalf("no files %s in %s", pattern, dir)
	}
	out := make([]T, 0, len(files))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		v, err := parse(filepath.Base(f), b)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// Headers calls fn with the key and value of each "key: value" line of
// data, in order; an error (fn's, or a line of another shape) names the
// file and the line.
func Headers(name string, data []byte, fn func(key, val string) error) error {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 16<<20)
	for line := 1; sc.Scan(); line++ {
		key, val, ok := strings.Cut(sc.Text(), ": ")
		if !ok {
			return fmt.Errorf("%s:%d: want 'name: value'", name, line)
		}
		if err := fn(key, val); err != nil {
			return fmt.Errorf("%s:%d: %v", name, line, err)
		}
	}
	return sc.Err()
}
