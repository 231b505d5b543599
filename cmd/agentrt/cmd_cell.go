package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/caps"
	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/termtext"
	"github.com/agentrt/agentrt/placement"
	"github.com/spf13/cobra"
)

func (c *cli) cellCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cell",
		Short: "Run this machine's cell as a daemon",
	}
	cmd.AddCommand(c.cellServeCmd(), c.cellStatusCmd(), c.cellHandoffCmd())
	return cmd
}

func (c *cli) cellStatusCmd() *cobra.Command {
	var (
		target string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show a daemon's workers, run queue, admissions and what it keeps in memory",
		Long: `Show how a cell daemon's scheduler stands: its workers and how many execute a
run now, the runs waiting for a worker by priority and the oldest one's wait,
and the admissions of new runs (admitted, refused by reason). Then what the
daemon keeps in memory for the next runs: compiled modules (--keep-compiled)
and zeroed guest memories (--keep-memory).`,
		Example: "  agentrt cell status\n  agentrt cell status --json | jq .scheduler.queued",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := c.cellClient(target)
			if err != nil {
				return err
			}
			if cl == nil {
				return withHint(errors.New("no cell daemon serves this data directory"), "start one with: agentrt cell serve")
			}
			ci, err := cl.Cell(cmd.Context())
			if err != nil {
				return withHint(err, "start the daemon with: agentrt cell serve")
			}
			if asJSON {
				return c.printJSON(ci)
			}
			st := ci.Scheduler
			if st == nil {
				return withHint(errors.New("this cell runs no scheduler"), "it serves one foreground run (agentrt run); ask a daemon (agentrt cell serve)")
			}
			fmt.Fprintf(c.stdout, "cell      %.16s\n", ci.Cell)
			fmt.Fprintf(c.stdout, "workers   %d busy of %d (at most %d at once so far)\n", st.Busy, st.Workers, st.MaxBusy)
			fmt.Fprintf(c.stdout, "queued    %d of at most %d", st.Queued, st.MaxQueued)
			if st.Queued > 0 {
				var by []string
				for p := cell.MaxPriority; p >= cell.MinPriority; p-- {
					if n := st.QueuedByPriority[p]; n > 0 {
						by = append(by, fmt.Sprintf("priority %d: %d", p, n))
					}
				}
				fmt.Fprintf(c.stdout, " (%s), the oldest waiting %s", strings.Join(by, ", "), st.OldestWait.Round(time.Millisecond))
			}
			fmt.Fprintln(c.stdout)
			mean := time.Duration(0)
			if st.Dispatched > 0 {
				mean = st.WaitTotal / time.Duration(st.Dispatched)
			}
			fmt.Fprintf(c.stdout, "executed  %d, waiting %s on average for a worker\n", st.Dispatched, mean.Round(time.Microsecond))
			fmt.Fprintf(c.stdout, "admitted  %d; refused %d for policy, %d for budget, %d for a full queue, %d for the cell budget\n", st.Admitted,
				st.Refused[cell.RefusedPolicy], st.Refused[cell.RefusedBudget], st.Refused[cell.RefusedFull], st.Refused[cell.RefusedCellBudget])
			if cb := st.CellBudget; cb != nil {
				fmt.Fprintf(c.stdout, "budget    %d runs in flight hold %s (held/ceiling)\n", cb.Runs, cb)
			}
			if cs := ci.Compiled; cs != nil {
				fmt.Fprintf(c.stdout, "compiled  %d modules kept of at most %d; %d runs found theirs compiled, %d compiled or loaded, %d dropped\n",
					cs.Kept, cs.Limit, cs.Hits, cs.Compiles, cs.Evicted)
			}
			if m := ci.Memory; m != nil {
				fmt.Fprintf(c.stdout, "memory    %d guest memories kept, %s of at most %s; %d runs started on a kept one, %d on a new one, %d given back\n",
					m.Kept, mib(m.Resident), mib(m.Limit), m.Reused, m.Fresh, m.Dropped)
			} else {
				fmt.Fprintln(c.stdout, "memory    no guest memory kept between runs (--keep-memory 0, or an engine that keeps none)")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&target, "cell", "", "the cell to ask (unix:PATH or http://127.0.0.1:PORT); default: the data directory's socket")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the cell's information as JSON (GET /v1/cell)")
	return cmd
}

func (c *cli) cellServeCmd() *cobra.Command {
	var (
		listen    string
		metrics   string
		uiAddr    string
		uiAny     bool
		drain     time.Duration
		keep      int
		keepMem   string
		natsURLs  string
		embedded  bool
		replicas  int
		leaseTTL  time.Duration
		heartbeat time.Duration
		sched     cell.SchedulerOptions
		self      string
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the cell API: submit, list, inspect, cancel and resume runs, stream their events",
		Long: `Run the cell as a long-lived host. It serves the cell API (JSON over HTTP,
documented in host/cell/API.md) on the unix socket DATA/agentrt.sock, which
only this user can open (and root; a peer of any other uid is refused), and
with --listen also on a loopback TCP address.

On TCP every request must carry the cell's API token, which the daemon writes
to DATA/api.token (mode 0600, created once and reused; delete it and restart
to rotate it): "Authorization: Bearer $(cat DATA/api.token)". agentrt finds
it there (--data) or in $AGENTRT_API_TOKEN. Any local process can reach a
loopback port, agents granted http to 127.0.0.1 and web pages included: a
request without the token is 401, and a request a browser would send (an
Origin header, a Host that is not the listener's own address, a body that is
not JSON) is refused whatever it carries. The API is never served beyond
this machine.

The daemon keeps the modules it runs compiled in memory, keyed by their
sha256 and the run's module limits (--keep-compiled bounds how many), so that
a run of a module it ran or was pushed (agentrt module push) starts without
compiling; GET /v1/cell shows the counts ("compiled").

On start the cell resumes every run it owned that had not ended and was not
cancelled: runs of a daemon that was killed, or drained at shutdown. Then it
starts its triggers (agentrt trigger --help), which fire only while a daemon
runs.

SIGTERM or SIGINT drains: new submissions are refused, every run stops at its
next step boundary (a step under way completes) and stays running, to be
resumed when the cell starts again. A second signal exits at once; the runs
are then resumed from their journals like after a crash.

Submit runs with agentrt run --cell unix:DATA/agentrt.sock MODULE.wasm, cancel
them with agentrt cancel RUN. While it holds the data directory, agentrt run,
resume, cancel and approve go to it on their own, and the commands that read
(runs, logs, journal show and query, budget, replay, audit export,
checkpoint, prove and consistency) read through it, with the same output as from the store.
agentrt store check and salvage need the daemon stopped.

With --metrics 127.0.0.1:PORT the daemon serves Prometheus metrics at
/metrics on that loopback address (no token; no agent of the cell may reach
it): agentrt_calls_total{op,class,status}, agentrt_journal_commit_seconds
{durable} (a durable commit's latency includes the store's fsync),
agentrt_journal_fsync_seconds (the fsync alone; empty on a cluster cell,
whose NATS servers sync), agentrt_budget_charged_total{dimension} (tokens,
micro_usd spent, calls), agentrt_budget_headroom_ratio{dimension},
agentrt_budget_refusals_total{dimension}, agentrt_leases_acquired_total
{takeover}, agentrt_lease_epoch_max, agentrt_leases_lost_total,
agentrt_verification_failures_total{class}, agentrt_queue_depth{queue},
agentrt_runs{status}, agentrt_parked_runs{wait},
agentrt_parked_oldest_seconds{wait} and agentrt_approvals_pending{age}. No
label holds a run id or anything an agent chooses.

With --ui 127.0.0.1:PORT the daemon serves a web dashboard there: the runs
(filtered by status, module and start time), each run's journal timeline
(phases, ops, gate decisions, budget records, durations, seals) page by page
with its payloads shown as hashes until opened one by one, live updates
through the event stream, and the approvals queue. Sign in with the API token
(DATA/api.token, created as for --listen): the browser keeps a session cookie
derived from it; the token never goes in a URL. The dashboard refuses
requests from other sites, and no agent of the cell may reach it. It listens
on a loopback address only, unless --ui-any-address says otherwise (plain
HTTP: anyone on the path reads what it shows).

With --nats URL[,URL...] the cell joins a cluster on NATS JetStream (servers
2.12 or later, run with sync_interval: always): the runs' journals, index,
agent state, event logs, blobs, modules and leases live in the cluster, and
any of its cells reads them. --nats-embedded instead starts a one-box server
inside this process, its files in DATA/nats. The cell's own records (votes,
triggers, tasks, seen tokens, the lineage index) stay in DATA; the lineage
query is refused on a cluster cell.

A cluster cell writes a heartbeat to the cell registry (the KV bucket
AGENTRT_CELLS) every --heartbeat, with its descriptor from --describe (a
YAML or JSON file in the format of agentrt place --cells: max_runs, gpus,
models, datasets, cost_per_hour, clearance, labels; its id is the cell's
key). At each heartbeat it looks for running runs whose lease expired (their
cell died, or stopped): placement picks one of the live cells, the expired
holder left out, and the cell it picks takes the run over. It verifies the
journal (a gap in it is named and refused), journals the lease it takes with
the placement decision, and resumes from the last completed entry: completed
effects are not run again, an effect in doubt is decided as on one machine.
It accepts the entries sealed by the cells listed in DATA/trusted_cells (one
OpenSSH ed25519 public key a line). A cell renews its runs' leases every
third of --lease-ttl; one it could not renew for the TTL less a fifth, on
its own clock (cut off from the cluster, or frozen), or that another cell
took, it stops at once, writing nothing more. A deposed holder's appends
are refused by the journal's fence in any case.`,
		Example: `  agentrt cell serve
  agentrt cell serve --listen 127.0.0.1:7070
  agentrt cell serve --ui 127.0.0.1:7080
  curl --unix-socket ~/.local/share/agentrt/agentrt.sock http://cell/v1/runs
  curl -H "Authorization: Bearer $(cat ~/.local/share/agentrt/api.token)" http://127.0.0.1:7070/v1/runs`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// The daemon's log names what guests chose (resources, errors):
			// escaped, none of it acts on the terminal it is read on.
			logger := log.New(lineWriter{c.stderr}, "agentrt cell: ", log.LstdFlags)
			if _, err := sched.Check(); err != nil {
				return withHint(err, "--workers is 1..%d, --queue-max and --queue-aging positive, --run-budget and --cell-budget in the budget syntax (model_calls=100,usd=5)", cell.MaxWorkers)
			}
			if keep < 0 {
				return withHint(fmt.Errorf("--keep-compiled %d is below 0", keep), "give the most compiled modules to keep in memory, at least 1 (0: the default, %d)", host.DefaultKeepCompiled)
			}
			keepMemory, err := keepMemoryFlag(keepMem)
			if err != nil {
				return err
			}
			approvals := cell.NewApprovals()
			var mx *cell.Metrics
			var mln net.Listener
			if metrics != "" {
				mx = cell.NewMetrics()
				if mln, err = cell.ListenLoopback(metrics); err != nil {
					return withHint(err, "serve the metrics on 127.0.0.1:PORT")
				}
				defer mln.Close()
			}
			copts := cell.Options{Approver: approvals, KeepCompiled: keep, KeepMemory: keepMemory, LeaseTTL: leaseTTL}
			if mx != nil {
				copts.Observer = mx
			}
			if leaseTTL < 0 {
				return withHint(fmt.Errorf("--lease-ttl %s is below 0", leaseTTL), "give how long a run's lease lasts unless renewed, such as 10s")
			}
			if natsURLs != "" || embedded {
				co, err := clusterOptions(natsURLs, embedded, replicas, heartbeat, self)
				if err != nil {
					return err
				}
				copts.Cluster = co
			} else if replicas != 0 || heartbeat != 0 || self != "" {
				return withHint(errors.New("--replicas, --heartbeat and --describe are for a cluster cell"), "add --nats URL or --nats-embedded")
			}
			cl, err := c.open(context.Background(), copts)
			if err != nil {
				return err
			}
			defer cl.Close(context.Background())
			if mx != nil {
				mx.Watch(cl.Journal)
				defer cl.Listeners.Add("the cell's metrics", mln.Addr())()
				mux := http.NewServeMux()
				mux.Handle("GET /metrics", mx.Handler())
				ms := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
				go ms.Serve(mln)
				defer ms.Close()
				logger.Printf("metrics on http://%s/metrics", mln.Addr())
			}
			var lns []net.Listener
			var uiLn net.Listener
			sock, err := cell.ListenSocket(cell.SocketPath(cl.Dir))
			if err != nil {
				return withHint(err, "pick a data directory with a shorter path (--data)")
			}
			lns = append(lns, sock)
			opts := cell.ServerOptions{Logf: logger.Printf, Approvals: approvals, Triggers: true, Scheduler: sched}
			if listen != "" {
				ln, err := cell.ListenLoopback(listen)
				if err != nil {
					sock.Close()
					return withHint(err, "listen on 127.0.0.1:PORT, or use the unix socket")
				}
				lns = append(lns, ln)
				// No agent of this cell may reach its own API.
				defer cl.Listeners.Add("the cell API", ln.Addr())()
				if opts.APIToken, err = cell.LoadOrCreateAPIToken(cl.Dir); err != nil {
					closeAll(lns)
					return withHint(err, "the TCP listener needs the API token in %s", cell.APITokenPath(cl.Dir))
				}
			}
			if uiAddr == "" && uiAny {
				closeAll(lns)
				return withHint(errors.New("--ui-any-address without --ui"), "add --ui ADDR")
			}
			if uiAddr != "" {
				uln, err := cell.ListenUI(uiAddr, uiAny)
				if err != nil {
					closeAll(lns)
					return withHint(err, "serve the dashboard on 127.0.0.1:PORT (or add --ui-any-address)")
				}
				defer uln.Close()
				if opts.APIToken == "" {
					if opts.APIToken, err = cell.LoadOrCreateAPIToken(cl.Dir); err != nil {
						closeAll(lns)
						return withHint(err, "the dashboard needs the API token in %s", cell.APITokenPath(cl.Dir))
					}
				}
				uiLn = uln
			}
			srv := cell.NewServer(cl, opts)
			cl.AddSink(srv.Sink)
			if mx != nil {
				mx.Queues(srv.QueueDepths)
				mx.Scheduler(srv)
			}
			if uiLn != nil {
				us, err := srv.UI(uiLn, cell.UIOptions{Token: opts.APIToken, AnyAddress: uiAny})
				if err != nil {
					closeAll(lns)
					return err
				}
				go us.Serve(uiLn)
				defer us.Close()
				logger.Printf("dashboard on http://%s (sign in with the token in %s)", uiLn.Addr(), cell.APITokenPath(cl.Dir))
			}
			var servers []*http.Server
			for _, ln := range lns {
				hs, err := srv.Endpoint(ln)
				if err != nil {
					closeAll(lns)
					return err
				}
				servers = append(servers, hs)
			}
			// The triggers start before the API is served, so that no
			// request finds them loading. A claimed firing they resolve
			// may start a run before Recover: Recover leaves live runs be.
			if err := srv.StartTriggers(ctx); err != nil {
				logger.Printf("triggers: %v", err)
			}
			serveErr := make(chan error, len(lns))
			for i, ln := range lns {
				go func() { serveErr <- servers[i].Serve(ln) }()
			}
			logger.Printf("cell %x serving on unix:%s", cl.Public(), sock.Addr())
			if len(lns) > 1 {
				logger.Printf("and on http://%s (requests carry the token in %s)", lns[1].Addr(), cell.APITokenPath(cl.Dir))
			}
			runs, err := srv.Recover(ctx)
			if err != nil {
				logger.Printf("recover: %v", err)
			}
			logger.Printf("recovered %d unfinished runs", len(runs))
			if cl.Cluster != nil {
				if err := srv.StartCluster(ctx); err != nil {
					logger.Printf("cluster: %v", err)
				} else {
					logger.Printf("cell %x in the cluster registry", cl.Public())
				}
			}

			select {
			case <-ctx.Done():
			case err := <-serveErr:
				logger.Printf("serve: %v", err)
			}
			stop() // a second signal kills the process
			logger.Printf("draining: runs stop at their next step boundary")
			dctx, cancel := context.WithTimeout(context.Background(), drain)
			defer cancel()
			derr := srv.Shutdown(dctx)
			sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer scancel()
			for _, hs := range servers {
				if err := hs.Shutdown(sctx); err != nil {
					hs.Close()
				}
			}
			if derr != nil {
				return fmt.Errorf("drain: %w (the runs still going resume from their journals on the next start)", derr)
			}
			logger.Printf("drained; stopped runs resume on the next start")
			return nil
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "", "also serve the API on this loopback address (127.0.0.1:PORT), to clients with the token in DATA/"+cell.APITokenFile)
	cmd.Flags().StringVar(&uiAddr, "ui", "", "serve the web dashboard on this loopback address (127.0.0.1:PORT), to browsers signed in with the token in DATA/"+cell.APITokenFile)
	cmd.Flags().BoolVar(&uiAny, "ui-any-address", false, "allow --ui on an address that is not loopback (plain HTTP)")
	cmd.Flags().StringVar(&metrics, "metrics", "", "serve Prometheus metrics at /metrics on this loopback address (127.0.0.1:PORT)")
	c.engineFlag(cmd)
	cmd.Flags().IntVar(&keep, "keep-compiled", 0, fmt.Sprintf("the most compiled modules kept in memory, so that runs of them start without compiling; the least recently used is dropped past it (default %d)", host.DefaultKeepCompiled))
	cmd.Flags().StringVar(&keepMem, "keep-memory", "", fmt.Sprintf("the most bytes of zeroed guest memory kept from ended runs for the next ones, which start sooner on it (wazero on Linux; other engines and platforms keep none), as 256MiB; 0 keeps none (default %dMiB)", host.DefaultKeepMemory>>20))
	cmd.Flags().IntVar(&sched.Workers, "workers", 0, fmt.Sprintf("how many runs execute at once; a parked run holds no worker (default GOMAXPROCS×32, here %d)", cell.DefaultWorkers()))
	cmd.Flags().IntVar(&sched.MaxQueued, "queue-max", 0, fmt.Sprintf("how many runs may wait for a worker; past it submissions, task attempts and trigger firings are refused (default %d)", cell.DefaultMaxQueued))
	cmd.Flags().DurationVar(&sched.Aging, "queue-aging", 0, fmt.Sprintf("a queued run's priority rises by one for each such wait, so none starves (default %s)", cell.DefaultAging))
	cmd.Flags().StringVar(&sched.RunBudget, "run-budget", "", "admit only runs whose budget stays within these ceilings, naming each (model_calls=100,usd=5); spawns are bounded by their parents' instead")
	cmd.Flags().StringVar(&sched.CellBudget, "cell-budget", "", "admit a run only while the ceilings of the admitted runs that have not ended, summed, stay within these (usd=50,model_calls=1000), naming each; a run past them is refused until some end (rebuilt from the index at a restart); spawns are carved from their parents'")
	cmd.Flags().DurationVar(&drain, "drain-timeout", 30*time.Second, "how long a shutdown waits for runs to reach a step boundary")
	cmd.Flags().StringVar(&natsURLs, "nats", "", "join the cluster on these NATS JetStream servers (nats://HOST:PORT, comma-separated)")
	cmd.Flags().BoolVar(&embedded, "nats-embedded", false, "start a one-box NATS JetStream server in this process (files in DATA/nats)")
	cmd.Flags().IntVar(&replicas, "replicas", 0, "servers that keep the journal stream and the buckets: 1 or 3 (default 1)")
	cmd.Flags().DurationVar(&leaseTTL, "lease-ttl", 0, "how long a run's lease lasts unless renewed: how soon a peer takes over a run whose cell died (default 30s)")
	cmd.Flags().DurationVar(&heartbeat, "heartbeat", 0, "how often a cluster cell writes its registry record and looks for runs to take over (default 1s)")
	cmd.Flags().StringVar(&self, "describe", "", "a YAML or JSON file describing this cell for placement (format of agentrt place --cells, one cell, no id)")
	return cmd
}

// mib writes n bytes in MiB.
func mib(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// keepMemoryFlag reads cell serve's --keep-memory: empty for the
// default, 0 for none (cell.Options.KeepMemory below zero).
func keepMemoryFlag(v string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := caps.ParseSize("--keep-memory", v)
	if err != nil {
		return 0, withHint(err, "give the most bytes of guest memory to keep, as 256MiB, or 0 for none (default %dMiB)", host.DefaultKeepMemory>>20)
	}
	if n == 0 {
		return -1, nil
	}
	return n, nil
}

// clusterOptions reads the cluster flags of cell serve.
func clusterOptions(urls string, embedded bool, replicas int, heartbeat time.Duration, describe string) (*cell.ClusterOptions, error) {
	co := &cell.ClusterOptions{Embedded: embedded, Replicas: replicas, Heartbeat: heartbeat}
	if urls != "" {
		co.URLs = strings.Split(urls, ",")
	}
	if heartbeat < 0 {
		return nil, withHint(fmt.Errorf("--heartbeat %s is below 0", heartbeat), "give how often the cell writes its heartbeat, such as 1s")
	}
	if describe != "" {
		b, err := os.ReadFile(describe)
		if err != nil {
			return nil, withHint(err, "--describe names a file describing this cell")
		}
		d, err := placement.ParseSelf(describe, b)
		if err != nil {
			return nil, withHint(err, "see agentrt place --help for the cell format")
		}
		co.Self = d
	}
	return co, nil
}

func (c *cli) cancelCmd() *cobra.Command {
	var target string
	cmd := &cobra.Command{
		Use:   "cancel RUN",
		Short: "Stop a run at its next step boundary, keeping its state",
		Long: `Stop a run at its next step boundary: a step under way completes and is
journaled, then the run stops. Its journal keeps every call; agentrt resume RUN
continues it. A cancelled run is not resumed by a cell on its own.

The run may be executing in a cell daemon (agentrt cell serve) or in a
foreground agentrt run: cancel asks the process that holds the data directory,
through its socket (DATA/agentrt.sock), or the cell named with --cell. A run
no process is executing (one whose process was killed) is marked cancelled.

RUN is a run id, a unique prefix of one, or "last" for the newest run.`,
		Example: "  agentrt cancel last\n  agentrt cancel 18ec7ae8 --cell http://127.0.0.1:7070",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			cl, err := c.cellClient(target)
			if err != nil {
				return err
			}
			if cl != nil {
				ri, err := cl.Cancel(ctx, args[0])
				if err == nil {
					fmt.Fprintf(c.stdout, "run %s %s\n", ri.RunID, ri.Status)
					return nil
				}
				if target != "" || !unreachable(err) {
					return remoteHint(err)
				}
				// A socket left by a killed process: no one holds the
				// directory, so the run is cancelled here.
			}
			local, err := c.open(ctx, cell.Options{})
			if err != nil {
				return err
			}
			defer local.Close(ctx)
			run, err := cell.FindRun(ctx, local.Store, args[0])
			if err != nil {
				return err
			}
			if err := local.Host.Cancel(ctx, run); err != nil {
				return err
			}
			fmt.Fprintf(c.stdout, "run %s cancelled\n", run)
			return nil
		},
	}
	cmd.Flags().StringVar(&target, "cell", "", "the cell to ask (unix:PATH or http://127.0.0.1:PORT); default: the data directory's socket")
	return cmd
}

// lineWriter writes each log line escaped as one line: a guest's text in
// a message can neither act on the terminal nor begin a line of its own.
type lineWriter struct{ w io.Writer }

func (l lineWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(l.w, termtext.Line(strings.TrimSuffix(string(p), "\n"))+"\n"); err != nil {
		return 0, err
	}
	return len(p), nil
}

// closeAll closes listeners not served yet.
func closeAll(lns []net.Listener) {
	for _, ln := range lns {
		ln.Close()
	}
}

// dial returns a client for target; an http:// target takes the API token
// from $AGENTRT_API_TOKEN, else from the data directory in use.
func (c *cli) dial(target string) (*cell.Client, error) {
	var opts cell.DialOptions
	if strings.HasPrefix(target, "http://") && os.Getenv(cell.EnvAPIToken) == "" {
		dir, err := c.data()
		if err != nil {
			return nil, err
		}
		opts.DataDir = dir
	}
	cl, err := cell.DialWith(target, opts)
	switch {
	case errors.Is(err, cell.ErrNoAPIToken):
		return nil, withHint(err, "a daemon listening on TCP writes its token to DATA/%s: name its data directory with --data, or set $%s", cell.APITokenFile, cell.EnvAPIToken)
	case errors.Is(err, cell.ErrBadAPIToken):
		return nil, withHint(err, "the token is the 64 hex digits the daemon wrote to DATA/%s", cell.APITokenFile)
	case err != nil:
		return nil, withHint(err, "name the daemon's socket (unix:DATA/agentrt.sock) or loopback address (http://127.0.0.1:PORT)")
	}
	return cl, nil
}

// cellClient returns a client for target, or for the data directory's
// socket when target is empty and the socket exists; nil when neither.
func (c *cli) cellClient(target string) (*cell.Client, error) {
	if target != "" {
		return c.dial(target)
	}
	dir, err := c.data()
	if err != nil {
		return nil, err
	}
	sock := cell.SocketPath(dir)
	if _, err := os.Stat(sock); err != nil {
		return nil, nil
	}
	return cell.Dial("unix:" + sock)
}

// unreachable says whether err is a failure to reach the cell at all (as
// opposed to an answer from it).
func unreachable(err error) bool {
	var re *cell.RemoteError
	return !errors.As(err, &re)
}

// remoteHint carries a cell's hint into the CLI's error.
func remoteHint(err error) error {
	var re *cell.RemoteError
	if errors.As(err, &re) && re.Hint() != "" {
		return withHint(err, "%s", re.Hint())
	}
	if unreachable(err) {
		return withHint(err, "is the cell running? start it with: agentrt cell serve")
	}
	return err
}
