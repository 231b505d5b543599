// Package jstest starts real NATS JetStream servers in process for tests:
// one server (R1) or a cluster of three routed on loopback (R3). Each
// server keeps its JetStream files in a t.TempDir(), syncs every write
// before acknowledging it (sync_interval: always, as the journal needs),
// and is shut down when the test ends.
//
// It is a test helper: it never listens beyond 127.0.0.1.
package jstest

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// MaxPayload is the largest message the test servers take (8 MiB): the
// journal's largest records (a kv write near the request limit) fit, and
// the store still has to split blobs and modules larger than it.
const MaxPayload = 8 << 20

// options are the options of one test server: a random client port on
// loopback, JetStream in dir, every write synced before its ack.
func options(t testing.TB, name string) *server.Options {
	return &server.Options{
		ServerName: name,
		Host:       "127.0.0.1",
		Port:       -1,
		NoLog:      true,
		NoSigs:     true,
		JetStream:  true,
		StoreDir:   t.TempDir(),
		// sync_interval: always. The default syncs every 2 minutes and
		// acknowledges before that, which would lose acknowledged
		// journal entries in a power loss.
		SyncAlways: true,
		MaxPayload: MaxPayload,
	}
}

// started holds the options each server was started with, for Restart.
var started sync.Map // *server.Server -> *server.Options

// launch starts a server without waiting for it.
func launch(t testing.TB, opts *server.Options) *server.Server {
	t.Helper()
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("jstest: configure nats-server %s: %v", opts.ServerName, err)
	}
	started.Store(s, opts.Clone())
	go s.Start()
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

// ready waits for s to take clients: a clustered server is ready once
// JetStream's meta group has formed, so a cluster's servers are all
// launched first.
func ready(t testing.TB, s *server.Server) {
	t.Helper()
	if !s.ReadyForConnections(30 * time.Second) {
		t.Fatalf("jstest: nats-server %s did not accept connections within 30 s", s.Name())
	}
}

// Server starts one JetStream server and returns it.
func Server(t testing.TB) *server.Server {
	t.Helper()
	return ServerWith(t, nil)
}

// ServerWith is Server with its options changed by mod first (nil
// changes nothing). Benchmarks use it to measure what a setting costs,
// such as SyncAlways off; a store test keeps the defaults.
func ServerWith(t testing.TB, mod func(*server.Options)) *server.Server {
	t.Helper()
	opts := options(t, "js-1")
	if mod != nil {
		mod(opts)
	}
	s := launch(t, opts)
	ready(t, s)
	return s
}

// Cluster starts n JetStream servers routed to each other on loopback
// (cluster "agentrt-test"), and returns them once JetStream's meta group
// has a leader that every server follows. DontListen cannot be used here:
// it also closes the cluster port the routes need.
func Cluster(t testing.TB, n int) []*server.Server {
	t.Helper()
	return ClusterWith(t, n, nil)
}

// ClusterWith is Cluster with each server's options changed by mod
// first (nil changes nothing).
func ClusterWith(t testing.TB, n int, mod func(*server.Options)) []*server.Server {
	t.Helper()
	if n < 1 {
		t.Fatalf("jstest: a cluster of %d servers", n)
	}
	// Every server of a JetStream cluster needs its routes at start, so
	// the cluster ports are chosen first: free ports on loopback, from
	// the OS.
	ports := freePorts(t, n)
	routes := make([]string, n)
	for i, p := range ports {
		routes[i] = fmt.Sprintf("nats://127.0.0.1:%d", p)
	}
	servers := make([]*server.Server, 0, n)
	for i := range n {
		opts := options(t, fmt.Sprintf("js-%d", i+1))
		opts.Cluster = server.ClusterOpts{Name: "agentrt-test", Host: "127.0.0.1", Port: ports[i]}
		opts.Routes = server.RoutesFromStr(strings.Join(routes, ","))
		if mod != nil {
			mod(opts)
		}
		servers = append(servers, launch(t, opts))
	}
	for _, s := range servers {
		ready(t, s)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !clusterReady(servers) {
		if time.Now().After(deadline) {
			t.Fatalf("jstest: the JetStream cluster of %d servers had no current meta leader within 30 s", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return servers
}

// freePorts returns n TCP ports on 127.0.0.1 that were free a moment ago.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, n)
	ls := make([]net.Listener, n)
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("jstest: find a free port: %v", err)
		}
		ls[i], ports[i] = l, l.Addr().(*net.TCPAddr).Port
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// clusterReady: one meta leader, every server current, and the leader
// sees every server as a JetStream peer (only the leader answers that).
func clusterReady(servers []*server.Server) bool {
	var leader *server.Server
	for _, s := range servers {
		if !s.JetStreamIsCurrent() {
			return false
		}
		if s.JetStreamIsLeader() {
			if leader != nil {
				return false
			}
			leader = s
		}
	}
	return leader != nil && len(leader.JetStreamClusterPeers()) == len(servers)
}

// URL is the comma-separated client URLs of servers, as nats.Connect
// takes them.
func URL(servers ...*server.Server) string {
	urls := make([]string, len(servers))
	for i, s := range servers {
		urls[i] = s.ClientURL()
	}
	return strings.Join(urls, ",")
}

// Connect connects to servers and closes the connection when the test
// ends.
func Connect(t testing.TB, servers ...*server.Server) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(URL(servers...), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("jstest: connect to %s: %v", URL(servers...), err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// Stop shuts s down at once, as a crash would look to its clients and
// peers: connections dropped, its raft groups gone without handing over.
// Its JetStream files stay, for Restart.
func Stop(s *server.Server) {
	s.Shutdown()
	s.WaitForShutdown()
}

// Restart starts again a server of this package that Stop shut down,
// with its name, JetStream directory, client port and routes, and returns
// it once it takes clients; a member of a cluster once its JetStream is
// current again.
func Restart(t testing.TB, s *server.Server) *server.Server {
	t.Helper()
	o, ok := started.Load(s)
	if !ok {
		t.Fatalf("jstest: Restart of a server jstest did not start")
	}
	opts := o.(*server.Options).Clone()
	if a, ok := s.Addr().(*net.TCPAddr); ok {
		opts.Port = a.Port // the clients reconnect to the address they know
	}
	Stop(s)
	r := launch(t, opts)
	if !r.ReadyForConnections(time.Minute) {
		t.Fatalf("jstest: the restarted nats-server %s did not accept connections within a minute", opts.ServerName)
	}
	deadline := time.Now().Add(time.Minute)
	for opts.Cluster.Port != 0 && !r.JetStreamIsCurrent() {
		if time.Now().After(deadline) {
			t.Fatalf("jstest: the restarted nats-server %s did not catch up with its cluster within a minute", opts.ServerName)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return r
}
