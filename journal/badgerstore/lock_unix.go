//go:build unix

package badgerstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// lockFile is the file in a store's directory that Open locks for as long
// as the store is open: the preflight checks and repairs files that only a
// store nobody has open may have (badger takes its own lock only when it
// opens, after them).
const lockFile = "agentrt.lock"

// dirLock is an exclusive advisory lock on a store directory.
type dirLock struct{ f *os.File }

func lockDir(dir string) (*dirLock, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w (%s)", ErrLocked, dir)
		}
		return nil, fmt.Errorf("badgerstore: lock %s: %w", dir, err)
	}
	return &dirLock{f: f}, nil
}

func (l *dirLock) release() {
	if l != nil {
		l.f.Close() // closing the descriptor drops the lock
	}
}
