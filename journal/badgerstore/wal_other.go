//go:build !linux

package badgerstore

import "os"

// datasync makes f's data durable (on darwin, Go's Sync is F_FULLFSYNC).
func datasync(f *os.File) error { return f.Sync() }
