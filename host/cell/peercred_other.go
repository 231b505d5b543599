//go:build !linux && !darwin

package cell

import "net"

// peerUID reports no peer here: the socket's file mode alone admits its
// clients.
func peerUID(*net.UnixConn) (int, error) { return -1, errNoPeerCred }
