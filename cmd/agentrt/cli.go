package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/host/tracing"
	"github.com/agentrt/agentrt/internal/fileread"
	"github.com/agentrt/agentrt/internal/termtext"
	"github.com/agentrt/agentrt/internal/wasmbuild"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/badgerstore"
	"github.com/agentrt/agentrt/replay"
	"github.com/spf13/cobra"
)

// cli carries what every command shares: the output writers and the
// global flags.
type cli struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	dataDir        string
	cacheDir       string
	// policies and modes override the data directory's gate files.
	policies, modes string
	// engine is the WebAssembly engine of the cell a command opens
	// (--engine).
	engine string
	// printer shows the events of the run a command executes here.
	printer *eventPrinter
	// tracing is what OTEL_* configures, set up by the first cell the
	// command opens (nil: off), and traced says it was.
	tracing *tracing.Tracing
	traced  bool
}

// hinted is an error with a suggested fix, printed on its own line.
type hinted struct {
	err  error
	hint string
}

func (h *hinted) Error() string { return h.err.Error() }
func (h *hinted) Unwrap() error { return h.err }

// checkPriority refuses a --priority out of range: 1 (lowest) to 9
// (highest), or 0 when the flag is left out.
func checkPriority(p int, set bool) error {
	if !set || (p >= cell.MinPriority && p <= cell.MaxPriority) {
		return nil
	}
	return withHint(fmt.Errorf("--priority %d is out of range", p), "give %d (lowest) to %d (highest), or leave it out for %d", cell.MinPriority, cell.MaxPriority, cell.DefaultPriority)
}

func withHint(err error, format string, args ...any) error {
	return &hinted{err: err, hint: fmt.Sprintf(format, args...)}
}

// exitError makes a command exit with a status without printing more.
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// run executes the command line args and returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := &cli{stdin: stdin, stdout: stdout, stderr: stderr}
	root := c.root()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	err := root.ExecuteContext(ctx)
	if c.tracing != nil {
		// The spans not yet sent go now, even after an interrupt.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		if serr := c.tracing.Shutdown(sctx); serr != nil {
			fmt.Fprintf(stderr, "agentrt: warning: exporting the traces: %s\n", termtext.Line(serr.Error()))
		}
		cancel()
	}
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	// An error may carry what a guest wrote (its error, a function name
	// in a trap's stack): escaped, it cannot act on the terminal.
	fmt.Fprintf(stderr, "agentrt: error: %s\n", termtext.Line(err.Error()))
	if h := hintFor(err); h != "" {
		fmt.Fprintf(stderr, "hint: %s\n", termtext.Line(h))
	}
	return 1
}

// hintFor returns the fix for errors that have a known one.
func hintFor(err error) string {
	var h *hinted
	var le *host.LinkError
	var div *replay.DivergenceError
	var te *wasmbuild.ToolchainError
	switch {
	case errors.As(err, &te):
		return te.Hint
	case errors.Is(err, host.ErrInterrupted):
		return "the journal keeps every call made so far; continue the run with: agentrt resume RUN"
	case errors.Is(err, host.ErrFinished):
		return cell.Hint(err)
	case errors.As(err, &h):
		return h.hint
	case tokenHint(err, "FILE") != "":
		return tokenHint(err, "FILE")
	case errors.As(err, &le):
		return "add the missing capabilities to the grant file and pass it with --grant (see examples/*/grant.yaml)"
	case errors.Is(err, badgerstore.ErrDamaged):
		return "nothing in the store was changed; see the damage with: agentrt store check (agentrt store salvage --to DIR copies out what still verifies)"
	case errors.Is(err, journal.ErrIncomplete):
		return "the store lost part of this journal: see what is damaged with agentrt store check, and copy out what verifies with agentrt store salvage --to DIR"
	case errors.Is(err, fileread.ErrNotRegular):
		return "name a regular file: not a device, a FIFO or a directory"
	case errors.Is(err, fileread.ErrTooLarge):
		return "agentrt reads files of this kind up to the size named; check that this is the file you meant"
	case errors.Is(err, badgerstore.ErrLocked):
		return "another agentrt process (a cell daemon, a run, or a command such as agentrt purge) is using this data directory; wait for it, or pick another with --data"
	case errors.Is(err, cell.ErrCut):
		return "the process that holds the data directory stopped answering mid-way (it stopped, or was killed); what arrived is not the whole answer: run the command again"
	case errors.Is(err, cell.ErrNoRuns):
		return "start one with: agentrt run MODULE.wasm (agentrt run --help)"
	case errors.Is(err, journal.ErrNotFound):
		return "list runs with: agentrt runs"
	case errors.Is(err, cell.ErrAmbiguous):
		return "give more digits of the run id (agentrt runs lists them)"
	case errors.Is(err, journal.ErrBadRunID):
		return "run ids are 32 hex digits, or a unique prefix of one (agentrt runs lists them)"
	case errors.Is(err, journal.ErrUntrusted):
		return "the journal was signed by another cell; verify it with that cell's key"
	case strings.Contains(err.Error(), "arg(s), received"), strings.HasPrefix(err.Error(), "unknown flag"):
		return "see the command's --help for what it takes"
	case errors.As(err, &div):
		return "the module no longer makes the calls the journal recorded; replay with the recorded module, or fix the change at the named call"
	case errors.Is(err, host.ErrNotWasm):
		return "build the agent first: agentrt build DIR -o agent.wasm"
	case errors.Is(err, host.ErrModuleLimit), errors.Is(err, host.ErrLimitRaised):
		return cell.Hint(err)
	case errors.Is(err, host.ErrBadModule):
		return "the host refuses the module before it runs; build a command module (agentrt build DIR: GOOS=wasip1, or a C main with wasi-libc)"
	}
	// An error the cell answered that the CLI has no hint of its own for:
	// the cell's.
	var re *cell.RemoteError
	if errors.As(err, &re) {
		return re.Hint()
	}
	return ""
}

func (c *cli) root() *cobra.Command {
	root := &cobra.Command{
		Use:   "agentrt",
		Short: "Run WebAssembly agents durably and verifiably",
		Long: `agentrt runs AI agents compiled to WebAssembly. An agent reaches the world only
through capability imports its grant allows; every call is written to a signed,
hash-chained journal before its effect happens, so any run can be replayed
exactly and verified offline.

Quick start:
  agentrt build examples/crawler -o crawler.wasm
  agentrt run crawler.wasm --grant examples/crawler/grant.yaml --input '{"start":"http://127.0.0.1:8080/"}'
  agentrt runs
  agentrt journal show RUN
  agentrt replay RUN
  agentrt audit export RUN -o run.bundle   # then, anywhere: agentrt audit verify run.bundle --trust KEYS

A cell can also run as a daemon (agentrt cell serve); agentrt run, resume,
cancel and approve then go through it, and so do the commands that read
(runs, logs, journal, budget, replay, audit export, checkpoint and prove), with the
same output as from the store itself.

Traces (OpenTelemetry, off by default): set OTEL_EXPORTER_OTLP_ENDPOINT (or
OTEL_TRACES_EXPORTER=otlp) and the runs this process hosts export a span per
run and per import call over OTLP, http/protobuf or grpc
(OTEL_EXPORTER_OTLP_PROTOCOL); each span names its journal entry by run id,
seq and hash, and the run's header records the trace id. The other OTEL_*
variables (headers, sampler, service name) apply. Requests and responses stay
out of spans unless AGENTRT_TRACE_PAYLOADS=true.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&c.dataDir, "data", "", "data directory of the cell (default $"+cell.EnvData+", else a per-user data directory)")
	root.PersistentFlags().StringVar(&c.cacheDir, "cache", "", "compilation cache directory, which cells may share (default $"+cell.EnvCache+", else DATA/cache)")
	root.PersistentFlags().StringVar(&c.policies, "policies", "", "customer Cedar policies, a directory of .cedar files or one file (default DATA/"+cell.PoliciesDir+" when it exists)")
	root.PersistentFlags().StringVar(&c.modes, "modes", "", "permission modes file (default DATA/"+cell.ModesFile+" when it exists)")
	root.AddCommand(
		c.newCmd(),
		c.buildCmd(),
		c.runCmd(),
		c.moduleCmd(),
		c.resumeCmd(),
		c.forkCmd(),
		c.runsCmd(),
		c.journalCmd(),
		c.budgetCmd(),
		c.replayCmd(),
		c.keysCmd(),
		c.logsCmd(),
		c.eventsCmd(),
		c.purgeCmd(),
		c.storeCmd(),
		c.auditCmd(),
		c.sandboxCmd(),
		c.tokenCmd(),
		c.policyCmd(),
		c.cellCmd(),
		c.cancelCmd(),
		c.approveCmd(),
		c.approvalsCmd(),
		c.taskCmd(),
		c.tasksCmd(),
		c.triggerCmd(),
		c.placeCmd(),
		c.mcpCmd(),
	)
	return root
}

// data returns the data directory the command works on.
func (c *cli) data() (string, error) {
	if c.dataDir != "" {
		return c.dataDir, nil
	}
	return cell.DefaultDataDir()
}

// open opens the cell.
func (c *cli) open(ctx context.Context, opts cell.Options) (*cell.Cell, error) {
	dir, err := c.data()
	if err != nil {
		return nil, err
	}
	c.engineOptions(&opts)
	opts.Policies, opts.Modes = c.policies, c.modes
	if !c.traced {
		if c.tracing, err = tracing.FromEnv(ctx); err != nil {
			return nil, withHint(err, "tracing is configured by the OTEL_* variables: unset them to run without it (agentrt --help names them)")
		}
		c.traced = true
	}
	opts.Tracer, opts.TracePayloads = c.tracing.Tracer(), c.tracing.TracePayloads()
	cl, err := cell.Open(ctx, dir, opts)
	return cl, engineError(err)
}

// newEngine returns the engine the cell would use (--engine, --cache),
// alone: what replay needs to re-execute a run whose store it reads,
// perhaps through the daemon that holds it.
func (c *cli) newEngine(ctx context.Context) (*host.Engine, error) {
	dir, err := c.data()
	if err != nil {
		return nil, err
	}
	var opts cell.Options
	c.engineOptions(&opts)
	eng, err := cell.NewEngine(ctx, dir, opts)
	return eng, engineError(err)
}

// engineOptions sets the engine and the compilation cache of opts from
// the flags and the environment.
func (c *cli) engineOptions(opts *cell.Options) {
	opts.CacheDir = c.cacheDir
	if opts.CacheDir == "" {
		opts.CacheDir = os.Getenv(cell.EnvCache)
	}
	opts.Engine = c.engine
}

func engineError(err error) error {
	if errors.Is(err, host.ErrEngineUnavailable) {
		return withHint(err, "build agentrt with the engine (cgo): CGO_ENABLED=1 go build -tags wasmtime -o bin/agentrt ./cmd/agentrt; or run with --engine wazero")
	}
	return err
}
