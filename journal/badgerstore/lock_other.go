//go:build !unix && !windows

package badgerstore

// lockFile is the file in a store's directory that Open locks where the
// platform can; here badger's own lock is the only one.
const lockFile = "agentrt.lock"

type dirLock struct{}

func lockDir(string) (*dirLock, error) { return &dirLock{}, nil }

func (*dirLock) release() {}
