package cell

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/cell/handoff"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/cellkey"
	"github.com/agentrt/agentrt/journal/jetstore"
	"github.com/agentrt/agentrt/placement"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ClusterOptions put a cell on NATS JetStream (Options.Cluster): the runs'
// journals, index, agent state, event logs, blobs, modules and leases live
// in the cluster's store (journal/jetstore), so that any cell of the
// cluster reads a run and a peer resumes one whose holder died. What is the
// cell's own stays in its data directory: its key, approval votes,
// triggers, tasks, the tokens it has seen and its lineage index.
type ClusterOptions struct {
	// URLs are the NATS servers to connect to (nats://host:port).
	URLs []string
	// Embedded starts a one-box JetStream server in this process, its
	// files in DATA/nats, reachable only from inside the process; URLs
	// must then be empty.
	Embedded bool
	// Replicas is the journal stream's and the buckets' replica count, 1
	// or 3 (default 1).
	Replicas int
	// Heartbeat is how often the cell writes its registry record;
	// default 1 s. A record not renewed within 3 heartbeats is stale and
	// the cell is taken for gone.
	Heartbeat time.Duration
	// Self is what the cell says of itself in the registry (placement's
	// cell descriptor). ID is filled in with the cell's key; Running is
	// the cell's live runs at each heartbeat.
	Self placement.Cell
	// HandoffExpiry is how long a handoff envelope this cell seals stays
	// valid, and how long the lease it hands over lasts unless the
	// destination takes it (default 10 s).
	HandoffExpiry time.Duration
}

// Cluster is a cell's connection to its cluster.
type Cluster struct {
	nc       *nats.Conn
	embedded *server.Server
	// Store is the cluster's journal store.
	Store *jetstore.Store
	// Registry holds the cells' heartbeats.
	Registry *Registry
	// handoffs holds the runs' handoff envelope chains and the nonces
	// accepted (handoffs.go).
	handoffs *kvHandoffs
	opts     ClusterOptions
	// trusted are the peer cells whose entries this cell accepts in a
	// journal it resumes (DATA/trusted_cells).
	trusted []ed25519.PublicKey
}

// TrustedCellsFile lists, one OpenSSH ed25519 public key a line, the peer
// cells whose sealed entries this cell accepts in a run it takes over. The
// registry is not trusted for keys: anyone who may write to it could name
// one.
const TrustedCellsFile = "trusted_cells"

// EmbeddedNATSDir is where --nats-embedded keeps its JetStream files.
const EmbeddedNATSDir = "nats"

func (o ClusterOptions) withDefaults() (ClusterOptions, error) {
	if o.Heartbeat == 0 {
		o.Heartbeat = time.Second
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.HandoffExpiry == 0 {
		o.HandoffExpiry = 10 * time.Second
	}
	switch {
	case o.Embedded && len(o.URLs) > 0:
		return o, errors.New("cell: an embedded NATS server and server URLs both given: use one")
	case !o.Embedded && len(o.URLs) == 0:
		return o, errors.New("cell: no NATS server: give its URLs, or ask for the embedded one")
	case o.Heartbeat < 10*time.Millisecond:
		return o, fmt.Errorf("cell: a heartbeat every %s is below 10ms", o.Heartbeat)
	case o.Embedded && o.Replicas != 1:
		return o, fmt.Errorf("cell: %d replicas on an embedded one-box server, which keeps 1", o.Replicas)
	}
	for _, u := range o.URLs {
		if !strings.HasPrefix(u, "nats://") && !strings.HasPrefix(u, "tls://") {
			return o, fmt.Errorf("cell: NATS URL %q: write nats://HOST:PORT (or tls://)", u)
		}
	}
	return o, nil
}

// joinTimeout bounds how long a cell waits, as it joins, for the
// cluster's registry and handoff buckets to answer (the store waits its
// own Options.Timeout).
const joinTimeout = 30 * time.Second

// openCluster connects the cell in dir to its cluster and opens its store
// and registry.
func openCluster(ctx context.Context, dir string, o ClusterOptions) (*Cluster, error) {
	opts, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Cluster{opts: opts}
	if b, err := os.ReadFile(filepath.Join(dir, TrustedCellsFile)); err == nil {
		if c.trusted, err = cellkey.ParseTrustFile(b); err != nil {
			return nil, fmt.Errorf("cell: %s: %w", TrustedCellsFile, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	connect := []nats.Option{nats.Name("agentrt cell"), nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond)}
	url := strings.Join(opts.URLs, ",")
	if opts.Embedded {
		srv, err := server.NewServer(&server.Options{
			ServerName: "agentrt-embedded",
			DontListen: true, // one box: no client port, no routes
			JetStream:  true,
			StoreDir:   filepath.Join(dir, EmbeddedNATSDir),
			// An acknowledged commit is on disk (journal/SPEC.md 16).
			SyncAlways: true,
			NoSigs:     true,
			NoLog:      true,
			MaxPayload: 8 << 20,
		})
		if err != nil {
			return nil, fmt.Errorf("cell: embedded NATS server: %w", err)
		}
		go srv.Start()
		if !srv.ReadyForConnections(30 * time.Second) {
			srv.Shutdown()
			return nil, errors.New("cell: the embedded NATS server did not start within 30 s")
		}
		c.embedded = srv
		connect = append(connect, nats.InProcessServer(srv))
		url = ""
	}
	if c.nc, err = nats.Connect(url, connect...); err != nil {
		c.close()
		return nil, fmt.Errorf("cell: connect to NATS %s: %w", url, err)
	}
	if c.Store, err = jetstore.Open(ctx, c.nc, jetstore.Options{Replicas: opts.Replicas}); err != nil {
		c.close()
		return nil, fmt.Errorf("cell: %w", err)
	}
	// The cells of a cluster that has just started open its buckets
	// together; an R3 bucket answers only once its raft group has a
	// leader.
	err = jetstore.Patiently(ctx, joinTimeout, func(ctx context.Context) (err error) {
		c.Registry, err = OpenRegistry(ctx, c.nc, opts.Replicas)
		return err
	})
	if err != nil {
		c.close()
		return nil, err
	}
	err = jetstore.Patiently(ctx, joinTimeout, func(ctx context.Context) (err error) {
		c.handoffs, err = openHandoffs(ctx, c.nc, opts.Replicas)
		return err
	})
	if err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// guardServers registers the addresses of the cluster's NATS servers (the
// URLs given, the servers the connection discovered, the one it is
// connected to) in ls, the addresses the http capability never connects
// to, whatever a grant names: an agent granted a host the servers listen
// on (127.0.0.1, any port) does not reach the cluster's bus, and through
// it the cells' handoff subjects, their leases and their journals. A name
// is registered as the addresses it resolves to when it is seen. Servers
// that join the cluster later are registered as the connection learns of
// them (the servers' INFO gossip), and so is the server it reconnects to.
func (c *Cluster) guardServers(ls *host.ListenerSet) {
	if c.embedded != nil {
		return // in process, no port
	}
	g := &serverGuard{ls: ls, seen: map[netip.AddrPort]bool{}}
	// The handlers are set before the first pass, so that a server
	// discovered in between is registered by one or the other.
	c.nc.SetDiscoveredServersHandler(g.guard)
	c.nc.SetReconnectHandler(g.guard)
	g.guard(c.nc)
}

// serverGuard registers NATS server addresses in a ListenerSet, each
// once.
type serverGuard struct {
	ls   *host.ListenerSet
	mu   sync.Mutex
	seen map[netip.AddrPort]bool
}

// guard registers the servers nc knows of now.
func (g *serverGuard) guard(nc *nats.Conn) {
	for _, u := range append(nc.Servers(), nc.DiscoveredServers()...) {
		if pu, err := url.Parse(u); err == nil {
			hp := pu.Host
			if pu.Port() == "" {
				hp = net.JoinHostPort(pu.Hostname(), strconv.Itoa(nats.DefaultPort))
			}
			g.add(hp)
		}
	}
	if a := nc.ConnectedAddr(); a != "" {
		g.add(a)
	}
}

func (g *serverGuard) add(hostport string) {
	const what = "the cluster's NATS server"
	h, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return
	}
	port, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return
	}
	ips := []netip.Addr{}
	if ip, err := netip.ParseAddr(h); err == nil {
		ips = append(ips, ip)
	} else {
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ips, _ = net.DefaultResolver.LookupNetIP(rctx, "ip", h)
		cancel()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, ip := range ips {
		ap := netip.AddrPortFrom(ip.Unmap(), uint16(port))
		if !g.seen[ap] {
			g.seen[ap] = true
			g.ls.Add(what, net.TCPAddrFromAddrPort(ap))
		}
	}
}

func (c *Cluster) close() error {
	if c.nc != nil {
		c.nc.Close()
	}
	if c.embedded != nil {
		c.embedded.Shutdown()
		c.embedded.WaitForShutdown()
	}
	return nil
}

// Handoffs returns the cluster's store of the runs' handoff envelope
// chains and accepted nonces (handoffs.go).
func (c *Cluster) Handoffs() handoff.Store { return c.handoffs }

// Trusted returns the peer cells this cell accepts entries from.
func (c *Cluster) Trusted() []ed25519.PublicKey { return slices.Clone(c.trusted) }

// Heartbeat is a cell's registry record: its descriptor as of At.
type Heartbeat struct {
	Cell placement.Cell `json:"cell"`
	// At is when it was written, Unix ns by the writer's clock, and
	// Every how often the writer renews it.
	At    int64         `json:"at"`
	Every time.Duration `json:"every"`
}

// Stale says whether h, read at now, is older than three of its writer's
// heartbeats: the cell is taken for gone.
func (h Heartbeat) Stale(now time.Time) bool {
	return now.UnixNano() > h.At+3*int64(h.Every)
}

// RegistryBucket is the KV bucket of the cells' heartbeats.
const RegistryBucket = "AGENTRT_CELLS"

// Registry is the cluster's cell registry: one key per cell (its id), the
// JSON of its last Heartbeat. Each cell writes only its own key.
type Registry struct {
	kv jetstream.KeyValue
}

// OpenRegistry opens (creating) the registry bucket on nc's servers.
func OpenRegistry(ctx context.Context, nc *nats.Conn, replicas int) (*Registry, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("cell: registry: %w", err)
	}
	kv, err := jetstore.OpenBucket(ctx, js, jetstream.KeyValueConfig{
		Bucket:      RegistryBucket,
		Description: "agentrt cell registry: each cell's heartbeat (placement descriptor)",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("cell: open the cell registry %s: %w", RegistryBucket, err)
	}
	return &Registry{kv: kv}, nil
}

// Announce writes h as its cell's record.
func (r *Registry) Announce(ctx context.Context, h Heartbeat) error {
	if err := h.Cell.Validate("cell"); err != nil {
		return fmt.Errorf("cell: registry: %w", err)
	}
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	if _, err := r.kv.Put(ctx, h.Cell.ID, b); err != nil {
		return fmt.Errorf("cell: registry: announce %s: %w", h.Cell.ID, err)
	}
	return nil
}

// Cells returns every cell's last heartbeat, in id order, stale ones
// included (Heartbeat.Stale). A record that does not decode is skipped.
func (r *Registry) Cells(ctx context.Context) ([]Heartbeat, error) {
	keys, err := r.kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("cell: registry: %w", err)
	}
	var out []Heartbeat
	for k := range keys.Keys() {
		e, err := r.kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("cell: registry: read %s: %w", k, err)
		}
		var h Heartbeat
		if json.Unmarshal(e.Value(), &h) != nil || h.Cell.ID != k {
			continue
		}
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b Heartbeat) int { return strings.Compare(a.Cell.ID, b.Cell.ID) })
	return out, nil
}

// Live returns the descriptors of the cells whose heartbeats are not
// stale at now.
func Live(hs []Heartbeat, now time.Time) []placement.Cell {
	var out []placement.Cell
	for _, h := range hs {
		if !h.Stale(now) {
			out = append(out, h.Cell)
		}
	}
	return out
}

// self returns the cell's descriptor for its next heartbeat.
func (c *Cluster) self(pub ed25519.PublicKey, running int) placement.Cell {
	d := c.opts.Self
	d.ID = hex.EncodeToString(pub)
	d.Running = running
	if d.MaxRuns == 0 {
		d.MaxRuns = 64
	}
	return d
}

var (
	_ journal.Leases        = (*jetstore.Store)(nil)
	_ journal.LeaseHandover = (*jetstore.Store)(nil)
)
