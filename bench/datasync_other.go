//go:build !linux

package bench

import "os"

// datasync is what the journal's log does after a durable round's record
// (journal/badgerstore's wal_other.go: Sync).
func datasync(f *os.File) error { return f.Sync() }
