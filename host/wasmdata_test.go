package host_test

import (
	"bytes"
	"testing"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/testutil"
)

// TestMergedDataMakesTheSameMemory: the rewrite merges a Go agent's tens
// of thousands of data segments into a few, and the memory they make is
// the same byte for byte.
func TestMergedDataMakesTheSameMemory(t *testing.T) {
	code := testutil.BuildGo(t, "host/testdata/agents/smoke")
	image, n, merged, m, err := host.DataImage(code)
	if err != nil {
		t.Fatal(err)
	}
	if n < 1000 || m*100 > n {
		t.Fatalf("%d data segments merged into %d: want a Go agent's thousands merged into a hundredth or fewer", n, m)
	}
	if !bytes.Equal(image, merged) {
		t.Fatalf("the merged segments make a different memory: %d bytes against %d, first difference at %d", len(merged), len(image), firstDiff(image, merged))
	}
}

// TestDataMergesOnlyWhereOrderCannotMatter: segments are merged across a
// gap of up to 64 zeros, and left as they are when they overlap (the later
// one wins), when an offset is not a constant, or when the module has a
// data count section (an instruction may name a segment by its index).
func TestDataMergesOnlyWhereOrderCannotMatter(t *testing.T) {
	for _, c := range []struct {
		name     string
		wat      string
		segments int
	}{
		{"a gap of 64 zeros", `(module (memory 1) (data (i32.const 100) "ab") (data (i32.const 166) "cd") (data (i32.const 10) "x"))`, 2},
		{"a gap of 65 zeros", `(module (memory 1) (data (i32.const 100) "ab") (data (i32.const 167) "cd"))`, 2},
		{"adjacent, out of order", `(module (memory 1) (data (i32.const 4) "cd") (data (i32.const 0) "abab"))`, 1},
		{"overlapping", `(module (memory 1) (data (i32.const 2) "XY") (data (i32.const 0) "abcd") (data (i32.const 6) "ef"))`, 3},
		{"an offset from a global", `(module (import "env" "g" (global $g i32)) (memory 1) (data (i32.const 0) "ab") (data (global.get $g) "cd"))`, 2},
		{"a passive segment", `(module (memory 1) (data (i32.const 0) "ab") (data "cd") (data (i32.const 4) "ef") (func (memory.init 1 (i32.const 0) (i32.const 0) (i32.const 2)) (data.drop 1)))`, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			image, n, merged, m, err := host.DataImage(watModule(t, c.wat))
			if err != nil {
				t.Fatal(err)
			}
			want := c.segments
			if m != want {
				t.Fatalf("%d segments became %d, want %d", n, m, want)
			}
			if !bytes.Equal(image, merged) {
				t.Fatalf("the memory differs at %d: %q against %q", firstDiff(image, merged), merged, image)
			}
		})
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
