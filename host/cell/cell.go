// Package cell opens a cell: the data directory that holds one host's
// journal store, agent state, signing key and compilation cache, and the
// host that runs agents on them. One cell per directory; the store's lock
// keeps a second process out.
package cell

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/caps/llm"
	"github.com/agentrt/agentrt/host/caps/llm/provider"
	"github.com/agentrt/agentrt/host/caps/mcp"
	"github.com/agentrt/agentrt/internal/clock"
	"github.com/agentrt/agentrt/internal/fileread"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/badgerstore"
	"github.com/agentrt/agentrt/journal/cellkey"
	"github.com/agentrt/agentrt/policy"
	"go.opentelemetry.io/otel/trace"
)

// EnvData names the environment variable that picks the data directory, and
// EnvCache the one that picks the compilation cache directory.
const (
	EnvData  = "AGENTRT_DATA"
	EnvCache = "AGENTRT_CACHE"
)

// DefaultDataDir returns the per-user data directory: $AGENTRT_DATA, else
// $XDG_DATA_HOME/agentrt or ~/.local/share/agentrt on Unix,
// ~/Library/Application Support/agentrt on macOS, %LocalAppData%\agentrt on
// Windows.
func DefaultDataDir() (string, error) {
	if d := os.Getenv(EnvData); d != "" {
		return d, nil
	}
	switch runtime.GOOS {
	case "windows":
		if d := os.Getenv("LocalAppData"); d != "" {
			return filepath.Join(d, "agentrt"), nil
		}
	case "darwin":
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		return filepath.Join(home, "Library", "Application Support", "agentrt"), nil
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "agentrt"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no home directory for the default data directory (set --data or %s): %w", EnvData, err)
	}
	return filepath.Join(home, ".local", "share", "agentrt"), nil
}

// StoreDir returns the store's directory inside a data directory.
func StoreDir(dataDir string) string { return filepath.Join(dataDir, "store") }

// WorkDir returns the directory inside a data directory that holds the
// runs' tool workspaces, one per run: DATA/work/<run id>.
func WorkDir(dataDir string) string { return filepath.Join(dataDir, "work") }

// Cell is an open data directory.
type Cell struct {
	Dir string
	// Store is the data directory's badger store: the cell's own records
	// (votes, triggers, tasks, seen tokens, lineage) and, without a
	// cluster, the runs too.
	Store *badgerstore.Store
	// Journal is where the runs live: Store, or the cluster's store.
	Journal JournalStore
	// Cluster is the cell's cluster (Options.Cluster); nil for a cell on
	// its data directory alone.
	Cluster *Cluster
	Key     ed25519.PrivateKey
	Engine  *host.Engine
	Host    *host.Host
	// Listeners are the cell's own TCP listeners (its API, later its
	// metrics and UI), which no agent's http capability may reach: a
	// daemon adds each one it opens (Listeners.Add).
	Listeners *host.ListenerSet
	// Clock is the time the cell's schedules run on, and its host's clock
	// (Options.Clock).
	Clock clock.Clock
	// Book is the cell's book of signed quorum approvals, when it has
	// approvers (DATA/approvers); nil: a call the modes ask about asks
	// Options.Approver, in memory, and approval.request is denied.
	Book *Book

	mu    sync.RWMutex
	sinks []func(host.Event)
}

// AddSink makes fn see every event of the runs this cell hosts from now
// on, besides Options.Sink. fn must not block.
func (c *Cell) AddSink(fn func(host.Event)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sinks = append(c.sinks, fn)
}

func (c *Cell) sink(e host.Event) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, fn := range c.sinks {
		fn(e)
	}
}

// Options tune Open.
type Options struct {
	// Sink sees every event of the runs this cell hosts.
	Sink func(host.Event)
	// Observer is told of the calls and commits of the runs this cell
	// hosts (Metrics).
	Observer host.Observer
	// Tracer, when set, traces the runs this cell hosts
	// (host.Deps.Tracer; host/tracing sets one up from OTEL_*), and
	// TracePayloads puts their payloads into the spans.
	Tracer        trace.TracerProvider
	TracePayloads bool
	// NoCache turns the compilation cache off.
	NoCache bool
	// Warm, when set, is called with the cell's engine once the store's
	// directory is locked for this process and while the store opens
	// (badgerstore.OpenOptions.Locked): agentrt run starts compiling its
	// module there (host.Engine.Warm). It is not called when another
	// process holds the store.
	Warm func(*host.Engine)
	// Engine is the WebAssembly engine (host.EngineConfig.Kind); empty:
	// the default, wazero.
	Engine string
	// KeepCompiled is the most compiled modules the cell keeps in
	// memory (host.EngineConfig.KeepCompiled); zero: the default,
	// host.DefaultKeepCompiled.
	KeepCompiled int
	// KeepMemory is the most bytes of zeroed guest memory the cell keeps
	// from ended runs for the next ones (host.EngineConfig.KeepMemory);
	// zero: the default, host.DefaultKeepMemory; below zero: none.
	KeepMemory int64
	// CacheDir holds the compilation cache; empty: DATA/cache. Cells may
	// share one: entries are keyed by the module's hash and the compiler.
	CacheDir string
	// Policies is a directory (or file) of customer Cedar policies; empty:
	// DATA/policies when it exists, else no customer layer. The platform
	// defaults always apply.
	Policies string
	// Modes is a permission modes file; empty: DATA/modes.yaml when it
	// exists, else none.
	Modes string
	// Approver answers the calls the modes ask about; nil: an ask is a no.
	Approver host.Approver
	// Cluster, when set, puts the runs on NATS JetStream (ClusterOptions).
	Cluster *ClusterOptions
	// LeaseTTL is how long a run's lease lasts unless renewed (zero: the
	// host's default): how soon a peer may take over a run whose cell died.
	LeaseTTL time.Duration
	// Clock is the cell's time: its host's clock and its schedules'
	// (timers, triggers, task backoffs, approval expiries); nil: the
	// system's. Tests inject a clock.Fake.
	Clock clock.Clock
}

// llmDeps returns the cell's model providers, from DATA/llm.yaml; nil
// when the cell has none. Images in requests are read from the store's
// blob area, by hash.
func llmDeps(dir string, st journal.Blobs) (*llm.Providers, error) {
	path := filepath.Join(dir, provider.FileName)
	cfg, err := provider.Load(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cell: %w", err)
	}
	images := func(sum []byte) ([]byte, error) { return st.Blob(context.Background(), sum) }
	return llm.NewProviders(cfg, nil, images), nil
}

// Files of a data directory that configure its gate.
const (
	// PoliciesDir holds the customer's Cedar policies (*.cedar).
	PoliciesDir = "policies"
	// ModesFile holds the permission modes (policy.ParseModes).
	ModesFile = "modes.yaml"
	// TokenRootsFile lists, one OpenSSH public key a line, the keys
	// trusted to issue capability tokens besides the cell's own.
	TokenRootsFile = "token_roots"
)

// Open opens (creating on first use) the cell in dir.
func Open(ctx context.Context, dir string, opts Options) (*Cell, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	key, err := cellkey.LoadOrCreate(dir)
	if err != nil {
		return nil, err
	}
	// The engine is made once the store is this process's (not for a
	// store a daemon holds, whose caller goes to the daemon), so that it
	// can start on opts.Warm while the store opens.
	var eng *host.Engine
	var engErr error
	st, err := badgerstore.OpenWith(StoreDir(dir), badgerstore.OpenOptions{Locked: func() {
		if eng, engErr = NewEngine(ctx, dir, opts); engErr == nil && opts.Warm != nil {
			opts.Warm(eng)
		}
	}})
	if err == nil && engErr != nil {
		st.Close()
		err = engErr
	}
	if err != nil {
		if eng != nil {
			eng.Close(ctx)
		}
		return nil, err
	}
	clk := opts.Clock
	if clk == nil {
		clk = clock.Real
	}
	c := &Cell{Dir: dir, Store: st, Journal: st, Key: key, Engine: eng, Listeners: &host.ListenerSet{}, Clock: clk}
	if opts.Sink != nil {
		c.sinks = append(c.sinks, opts.Sink)
	}
	deps := host.Deps{Store: st, KV: st, Events: st, Key: key, Sink: c.sink, Nonces: st, Approver: opts.Approver,
		Listeners: c.Listeners, Now: clk.Now, Observer: opts.Observer, Tracer: opts.Tracer, TracePayloads: opts.TracePayloads}
	if opts.Cluster != nil {
		if c.Cluster, err = openCluster(ctx, dir, *opts.Cluster); err != nil {
			st.Close()
			eng.Close(ctx)
			return nil, err
		}
		c.Cluster.guardServers(c.Listeners)
		js := c.Cluster.Store
		c.Journal = js
		deps.Store, deps.KV, deps.Events, deps.Leases = js, js, js, js
		deps.TrustedCells = c.Cluster.Trusted()
	}
	cache := cacheDir(dir, opts)
	deps.Tools = host.ToolDeps{Workspaces: WorkDir(dir), DataDir: dir, CacheDir: cache}
	deps.MCP = mcp.Deps{DataDir: dir, CacheDir: cache}
	if deps.MCP.Credentials, err = mcp.LoadCredentials(filepath.Join(dir, mcp.CredentialsFile)); err != nil {
		c.Close(ctx)
		return nil, fmt.Errorf("cell: %w", err)
	}
	if c.Book, err = OpenBook(dir, st, clk.Now); err == nil && c.Book != nil {
		deps.Approvals = c.Book
	}
	if err != nil {
		c.Close(ctx)
		return nil, err
	}
	if err = gateDeps(dir, opts, &deps); err == nil {
		if deps.LLM, err = llmDeps(dir, c.Journal); err == nil {
			c.Host, err = host.New(eng, deps, host.Config{LeaseTTL: opts.LeaseTTL})
		}
	}
	if err != nil {
		c.Close(ctx)
		return nil, err
	}
	return c, nil
}

// testCompileTimeout, when not zero, is the compile timeout of every
// cell's engine instead of the default: this package's tests set it
// (export_test.go), since a Go guest compiled under the race detector on a
// loaded machine may take longer than a cell allows, and they are not about
// that limit (host's tests are).
var testCompileTimeout time.Duration

// NewEngine returns the engine Open makes for the cell in dir, as opts
// pick it (Engine, CacheDir, NoCache), without opening the store: what
// re-executing a run needs while another process (a daemon) holds the
// store and answers its reads.
func NewEngine(ctx context.Context, dir string, opts Options) (*host.Engine, error) {
	return host.NewEngine(ctx, host.EngineConfig{Kind: opts.Engine, CacheDir: cacheDir(dir, opts), KeepCompiled: opts.KeepCompiled,
		KeepMemory: opts.KeepMemory, Compile: host.CompileLimits{Timeout: testCompileTimeout}})
}

// cacheDir is the compilation cache of the cell in dir as opts pick it:
// DATA/cache by default, opts.CacheDir, or none (NoCache).
func cacheDir(dir string, opts Options) string {
	switch {
	case opts.NoCache:
		return ""
	case opts.CacheDir != "":
		return opts.CacheDir
	}
	return filepath.Join(dir, "cache")
}

// Public returns the cell's public key, its identity.
func (c *Cell) Public() ed25519.PublicKey { return c.Key.Public().(ed25519.PublicKey) }

// Close releases the engine and the store.
func (c *Cell) Close(ctx context.Context) error {
	err := errors.Join(c.Engine.Close(ctx), c.Store.Close())
	if c.Cluster != nil {
		err = errors.Join(err, c.Cluster.close())
	}
	return err
}

// JournalStore is where a cell's runs live: their journals and index, the
// blobs their payloads name and their event logs.
type JournalStore interface {
	journal.Store
	journal.Blobs
	host.EventLog
}

// ErrNoRuns is returned by FindRun for LastRun in a store with no runs.
var ErrNoRuns = fmt.Errorf("no runs yet: %w", journal.ErrNotFound)

// ErrAmbiguous is returned by FindRun when a prefix matches several runs.
var ErrAmbiguous = errors.New("run id prefix matches more than one run")

// LastRun is the name FindRun resolves to the newest run.
const LastRun = "last"

// FindRun resolves a run id, a unique prefix of one, or LastRun.
func FindRun(ctx context.Context, st journal.Store, s string) (journal.RunID, error) {
	if id, err := journal.ParseRunID(s); err == nil {
		return id, nil
	}
	if s == "" {
		return journal.RunID{}, journal.ErrBadRunID
	}
	runs, err := st.Runs(ctx)
	if err != nil {
		return journal.RunID{}, err
	}
	if s == LastRun {
		if len(runs) == 0 {
			return journal.RunID{}, ErrNoRuns
		}
		return runs[0].ID, nil
	}
	if strings.Trim(s, "0123456789abcdef") != "" {
		return journal.RunID{}, journal.ErrBadRunID
	}
	var found []journal.RunID
	for _, m := range runs {
		if len(s) <= 32 && m.ID.String()[:len(s)] == s {
			found = append(found, m.ID)
		}
	}
	switch len(found) {
	case 0:
		return journal.RunID{}, fmt.Errorf("no run %q: %w", s, journal.ErrNotFound)
	case 1:
		return found[0], nil
	}
	return journal.RunID{}, fmt.Errorf("%q: %w (%d runs)", s, ErrAmbiguous, len(found))
}

// gateDeps loads the gate's configuration of the cell in dir: the policy
// (platform defaults and the customer's policies), the permission modes
// and the trusted token roots.
func gateDeps(dir string, opts Options, deps *host.Deps) error {
	var customer []policy.Source
	pdir, explicit := opts.Policies, opts.Policies != ""
	if !explicit {
		pdir = filepath.Join(dir, PoliciesDir)
	}
	if _, err := os.Stat(pdir); err == nil || explicit {
		var err error
		if customer, err = policy.LoadDir(pdir); err != nil {
			return fmt.Errorf("cell: customer policies %s: %w", pdir, err)
		}
	}
	eng, err := policy.NewEngine(policy.Platform(), customer)
	if err != nil {
		return fmt.Errorf("cell: policies: %w", err)
	}
	deps.Policy = eng
	mfile, explicit := opts.Modes, opts.Modes != ""
	if !explicit {
		mfile = filepath.Join(dir, ModesFile)
	}
	if b, err := fileread.Read(mfile, fileread.Modes); err == nil {
		if deps.Modes, err = policy.ParseModes(b); err != nil {
			return fmt.Errorf("cell: %s: %w", mfile, err)
		}
	} else if explicit || !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("cell: permission modes: %w", err)
	}
	if b, err := fileread.Read(filepath.Join(dir, TokenRootsFile), fileread.Trust); err == nil {
		if deps.TokenRoots, err = cellkey.ParseTrustFile(b); err != nil {
			return fmt.Errorf("cell: %s: %w", TokenRootsFile, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
