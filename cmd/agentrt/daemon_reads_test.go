//go:build unix

package main

import (
	"net"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/journal/badgerstore"
)

// TestReadsOfAHeldDirectorySayWhy holds a data directory's store (as a
// command such as purge does) and runs each read command on it: with no
// socket in the directory, and with a socket no process answers on, each
// fails with the lock error and a hint that names the socket and says
// what to do; none answers as if the store were empty.
func TestReadsOfAHeldDirectorySayWhy(t *testing.T) {
	data := t.TempDir()
	st, err := badgerstore.Open(cell.StoreDir(data))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	reads := [][]string{
		{"runs"}, {"logs", "last"}, {"journal", "show", "last"}, {"journal", "query"}, {"replay", "last"},
		{"audit", "export", "last", "-o", t.TempDir() + "/run.bundle"}, {"audit", "checkpoint", "last"},
		{"audit", "prove", "last", "--entry", "0"},
	}
	check := func(want string) {
		t.Helper()
		for _, args := range reads {
			r := agentrtCLI(data, args...)
			if r.code != 1 || !strings.Contains(r.stderr, "agentrt: error: badgerstore: the data directory is in use") ||
				!strings.Contains(r.stderr, "\nhint: ") || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, cell.SocketPath(data)) {
				t.Errorf("%v: %v\nwant the lock error and a hint with %q and the socket's path", args, r, want)
			}
		}
	}
	check("serves no socket")
	// A socket file that no one listens on any more.
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: cell.SocketPath(data), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	check("its socket does not answer")
}
