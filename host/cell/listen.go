package cell

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
)

// SocketName is the cell API's unix socket in a data directory. A process
// that holds the directory serves it: the daemon the whole API, a
// foreground run reading and cancelling.
const SocketName = "agentrt.sock"

// SocketPath returns the API socket of the cell in dataDir.
func SocketPath(dataDir string) string { return filepath.Join(dataDir, SocketName) }

// maxSocketPath is the longest unix socket path every platform takes
// (sockaddr_un holds 104 bytes on macOS, 108 on Linux, with the NUL).
const maxSocketPath = 103

// ErrSocketPath is returned by ListenSocket for a path too long for a unix
// socket.
var ErrSocketPath = errors.New("cell: socket path too long for a unix socket")

// ListenSocket listens on the unix socket at path, readable and writable by
// this user only. The caller holds the cell's data directory (its store's
// lock), so a socket file left there by a killed process is stale and is
// replaced.
func ListenSocket(path string) (net.Listener, error) {
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("%w: %s (%d bytes, at most %d)", ErrSocketPath, path, len(path), maxSocketPath)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// ListenLoopback listens on addr, which must be a loopback address: the
// API has no authentication of its own, so it is never offered beyond
// this machine (the unix socket's permissions guard it locally).
func ListenLoopback(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("cell: listen address %q: %w", addr, err)
	}
	if host == "localhost" {
		host = "127.0.0.1"
		_, port, _ := net.SplitHostPort(addr)
		addr = net.JoinHostPort(host, port)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("cell: listen address %q is not a loopback address (127.0.0.1, ::1): the cell API has no authentication and is served on this machine only", addr)
	}
	return net.Listen("tcp", addr)
}
