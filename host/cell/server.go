package cell

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/cell/handoff"
	"github.com/agentrt/agentrt/internal/fileread"
	"github.com/agentrt/agentrt/journal"
)

// The cell API: JSON over HTTP, served on a unix socket in the data
// directory (SocketName) and, when asked, on a loopback TCP address that
// takes a bearer token (APITokenFile); Endpoint checks each request before
// it reaches a handler. It is documented in API.md next to this file.
// Every error is a JSON object {"error": "...", "hint": "..."} with a 4xx
// or 5xx status.

// RunInfo is a run as the API and `agentrt runs --json` show it.
type RunInfo struct {
	RunID  string            `json:"run_id"`
	Status journal.RunStatus `json:"status"`
	Live   bool              `json:"live"`
	// Stopping says the run was asked to stop and is finishing its step.
	Stopping bool `json:"stopping,omitempty"`
	// Waiting lists the run's calls parked for approval.
	Waiting []ApprovalInfo `json:"waiting,omitempty"`
	// Wait is what a parked run waits for (a timer, an approval).
	Wait *WaitInfo `json:"wait,omitempty"`
	// Queued says the run waits in the cell's queue for a worker.
	Queued *QueuedInfo `json:"queued,omitempty"`
	// Priority is the run's priority in the cell's queue (1..9).
	Priority     int             `json:"priority"`
	Module       string          `json:"module,omitempty"`
	ModuleSHA256 string          `json:"module_sha256"`
	Started      time.Time       `json:"started"`
	Ended        *time.Time      `json:"ended,omitempty"`
	Steps        uint64          `json:"steps"`
	Cell         string          `json:"cell"`
	Output       json.RawMessage `json:"output,omitempty"`
	// OutputText says Output is not the run's output itself, which is not
	// JSON, but a JSON string of it.
	OutputText bool `json:"output_text,omitempty"`
	// OutputBase64 is the run's output when it is not UTF-8 (binary), as
	// its bytes (base64 in JSON); Output is then absent.
	OutputBase64 []byte `json:"output_base64,omitempty"`
	Error        string `json:"error,omitempty"`
}

// info returns the RunInfo of m as this server's host sees it.
func (s *Server) info(m journal.RunMeta) RunInfo {
	ri := Info(m, s.cell.Host.Live(m.ID))
	ri.Stopping = s.cell.Host.Stopping(m.ID)
	if prio, since, ok := s.sched.queuedInfo(m.ID); ok {
		ri.Queued = &QueuedInfo{Priority: int(prio), Since: since.UTC()}
	}
	if s.approvals != nil {
		for _, a := range s.approvals.Pending(m.ID) {
			ri.Waiting = append(ri.Waiting, approvalInfo(a))
		}
	}
	return ri
}

// Info returns m as a RunInfo, its output as EncodeOutput puts it.
func Info(m journal.RunMeta, live bool) RunInfo {
	ri := RunInfo{
		RunID: m.ID.String(), Status: m.Status, Live: live, Module: m.ModuleName,
		ModuleSHA256: hex.EncodeToString(m.ModuleSHA256), Started: time.Unix(0, m.Started).UTC(),
		Steps: m.Steps, Cell: hex.EncodeToString(m.Cell), Error: m.Error, Priority: int(effectivePriority(m.Priority)),
	}
	if m.Ended != 0 {
		t := time.Unix(0, m.Ended).UTC()
		ri.Ended = &t
	}
	if m.Output != nil {
		ri.Output, ri.OutputText, ri.OutputBase64 = EncodeOutput(m.Output)
	}
	if w := m.Wait; w != nil {
		ri.Wait = &WaitInfo{Kind: w.Kind, Step: w.Step, Op: w.Op, Group: w.Group, Since: time.Unix(0, w.Since).UTC()}
		if len(w.Digest) > 0 {
			ri.Wait.Digest = hex.EncodeToString(w.Digest)
		}
		if !w.Run.IsZero() {
			ri.Wait.Run = w.Run.String()
		}
		if w.Until != 0 {
			t := time.Unix(0, w.Until).UTC()
			ri.Wait.Until = &t
		}
	}
	return ri
}

// QueuedInfo is a run waiting for a worker, as the API shows it.
type QueuedInfo struct {
	// Priority is its priority in the queue, 1..9 (before aging).
	Priority int `json:"priority"`
	// Since is when it was queued.
	Since time.Time `json:"since"`
}

// WaitInfo is what a parked run waits for, as the API shows it.
type WaitInfo struct {
	// Kind is "timer" or "approval".
	Kind string `json:"kind"`
	Step uint64 `json:"step"`
	Op   string `json:"op,omitempty"`
	// Until is a timer's wake time, an approval's expiry.
	Until *time.Time `json:"until,omitempty"`
	// Group and Digest name an approval.
	Group  string `json:"group,omitempty"`
	Digest string `json:"digest,omitempty"`
	// Run is the child a run parked on agent.await waits for (kind run).
	Run   string    `json:"run,omitempty"`
	Since time.Time `json:"since"`
}

// EncodeOutput is how a run's output travels in JSON, without a byte lost
// or changed: the output itself (value) when it is UTF-8 JSON; a JSON
// string of it (value, and text true) when it is other UTF-8 text; its
// bytes (raw, for "output_base64") when it is not UTF-8. A JSON string
// would replace invalid UTF-8 with U+FFFD.
func EncodeOutput(out []byte) (value json.RawMessage, text bool, raw []byte) {
	switch {
	case !utf8.Valid(out):
		return nil, false, out
	case json.Valid(out):
		return out, false, nil
	}
	value, _ = json.Marshal(string(out))
	return value, true, nil
}

// Submission is the body of POST /v1/runs.
type Submission struct {
	// Module is the wasm module (base64 in JSON); it may be left out when
	// ModuleSHA256 names a module the cell holds.
	Module []byte `json:"module,omitempty"`
	// ModuleSHA256 names the module by its SHA-256 (64 hex digits): one
	// pushed before (POST /v1/modules) or run before. With Module too, it
	// must be the bytes' hash.
	ModuleSHA256 string `json:"module_sha256,omitempty"`
	// Name is a human name for the module, recorded with the run.
	Name  string `json:"name,omitempty"`
	Input []byte `json:"input,omitempty"`
	// Grant is a grant file's text (YAML or JSON); empty: the run
	// capability alone.
	Grant string `json:"grant,omitempty"`
	// Seed is 64 hex digits; empty: fresh.
	Seed string `json:"seed,omitempty"`
	// Token is a capability token (base64 in JSON) granting the run; a
	// grant, when also given, must be within it.
	Token []byte `json:"token,omitempty"`
	// Priority is the run's priority in the cell's queue, 1 (lowest) to
	// 9 (highest); 0 or absent: 5.
	Priority int `json:"priority,omitempty"`
}

// Submitted answers POST /v1/runs and POST /v1/runs/{run}/resume.
type Submitted struct {
	RunID string `json:"run_id"`
}

// StreamLine is one line of GET /v1/runs/{run}/events: a guest event, or,
// last, the run's end ("end": how it stopped).
type StreamLine struct {
	// RunID is set on the first line of a followed submission.
	RunID string         `json:"run_id,omitempty"`
	Time  time.Time      `json:"time"`
	Kind  host.EventKind `json:"kind,omitempty"`
	Level uint8          `json:"level,omitempty"`
	Data  string         `json:"data,omitempty"`
	// End is set on the last line of a followed stream.
	End *RunInfo `json:"end,omitempty"`
	// Stopped says why the run stopped without ending (cancelled,
	// draining, a store fault), on the last line.
	Stopped string `json:"stopped,omitempty"`
}

// Server serves the cell API over a cell. It executes the runs submitted
// to it (and the ones it recovers) in goroutines of its own.
type Server struct {
	cell *Cell
	// control limits the API to reading and cancelling: a process that
	// runs one agent in the foreground serves only that.
	control bool
	// approvals are the calls parked for approval, when the cell's
	// approver is this server's.
	approvals *Approvals
	// token is the credential of the TCP listeners.
	token string
	logf  func(format string, args ...any)
	// breaker decides the recoveries (breaker.go).
	breaker *breaker
	// triggers are the cell's triggers, when the server keeps them.
	triggers *triggerSet

	mu     sync.Mutex
	subs   map[journal.RunID]map[chan StreamLine]bool
	wg     sync.WaitGroup
	closed bool
	// onEnd are told of every run this server executed that stopped
	// (OnEnd).
	onEnd []func(journal.RunID, *host.Result, error)
	// waker keeps the timers of the parked runs (wake.go); approvalSubs
	// follow GET /v1/approvals?follow=1.
	waker        *waker
	approvalSubs map[chan StreamLine]bool
	// takeoverRefusals is why this cell last refused to take over each
	// run its admission refused (takeover.go), so that it says so once.
	takeoverRefusals map[journal.RunID]string
	// tasks are the cell's tasks (tasks.go); nil on a control server.
	tasks *tasks
	// sched is the worker pool and the run queue (sched.go).
	sched *scheduler
	// sealHandoff, when set, seals the handoff envelopes in place of
	// handoff.Seal: tests make the envelopes an attacker or a faulty
	// source would.
	sealHandoff atomic.Pointer[func(ed25519.PrivateKey, handoff.Payload) ([]byte, error)]
}

// OnEnd registers fn, which is called, in the run's goroutine, each time a
// run this server executes stops: it ended (res.Status completed or
// failed), parked, was cancelled, or was interrupted (err says why; res may
// be nil). The cell's triggers and tasks learn of their runs' outcomes so.
func (s *Server) OnEnd(fn func(run journal.RunID, res *host.Result, err error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onEnd = append(s.onEnd, fn)
}

// Launch starts a run of spec and executes it in the background, as a
// submission through the API does; what names why in the daemon's log
// ("started", "triggered", ...). The start is refused as a submission's
// is: by the token, the link check, the scheduler's admission
// (*AdmissionError), a server shutting down.
func (s *Server) Launch(ctx context.Context, spec host.RunSpec, what string) (journal.RunID, error) {
	if err := checkPriority(int(spec.Priority)); err != nil {
		return journal.RunID{}, err
	}
	st, err := s.cell.Host.Start(ctx, spec)
	if err != nil {
		return journal.RunID{}, err
	}
	if err := s.sched.admit(ctx, st, false); err != nil {
		return journal.RunID{}, err
	}
	if err := s.execute(st, what); err != nil {
		return journal.RunID{}, err
	}
	return st.Run, nil
}

// ServerOptions tune NewServer.
type ServerOptions struct {
	// ControlOnly serves reading and cancelling runs, not starting them.
	ControlOnly bool
	// Logf reports what the server does (runs started, recovered,
	// stopped); nil: the standard logger.
	Logf func(format string, args ...any)
	// Approvals, when set, is the cell's approver (Options.Approver):
	// the API lists the calls it parked and answers them.
	Approvals *Approvals
	// APIToken is the bearer token requests on a TCP listener must carry
	// (LoadOrCreateAPIToken); Endpoint refuses a TCP listener without one.
	APIToken string
	// Breaker tunes the crash-loop breaker of Recover.
	Breaker BreakerOptions
	// Triggers serves the trigger API and keeps the cell's triggers,
	// which StartTriggers starts (triggers.go). Not with ControlOnly.
	Triggers bool
	// Scheduler sizes the worker pool and the queue (sched.go); checked
	// with SchedulerOptions.Check first: NewServer panics on a bad value.
	Scheduler SchedulerOptions
}

// NewServer returns a server for c. The cell must have been opened with
// the server's Sink (Options.Sink = s.Sink) for events to stream live; see
// Serve, which does both.
func NewServer(c *Cell, opts ServerOptions) *Server {
	s := &Server{cell: c, control: opts.ControlOnly, logf: opts.Logf, approvals: opts.Approvals, token: opts.APIToken, subs: map[journal.RunID]map[chan StreamLine]bool{},
		breaker: newBreaker(c.Store, c.Journal, opts.Breaker)}
	if s.logf == nil {
		s.logf = log.Printf
	}
	s.waker = newWaker(c.Clock, s.wake)
	s.sched = newScheduler(s, opts.Scheduler)
	s.approvalSubs = map[chan StreamLine]bool{}
	if c.Book != nil {
		c.Book.mu.Lock()
		c.Book.decided = func(run journal.RunID, _ uint64) { s.wake(run, "approval decided") }
		c.Book.mu.Unlock()
	}
	if !s.control {
		s.tasks = newTasks(s)
		// The daemon starts and follows the runs' sub-agents (agents.go).
		c.Host.SetAgents(agents{s})
		s.OnEnd(s.agentEnded)
	}
	if s.sched.cell.on() {
		// A run that ended gives back its share of the cell budget.
		s.OnEnd(func(run journal.RunID, _ *host.Result, err error) { s.sched.cell.ended(s, run, err) })
	}
	if opts.Triggers && !opts.ControlOnly {
		s.triggers = newTriggers(s)
		// Room made in the cell (runs leaving the queue, shares of the
		// cell budget given back) wakes the firings waiting for it.
		s.sched.roomMade = s.triggers.wakeRoom
		if s.sched.cell.on() {
			s.sched.cell.onFreed = s.triggers.wakeRoom
		}
	}
	if s.approvals != nil {
		s.approvals.mu.Lock()
		s.approvals.notify = func(a host.Approval) {
			// The resource and the method come from the guest: quoted,
			// they cannot carry terminal control sequences into the
			// daemon's log or a follower's terminal.
			what := a.Op
			if a.Method != "" {
				what += " " + strconv.Quote(a.Method)
			}
			if a.Resource != "" {
				what += " " + strconv.Quote(a.Resource)
			}
			s.logf("run %s step %d (%s) waits for approval", a.Run, a.Step, what)
			s.publish(a.Run, StreamLine{Time: time.Now().UTC(), Kind: EventApproval,
				Data: fmt.Sprintf("step %d (%s) waits for approval (permission mode rule %q)", a.Step, what, a.Rule)})
		}
		s.approvals.mu.Unlock()
	}
	return s
}

// Sink passes each event to the followers of its run. It never blocks: a
// follower that falls behind by more than its buffer is cut off (its
// stream ends with a line that says so).
func (s *Server) Sink(e host.Event) {
	s.publish(e.Run, StreamLine{Time: time.Unix(0, e.Time).UTC(), Kind: e.Kind, Level: e.Level, Data: string(e.Data)})
}

func (s *Server) publish(run journal.RunID, l StreamLine) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.subs[run] {
		select {
		case ch <- l:
		default:
			delete(s.subs[run], ch)
			close(ch)
		}
	}
}

// subscribe returns a channel that receives run's events from now on.
func (s *Server) subscribe(run journal.RunID) chan StreamLine {
	ch := make(chan StreamLine, 1024)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.subs[run] == nil {
		s.subs[run] = map[chan StreamLine]bool{}
	}
	s.subs[run][ch] = true
	return ch
}

func (s *Server) unsubscribe(run journal.RunID, ch chan StreamLine) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.subs[run][ch] {
		delete(s.subs[run], ch)
		close(ch)
	}
}

// ErrShuttingDown is returned for a run that a server shutting down does
// not execute.
var ErrShuttingDown = errors.New("cell: shutting down")

// execute runs st in the background, on a worker of the scheduler (now or
// once one is free), until it ends or stops, then tells the run's
// followers. A server shutting down refuses, and the run (its start
// journaled) stays running, to be recovered.
func (s *Server) execute(st *host.Started, what string) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		st.Abandon()
		return ErrShuttingDown
	}
	s.wg.Add(1)
	s.mu.Unlock()
	// The run's context is the server's lifetime, not the request's: a
	// run outlives the call that submitted it. Drain stops it.
	if err := s.sched.enqueue(st, what); err != nil {
		s.wg.Done()
		return err
	}
	return nil
}

// finish tells the followers and the end hooks of run that its execution
// stopped (res, err as Execute returned them).
func (s *Server) finish(run journal.RunID, res *host.Result, err error) {
	defer s.wg.Done()
	last := StreamLine{Time: time.Now().UTC()}
	if m, merr := s.cell.Journal.Meta(context.Background(), run); merr == nil {
		ri := Info(m, false)
		last.End = &ri
	}
	switch {
	case err != nil:
		last.Stopped = err.Error()
		s.logf("run %s stopped: %v", run, err)
	default:
		s.logf("run %s %s after %d calls", run, res.Status, res.Steps)
	}
	s.publish(run, last)
	s.mu.Lock()
	for ch := range s.subs[run] {
		close(ch)
	}
	delete(s.subs, run)
	hooks := slices.Clone(s.onEnd)
	s.mu.Unlock()
	if err == nil && res != nil && res.Status == journal.StatusParked {
		s.parked(run, res.Wait)
	}
	for _, fn := range hooks {
		fn(run, res, err)
	}
}

// Recover resumes every run this cell owned that had not ended and was not
// cancelled or held (its process was killed, or drained at shutdown),
// through the crash-loop breaker (breaker.go): a run whose recoveries keep
// making no progress is resumed after a backoff, then held. It returns the
// runs it resumed now; a run that cannot be reopened is logged and left.
func (s *Server) Recover(ctx context.Context) ([]journal.RunID, error) {
	if s.tasks != nil {
		// First the tasks, so that a task cancelled while its run was
		// not is cancelled before the run would be resumed.
		if err := s.tasks.recover(ctx); err != nil {
			return nil, err
		}
	}
	runs, err := s.cell.Journal.Runs(ctx)
	if err != nil {
		return nil, err
	}
	// The runs recovered are all queued before any executes: they go by
	// priority.
	defer s.sched.pause()()
	me := hex.EncodeToString(s.cell.Public())
	var out []journal.RunID
	for _, m := range runs {
		if hex.EncodeToString(m.Cell) != me || s.cell.Host.Live(m.ID) {
			continue
		}
		if m.Status.Finished() {
			s.breaker.forget(m.ID)
		}
		if s.sched.cell.on() {
			// Before any run executes, every run in flight holds its
			// share of the cell budget again, from the index.
			if err := s.sched.cell.recover(ctx, s, m); err != nil {
				s.logf("%v", err)
			}
		}
		if m.Status == journal.StatusParked {
			s.recoverParked(m)
			continue
		}
		if m.Status != journal.StatusRunning {
			continue
		}
		started, err := s.recoverRun(ctx, m.ID, "recovered")
		if err != nil {
			return out, err
		}
		if started {
			out = append(out, m.ID)
		}
	}
	return out, nil
}

// Shutdown drains the cell: every run stops at its next step boundary and
// stays running, to be recovered when a server starts again. It returns
// when they have all stopped, or ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	if s.triggers != nil {
		s.triggers.stop()
	}
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.breaker.close()
	s.waker.close()
	if s.tasks != nil {
		s.tasks.close()
	}
	live := s.liveRuns(ctx)
	err := s.cell.Host.Drain(ctx)
	if err == nil {
		// Stopped cleanly: none of them killed its host.
		for _, run := range live {
			s.breaker.forget(run)
		}
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		err = errors.Join(err, ctx.Err())
	}
	return err
}

// handler returns the API's routes. It is served only behind Endpoint's
// guard, which authenticates the request and names its identity.
func (s *Server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/cell", s.getCell)
	mux.HandleFunc("GET /v1/runs", s.listRuns)
	mux.HandleFunc("GET /v1/runs/{run}", s.getRun)
	mux.HandleFunc("POST /v1/runs/{run}/cancel", s.cancelRun)
	mux.HandleFunc("GET /v1/runs/{run}/events", s.events)
	mux.HandleFunc("GET /v1/runs/{run}/stream", s.stream)
	mux.HandleFunc("GET /v1/approvals", s.listApprovals)
	mux.HandleFunc("GET /v1/runs/{run}/approvals/{step}", s.getApproval)
	mux.HandleFunc("POST /v1/runs/{run}/votes", s.vote)
	mux.HandleFunc("POST /v1/runs/{run}/approve", s.approve)
	s.readRoutes(mux)
	if !s.control {
		mux.HandleFunc("POST /v1/runs", s.submit)
		mux.HandleFunc("POST /v1/modules", s.pushModule)
		mux.HandleFunc("GET /v1/modules/{sha256}", s.getModule)
		mux.HandleFunc("POST /v1/runs/{run}/resume", s.resume)
		mux.HandleFunc("POST /v1/runs/{run}/handoff", s.handoffRun)
		s.taskRoutes(mux)
	}
	if s.triggers != nil {
		s.triggerRoutes(mux)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		hint := "the API is under /v1 (see host/cell/API.md)"
		if s.control {
			hint = "this process runs one agent in the foreground and serves reading and cancelling only; start runs on a daemon (agentrt cell serve)"
		}
		writeError(w, http.StatusNotFound, fmt.Errorf("no endpoint %s %s", r.Method, r.URL.Path), hint)
	})
	return http.MaxBytesHandler(mux, MaxSubmission)
}

// MaxSubmission is the largest request body the API reads (a module and
// its input).
const MaxSubmission = 64 << 20

// MaxModule is the largest module a cell takes, through the API or from
// agentrt run: its base64 in a submission stays well within MaxSubmission,
// and the store keeps it as one value. Module files are read up to it
// (fileread.Module).
const MaxModule = fileread.MaxModule

// ErrModuleTooLarge is returned for a module over MaxModule.
var ErrModuleTooLarge = fmt.Errorf("module over the cell's limit of %d MiB", MaxModule>>20)

// CellInfo answers GET /v1/cell.
type CellInfo struct {
	Cell        string   `json:"cell"`
	Dir         string   `json:"data"`
	Live        []string `json:"live"`
	ControlOnly bool     `json:"control_only"`
	// Approvers says the cell has approvers (DATA/approvers): its
	// approvals take signed votes (POST /v1/runs/{run}/votes), not
	// answers.
	Approvers bool `json:"approvers,omitempty"`
	// Compiled counts the compiled modules the cell keeps in memory.
	Compiled *host.EngineStats `json:"compiled,omitempty"`
	// Memory is the guest memories the cell keeps from ended runs for
	// the next ones; none when its engine keeps none.
	Memory *host.MemoryStats `json:"memory,omitempty"`
	// Scheduler is the worker pool and the run queue (a daemon's).
	Scheduler *SchedulerStats `json:"scheduler,omitempty"`
}

func (s *Server) getCell(w http.ResponseWriter, r *http.Request) {
	ci := CellInfo{Cell: hex.EncodeToString(s.cell.Public()), Dir: s.cell.Dir, Live: []string{}, ControlOnly: s.control, Approvers: s.cell.Book != nil}
	if cs := s.cell.Engine.Stats(); !s.control {
		ci.Compiled = &cs
		if ms, ok := s.cell.Engine.MemoryStats(); ok {
			ci.Memory = &ms
		}
		ss := s.sched.stats()
		ci.Scheduler = &ss
	}
	// The host's own list: every agentrt run that finds a daemon asks
	// for this, and reading the run index would cost it one read per run
	// the store ever held.
	for _, id := range s.cell.Host.LiveRuns() {
		ci.Live = append(ci.Live, id.String())
	}
	writeJSON(w, http.StatusOK, ci)
}

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) {
	runs, err := s.cell.Journal.Runs(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, err, "")
		return
	}
	out := make([]RunInfo, 0, len(runs))
	for _, m := range runs {
		out = append(out, s.info(m))
	}
	writeJSON(w, http.StatusOK, out)
}

// findRun resolves the {run} path value, answering the error itself.
func (s *Server) findRun(w http.ResponseWriter, r *http.Request) (journal.RunID, bool) {
	run, err := FindRun(r.Context(), s.cell.Journal, r.PathValue("run"))
	if err != nil {
		code := http.StatusBadRequest
		if errors.Is(err, journal.ErrNotFound) {
			code = http.StatusNotFound
		}
		writeError(w, code, err, "GET /v1/runs lists the runs")
		return run, false
	}
	return run, true
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request) {
	run, ok := s.findRun(w, r)
	if !ok {
		return
	}
	m, err := s.cell.Journal.Meta(r.Context(), run)
	if err != nil {
		writeError(w, startErrorCode(err), err, "")
		return
	}
	writeJSON(w, http.StatusOK, s.info(m))
}

func (s *Server) submit(w http.ResponseWriter, r *http.Request) {
	var sub Submission
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sub); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("submission: over %d MiB: %w", MaxSubmission>>20, err),
				fmt.Sprintf("a submission is at most %d MiB, its module at most %d MiB", MaxSubmission>>20, MaxModule>>20))
			return
		}
		writeError(w, http.StatusBadRequest, fmt.Errorf("submission: %w", err), `send {"module": BASE64 or "module_sha256": HEX, "input": BASE64, "grant": "YAML text"}`)
		return
	}
	if len(sub.Module) > MaxModule {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("submission: %w (this one is %d bytes)", ErrModuleTooLarge, len(sub.Module)), "")
		return
	}
	spec := host.RunSpec{Code: sub.Module, Name: sub.Name, Input: sub.Input, Token: sub.Token}
	if sub.ModuleSHA256 != "" {
		sum, err := parseModuleSum(sub.ModuleSHA256)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Errorf("submission: %w", err), "")
			return
		}
		spec.ModuleSHA256 = sum
	} else if sub.Module == nil {
		writeError(w, http.StatusBadRequest, errors.New("submission: no module: give its bytes (\"module\") or its hash (\"module_sha256\")"),
			"push the module once (agentrt module push FILE, or POST /v1/modules) and name it by its sha256")
		return
	}
	if sub.Grant != "" {
		g, err := host.ParseGrant([]byte(sub.Grant))
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Errorf("grant: %w", err), "")
			return
		}
		spec.Grant = g
	}
	if sub.Seed != "" {
		seed, err := hex.DecodeString(sub.Seed)
		if err != nil || len(seed) != 32 {
			writeError(w, http.StatusBadRequest, fmt.Errorf("seed %q is not 32 bytes of hex", sub.Seed), "")
			return
		}
		spec.Seed = seed
	}
	if err := checkPriority(sub.Priority); err != nil {
		writeError(w, http.StatusBadRequest, err, "give a priority from 1 (lowest) to 9 (highest), or none for 5")
		return
	}
	spec.Priority = uint8(sub.Priority)
	st, err := s.cell.Host.Start(r.Context(), spec)
	if err != nil {
		writeError(w, startErrorCode(err), err, "")
		return
	}
	if err := s.sched.admit(r.Context(), st, false); err != nil {
		writeError(w, startErrorCode(err), err, Hint(err))
		return
	}
	s.launch(w, r, st, "started", http.StatusCreated)
}

// launch executes st and answers: its id, or with ?follow=1 a stream of
// its events from the first one (the follower is in place before the run
// executes), its id on the first line.
func (s *Server) launch(w http.ResponseWriter, r *http.Request, st *host.Started, what string, code int) {
	var live chan StreamLine
	if r.URL.Query().Get("follow") != "" {
		live = s.subscribe(st.Run)
		defer s.unsubscribe(st.Run, live)
	}
	if err := s.execute(st, what); err != nil {
		writeError(w, http.StatusServiceUnavailable, err, "")
		return
	}
	if live == nil {
		writeJSON(w, code, Submitted{RunID: st.Run.String()})
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(code)
	sw := newStreamWriter(w)
	sw.send(StreamLine{RunID: st.Run.String(), Time: time.Now().UTC()})
	sw.follow(r.Context(), live, time.Time{})
}

// streamWriter writes JSON lines, flushing each.
type streamWriter struct {
	enc     *json.Encoder
	flusher http.Flusher
}

func newStreamWriter(w http.ResponseWriter) *streamWriter {
	f, _ := w.(http.Flusher)
	return &streamWriter{enc: json.NewEncoder(w), flusher: f}
}

func (sw *streamWriter) send(l StreamLine) bool {
	if sw.enc.Encode(l) != nil {
		return false
	}
	if sw.flusher != nil {
		sw.flusher.Flush()
	}
	return true
}

// follow sends the lines of live after since until the run's last line,
// the follower being cut off, or ctx ending.
func (sw *streamWriter) follow(ctx context.Context, live chan StreamLine, since time.Time) {
	for {
		select {
		case l, ok := <-live:
			if !ok {
				sw.send(StreamLine{Time: time.Now().UTC(), Stopped: "event stream cut off: the reader fell behind (the run goes on)"})
				return
			}
			if l.End == nil && l.Stopped == "" && !l.Time.After(since) {
				continue
			}
			if !sw.send(l) || l.End != nil || l.Stopped != "" {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// startErrorCode maps why a run could not start, resume or stop to a
// status: the submitter's fault (a bad module, a missing capability, a
// malformed or refused token), a conflict with the run's state or with a
// request racing this one, or the cell's.
func startErrorCode(err error) int {
	var le *host.LinkError
	var held *journal.HeldError
	var ce *capability.Error
	var ae *AdmissionError
	switch {
	case errors.As(err, &ae):
		switch ae.Reason {
		case RefusedFull, RefusedCellBudget:
			return http.StatusServiceUnavailable
		case RefusedPriority:
			return http.StatusBadRequest
		}
		return http.StatusForbidden
	case errors.As(err, &le), errors.Is(err, host.ErrBadModule), errors.Is(err, host.ErrLimitRaised):
		return http.StatusUnprocessableEntity
	case errors.Is(err, host.ErrUnenforcedCeiling), errors.Is(err, host.ErrToolDeclaration), errors.Is(err, host.ErrGrantWidensToken):
		// The token is well formed, and refused: it asks for what this
		// cell does not enforce, or a grant file widens it.
		return http.StatusForbidden
	case errors.As(err, &ce):
		if errors.Is(ce.Class, capability.ErrDecode) || errors.Is(ce.Class, capability.ErrNonCanonical) || errors.Is(ce.Class, capability.ErrVersion) {
			return http.StatusBadRequest
		}
		return http.StatusForbidden
	case errors.Is(err, host.ErrModuleMismatch):
		return http.StatusBadRequest
	case errors.Is(err, host.ErrFinished), errors.Is(err, host.ErrActive), errors.As(err, &held), errors.Is(err, journal.ErrConflict):
		return http.StatusConflict
	case errors.Is(err, journal.ErrNotFound):
		return http.StatusNotFound
	}
	return http.StatusInternalServerError
}

// noBody answers 400 and returns false when a request that takes no body
// sent one.
func noBody(w http.ResponseWriter, r *http.Request) bool {
	var b [1]byte
	if n, _ := r.Body.Read(b[:]); n > 0 {
		writeError(w, http.StatusBadRequest, fmt.Errorf("%s %s takes no body", r.Method, r.URL.Path), "send the request without a body")
		return false
	}
	return true
}

func (s *Server) resume(w http.ResponseWriter, r *http.Request) {
	if !noBody(w, r) {
		return
	}
	run, ok := s.findRun(w, r)
	if !ok {
		return
	}
	st, err := s.reopenAdmitted(r.Context(), run, nil)
	if err != nil {
		writeError(w, startErrorCode(err), err, Hint(err))
		return
	}
	s.launch(w, r, st, "resumed", http.StatusAccepted)
}

// reopenAdmitted reopens run, which this cell takes up again from outside
// (resumed by hand; with decision, taken over from a cell whose lease
// expired, Host.TakeOver), through this cell's admission, decided as for a
// submission on the verified journal before the run's lease is taken. A
// refused run is left as it was, nothing journaled; an admitted one holds
// its share of the cell budget until it ends. A spawn is admitted as a
// spawn: its parent's carve bounds it.
func (s *Server) reopenAdmitted(ctx context.Context, run journal.RunID, decision []byte) (*host.Started, error) {
	// A run that holds its share already (parked) keeps it whatever
	// happens here.
	had, admitted := s.sched.cell.holds(run), false
	check := func(t host.Tail) error {
		o := t.Origin()
		if err := s.sched.admitTail(ctx, run, t, o != nil && o.Kind == OriginSpawn); err != nil {
			return err
		}
		admitted = true
		return nil
	}
	var (
		st  *host.Started
		err error
	)
	if decision != nil {
		st, err = s.cell.Host.TakeOver(ctx, run, decision, check)
	} else {
		st, err = s.cell.Host.ReopenChecked(ctx, run, check)
	}
	if err != nil && admitted && !had {
		s.sched.cell.release(run)
	}
	return st, err
}

func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request) {
	if !noBody(w, r) {
		return
	}
	run, ok := s.findRun(w, r)
	if !ok {
		return
	}
	if err := s.Cancel(r.Context(), run); err != nil {
		writeError(w, startErrorCode(err), err, "")
		return
	}
	if s.tasks != nil {
		// A run not executing here (parked, or killed) is cancelled
		// without an end: its task learns of it so.
		s.tasks.onEnd(run, nil, nil)
	}
	m, err := s.cell.Journal.Meta(r.Context(), run)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err, "")
		return
	}
	writeJSON(w, http.StatusOK, s.info(m))
}

// events streams a run's event log as JSON lines: what is stored, then,
// with ?follow=1 and while the run is live here, each event as it happens
// and a last line with the run's end.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	run, ok := s.findRun(w, r)
	if !ok {
		return
	}
	follow := r.URL.Query().Get("follow") != ""
	var live chan StreamLine
	if follow {
		// Subscribe before reading what is stored, so nothing falls in
		// between; what arrives twice (stored meanwhile) is skipped by
		// time.
		live = s.subscribe(run)
		defer s.unsubscribe(run, live)
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	sw := newStreamWriter(w)
	var last time.Time
	err := host.ReadEvents(r.Context(), s.cell.Journal, run, func(e host.Event) error {
		last = time.Unix(0, e.Time).UTC()
		if !sw.send(StreamLine{Time: last, Kind: e.Kind, Level: e.Level, Data: string(e.Data)}) {
			return errors.New("client gone")
		}
		return nil
	})
	if err != nil {
		sw.send(StreamLine{Time: time.Now().UTC(), Stopped: err.Error()})
		return
	}
	if !follow {
		return
	}
	if !s.cell.Host.Live(run) {
		// Not running here: the stream ends with how the run stands.
		if m, err := s.cell.Journal.Meta(r.Context(), run); err == nil {
			ri := Info(m, false)
			sw.send(StreamLine{Time: time.Now().UTC(), End: &ri})
		}
		return
	}
	// Events stored while the log was read arrive live too; those up to
	// the last stored one's time are skipped. (The log merges a burst of
	// output into one event stamped with its first part's time, so a part
	// of a burst written just as the stream starts may show twice.)
	sw.follow(r.Context(), live, last)
}

// EventApproval is the kind of the stream line that says a call waits for
// approval.
const EventApproval host.EventKind = "approval"

func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request) {
	if s.cell.Book != nil {
		s.listSigned(w, r)
		return
	}
	out := []ApprovalInfo{}
	if s.approvals != nil {
		for _, a := range s.approvals.Pending(journal.RunID{}) {
			out = append(out, approvalInfo(a))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) approve(w http.ResponseWriter, r *http.Request) {
	run, ok := s.findRun(w, r)
	if !ok {
		return
	}
	var body struct {
		Answer
		// By was where a client named the approver; the name comes from
		// the request's credential now, so a body that still names one
		// is refused rather than silently ignored.
		By json.RawMessage `json:"by"`
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("answer: %w", err), `send {"approve": true|false, "step": N}`)
		return
	}
	if body.By != nil {
		writeError(w, http.StatusBadRequest, errors.New(`answer: "by" is not taken: the cell names the approver from the request's credential`),
			`leave "by" out; the journal records the socket peer's user or the API token`)
		return
	}
	ans := body.Answer
	who := identity(r.Context())
	if who == "" {
		// Only the guard's requests reach here; one without an identity
		// is a wiring fault, and nobody is named who did not answer.
		writeError(w, http.StatusInternalServerError, errors.New("answer: the request carries no credential identity"), "")
		return
	}
	if s.cell.Book != nil {
		writeError(w, http.StatusConflict, fmt.Errorf("%w: this cell has approvers (DATA/approvers), whose signed votes decide", ErrVoteRefused),
			"sign a vote: agentrt approve RUN STEP --key ~/.ssh/id_ed25519 (or POST /v1/runs/{run}/votes)")
		return
	}
	if s.approvals == nil {
		writeError(w, http.StatusNotFound, ErrNotPending, "this cell asks no one: it runs no permission modes that ask")
		return
	}
	a, err := s.approvals.Answer(run, ans.Step, ans.Approve, who)
	if err != nil {
		writeError(w, http.StatusNotFound, err, "GET /v1/approvals lists the calls waiting")
		return
	}
	s.logf("run %s step %d %s by %s", run, a.Step, map[bool]string{true: "approved", false: "denied"}[ans.Approve], who)
	ai := approvalInfo(a)
	ai.Approver = who
	writeJSON(w, http.StatusOK, ai)
}

// APIError is the body of every error answer.
type APIError struct {
	Error string `json:"error"`
	Hint  string `json:"hint,omitempty"`
	// Kinds names the classes of the error (errors.go, API.md), for
	// clients to tell errors apart by.
	Kinds []string `json:"kinds,omitempty"`
	// Gap names the entries missing from a journal the store cannot give
	// back whole (kind "incomplete").
	Gap *Gap `json:"gap,omitempty"`
}

func writeError(w http.ResponseWriter, code int, err error, hint string) {
	writeJSON(w, code, apiError(err, hint))
}

// Hint returns the fix for errors of the run lifecycle that have a known
// one, as the API and the CLI give it.
func Hint(err error) string {
	var le *host.LinkError
	var held *journal.HeldError
	var ae *AdmissionError
	switch {
	case errors.As(err, &ae):
		switch ae.Reason {
		case RefusedPolicy:
			return "the cell's policy forbids starting this agent (action " + host.AdmitAction + "); ask the cell's operator, or run another agent"
		case RefusedBudget:
			return "grant the run a budget within the cell's run budget (agentrt cell serve --run-budget), naming every dimension it bounds"
		case RefusedFull:
			return "the cell is saturated: retry later, or raise its queue bound (agentrt cell serve --queue-max)"
		case RefusedPriority:
			return "give a priority from 1 (lowest) to 9 (highest)"
		case RefusedCellBudget:
			return "the runs in flight hold the cell's budget (agentrt cell serve --cell-budget): retry when some end, or grant the run less"
		}
	case errors.Is(err, host.ErrFinished):
		return "a finished run is neither cancelled nor resumed; replay it with: agentrt replay RUN"
	case errors.Is(err, host.ErrActive):
		return "the run is executing in this cell now; cancel it first (POST /v1/runs/RUN/cancel)"
	case errors.As(err, &held):
		return "another cell holds the run; wait for its lease to lapse"
	case errors.As(err, &le):
		return "add the missing capabilities to the grant"
	case errors.Is(err, host.ErrNotWasm):
		return "submit a wasm module (agentrt build DIR -o agent.wasm)"
	case errors.Is(err, journal.ErrConflict):
		return "another request changed the run at the same moment; see how it stands (GET /v1/runs/RUN) and ask again"
	case errors.Is(err, ErrModuleTooLarge):
		return fmt.Sprintf("a cell takes modules of up to %d MiB; strip its debug sections (Go: -ldflags='-s -w'), or split the agent", MaxModule>>20)
	case errors.Is(err, host.ErrUnknownModule):
		return "push the module first (agentrt module push FILE, or POST /v1/modules), or submit its bytes"
	case errors.Is(err, host.ErrModuleLimit):
		return "the named limit bounds what a module may cost this cell (README, Limits): build the module within it"
	case errors.Is(err, host.ErrLimitRaised):
		return "leave the limit out of the grant's limits section, or lower it"
	case errors.Is(err, ErrNoCluster):
		return "a handoff moves a run between the cells of a cluster: start the cells with --nats URL (or --nats-embedded for one box)"
	case errors.Is(err, ErrNoCell):
		return "name the destination by its id (GET /v1/cell on it shows it) or by the name in its --describe file; it must be live in the cluster's registry"
	case errors.Is(err, host.ErrNotLive):
		return "a handoff moves a run executing on this cell; a stopped run is resumed where you want it (agentrt resume RUN on that cell)"
	case errors.Is(err, ErrHandoffRefused):
		return "the run goes on where it was; the destination's log says why it refused, and its trusted_cells must list this cell"
	}
	return ""
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// SchedulerStats returns the state of the server's worker pool and run
// queue (sched.go).
func (s *Server) SchedulerStats() SchedulerStats { return s.sched.stats() }

// QueueDepths returns the depth of the daemon's queues, for metrics
// (Metrics.Queues): trigger_firings, the firings queued behind a
// trigger's runs (overlap queue), and task_retries, the tasks waiting for
// their next attempt. A queue the server does not keep is not named.
func (s *Server) QueueDepths() map[string]int {
	out := map[string]int{"runs": s.sched.stats().Queued}
	if s.triggers != nil {
		out["trigger_firings"] = s.triggers.queued()
	}
	if s.tasks != nil {
		if n, err := s.tasks.waiting(); err == nil {
			out["task_retries"] = n
		}
	}
	return out
}
