//go:build linux || darwin

package sandbox

import (
	"io/fs"
	"syscall"
)

// inodeKey names a file across its hard links.
type inodeKey struct{ dev, ino uint64 }

// allocated returns the file's inode, the bytes allocated to it and its
// link count.
func allocated(fi fs.FileInfo) (inodeKey, int64, uint64) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return inodeKey{}, fi.Size(), 1
	}
	return inodeKey{uint64(st.Dev), uint64(st.Ino)}, int64(st.Blocks) * 512, uint64(st.Nlink)
}
