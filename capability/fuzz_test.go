package capability

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// FuzzVerify feeds hostile bytes to the decoder and verifier: they must not
// panic, every failure must be an *Error of a known class, and whatever
// Parse accepts must re-encode to the very bytes it came from (one token,
// one encoding).
func FuzzVerify(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(vectorDir, "*.txt"))
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		v, err := parseVector(filepath.Base(file), b)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(v.token)
	}
	f.Add([]byte{0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}) // an array claiming 2^64-1 links
	f.Fuzz(func(t *testing.T, data []byte) {
		tok, perr := Parse(data)
		if perr == nil && !bytes.Equal(tok.Bytes(), data) {
			t.Fatalf("Parse accepted bytes that do not re-encode to themselves")
		}
		_, err := Verify(data, trustA(), Options{Now: during})
		if err == nil {
			return
		}
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("not an *Error: %v", err)
		}
		known := false
		for _, class := range classes {
			known = known || e.Class == class
		}
		if !known {
			t.Fatalf("unknown class %v", e.Class)
		}
	})
}

// TestHostileLengthsAllocateLittle: heads that claim huge lengths are
// refused before anything of that size is allocated.
func TestHostileLengthsAllocateLittle(t *testing.T) {
	inputs := map[string][]byte{
		"array of 2^64-1 links":       {0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		"link byte string of 4 GiB":   {0x81, 0x84, 0x5a, 0xff, 0xff, 0xff, 0xff},
		"nested arrays":               bytes.Repeat([]byte{0x81}, 10000),
		"one link, 2^32 map pairs":    {0x81, 0x84, 0x41, 0xa0, 0xba, 0xff, 0xff, 0xff, 0xff},
		"token over MaxTokenSize":     append([]byte{0x81, 0x5a, 0x00, 0x01, 0x00, 0x01}, make([]byte, MaxTokenSize+1)...),
		"many links of empty strings": append([]byte{0x99, 0x10, 0x00}, bytes.Repeat([]byte{0x40}, 0x1000)...),
	}
	for name, in := range inputs {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := Verify(in, trustA(), Options{Now: during})
		runtime.ReadMemStats(&after)
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%s: want an *Error, got %v", name, err)
		}
		// The decoder may copy the input a few times; it must not
		// allocate what the heads claim.
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 4*uint64(len(in))+1<<20 {
			t.Errorf("%s: %d bytes allocated for %d bytes of input", name, grew, len(in))
		}
	}
}
