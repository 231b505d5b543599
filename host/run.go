package host

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host/budget"
	"github.com/agentrt/agentrt/host/caps/agent"
	"github.com/agentrt/agentrt/host/caps/llm"
	"github.com/agentrt/agentrt/host/caps/mcp"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/policy"
)

// Deps are the outside parts a Host works with.
type Deps struct {
	Store journal.Store
	KV    KVStore
	// Events, when set, keeps each run's event log.
	Events EventLog
	// Key is the cell's signing key.
	Key ed25519.PrivateKey
	// Listeners are the addresses the cell itself listens on, which the
	// http capability never connects to, whatever a grant says (host/caps/http);
	// nil: none. A *ListenerSet lets the cell add a listener after the
	// host exists.
	Listeners Listeners
	// Resolver resolves the names of the http capability's requests; nil:
	// the system's. Every address it returns is checked as it is dialled.
	Resolver *net.Resolver
	// Now is the host's real clock; nil: time.Now.
	Now func() time.Time
	// Rand is the real entropy for seeds and random.bytes; nil: crypto/rand.
	Rand io.Reader
	// Sink, when set, sees every event as it happens.
	Sink func(Event)
	// Observer, when set, is told of every call journaled and every
	// commit, for metrics; it must not block.
	Observer Observer
	// Tracer, when set, traces the runs (OpenTelemetry, trace.go): a span
	// per execution of a run, one per import call made live, and the
	// run's header records the trace. nil: no spans, at no cost.
	Tracer trace.TracerProvider
	// TracePayloads puts the calls' requests and responses (and an llm
	// call's messages) into their spans; off, a span holds their hashes
	// and sizes only.
	TracePayloads bool
	// Leases keeps the runs' leases; nil: the Store's, when it has them.
	// Without one, runs are written without leases.
	Leases journal.Leases
	// Tools serves the tool capability (workspaces, sandbox options).
	Tools ToolDeps
	// MCP serves the mcp capability: the sandbox options of stdio servers
	// and the cell's credentials for http servers.
	MCP mcp.Deps
	// LLM are the cell's model providers (its llm.yaml), which the llm
	// capability calls; nil: none, and every model call is denied.
	LLM *llm.Providers
	// Policy is the gate's policy layer; nil: none (the capability layer
	// alone decides).
	Policy *policy.Engine
	// Modes are the permission modes applied after the policy; nil: none.
	Modes *policy.Modes
	// Approvals is the cell's book of signed quorum approvals: with one, a
	// call the modes ask about, and every approval.request, parks its run
	// until the approvers decide (park.go); Approver is then not asked.
	Approvals Approvals
	// Agents starts and follows the runs' sub-agents (agentrt:agent); nil:
	// every agent.spawn is denied. The cell daemon's.
	Agents agent.Spawner
	// Approver answers the calls a mode asks about; nil: an ask is a no.
	// A cell with an approver runs its calls in the "interactive" mode of
	// the policy context, without one "unattended".
	Approver Approver
	// Clearance is the data clearance of the cell's runs, as the policy
	// context and the Cell entity carry it.
	Clearance int64
	// TokenRoots are the keys trusted to issue capability tokens, besides
	// the cell's own.
	TokenRoots []ed25519.PublicKey
	// TrustedCells are the peer cells whose sealed entries this host
	// accepts in a journal it resumes, besides its own: the cells of its
	// cluster that may have run the run before it took the run over.
	TrustedCells []ed25519.PublicKey
	// Nonces remembers the tokens presented to the cell, so that one is
	// never presented twice; nil: not remembered.
	Nonces capability.NonceCache
}

// Config tunes a Host.
type Config struct {
	// GroupCommit is the most entries buffered before a commit. Zero: 256.
	GroupCommit int
	// MaxRequest is the largest request a guest may send. Zero:
	// abi.MaxRequest.
	MaxRequest int
	// LeaseTTL is how long a run's lease lasts unless renewed. The host
	// renews the lease of each run it executes every third of it; one it
	// could not renew for LeaseTTL less a fifth (on its monotonic clock)
	// stops at once, writing nothing more (ErrLeaseExpired). Zero: 30 s.
	LeaseTTL time.Duration
	// Limits are the cell's limits of every run; a grant's limits may
	// lower them. Zero fields take the defaults of DefaultLimits.
	Limits Limits
}

// Host runs agent modules, journaling every import call.
type Host struct {
	engine *Engine
	deps   Deps
	cfg    Config
	live   live
	// tr makes the runs' spans; nil: not traced.
	tr *tracer
	// dev keeps the tokens issued on the fly for plain grants
	// (verifyToken).
	dev devTokens
}

// New returns a host that runs modules on engine with deps.
func New(engine *Engine, deps Deps, cfg Config) (*Host, error) {
	if deps.Store == nil || deps.KV == nil || deps.Key == nil {
		return nil, errors.New("host: Store, KV and Key are required")
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if deps.Rand == nil {
		deps.Rand = rand.Reader
	}
	if cfg.GroupCommit <= 0 {
		cfg.GroupCommit = 256
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 30 * time.Second
	}
	if l, ok := deps.Store.(journal.Leases); ok && deps.Leases == nil {
		deps.Leases = l
	}
	if cfg.MaxRequest <= 0 {
		cfg.MaxRequest = abi.MaxRequest
	}
	cfg.Limits = cfg.Limits.withDefaults(DefaultLimits())
	if cfg.Limits.MemoryPages > engine.maxPages {
		return nil, fmt.Errorf("host: Limits.MemoryPages %d is over the engine's cap of %d pages (EngineConfig.MemoryLimitPages)", cfg.Limits.MemoryPages, engine.maxPages)
	}
	return &Host{engine: engine, deps: deps, cfg: cfg, tr: newTracer(&deps)}, nil
}

// RunSpec describes a run to start.
type RunSpec struct {
	// Code is the module's bytes; nil when ModuleSHA256 names it.
	Code []byte
	// ModuleSHA256, when set, names the module by its SHA-256: without
	// Code the module is the one the store holds (PutModule, or a run of
	// it before), ErrUnknownModule when it holds none; with Code, the
	// bytes must have it (ErrModuleMismatch).
	ModuleSHA256 []byte
	// Name is a human name for the module (its file name); recorded.
	Name  string
	Input []byte
	Grant *Grant
	// Seed seeds the guest's random stream; nil: 32 fresh random bytes.
	Seed []byte
	// WallBase is the origin of the guest's virtual wall clock, Unix ns;
	// zero: now.
	WallBase int64
	// Parent is the run that started this one, if any.
	Parent journal.RunID
	// Token is the capability token the run is started with. Without one,
	// Grant (or the default grant) is issued as a token by the cell's key
	// on the fly; with one, Grant, when set, must be within it and
	// supplies the tool definitions and the kv namespace.
	Token []byte
	// Origin, when set, says what started the run (a trigger's firing, a
	// task's attempt): recorded in its header and its index record.
	Origin *journal.Origin
	// Priority is the run's scheduling priority (1 lowest .. 9 highest; 0:
	// not given), kept in its index record (RunMeta.Priority) for the cell's
	// scheduler; the host executes it as any run.
	Priority uint8
}

// Result is the outcome of a run.
type Result struct {
	Run    journal.RunID
	Status journal.RunStatus
	Output []byte
	// Err is why the guest failed, when Status is failed.
	Err   error
	Steps uint64
	// Wait is what a parked run (Status parked) waits for.
	Wait *journal.Wait
	// Replayed is, for a resumed run, the number of calls answered from
	// its journal: those since its last checkpoint; for a fork, the number
	// answered from its parent's.
	Replayed uint64
}

// Run starts a run of spec.Code and runs it to its end. The returned error
// is for what kept the host from running or journaling it (a module refused
// at link time, a store failure); a guest that fails is a Result with
// Status failed.
func (h *Host) Run(ctx context.Context, spec RunSpec) (*Result, error) {
	st, err := h.Start(ctx, spec)
	if err != nil {
		return nil, err
	}
	return st.Execute(ctx)
}

// Started is a run journaled and ready to execute: Run is Start then
// Execute, and Resume is Reopen then Execute. The split lets a caller (the
// cell daemon) learn the run's id, and refuse what cannot start, before the
// run executes. The run counts as live from Start: Execute must follow.
type Started struct {
	Run   journal.RunID
	h     *Host
	m     *Module
	s     *session
	w     *journal.Writer
	meta  *journal.RunMeta
	lease *holder
	live  *liveRun
	// span is the span of this execution of the run; nil: not traced.
	span trace.Span
}

// Execute runs the started run to its end, or until ctx ends or Cancel or
// Drain stop it (ErrInterrupted, with the cause). A guest is stopped
// between two calls too, while it computes.
func (st *Started) Execute(ctx context.Context) (res *Result, err error) {
	defer st.h.live.leave(st.Run)
	if st.span != nil {
		ctx = trace.ContextWithSpan(ctx, st.span)
		defer func() { endRun(st.span, st.w, res, err) }()
	}
	st.s.halt = st.live.halt
	// The run's capability instances live as long as this execution: the
	// connections they open are the run's own.
	if err := st.s.open(); err != nil {
		st.lease.release(context.Background())
		return nil, err
	}
	defer st.s.close()
	defer st.armBudget()()
	// A lease lost or run out stops the run at once, an effect under way
	// too: another cell may be about to take the run over.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer st.lease.watch(func(err error) {
		st.live.stop(err)
		cancel(err)
	})()
	res, err = st.h.conclude(ctx, st.m, st.s, st.w, st.meta, st.lease, st.live)
	if res != nil {
		switch p := st.s.path.(type) {
		case *resumePath:
			res.Replayed = uint64(p.rec.Served())
		case *forkPath:
			res.Replayed = uint64(p.rec.Served())
		}
	}
	return res, err
}

// armBudget starts the clock of the run's wall-time budget (its ledger's
// wall_seconds ceiling: its token's, or what run.limit lowered it to),
// counted from the run's start across resumes: when it runs out the run is
// stopped, between two calls or at one, and ends failed. A resumed run's
// clock starts once it is past its recorded calls, so that the end always
// follows them; a run.limit that lowers the ceiling moves the deadline
// (session.setWall). It returns the function that stops the clock.
func (st *Started) armBudget() func() {
	var mu sync.Mutex
	var t *time.Timer
	var deadline time.Time
	disarmed, live := false, true
	start := time.Unix(0, st.meta.Started)
	arm := func() {
		if disarmed || !live || deadline.IsZero() {
			return
		}
		if t != nil {
			t.Stop()
		}
		stop := &stopError{reason: fmt.Sprintf("budget: the run's wall-time budget of %v (its token's wall_seconds, or run.limit) ran out", deadline.Sub(start))}
		t = time.AfterFunc(deadline.Sub(st.h.deps.Now()), func() { st.live.stop(stop) })
	}
	setWall := func(d time.Time) {
		mu.Lock()
		defer mu.Unlock()
		if deadline.IsZero() || d.Before(deadline) {
			deadline = d
			st.s.wallDeadline = d
			arm()
		}
	}
	if p, ok := st.s.path.(*resumePath); ok && !p.past {
		live = false
		p.onPast = func() {
			mu.Lock()
			defer mu.Unlock()
			live = true
			arm()
		}
	}
	if n, ok := st.s.ledger.Ceilings().Get(budget.WallSeconds); ok {
		setWall(start.Add(time.Duration(n) * time.Second))
	}
	st.s.setWall = setWall
	return func() {
		mu.Lock()
		defer mu.Unlock()
		disarmed = true
		if t != nil {
			t.Stop()
		}
	}
}

// OnReplay makes fn see the progress of a resumed run through its
// recorded calls, as Execute answers them from the journal: the calls
// answered so far and their number, after each, until the run goes live.
// It is called in the run's goroutine and must not block. A run that is
// not resumed, or has no recorded calls to answer, never calls fn. Call
// it before Execute.
func (st *Started) OnReplay(fn func(served, total int)) {
	if p, ok := st.s.path.(*resumePath); ok && !p.past {
		p.progress = fn
	}
}

// Abandon gives up a started run without executing it: its lease is
// released and it stays as journaled (running), for a later resume.
func (st *Started) Abandon() {
	st.lease.release(context.Background())
	st.h.live.leave(st.Run)
	if st.span != nil {
		endRun(st.span, st.w, nil, errors.New("host: the run was abandoned before it executed"))
	}
}

// Start journals the start of a run of spec.Code and returns it ready to
// execute.
func (h *Host) Start(ctx context.Context, spec RunSpec) (*Started, error) {
	return h.start(ctx, spec, nil)
}

// start is Start; fork, when set, makes the run a fork that answers its
// first calls from its parent's journal (Fork).
func (h *Host) start(ctx context.Context, spec RunSpec, fork *forked) (_ *Started, err error) {
	if spec.Grant != nil {
		if err := spec.Grant.Check(); err != nil {
			return nil, fmt.Errorf("host: grant: %w", err)
		}
	}
	spec.Name = strings.ToValidUTF8(spec.Name, "\uFFFD")
	now := h.deps.Now()
	token, grant, err := h.verifyToken(spec.Token, spec.Grant, now)
	if err != nil {
		return nil, err
	}
	// The run's limits are recorded in its grant as they apply, so that a
	// replay or a resume on a cell configured otherwise applies the same.
	limits, err := grant.Limits.within(h.cfg.Limits)
	if err != nil {
		return nil, fmt.Errorf("host: grant: %w", err)
	}
	grant.Limits = &limits
	m, stored, err := h.runModule(ctx, spec, h.engine.runLimits(limits))
	if err != nil {
		return nil, err
	}
	grantBytes, err := grant.Canonical()
	if err != nil {
		return nil, err
	}
	if !stored {
		if err := h.deps.Store.PutModule(ctx, m.SHA256, spec.Code); err != nil {
			return nil, fmt.Errorf("host: store module: %w", err)
		}
	}
	seed := spec.Seed
	if seed == nil {
		seed = make([]byte, 32)
		if _, err := io.ReadFull(h.deps.Rand, seed); err != nil {
			return nil, err
		}
	}
	if len(seed) != 32 {
		return nil, fmt.Errorf("host: seed must be 32 bytes, got %d", len(seed))
	}
	wall := spec.WallBase
	if wall == 0 {
		wall = now.UnixNano()
	}
	run := journal.NewRunID(now)
	hdr := &journal.Header{
		ModuleSHA256: m.SHA256, ABI: abi.Version, Input: spec.Input, Seed: seed, WallBase: wall,
		Grant: grantBytes, ModuleName: spec.Name, Token: token,
	}
	if !spec.Parent.IsZero() {
		hdr.Parent = spec.Parent[:]
	}
	if fork != nil {
		hdr.Fork = fork.point
	}
	var span trace.Span
	if h.tr != nil {
		span = h.tr.startRun(ctx, run, hdr, nil)
		hdr.Trace = traceRef(span)
		defer func() {
			if err != nil {
				endRun(span, nil, nil, err)
			}
		}()
	}
	if o := spec.Origin; o != nil {
		if o.Kind == "" || o.ID == "" || !utf8.ValidString(o.Kind) || !utf8.ValidString(o.ID) {
			return nil, fmt.Errorf("host: the run's origin needs a kind and an id in UTF-8, got %q %q", o.Kind, o.ID)
		}
		hdr.Origin = o
	}
	if err := checkLink(m.Imports, grant); err != nil {
		var le *LinkError
		if errors.As(err, &le) && !le.malformed() {
			// Refused by its token before it runs: the journal records
			// the attempt and why, a start and a failed end, so the
			// refusal is auditable. (A module that imports what no ABI
			// has is malformed, and refused like one.)
			return nil, h.refuse(ctx, run, hdr, m, spec.Name, now, err)
		}
		return nil, err
	}
	w := journal.NewWriter(h.deps.Store, journal.NewChain(run, h.deps.Key))
	meta := journal.RunMeta{ID: run, Status: journal.StatusRunning, ModuleSHA256: m.SHA256, ModuleName: spec.Name,
		Started: now.UnixNano(), Cell: h.deps.Key.Public().(ed25519.PublicKey),
		Engines: []string{h.engine.Kind()}, MaxRequest: uint64(h.cfg.MaxRequest), Origin: hdr.Origin, Priority: spec.Priority}
	if err := w.Add(&journal.Entry{Phase: journal.PhaseStart, Header: hdr, Time: now.UnixNano()}); err != nil {
		return nil, err
	}
	startHash := w.Head()
	if span != nil {
		span.SetAttributes(AttrSeq.Int64(0), AttrEntryHash.String(hex.EncodeToString(startHash)))
	}
	lr, err := h.live.enter(run)
	if err != nil {
		return nil, err
	}
	lease, err := h.acquire(ctx, run, w, nil, false)
	if err != nil {
		h.live.leave(run)
		return nil, err
	}
	// The start need not be durable on its own: the first effect's commit,
	// or the end's, makes it so.
	if err := w.Commit(ctx, &meta, false); err != nil {
		lease.release(ctx)
		h.live.leave(run)
		return nil, fmt.Errorf("host: start run: %w", err)
	}

	events := &eventBuffer{run: run, now: h.deps.Now, sink: h.deps.Sink, keep: h.deps.Events != nil, limit: limits.LogBytes}
	blog := &budgetLog{}
	events.at = w.Next
	live := h.newLivePath(w, events, lease, &meta, blog)
	var path callPath = live
	if fork != nil {
		path = &forkPath{rec: fork.rec, live: live, past: fork.rec.Len() == 0}
	}
	ceilings := runCeilings(grant)
	s := &session{run: run, header: hdr, grant: grant, path: path, deps: &h.deps, slots: &opSlots,
		maxRequest: h.cfg.MaxRequest, events: events, startHash: startHash, limits: limits,
		ledger: budget.New(ceilings), blog: blog, stepCap: stepCap(ceilings), started: meta.Started}
	return &Started{Run: run, h: h, m: m, s: s, w: w, meta: &meta, lease: lease, live: lr, span: span}, nil
}

// conclude runs session s of module m to its end and journals the end, or,
// when the host stopped it, keeps what it journaled and says why.
func (h *Host) conclude(ctx context.Context, m *Module, s *session, w *journal.Writer, meta *journal.RunMeta, lease *holder, lr *liveRun) (*Result, error) {
	events := s.events
	guestErr := h.engine.execute(ctx, m, s)
	// Whatever the outcome, this process is done with the run: the next
	// holder (a resume) need not wait for the lease to lapse.
	defer lease.release(ctx)
	// A group commit still in flight (a run that stopped with no commit
	// after it) lands before the lease goes.
	defer w.Wait()
	if s.park != nil && errors.Is(s.fatal, errParked) {
		// The run parked: its index says so and what for, durably with
		// the events so far; its instance is closed.
		wait := s.park.wait
		meta.Status, meta.Wait, meta.Steps = journal.StatusParked, &wait, s.steps
		res := &Result{Run: s.run, Status: journal.StatusParked, Steps: s.steps, Wait: &wait}
		if errors.Is(lr.why(), ErrCancelled) {
			// Cancelled as it parked: it stays cancelled, keeping its
			// wait, so that no timer or vote resumes it on its own.
			meta.Status, res.Status = journal.StatusCancelled, journal.StatusCancelled
		}
		if err := lease.valid(); err != nil {
			return &Result{Run: s.run, Status: journal.StatusRunning, Steps: s.steps}, err
		}
		if err := events.flushTo(w); err != nil {
			return res, err
		}
		if err := w.Commit(context.WithoutCancel(ctx), meta, true); err != nil {
			return res, fmt.Errorf("host: park run: %w", err)
		}
		return res, nil
	}
	if s.fatal != nil && !errors.Is(guestErr, errGuest) {
		res := &Result{Run: s.run, Status: journal.StatusRunning, Steps: s.steps}
		var stop *stopError
		if errors.Is(s.fatal, ErrInterrupted) && errors.As(lr.why(), &stop) {
			// The run's wall-time budget ran out, between two calls or
			// at one: it ends failed, as if the guest had trapped there,
			// with nothing in doubt (a step under way completed first).
			guestErr = &GuestError{Stopped: fmt.Sprintf("%s after %d calls", stop.reason, s.steps)}
		} else if errors.Is(s.fatal, ErrInterrupted) {
			// Keep every call made so far; the context is over, the
			// journal's work is not. A cancelled run says so in its
			// index record, so that no cell resumes it on its own.
			var stopped *journal.RunMeta
			cause := lr.why()
			if cause == nil {
				cause = context.Cause(ctx)
			}
			if LostLease(cause) {
				// The lease is gone: nothing more is written, not even
				// the events; the next holder goes on from the journal.
				return res, fmt.Errorf("%w: %w", s.fatal, cause)
			}
			if errors.Is(cause, ErrCancelled) {
				meta.Status, res.Status = journal.StatusCancelled, journal.StatusCancelled
				stopped = meta
			}
			if err := events.flushTo(w); err == nil {
				if err := w.Commit(context.WithoutCancel(ctx), stopped, true); err != nil {
					return res, errors.Join(s.fatal, err)
				}
				var y *yieldStop
				if errors.As(cause, &y) && lease != nil {
					// Stopped for a handoff: the lease goes to Yield's
					// caller, not back to the store.
					y.out <- &Yielded{Lease: lease.yield(), Entries: w.Next(), Head: w.Head(), Token: s.header.Token}
				}
			}
			if cause != nil && cause != context.Canceled {
				return res, fmt.Errorf("%w: %w", s.fatal, cause)
			}
			return res, s.fatal
		} else {
			var div *DivergenceError
			if errors.As(guestErr, &div) {
				div.locate(guestErr)
			}
			return res, guestErr
		}
	}

	res := &Result{Run: s.run, Status: journal.StatusCompleted, Output: s.output, Steps: s.steps}
	end := &journal.End{Status: journal.StatusCompleted, Output: s.output, Steps: s.steps}
	if guestErr != nil {
		res.Status, res.Err = journal.StatusFailed, guestErr
		end.Status, end.Error = journal.StatusFailed, strings.ToValidUTF8(guestErr.Error(), "\uFFFD")
	}
	if err := lease.valid(); err != nil {
		return &Result{Run: s.run, Status: journal.StatusRunning, Steps: s.steps}, err
	}
	done := h.deps.Now()
	meta.Status, meta.Output, meta.Error, meta.Ended, meta.Steps = end.Status, end.Output, end.Error, done.UnixNano(), s.steps
	if err := w.Add(&journal.Entry{Phase: journal.PhaseEnd, End: end, Time: done.UnixNano(), Epoch: lease.epoch(), Budget: s.closeBudget()}); err != nil {
		return res, err
	}
	if err := events.flushTo(w); err != nil {
		return res, err
	}
	if err := w.Commit(ctx, meta, true); err != nil {
		return res, fmt.Errorf("host: finish run: %w", err)
	}
	return res, nil
}

// ErrInterrupted is returned by Run when the run's context ended: the run
// stopped at a step boundary (or, in the middle of an effect, with that
// effect in doubt), and its journal holds every call made until then.
var ErrInterrupted = errors.New("host: run interrupted")

// errGuest marks an error the guest caused (a trap, a non-zero exit), as
// opposed to one that stopped the host.
var errGuest = errors.New("guest failed")

// GuestError is a run's failure caused by the guest itself. Its text is
// what the run's end entry records: the cause, never the host's internals.
type GuestError struct {
	// ExitCode is the guest's exit status; 0 when it trapped.
	ExitCode uint32
	// Trap is why the guest trapped: a WebAssembly trap (unreachable, an
	// access out of bounds), a fault of the calling convention (a buffer
	// outside its memory), or a fault of the host serving its call.
	Trap string
	// Stack is the wasm stack trace of the trap, innermost first.
	Stack []string
	// Stopped is why the host stopped the guest (a quota, its wall-time
	// budget); the end's error then starts with "stopped: ".
	Stopped string
}

func (e *GuestError) Error() string {
	switch {
	case e.Stopped != "":
		return "stopped: " + e.Stopped
	case e.Trap != "":
		if len(e.Stack) > 0 {
			return "guest trapped: " + e.Trap + "\nwasm stack trace:\n\t" + strings.Join(e.Stack, "\n\t")
		}
		return "guest trapped: " + e.Trap
	}
	return fmt.Sprintf("guest exited with status %d", e.ExitCode)
}

// Is makes every GuestError match errGuest.
func (e *GuestError) Is(target error) bool { return target == errGuest }

// StoppedEnd reports whether a run's end records that the host stopped its
// guest between two calls or at one (GuestError.Stopped): a replay then
// stops the re-executed guest after its last recorded call too.
func StoppedEnd(end *journal.End) bool {
	return end != nil && end.Status == journal.StatusFailed && strings.HasPrefix(end.Error, "stopped: ")
}

// guestError describes how an instance's _start ended with err, for the
// journal: the trap's cause and the guest's stack, and nothing of the
// host's own stack (wazero appends a Go stack trace to a runtime error).
func guestError(err error) *GuestError {
	var stop *stopError
	if errors.As(err, &stop) {
		return &GuestError{Stopped: stop.reason}
	}
	msg, _, _ := strings.Cut(err.Error(), "\n")
	msg = strings.TrimSuffix(strings.TrimSuffix(msg, " (recovered by wazero)"), " (recovered by agentrt)")
	var rt runtime.Error
	if errors.As(err, &rt) {
		// A host function failed (a bug of the host, not of the guest's):
		// the guest is failed with the cause, and the host goes on.
		msg = "fault of the host serving an import call: " + rt.Error()
	}
	ge := &GuestError{Trap: msg, Stack: stackOf(err)}
	if len(ge.Stack) > maxStackFrames {
		ge.Stack = append(ge.Stack[:maxStackFrames:maxStackFrames], "...")
	}
	return ge
}

// maxStackFrames is the most frames of a trap's stack an end records.
const maxStackFrames = 32

// execute instantiates m for session s and runs its _start to the end. It
// returns nil when the guest returned or exited 0, a *GuestError when the
// guest failed, and s.fatal (wrapped with the wasm stack trace) when the
// host stopped it.
func (e *Engine) execute(ctx context.Context, m *Module, s *session) error {
	ctx = withSession(ctx, s)
	s.done = ctx.Done()
	for {
		err := e.instance(ctx, m, s)
		if s.fatal != nil || s.next == nil {
			return err
		}
		s.nextSegment()
	}
}

// instance runs one segment of session s in a fresh instance of m (see
// execute for what it returns); s.next is set when a checkpoint ended it.
func (e *Engine) instance(ctx context.Context, m *Module, s *session) error {
	// No context bounds the wait: a token is held for one instantiation,
	// which runs no guest code, and a run stopped meanwhile stops at its
	// first call as before.
	e.instantiating <- struct{}{}
	inst, err := e.rt.instantiate(ctx, m, s)
	<-e.instantiating
	if err != nil {
		return fmt.Errorf("host: instantiate: %w", err)
	}
	defer inst.close(ctx)
	err = inst.start(ctx)
	if s.fatal != nil || s.next != nil {
		return err
	}
	var exit *exitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &exit):
		if exit.code == 0 {
			return nil
		}
		return &GuestError{ExitCode: exit.code}
	default:
		return guestError(err)
	}
}

// ExecSpec describes a re-execution of a recorded run: the header and grant
// come from its journal and every import call is served by Source.
type ExecSpec struct {
	Run    journal.RunID
	Header *journal.Header
	Code   []byte
	Source Source
	// Sink, when set, sees the guest's events (stdout, stderr, logs).
	Sink func(Event)
	// MaxRequest must equal the recording host's limit; zero: abi.MaxRequest.
	MaxRequest int
	// Refused says the recording holds no call and an end: possibly a run
	// its grant refused at link time, whose refusal is then its outcome.
	Refused bool
	// Stopped, when set, is the reason the recorded run's end gives for
	// the host stopping its guest (StoppedEnd; the end's error after
	// "stopped: "), and Calls the number of calls recorded. Once the
	// Source has answered them all, the guest is stopped with that
	// reason, at its next call or within a few thousand instructions:
	// nothing it would do after was recorded, so a replay checks every
	// recorded call and ends in bounded time, where the run's stop was
	// a matter of time.
	Stopped string
	Calls   int
}

// Outcome is how a re-execution ended.
type Outcome struct {
	Output []byte
	Steps  uint64
	// GuestErr is the guest's own failure, as it would be recorded.
	GuestErr error
}

// Execute re-runs a recorded module with every call served by spec.Source
// (replay, audit). It writes nothing. The error is the Source's (a
// divergence, wrapped with the wasm stack trace of the call site) or what
// kept the module from running.
func (e *Engine) Execute(ctx context.Context, spec ExecSpec) (*Outcome, error) {
	grant, err := DecodeGrant(spec.Header.Grant)
	if err != nil {
		return nil, err
	}
	limits := grant.recordedLimits()
	m, err := e.compile(ctx, spec.Code, e.runLimits(limits))
	if err != nil {
		return nil, err
	}
	if err := checkLink(m.Imports, grant); err != nil {
		var le *LinkError
		if errors.As(err, &le) && !le.malformed() && spec.Refused {
			// A run refused by its grant records a failed end and no
			// calls: the refusal is its outcome, for a replay to
			// compare. Any other recording cannot be replayed by a
			// module its grant refuses.
			return &Outcome{GuestErr: err}, nil
		}
		return nil, err
	}
	maxReq := spec.MaxRequest
	if maxReq <= 0 {
		maxReq = abi.MaxRequest
	}
	events := &eventBuffer{run: spec.Run, now: time.Now, sink: spec.Sink}
	s := &session{run: spec.Run, header: spec.Header, grant: grant, src: spec.Source, slots: &opSlots,
		maxRequest: maxReq, events: events, limits: limits, stepCap: stepCap(runCeilings(grant))}
	if spec.Stopped != "" {
		halt := make(chan struct{})
		s.halt, s.haltStop = halt, &stopError{reason: spec.Stopped}
		if spec.Calls == 0 {
			close(halt)
		} else {
			s.src = &stoppingSource{Source: spec.Source, left: spec.Calls, halt: halt}
		}
	}
	gerr := e.execute(ctx, m, s)
	if s.fatal != nil {
		var div *DivergenceError
		if errors.As(gerr, &div) {
			div.locate(gerr)
		}
		return &Outcome{Output: s.output, Steps: s.steps}, gerr
	}
	return &Outcome{Output: s.output, Steps: s.steps, GuestErr: gerr}, nil
}

// stoppingSource is the Source of a replay of a run the host stopped:
// once it has answered the last recorded call, it closes halt.
type stoppingSource struct {
	Source
	left int
	halt chan struct{}
}

func (s *stoppingSource) Serve(ctx context.Context, c *Call) (abi.Status, []byte, error) {
	status, resp, err := s.Source.Serve(ctx, c)
	if err == nil {
		if s.left--; s.left == 0 {
			close(s.halt)
		}
	}
	return status, resp, err
}

// refuse journals a run refused before it ran (a module that imports
// capabilities its token lacks): its start entry and a failed end entry
// with the reason, durably. It returns why, naming the run.
func (h *Host) refuse(ctx context.Context, run journal.RunID, hdr *journal.Header, m *Module, name string, now time.Time, why error) error {
	w := journal.NewWriter(h.deps.Store, journal.NewChain(run, h.deps.Key))
	end := &journal.End{Status: journal.StatusFailed, Error: strings.ToValidUTF8(why.Error(), "\uFFFD")}
	meta := journal.RunMeta{ID: run, Status: journal.StatusFailed, ModuleSHA256: m.SHA256, ModuleName: name,
		Started: now.UnixNano(), Ended: now.UnixNano(), Error: end.Error, Cell: h.deps.Key.Public().(ed25519.PublicKey),
		Engines: []string{h.engine.Kind()}, MaxRequest: uint64(h.cfg.MaxRequest), Origin: hdr.Origin}
	err := errors.Join(
		w.Add(&journal.Entry{Phase: journal.PhaseStart, Header: hdr, Time: now.UnixNano()}),
		w.Add(&journal.Entry{Phase: journal.PhaseEnd, End: end, Time: now.UnixNano()}))
	if err == nil {
		err = w.Commit(ctx, &meta, true)
	}
	if err != nil {
		return errors.Join(why, fmt.Errorf("host: journal the refusal: %w", err))
	}
	var le *LinkError
	if errors.As(why, &le) {
		le.Run = run
	}
	return why
}
