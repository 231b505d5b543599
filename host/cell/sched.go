package cell

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/budget"
	"github.com/agentrt/agentrt/journal"
	"github.com/prometheus/client_golang/prometheus"
)

// The scheduler. A daemon executes its runs on a bounded pool of workers:
//
//  1. Admission. A new run (an API submission, a task's attempt, a
//     trigger's firing, a spawn) is started (its token verified, its
//     module linked against its grant), then admitted: the cell's policy
//     must permit host.AdmitAction for it, its budget must fit within the
//     cell's per-run allocation (SchedulerOptions.RunBudget; a spawn's was
//     carved from its parent's instead), and, but for a spawn, the queue
//     must have room. With a cell budget (SchedulerOptions.CellBudget),
//     the ceilings of the admitted runs that have not ended, summed, must
//     stay within it (cellbudget.go). A refused run is journaled as failed
//     with the reason, and the submitter is told why (*AdmissionError).
//  2. Queue. An admitted run executes at once when a worker is free and
//     none is waiting; otherwise its start is made durable and it waits in
//     the queue (queue.go: priorities, aging, round-robin between tasks,
//     triggers and parents), holding its lease but no instance.
//  3. Workers. A run executes only while it holds one of Workers workers.
//     A run that parks (a timer, an approval, awaiting a child) ends its
//     execution and gives its worker back; woken, it queues again for one.
//     A run inside a long effect (an HTTP request, a model call, a native
//     tool) keeps its worker: the effect is bounded by the run's limits
//     and the call is journaled as under way, and giving the worker away
//     mid-call would let more runs execute at once than the pool allows.
//  4. Restart. A queued run is journaled as running with its start
//     durable, so Recover finds it and queues it again with its priority
//     (RunMeta.Priority); it was never executed, so none runs twice.
//  5. Stop. A queued run that is cancelled or drained leaves the queue at
//     once: a cancelled one is marked cancelled, a drained one stays
//     running, to be recovered.

// SchedulerOptions tune a daemon's scheduler.
type SchedulerOptions struct {
	// Workers is the number of runs that execute at once; 0:
	// DefaultWorkers.
	Workers int
	// MaxQueued bounds the runs waiting for a worker: past it, a
	// submission, task attempt or trigger firing is refused (spawns are
	// bounded by their parents' grants instead); 0: DefaultMaxQueued.
	MaxQueued int
	// Aging raises a queued run's priority by one for each Aging it
	// waits, so that no run starves; 0: DefaultAging.
	Aging time.Duration
	// RunBudget, in the budget flag syntax ("model_calls=100,usd=5"), is
	// the most a run admitted from outside may be granted on each
	// dimension it names: a run whose token leaves one of them unlimited,
	// or sets it higher, is refused. "": no bound.
	RunBudget string
	// CellBudget, in the budget flag syntax ("usd=50,model_calls=1000"),
	// is the most the runs admitted from outside that have not ended may
	// be granted together, on each dimension it names: the sum of their
	// ceilings, what they may spend at most. A run that would take the sum
	// past it, or leaves a named dimension unlimited, is refused
	// (RefusedCellBudget) until runs end. "": no bound.
	CellBudget string
}

// Defaults and bounds of SchedulerOptions.
const (
	DefaultMaxQueued = 10000
	DefaultAging     = 10 * time.Second
	MaxWorkers       = 4096
)

// DefaultWorkers is GOMAXPROCS×32. A worker is a slot, not a thread: a run
// holds it while it waits on its effects (a durable commit's fsync, an
// HTTP request, a model call) as much as while it computes, and the
// journal groups the commits of runs that wait at once. Measured on 2 CPUs
// (bench figure 21c, 64 children of 250 durable calls each): 16 workers
// (×8) gave 5 700 calls/s, 64 workers (×32) 12 100 (on a shared machine,
// other work using 1.3 and 0.5 CPUs: an indication, not an A/B).
func DefaultWorkers() int { return runtime.GOMAXPROCS(0) * 32 }

// Check returns the options with their defaults in place, or an error that
// says which is out of range.
func (o SchedulerOptions) Check() (SchedulerOptions, error) {
	switch {
	case o.Workers < 0 || o.Workers > MaxWorkers:
		return o, fmt.Errorf("scheduler: %d workers: between 1 and %d (0 for the default, GOMAXPROCS×32 = %d)", o.Workers, MaxWorkers, DefaultWorkers())
	case o.MaxQueued < 0:
		return o, fmt.Errorf("scheduler: a queue bound of %d: at least 1 (0 for the default, %d)", o.MaxQueued, DefaultMaxQueued)
	case o.Aging < 0:
		return o, fmt.Errorf("scheduler: aging %v: positive (0 for the default, %v)", o.Aging, DefaultAging)
	}
	if o.Workers == 0 {
		o.Workers = min(DefaultWorkers(), MaxWorkers)
	}
	if o.MaxQueued == 0 {
		o.MaxQueued = DefaultMaxQueued
	}
	if o.Aging == 0 {
		o.Aging = DefaultAging
	}
	if o.RunBudget != "" {
		if _, err := capability.ParseBudget(o.RunBudget); err != nil {
			return o, fmt.Errorf("scheduler: run budget %q: %w", o.RunBudget, err)
		}
	}
	if o.CellBudget != "" {
		if _, err := capability.ParseBudget(o.CellBudget); err != nil {
			return o, fmt.Errorf("scheduler: cell budget %q: %w", o.CellBudget, err)
		}
	}
	return o, nil
}

// Admission refusal reasons (AdmissionError.Reason), also the values of
// the outcome label of agentrt_sched_admissions_total.
const (
	RefusedPolicy   = "policy"
	RefusedBudget   = "budget"
	RefusedFull     = "queue_full"
	RefusedPriority = "priority"
	// RefusedCellBudget: the run does not fit in what the cell budget
	// has left (SchedulerOptions.CellBudget).
	RefusedCellBudget = "cell_budget"
)

// AdmissionError is returned for a run the scheduler did not admit.
type AdmissionError struct {
	// Reason is RefusedPolicy, RefusedBudget, RefusedFull or
	// RefusedPriority.
	Reason string
	// Run is the refused run, journaled as failed with Err's text; zero
	// for a refusal before the run was started (a priority out of range).
	Run journal.RunID
	Err error
}

func (e *AdmissionError) Error() string {
	if e.Run.IsZero() {
		return fmt.Sprintf("admission refused (%s): %v", e.Reason, e.Err)
	}
	return fmt.Sprintf("admission refused (%s): run %s: %v", e.Reason, e.Run, e.Err)
}

func (e *AdmissionError) Unwrap() error { return e.Err }

// Is makes every *AdmissionError match ErrAdmissionRefused.
func (e *AdmissionError) Is(target error) bool { return target == ErrAdmissionRefused }

// ErrAdmissionRefused matches (errors.Is) every *AdmissionError: the API's
// error kind "admission_refused".
var ErrAdmissionRefused = errors.New("cell: admission refused")

// ErrQueueFull is the cause of a RefusedFull refusal.
var ErrQueueFull = errors.New("the cell's run queue is full")

// SchedulerStats are the scheduler's state, for GET /v1/cell and metrics.
type SchedulerStats struct {
	Workers int `json:"workers"`
	Busy    int `json:"busy"`
	// MaxBusy is the most workers ever busy at once since the server
	// started: never above Workers.
	MaxBusy   int `json:"max_busy"`
	Queued    int `json:"queued"`
	MaxQueued int `json:"max_queued"`
	// QueuedByPriority counts the queued runs by priority (index 0 is
	// unused: priorities are 1..9).
	QueuedByPriority [MaxPriority + 1]int `json:"queued_by_priority"`
	// OldestWait is how long the longest-queued run has waited.
	OldestWait time.Duration `json:"oldest_wait_ns"`
	// Dispatched counts the executions started; WaitTotal is their summed
	// queue wait (zero for one that found a worker free).
	Dispatched uint64        `json:"dispatched"`
	WaitTotal  time.Duration `json:"wait_total_ns"`
	Admitted   uint64        `json:"admitted"`
	// AdmitTime is the time spent deciding admissions (policy, budget,
	// queue; not the journaling of a refusal), summed over Admitted and
	// the refused.
	AdmitTime time.Duration `json:"admit_ns_total"`
	// Refused counts the refused admissions by reason.
	Refused map[string]uint64 `json:"refused"`
	// CellBudget is what the runs in flight hold of the cell budget;
	// nil without one.
	CellBudget *CellBudgetStats `json:"cell_budget,omitempty"`
}

// job is one execution of a run the scheduler holds.
type job struct {
	st   *host.Started
	what string
	// dispatched is closed when the job gets a worker.
	dispatched chan struct{}
}

type scheduler struct {
	s         *Server
	opts      SchedulerOptions
	runBudget budget.Ceilings
	limited   bool
	// cell is the cell budget's accounting; nil without one.
	cell *cellBudget

	mu         sync.Mutex
	q          *runQueue
	index      map[journal.RunID]*queued
	busy       int
	maxBusy    int
	dispatched uint64
	waitTotal  time.Duration
	admitted   uint64
	admitTime  time.Duration
	refused    map[string]uint64
	wait       prometheus.Histogram
	// paused holds every run in the queue (Server.Recover queues all
	// the runs it recovers before any executes, so that they go by
	// priority, not by the order the index lists them in).
	paused int
	// roomMade, when set, is told each time runs leave the queue: a start
	// refused for a full queue may succeed now. It must not block.
	roomMade func()
}

func newScheduler(s *Server, opts SchedulerOptions) *scheduler {
	o, err := opts.Check()
	if err != nil {
		// NewServer's callers check their options (SchedulerOptions.Check)
		// first: an unchecked bad value is a caller's bug.
		panic(err)
	}
	sc := &scheduler{s: s, opts: o, q: newRunQueue(o.Aging), index: map[journal.RunID]*queued{}, refused: map[string]uint64{},
		wait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "agentrt_sched_wait_seconds",
			Help:    "How long runs waited in the scheduler's queue for a worker (0 for a run that found one free), per execution.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 12),
		})}
	if o.RunBudget != "" {
		b, _ := capability.ParseBudget(o.RunBudget)
		sc.runBudget, sc.limited = budget.FromBudget(b), true
	}
	if o.CellBudget != "" {
		b, _ := capability.ParseBudget(o.CellBudget)
		sc.cell = newCellBudget(budget.FromBudget(b))
	}
	return sc
}

// fairKey is the lane of a run: its task, its trigger, its parent, or the
// API's.
func fairKey(o *journal.Origin) string {
	if o == nil {
		return "submit"
	}
	return o.Kind + ":" + o.ID
}

// effectivePriority maps a recorded priority (0: not given) to 1..9.
func effectivePriority(p uint8) uint8 {
	switch {
	case p == 0:
		return DefaultPriority
	case p > MaxPriority:
		return MaxPriority
	}
	return p
}

// checkPriority refuses a priority out of 0..9 (0: not given).
func checkPriority(p int) error {
	if p < 0 || p > MaxPriority {
		return &AdmissionError{Reason: RefusedPriority, Err: fmt.Errorf("priority %d is out of range %d..%d (0 or absent: %d)", p, MinPriority, MaxPriority, DefaultPriority)}
	}
	return nil
}

// admit decides whether st, just started, is admitted; a refused run is
// journaled as failed and released. spawn says st is a child, whose budget
// its parent's carve bounds and which the queue bound does not refuse.
func (sc *scheduler) admit(ctx context.Context, st *host.Started, spawn bool) error {
	reason, err := sc.decide(ctx, st.Run, st.Admit, st.Ceilings, spawn)
	if err == nil {
		return nil
	}
	aerr := &AdmissionError{Reason: reason, Run: st.Run, Err: err}
	if jerr := st.Refuse(ctx, "admission refused ("+reason+"): "+err.Error()); jerr != nil {
		return errors.Join(aerr, jerr)
	}
	return aerr
}

// admitTail decides whether run, which this cell is about to take (handed
// to it by another cell, taken over after its holder's lease expired,
// resumed by hand), is admitted as a submission would be (policy, budget,
// queue bound, cell budget), from its verified tail, before the run's
// lease is taken: a refused run is not journaled here. spawn says run is
// a child, whose budget its parent's carve bounds.
func (sc *scheduler) admitTail(ctx context.Context, run journal.RunID, t host.Tail, spawn bool) error {
	reason, err := sc.decide(ctx, run, t.Admit, t.Ceilings, spawn)
	if err != nil {
		return &AdmissionError{Reason: reason, Run: run, Err: err}
	}
	return nil
}

// decide is the admission decision of run, counted: the policy's
// (policy), the run budget against the run's ceilings, the queue bound,
// then the cell budget, of which an admitted run holds its share; spawn
// skips the last three.
func (sc *scheduler) decide(ctx context.Context, run journal.RunID, policy func() error, ceilings func() budget.Ceilings, spawn bool) (string, error) {
	t0 := time.Now()
	reason, err := "", policy()
	if err != nil {
		reason = RefusedPolicy
	}
	if err == nil && sc.limited && !spawn {
		if err = withinBudget(ceilings(), sc.runBudget); err != nil {
			reason = RefusedBudget
		}
	}
	if err == nil && !spawn {
		sc.mu.Lock()
		if sc.q.Len() >= sc.opts.MaxQueued {
			err, reason = fmt.Errorf("%w: %d runs wait for %d workers", ErrQueueFull, sc.q.Len(), sc.opts.Workers), RefusedFull
		}
		sc.mu.Unlock()
	}
	if err == nil && !spawn && sc.cell.on() {
		// Last, so that a run refused for another reason holds nothing.
		if err = sc.cell.hold(ctx, sc.s, run, ceilings()); err != nil {
			reason = RefusedCellBudget
		}
	}
	sc.mu.Lock()
	if err != nil {
		sc.refused[reason]++
	} else {
		sc.admitted++
	}
	sc.admitTime += time.Since(t0)
	sc.mu.Unlock()
	return reason, err
}

// withinBudget returns why ceilings c exceed the allocation max.
func withinBudget(c, max budget.Ceilings) error {
	for _, name := range budget.DimNames() {
		d, _ := budget.ParseDim(name)
		m, ok := max.Get(d)
		if !ok {
			continue
		}
		n, set := c.Get(d)
		switch {
		case !set:
			return fmt.Errorf("the run's budget leaves %s unlimited; this cell admits runs of at most %s=%d", name, name, m)
		case n > m:
			return fmt.Errorf("the run's budget asks %s=%d; this cell admits runs of at most %s=%d", name, n, name, m)
		}
	}
	return nil
}

// full says the queue holds MaxQueued runs: a run that must wait for a
// worker is refused (RefusedFull).
func (sc *scheduler) full() bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.q.Len() >= sc.opts.MaxQueued
}

// enqueue executes st on a worker, now or when one is free. It returns an
// error only when a run that must wait could not be made durable (it is
// then given up, as journaled).
func (sc *scheduler) enqueue(st *host.Started, what string) error {
	j := &job{st: st, what: what, dispatched: make(chan struct{})}
	if sc.tryDispatch(j) {
		return nil
	}
	// It waits: its start must survive a crash meanwhile.
	if err := st.Persist(context.Background()); err != nil {
		st.Abandon()
		return err
	}
	it := &queued{key: fairKey(st.Origin()), prio: effectivePriority(st.Priority()), since: time.Now(), payload: j}
	sc.mu.Lock()
	if sc.busy < sc.opts.Workers && sc.q.Len() == 0 && sc.paused == 0 {
		sc.take()
		sc.mu.Unlock()
		go sc.work(j, 0)
		return nil
	}
	sc.q.push(it)
	sc.index[st.Run] = it
	sc.mu.Unlock()
	go sc.watch(it, j)
	return nil
}

// tryDispatch gives j a worker if one is free and no run waits.
func (sc *scheduler) tryDispatch(j *job) bool {
	sc.mu.Lock()
	if sc.busy >= sc.opts.Workers || sc.q.Len() > 0 || sc.paused > 0 {
		sc.mu.Unlock()
		return false
	}
	sc.take()
	sc.mu.Unlock()
	go sc.work(j, 0)
	return true
}

// pause holds the runs queued from now on in the queue until the returned
// function is called, which gives them the free workers.
func (sc *scheduler) pause() func() {
	sc.mu.Lock()
	sc.paused++
	sc.mu.Unlock()
	return func() {
		sc.mu.Lock()
		sc.paused--
		var start []*job
		var waits []time.Duration
		for sc.paused == 0 && sc.busy < sc.opts.Workers {
			now := time.Now()
			it := sc.q.pop(now)
			if it == nil {
				break
			}
			j := it.payload.(*job)
			delete(sc.index, j.st.Run)
			sc.take()
			sc.waitTotal += now.Sub(it.since)
			start, waits = append(start, j), append(waits, now.Sub(it.since))
		}
		sc.mu.Unlock()
		if len(start) > 0 {
			sc.left()
		}
		for i, j := range start {
			go sc.work(j, waits[i])
		}
	}
}

// left tells roomMade that runs left the queue.
func (sc *scheduler) left() {
	if sc.roomMade != nil {
		sc.roomMade()
	}
}

// take counts a worker taken; sc.mu is held.
func (sc *scheduler) take() {
	sc.dispatched++
	sc.busy++
	sc.maxBusy = max(sc.maxBusy, sc.busy)
}

// watch takes a queued run out of the queue when it is cancelled or
// drained before it gets a worker.
func (sc *scheduler) watch(it *queued, j *job) {
	select {
	case <-j.dispatched:
		return
	case <-j.st.Halted():
	}
	sc.mu.Lock()
	removed := sc.q.remove(it)
	delete(sc.index, j.st.Run)
	sc.mu.Unlock()
	if !removed {
		return // dispatched meanwhile: its execution stops it
	}
	sc.left()
	err := j.st.Unexecuted(context.Background())
	sc.s.finish(j.st.Run, nil, err)
}

// work executes j, then the queued runs while there are any, on one
// worker.
func (sc *scheduler) work(j *job, waited time.Duration) {
	for j != nil {
		close(j.dispatched)
		select {
		case <-j.st.Halted():
			// Cancelled or drained while it waited, and popped before
			// its watcher took it out: it is not executed either.
			err := j.st.Unexecuted(context.Background())
			sc.s.finish(j.st.Run, nil, err)
		default:
			sc.wait.Observe(waited.Seconds())
			sc.s.logf("%s run %s", j.what, j.st.Run)
			res, err := j.st.Execute(context.Background())
			sc.s.finish(j.st.Run, res, err)
		}
		j, waited = sc.next()
		if j != nil {
			sc.left()
		}
	}
}

// next pops the next run for a worker that finished one, or gives the
// worker back.
func (sc *scheduler) next() (*job, time.Duration) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	now := time.Now()
	it := sc.q.pop(now)
	if it == nil {
		sc.busy--
		return nil, 0
	}
	w := now.Sub(it.since)
	j := it.payload.(*job)
	delete(sc.index, j.st.Run)
	sc.dispatched++
	sc.waitTotal += w
	return j, w
}

// stats returns the scheduler's state.
func (sc *scheduler) stats() SchedulerStats {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	st := SchedulerStats{Workers: sc.opts.Workers, Busy: sc.busy, MaxBusy: sc.maxBusy, Queued: sc.q.Len(), MaxQueued: sc.opts.MaxQueued,
		QueuedByPriority: sc.q.byPriority(), Dispatched: sc.dispatched, WaitTotal: sc.waitTotal, Admitted: sc.admitted, AdmitTime: sc.admitTime,
		Refused: map[string]uint64{}}
	if t := sc.q.oldest(); !t.IsZero() {
		st.OldestWait = time.Since(t)
	}
	st.CellBudget = sc.cell.stats()
	for k, v := range sc.refused {
		st.Refused[k] = v
	}
	return st
}

// queuedInfo returns the priority and queue time of run if it is queued.
func (sc *scheduler) queuedInfo(run journal.RunID) (uint8, time.Time, bool) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	it := sc.index[run]
	if it == nil {
		return 0, time.Time{}, false
	}
	return it.prio, it.since, true
}
