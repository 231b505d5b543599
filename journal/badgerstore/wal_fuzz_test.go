package badgerstore

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzReadWAL: the journal's log is read, before badger opens, from bytes
// a crash or a damaged disk may have left anything in. Whatever they are,
// readWAL returns records whose ops decode, or an error; it never panics,
// and never returns a record after one it refused.
func FuzzReadWAL(f *testing.F) {
	var ops walOps
	ops.set([]byte("k/ns\x00a"), []byte("value"))
	ops.del([]byte("k/ns\x00b"))
	rec := append(appendHeader(nil, 7, ops.b), ops.b...)
	two := append(append([]byte(nil), rec...), append(appendHeader(nil, 8, ops.b), ops.b...)...)
	f.Add(rec)
	f.Add(two)
	f.Add(rec[:len(rec)-3])                                // cut
	f.Add(append(append([]byte(nil), rec...), 0, 0, 0, 0)) // zeros after
	f.Add([]byte{})
	f.Add(append(appendHeader(nil, 0, ops.b), ops.b...)) // numbered 0: refused
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, walDir), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(segmentPath(dir, 1), data, 0o600); err != nil {
			t.Fatal(err)
		}
		left, err := readWAL(dir)
		if err != nil {
			return
		}
		for i, r := range left.recs {
			if err := applyOps(r, func(_, _ []byte) error { return nil }, func([]byte) error { return nil }); err != nil {
				t.Fatalf("record %d of %d was returned, and its ops do not decode: %v", i, len(left.recs), err)
			}
		}
		if len(left.recs) > 0 && left.last == 0 {
			t.Fatalf("%d records returned, the last one's seq 0", len(left.recs))
		}
	})
}
