package cell

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/budget"
	"github.com/agentrt/agentrt/internal/clock"
	"github.com/agentrt/agentrt/journal"
)

// A task is a durable objective that the cell pursues through runs, its
// attempts: a failed attempt is retried by the task's policy, after a
// backoff, as a new run whose header names the task and the attempt
// (journal.Origin{Kind: "task"}). The task's caps hold across attempts:
// each attempt is started with ceilings of the caps less what the earlier
// attempts spent (read from their journals' budget records), under a
// capability token made for it alone, and no attempt starts once a cap is
// spent.
//
// The task record (table TasksTable of the cell's records) is the truth:
// it is written before each attempt starts (the attempt claimed, its run
// id not known yet) and when each attempt stops, and holds the next
// attempt's time while a backoff runs. A daemon that starts again finds
// every task there (Server.Recover): a claimed attempt whose run id was not
// recorded is found by its run's origin, or started again; a backoff is
// armed again on the cell's clock (one whose time has passed fires at
// once); a run that was running is resumed by Recover, and its end reaches
// the task as any run's end does (Server.OnEnd).

// TasksTable is the table of the cell's records (journal.CellRecords) that
// holds the tasks, one JSON record per task id.
const TasksTable = "tasks"

// OriginTask is the Origin.Kind of a task's attempts.
const OriginTask = "task"

// TaskState is where a task stands.
type TaskState string

// The states of a task. Completed and failed are final.
const (
	// TaskRunning: an attempt is starting, running or parked.
	TaskRunning TaskState = "running"
	// TaskWaiting: the last attempt failed and the next waits for its
	// time (Task.NextAt).
	TaskWaiting TaskState = "waiting"
	// TaskCompleted: an attempt completed.
	TaskCompleted TaskState = "completed"
	// TaskFailed: the last attempt failed with no retry left, a cap is
	// spent, or an attempt could not start (Task.Reason says which).
	TaskFailed TaskState = "failed"
	// TaskCancelled: cancelled (TaskCancel) with its state kept; resume
	// continues it.
	TaskCancelled TaskState = "cancelled"
)

// Final reports whether s is a state a task never leaves.
func (s TaskState) Final() bool { return s == TaskCompleted || s == TaskFailed }

// Limits of a task submission.
const (
	// MaxTaskRetries is the most retries a task may ask for.
	MaxTaskRetries = 100
	// MaxObjective is the longest objective, in bytes.
	MaxObjective = 64 << 10
	// DefaultTaskBackoff is the first backoff of a task that sets none.
	DefaultTaskBackoff = time.Second
	// DefaultTaskMaxBackoff caps the backoffs of a task that sets no cap.
	DefaultTaskMaxBackoff = time.Hour
	// attemptTokenLife is how long an attempt's token is valid: it is
	// verified when the attempt starts, and used for nothing else.
	attemptTokenLife = time.Hour
)

// Backoff returns the wait before the attempt after attempt n (from 1)
// failed: base·2^(n−1), at most max. So with base 10s and max 1m, the waits
// after attempts 1, 2, 3, 4 are 10s, 20s, 40s, 1m.
func Backoff(base, max time.Duration, n int) time.Duration {
	d := base
	for i := 1; i < n; i++ {
		if d >= max/2 {
			return max
		}
		d *= 2
	}
	return min(d, max)
}

// Task is a task as the API and `agentrt task show --json` show it.
type Task struct {
	ID        string    `json:"id"`
	State     TaskState `json:"state"`
	Objective string    `json:"objective"`
	// InputGiven says the attempts get the submission's input; without
	// it, their input is the objective's text.
	InputGiven   bool   `json:"input_given,omitempty"`
	Module       string `json:"module,omitempty"`
	ModuleSHA256 string `json:"module_sha256"`
	// Token says the attempts are granted by attenuations of the
	// submitted token (never shown); otherwise by tokens the cell issues
	// for the grant.
	Token   bool `json:"token,omitempty"`
	Retries int  `json:"retries"`
	// Priority is the attempts' priority in the cell's queue (1..9).
	Priority   int    `json:"priority,omitempty"`
	Backoff    string `json:"backoff"`
	MaxBackoff string `json:"max_backoff"`
	// Caps are the task's ceilings across its attempts (capability
	// budget names: steps, wall_seconds, tool_calls, micro_usd, ...).
	Caps capability.Budget `json:"caps"`
	// Spent is what the attempts spent, summed, per dimension.
	Spent   map[string]uint64 `json:"spent,omitempty"`
	Created time.Time         `json:"created"`
	// NextAt is when the next attempt starts (waiting), or would have
	// (a task cancelled in its backoff).
	NextAt *time.Time `json:"next_at,omitempty"`
	// Reason says why the task completed or failed.
	Reason   string    `json:"reason,omitempty"`
	Attempts []Attempt `json:"attempts"`
}

// Attempt is one run of a task.
type Attempt struct {
	Seq int `json:"attempt"`
	// Run is empty while the attempt is starting.
	Run string `json:"run_id,omitempty"`
	// Status is the run's ("starting" before its start is journaled,
	// "refused" when the cell refused to start it).
	Status  string            `json:"status"`
	Started time.Time         `json:"started"`
	Ended   *time.Time        `json:"ended,omitempty"`
	Steps   uint64            `json:"steps"`
	Spent   map[string]uint64 `json:"spent,omitempty"`
	Error   string            `json:"error,omitempty"`
	// Live, Wait, Approval and Waiting describe the task's current run,
	// as it is now (they are not stored): executing here; what it is
	// parked for (its index record's wait); the signed approval it waits
	// for, with its votes and expiry; its calls that wait for an answer
	// (permission modes without approvers).
	Live     bool            `json:"live,omitempty"`
	Wait     *WaitInfo       `json:"wait,omitempty"`
	Approval *SignedApproval `json:"approval,omitempty"`
	Waiting  []ApprovalInfo  `json:"waiting,omitempty"`
}

// Attempt statuses besides the run statuses.
const (
	AttemptStarting = "starting"
	AttemptRefused  = "refused"
)

// TaskSubmission is the body of POST /v1/tasks.
type TaskSubmission struct {
	// Module is the wasm module (base64 in JSON); Name its human name.
	Module []byte `json:"module"`
	Name   string `json:"name,omitempty"`
	// Objective is what the task is for, recorded in the task; it is the
	// attempts' input unless Input is given.
	Objective string `json:"objective"`
	Input     []byte `json:"input,omitempty"`
	// Grant is a grant file's text; Token a capability token with its
	// key (not sealed: the cell attenuates it for each attempt).
	Grant string `json:"grant,omitempty"`
	Token []byte `json:"token,omitempty"`
	// Retries is how many times a failed attempt is retried.
	Retries int `json:"retries,omitempty"`
	// Backoff and MaxBackoff are Go durations ("10s"); see Backoff.
	Backoff    string `json:"backoff,omitempty"`
	MaxBackoff string `json:"max_backoff,omitempty"`
	// Caps hold across the attempts.
	Caps capability.Budget `json:"caps,omitzero"`
	// Priority is the attempts' priority in the cell's queue, 1 (lowest)
	// to 9 (highest); 0: 5.
	Priority int `json:"priority,omitempty"`
}

// taskRecord is what the cell keeps of a task (TasksTable's value).
type taskRecord struct {
	Task
	Input      []byte        `json:"input_bytes,omitempty"`
	Grant      string        `json:"grant_text,omitempty"`
	TokenBytes []byte        `json:"token_bytes,omitempty"`
	BackoffD   time.Duration `json:"backoff_ns"`
	MaxD       time.Duration `json:"max_backoff_ns"`
}

// Errors of the task endpoints.
var (
	// ErrNoTask is returned for a task id (or prefix) that names none.
	ErrNoTask = fmt.Errorf("no such task: %w", journal.ErrNotFound)
	// ErrTaskState is returned for a cancel or resume the task's state
	// does not allow (a finished task, a resume of one not cancelled).
	ErrTaskState = errors.New("task")
	// ErrBadTask is returned for a submission that is not a task.
	ErrBadTask = errors.New("task submission")
)

// LastTask is the name FindTask resolves to the newest task.
const LastTask = "last"

// tasks runs a server's tasks.
type tasks struct {
	s     *Server
	cells journal.CellRecords
	clk   clock.Clock

	mu     sync.Mutex
	locks  map[string]*sync.Mutex
	timers map[string]clock.Timer
	closed bool
}

func newTasks(s *Server) *tasks {
	t := &tasks{s: s, cells: s.cell.Store, clk: s.cell.Clock, locks: map[string]*sync.Mutex{}, timers: map[string]clock.Timer{}}
	s.OnEnd(t.onEnd)
	return t
}

// lock takes the task's own lock: every change of a task record is made
// under it, read, changed, written.
func (t *tasks) lock(id string) func() {
	t.mu.Lock()
	l := t.locks[id]
	if l == nil {
		l = &sync.Mutex{}
		t.locks[id] = l
	}
	t.mu.Unlock()
	l.Lock()
	return l.Unlock
}

func (t *tasks) load(id string) (*taskRecord, error) {
	raw, ok, err := t.cells.CellGet(TasksTable, id)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", id, err)
	}
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNoTask, id)
	}
	var r taskRecord
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("task %s: a damaged record: %w", id, err)
	}
	return &r, nil
}

func (t *tasks) save(r *taskRecord) error {
	raw, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := t.cells.CellPut(TasksTable, r.ID, raw); err != nil {
		return fmt.Errorf("task %s: %w", r.ID, err)
	}
	return nil
}

// find resolves a task id, a unique prefix of one, or LastTask.
func (t *tasks) find(ref string) (string, error) {
	if ref == "" || (ref != LastTask && strings.Trim(ref, "0123456789abcdef") != "") {
		return "", fmt.Errorf("%w: %q is not a task id (32 hex digits, a unique prefix, or %q)", ErrBadTask, ref, LastTask)
	}
	var found []string
	prefix := ref
	if ref == LastTask {
		prefix = ""
	}
	err := t.cells.CellList(TasksTable, prefix, func(key string, _ []byte) error {
		found = append(found, key)
		return nil
	})
	if err != nil {
		return "", err
	}
	switch {
	case len(found) == 0:
		return "", fmt.Errorf("%w: %q", ErrNoTask, ref)
	case ref == LastTask:
		return found[len(found)-1], nil
	case len(found) > 1:
		return "", fmt.Errorf("%w: task id prefix %q matches %d tasks", ErrBadTask, ref, len(found))
	}
	return found[0], nil
}

// submit creates a task and starts its first attempt. A submission the
// cell refuses, or whose first attempt cannot start, leaves no task.
func (t *tasks) submit(ctx context.Context, sub TaskSubmission) (*Task, error) {
	r, code, err := t.check(sub)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(code)
	if err := t.s.cell.Journal.PutModule(ctx, sum[:], code); err != nil {
		return nil, err
	}
	now := t.clk.Now()
	r.ID = journal.NewRunID(now).String()
	r.ModuleSHA256 = hex.EncodeToString(sum[:])
	r.Created = now.UTC()
	r.State = TaskRunning
	unlock := t.lock(r.ID)
	defer unlock()
	raw, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	if ok, err := t.cells.CellCreate(TasksTable, r.ID, raw); err != nil || !ok {
		return nil, errors.Join(err, fmt.Errorf("task %s exists already", r.ID))
	}
	if err := t.attempt(ctx, r, 1); err != nil {
		if r.State == TaskFailed && len(r.Attempts) == 1 && r.Attempts[0].Status == AttemptRefused {
			// Refused at once (a bad token, a missing capability): the
			// submitter's to fix, and nothing ran.
			_ = t.cells.CellDelete(TasksTable, r.ID)
		}
		if errors.Is(err, ErrShuttingDown) {
			return nil, fmt.Errorf("%w: task %s is kept, its attempt 1 starts when the daemon starts again", err, r.ID)
		}
		return nil, err
	}
	out := r.Task
	return &out, nil
}

// check validates a submission and returns the task it makes (without id)
// and its module.
func (t *tasks) check(sub TaskSubmission) (*taskRecord, []byte, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadTask, fmt.Sprintf(format, args...))
	}
	switch {
	case len(sub.Module) == 0:
		return nil, nil, bad("no module")
	case len(sub.Module) > MaxModule:
		return nil, nil, fmt.Errorf("%w: %w (this one is %d bytes)", ErrBadTask, ErrModuleTooLarge, len(sub.Module))
	case strings.TrimSpace(sub.Objective) == "":
		return nil, nil, bad("no objective: say what the task is for")
	case len(sub.Objective) > MaxObjective:
		return nil, nil, bad("objective of %d bytes, over the limit of %d", len(sub.Objective), MaxObjective)
	case sub.Retries < 0 || sub.Retries > MaxTaskRetries:
		return nil, nil, bad("retries %d: between 0 and %d", sub.Retries, MaxTaskRetries)
	case sub.Priority < 0 || sub.Priority > MaxPriority:
		return nil, nil, bad("priority %d: between %d and %d (0 for %d)", sub.Priority, MinPriority, MaxPriority, DefaultPriority)
	}
	r := &taskRecord{Task: Task{Objective: sub.Objective, InputGiven: sub.Input != nil, Module: strings.ToValidUTF8(sub.Name, "\uFFFD"),
		Token: sub.Token != nil, Retries: sub.Retries, Caps: sub.Caps, Priority: sub.Priority},
		Input: sub.Input, Grant: sub.Grant, TokenBytes: sub.Token, BackoffD: DefaultTaskBackoff, MaxD: DefaultTaskMaxBackoff}
	for _, d := range []struct {
		name string
		s    string
		to   *time.Duration
	}{{"backoff", sub.Backoff, &r.BackoffD}, {"max_backoff", sub.MaxBackoff, &r.MaxD}} {
		if d.s == "" {
			continue
		}
		v, err := time.ParseDuration(d.s)
		if err != nil || v <= 0 {
			return nil, nil, bad("%s %q: a positive duration such as 10s or 1m30s", d.name, d.s)
		}
		*d.to = v
	}
	if sub.MaxBackoff == "" && r.BackoffD > r.MaxD {
		r.MaxD = r.BackoffD
	}
	if r.BackoffD > r.MaxD {
		return nil, nil, bad("backoff %v is over max_backoff %v", r.BackoffD, r.MaxD)
	}
	r.Backoff, r.MaxBackoff = r.BackoffD.String(), r.MaxD.String()
	if err := host.CheckEnforced(sub.Caps); err != nil {
		return nil, nil, fmt.Errorf("%w: caps: %w", ErrBadTask, err)
	}
	ceil := budget.FromBudget(sub.Caps)
	for d := range budget.NumDims {
		if n, ok := ceil.Get(d); ok && n == 0 {
			return nil, nil, bad("caps: %s is 0, which allows no attempt", d)
		}
	}
	if sub.Grant != "" {
		if _, err := host.ParseGrant([]byte(sub.Grant)); err != nil {
			return nil, nil, fmt.Errorf("%w: grant: %w", ErrBadTask, err)
		}
	}
	if sub.Token != nil {
		if _, err := capability.Parse(sub.Token); err != nil {
			return nil, nil, fmt.Errorf("task: token: %w", err)
		}
	}
	return r, sub.Module, nil
}

// spent sums what the attempts of r spent.
func spent(r *taskRecord) budget.Amounts {
	var a budget.Amounts
	for _, at := range r.Attempts {
		for name, n := range at.Spent {
			if d, ok := budget.ParseDim(name); ok {
				a[d] += n
			}
		}
	}
	return a
}

func amountsMap(a budget.Amounts) map[string]uint64 {
	m := map[string]uint64{}
	for d, n := range a {
		if n != 0 {
			m[budget.Dim(d).String()] = n
		}
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// remaining returns the ceilings of the next attempt of r: each cap less
// what the attempts spent; exhausted names the first cap spent, if any.
func remaining(r *taskRecord) (capability.Budget, string) {
	used := spent(r)
	caps := budget.FromBudget(r.Caps)
	var b capability.Budget
	for d := range budget.NumDims {
		n, ok := caps.Get(d)
		if !ok {
			continue
		}
		if used[d] >= n {
			return b, fmt.Sprintf("the task's %s cap of %d is spent (%d used by %d attempts)", d, n, used[d], len(r.Attempts))
		}
		*budgetField(&b, d) = capability.Limit(n - used[d])
	}
	return b, ""
}

// budgetField returns the field of b that holds the ceiling of d.
func budgetField(b *capability.Budget, d budget.Dim) **uint64 {
	switch d {
	case budget.Steps:
		return &b.Steps
	case budget.ModelCalls:
		return &b.ModelCalls
	case budget.InputTokens:
		return &b.InputTokens
	case budget.OutputTokens:
		return &b.OutputTokens
	case budget.MicroUSD:
		return &b.MicroUSD
	case budget.ToolCalls:
		return &b.ToolCalls
	case budget.HTTPRequests:
		return &b.HTTPRequests
	}
	return &b.WallSeconds
}

// token returns the capability token of an attempt of r, with ceilings
// b: an attenuation of the submitted token, whose ceilings it may only
// lower, or a token the cell issues for the grant. Each is new (its own
// nonce), so no token is presented to the cell twice.
func (t *tasks) token(r *taskRecord, b capability.Budget, now time.Time) ([]byte, error) {
	if r.TokenBytes != nil {
		tok, err := capability.Parse(r.TokenBytes)
		if err != nil {
			return nil, err
		}
		leaf := tok.Leaf().Claims
		lb := budget.FromBudget(leaf.Budget)
		for d := range budget.NumDims {
			if p := budgetField(&b, d); *p != nil {
				if n, ok := lb.Get(d); ok && n < **p {
					*p = capability.Limit(n)
				}
			}
		}
		out, err := capability.Attenuate(r.TokenBytes, nil, capability.Claims{Caps: leaf.Caps, Budget: b})
		if err != nil {
			return nil, fmt.Errorf("%w: its token cannot be attenuated for an attempt (give the token as issued or attenuated, carrying its key, not sealed): %w", ErrBadTask, err)
		}
		return out, nil
	}
	g, err := r.grant()
	if err != nil {
		return nil, err
	}
	caps, err := g.TokenCaps()
	if err != nil {
		return nil, fmt.Errorf("task: token for the grant: %w", err)
	}
	pub := t.s.cell.Public()
	out, err := capability.Issue(t.s.cell.Key, capability.Claims{Audience: pub, Caps: caps, Budget: b,
		NotBefore: now.Add(-time.Minute), Expires: now.Add(attemptTokenLife)})
	if err != nil {
		return nil, fmt.Errorf("task: token for the grant: %w", err)
	}
	return out, nil
}

func (r *taskRecord) grant() (*host.Grant, error) {
	if r.Grant == "" {
		return host.DefaultGrant(), nil
	}
	g, err := host.ParseGrant([]byte(r.Grant))
	if err != nil {
		return nil, fmt.Errorf("task %s: grant: %w", r.ID, err)
	}
	return g, nil
}

// attempt claims attempt seq of r, durably, and launches it; the caller
// holds r's lock. A cap already spent fails the task instead. When the
// cell refuses the start, the attempt is recorded refused and the task
// failed, and the refusal returned; when the cell is shutting down, the
// claim stays, for the next start of the daemon to launch.
func (t *tasks) attempt(ctx context.Context, r *taskRecord, seq int) error {
	now := t.clk.Now()
	r.NextAt = nil
	b, exhausted := remaining(r)
	if exhausted != "" {
		r.State, r.Reason = TaskFailed, exhausted
		t.s.logf("task %s failed: %s", r.ID, exhausted)
		return t.save(r)
	}
	if seq > len(r.Attempts) {
		r.Attempts = append(r.Attempts, Attempt{Seq: seq, Status: AttemptStarting, Started: now.UTC()})
	}
	r.State = TaskRunning
	if err := t.save(r); err != nil {
		return err
	}
	run, err := t.launch(ctx, r, seq, b, now)
	a := &r.Attempts[seq-1]
	if err != nil {
		if t.isClosed() {
			return err
		}
		ended := t.clk.Now().UTC()
		a.Status, a.Error, a.Ended = AttemptRefused, err.Error(), &ended
		r.State, r.Reason = TaskFailed, fmt.Sprintf("attempt %d could not start: %v", seq, err)
		t.s.logf("task %s failed: %s", r.ID, r.Reason)
		return errors.Join(err, t.save(r))
	}
	a.Run, a.Status = run.String(), string(journal.StatusRunning)
	return t.save(r)
}

// launch starts attempt seq of r with ceilings b.
func (t *tasks) launch(ctx context.Context, r *taskRecord, seq int, b capability.Budget, now time.Time) (journal.RunID, error) {
	sum, err := hex.DecodeString(r.ModuleSHA256)
	if err != nil || len(sum) != 32 {
		return journal.RunID{}, fmt.Errorf("task %s: module hash %q is not 64 hex digits", r.ID, r.ModuleSHA256)
	}
	// By hash: an attempt of a module the daemon keeps compiled reads
	// nothing back from the store.
	spec := host.RunSpec{ModuleSHA256: sum, Name: r.Module, Input: r.Input, Origin: &journal.Origin{Kind: OriginTask, ID: r.ID, Seq: uint64(seq)},
		Priority: uint8(r.Priority)}
	if !r.InputGiven {
		spec.Input = []byte(r.Objective)
	}
	if r.Grant != "" {
		if spec.Grant, err = r.grant(); err != nil {
			return journal.RunID{}, err
		}
	}
	if spec.Token, err = t.token(r, b, now); err != nil {
		return journal.RunID{}, err
	}
	return t.s.Launch(ctx, spec, fmt.Sprintf("task %s attempt %d:", r.ID, seq))
}

func (t *tasks) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

// arm sets the timer of r's next attempt, at r.NextAt on the cell's clock.
func (t *tasks) arm(r *taskRecord) {
	if r.NextAt == nil {
		return
	}
	id, at := r.ID, *r.NextAt
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	if old := t.timers[id]; old != nil {
		old.Stop()
	}
	t.timers[id] = t.clk.AfterFunc(at.Sub(t.clk.Now()), func() { t.fire(id, at) })
}

func (t *tasks) disarm(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if tm := t.timers[id]; tm != nil {
		tm.Stop()
		delete(t.timers, id)
	}
}

// fire starts the next attempt of task id, due at at, unless the task has
// moved on meanwhile (cancelled, or re-armed for another time).
func (t *tasks) fire(id string, at time.Time) {
	if t.isClosed() {
		return
	}
	unlock := t.lock(id)
	defer unlock()
	r, err := t.load(id)
	if err != nil {
		t.s.logf("task %s: %v", id, err)
		return
	}
	if r.State != TaskWaiting || r.NextAt == nil || !r.NextAt.Equal(at) {
		return
	}
	if err := t.attempt(context.Background(), r, len(r.Attempts)+1); err != nil {
		t.s.logf("task %s: attempt %d: %v", id, len(r.Attempts), err)
	}
}

// onEnd takes the end of a run to its task (Server.OnEnd).
func (t *tasks) onEnd(run journal.RunID, _ *host.Result, _ error) {
	ctx := context.Background()
	m, err := t.s.cell.Journal.Meta(ctx, run)
	if err != nil || m.Origin == nil || m.Origin.Kind != OriginTask {
		return
	}
	unlock := t.lock(m.Origin.ID)
	defer unlock()
	r, err := t.load(m.Origin.ID)
	if err != nil {
		t.s.logf("run %s of task %s: %v", run, m.Origin.ID, err)
		return
	}
	if err := t.settle(ctx, r, m); err != nil {
		t.s.logf("task %s: %v", r.ID, err)
	}
}

// settle records how the run of m, an attempt of r, stands, and moves the
// task on when the run is its last attempt's: completed, cancelled, or
// failed (a retry after the backoff, or the task failed). The caller holds
// r's lock.
func (t *tasks) settle(ctx context.Context, r *taskRecord, m journal.RunMeta) error {
	i := int(m.Origin.Seq) - 1
	if i < 0 || i >= len(r.Attempts) {
		return fmt.Errorf("run %s is attempt %d, which the task does not have", m.ID, m.Origin.Seq)
	}
	a := &r.Attempts[i]
	a.Run, a.Status, a.Steps, a.Error = m.ID.String(), string(m.Status), m.Steps, m.Error
	a.Ended = nil
	if m.Ended != 0 {
		e := time.Unix(0, m.Ended).UTC()
		a.Ended = &e
	}
	if m.Status != journal.StatusRunning && m.Status != journal.StatusParked {
		rep, err := host.LoadBudget(ctx, t.s.cell.Journal, m.ID, journal.TrustKeys(t.s.cell.Public()))
		if err != nil {
			return fmt.Errorf("attempt %d's spend: %w", a.Seq, err)
		}
		var am budget.Amounts
		for _, row := range rep.Rows {
			am[row.Dim] = row.Spent
		}
		a.Spent = amountsMap(am)
	}
	r.Spent = amountsMap(spent(r))
	if i != len(r.Attempts)-1 || r.State.Final() {
		return t.save(r)
	}
	switch m.Status {
	case journal.StatusCompleted:
		r.State, r.Reason, r.NextAt = TaskCompleted, fmt.Sprintf("attempt %d completed", a.Seq), nil
		t.s.logf("task %s completed by attempt %d", r.ID, a.Seq)
	case journal.StatusCancelled:
		r.State = TaskCancelled
	case journal.StatusFailed:
		t.failed(r, a)
	}
	if err := t.save(r); err != nil {
		return err
	}
	if r.State == TaskWaiting {
		t.arm(r)
	}
	return nil
}

// failed decides what follows the failure of a, r's last attempt: the task
// fails when no retry is left or a cap is spent; else the next attempt is
// due after the backoff (armed by the caller, unless the task is
// cancelled, whose resume arms it).
func (t *tasks) failed(r *taskRecord, a *Attempt) {
	if a.Seq > r.Retries {
		r.State, r.NextAt = TaskFailed, nil
		r.Reason = fmt.Sprintf("attempt %d failed and no retry is left (retries %d): %s", a.Seq, r.Retries, a.Error)
		t.s.logf("task %s failed: %s", r.ID, r.Reason)
		return
	}
	if _, exhausted := remaining(r); exhausted != "" {
		r.State, r.NextAt, r.Reason = TaskFailed, nil, exhausted
		t.s.logf("task %s failed: %s", r.ID, exhausted)
		return
	}
	next := t.clk.Now().Add(Backoff(r.BackoffD, r.MaxD, a.Seq)).UTC()
	r.NextAt = &next
	if r.State != TaskCancelled {
		r.State = TaskWaiting
		t.s.logf("task %s attempt %d failed; attempt %d at %s", r.ID, a.Seq, a.Seq+1, next.Format(time.RFC3339Nano))
	}
}

// cancel cancels task id: its pending retry, and its current run through
// Host.Cancel (which stops it at its next step boundary, or marks a parked
// one cancelled), keeping everything. A cancelled task stays cancelled.
func (t *tasks) cancel(ctx context.Context, id string) (*Task, error) {
	unlock := t.lock(id)
	r, err := t.load(id)
	if err != nil {
		unlock()
		return nil, err
	}
	if r.State.Final() {
		unlock()
		return nil, fmt.Errorf("%w %s has %s: nothing to cancel", ErrTaskState, id, r.State)
	}
	t.disarm(id)
	var run journal.RunID
	if n := len(r.Attempts); n > 0 && r.State == TaskRunning {
		run, _ = journal.ParseRunID(r.Attempts[n-1].Run)
	}
	r.State = TaskCancelled
	err = t.save(r)
	unlock()
	if err != nil {
		return nil, err
	}
	t.s.logf("task %s cancelled", id)
	// Outside the task's lock: the run's end takes it. A run that was
	// parking as it was stopped stops parked, not cancelled; it is not
	// executing any more, and a second cancel marks it.
	for i := 0; i < 3 && !run.IsZero(); i++ {
		if err := t.s.cell.Host.Cancel(ctx, run); err != nil && !errors.Is(err, host.ErrFinished) {
			return nil, fmt.Errorf("task %s: cancel run %s: %w", id, run, err)
		}
		m, err := t.s.cell.Journal.Meta(ctx, run)
		if err != nil {
			return nil, err
		}
		if m.Status != journal.StatusParked {
			// A run marked cancelled without executing has no end to
			// tell the task: settle it here.
			t.onEnd(run, nil, nil)
			break
		}
	}
	return t.show(ctx, id)
}

// resume continues a cancelled task: its cancelled (or interrupted) run is
// resumed through Host.Reopen, as agentrt resume does; a task cancelled
// between attempts gets its next attempt, at its time or at once.
func (t *tasks) resume(ctx context.Context, id string) (*Task, error) {
	unlock := t.lock(id)
	defer func() {
		if unlock != nil {
			unlock()
		}
	}()
	r, err := t.load(id)
	if err != nil {
		return nil, err
	}
	if r.State != TaskCancelled {
		return nil, fmt.Errorf("%w %s is %s, not cancelled: nothing to resume", ErrTaskState, id, r.State)
	}
	n := len(r.Attempts)
	last := &r.Attempts[n-1]
	var m journal.RunMeta
	if run, err := journal.ParseRunID(last.Run); err == nil {
		if m, err = t.s.cell.Journal.Meta(ctx, run); err != nil {
			return nil, err
		}
	}
	switch {
	case last.Run == "":
		// Cancelled as it was starting, before its run was known.
		if err := t.attempt(ctx, r, n); err != nil {
			return nil, err
		}
	case !m.Status.Finished():
		if t.s.cell.Host.Live(m.ID) {
			return nil, fmt.Errorf("%w %s: its run %s is still stopping; ask again", ErrTaskState, id, m.ID)
		}
		r.State = TaskRunning
		if err := t.save(r); err != nil {
			return nil, err
		}
		st, err := t.s.reopenAdmitted(ctx, m.ID, nil)
		if err != nil {
			r.State = TaskCancelled
			return nil, errors.Join(err, t.save(r))
		}
		if err := t.s.execute(st, fmt.Sprintf("task %s attempt %d: resumed", id, last.Seq)); err != nil {
			r.State = TaskCancelled
			return nil, errors.Join(err, t.save(r))
		}
	case r.NextAt != nil:
		now := t.clk.Now().UTC()
		if r.NextAt.Before(now) {
			r.NextAt = &now
		}
		r.State = TaskWaiting
		if err := t.save(r); err != nil {
			return nil, err
		}
		t.arm(r)
	default:
		return nil, fmt.Errorf("%w %s: its last attempt %s and no attempt is due", ErrTaskState, id, m.Status)
	}
	t.s.logf("task %s resumed", id)
	unlock()
	unlock = nil
	return t.show(ctx, id)
}

// recover takes up every task after a start of the daemon, before its
// runs are recovered: backoffs are armed again, a claimed attempt is
// found by its run's origin or launched again, and the end of a run the
// task did not learn of (the daemon died in between) is settled.
func (t *tasks) recover(ctx context.Context) error {
	var ids []string
	err := t.cells.CellList(TasksTable, "", func(key string, _ []byte) error {
		ids = append(ids, key)
		return nil
	})
	if err != nil {
		return err
	}
	var byOrigin map[string]journal.RunMeta
	for _, id := range ids {
		unlock := t.lock(id)
		r, err := t.load(id)
		if err == nil && !r.State.Final() {
			if byOrigin == nil {
				byOrigin, err = t.origins(ctx)
			}
			if err == nil {
				err = t.recoverOne(ctx, r, byOrigin)
			}
		}
		unlock()
		if err != nil {
			t.s.logf("task %s: recover: %v", id, err)
		}
	}
	return nil
}

// origins returns the runs of this store that are tasks' attempts, by
// "task/attempt".
func (t *tasks) origins(ctx context.Context) (map[string]journal.RunMeta, error) {
	runs, err := t.s.cell.Journal.Runs(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]journal.RunMeta{}
	for _, m := range runs {
		if o := m.Origin; o != nil && o.Kind == OriginTask {
			out[fmt.Sprintf("%s/%d", o.ID, o.Seq)] = m
		}
	}
	return out, nil
}

func (t *tasks) recoverOne(ctx context.Context, r *taskRecord, byOrigin map[string]journal.RunMeta) error {
	if r.State == TaskWaiting {
		t.arm(r)
		return nil
	}
	n := len(r.Attempts)
	if n == 0 {
		return t.attempt(ctx, r, 1)
	}
	last := &r.Attempts[n-1]
	m, found := byOrigin[fmt.Sprintf("%s/%d", r.ID, last.Seq)]
	switch {
	case found && last.Run == "":
		last.Run = m.ID.String()
	case !found && last.Run == "" && last.Status == AttemptStarting:
		if r.State == TaskCancelled {
			return nil
		}
		// Claimed, and never started: start it now.
		return t.attempt(ctx, r, last.Seq)
	case !found:
		return nil
	}
	switch m.Status {
	case journal.StatusCompleted, journal.StatusFailed, journal.StatusCancelled:
		return t.settle(ctx, r, m)
	case journal.StatusRunning:
		if r.State == TaskCancelled {
			// Cancelled, and the daemon died before its run was: cancel
			// it now, before Recover would resume it.
			if err := t.s.cell.Host.Cancel(ctx, m.ID); err != nil && !errors.Is(err, host.ErrFinished) {
				return err
			}
		}
	}
	return t.save(r)
}

// close stops the tasks' timers: a server shutting down starts no attempt.
// Their times are in the task records, for the next start.
func (t *tasks) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	for id, tm := range t.timers {
		tm.Stop()
		delete(t.timers, id)
	}
}

// list returns every task, oldest first.
func (t *tasks) list(ctx context.Context) ([]Task, error) {
	var ids []string
	if err := t.cells.CellList(TasksTable, "", func(key string, _ []byte) error {
		ids = append(ids, key)
		return nil
	}); err != nil {
		return nil, err
	}
	out := make([]Task, 0, len(ids))
	for _, id := range ids {
		tk, err := t.show(ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, *tk)
	}
	return out, nil
}

// show returns task id as it stands, its current run as the host sees it
// now (live, parked for what, calls waiting for approval).
func (t *tasks) show(ctx context.Context, id string) (*Task, error) {
	r, err := t.load(id)
	if err != nil {
		return nil, err
	}
	tk := r.Task
	if n := len(tk.Attempts); n > 0 {
		a := &tk.Attempts[n-1]
		if run, err := journal.ParseRunID(a.Run); err == nil {
			a.Live = t.s.cell.Host.Live(run)
			if m, err := t.s.cell.Journal.Meta(ctx, run); err == nil {
				if !m.Status.Finished() {
					a.Status = string(m.Status)
				}
				a.Wait = Info(m, false).Wait
				if w := m.Wait; w != nil && w.Kind == journal.WaitApproval && t.s.cell.Book != nil {
					if p, err := t.s.cell.Book.Get(run, w.Step); err == nil {
						sa := SignedApprovalOf(p)
						a.Approval = &sa
					}
				}
			}
			if t.s.approvals != nil {
				for _, ap := range t.s.approvals.Pending(run) {
					a.Waiting = append(a.Waiting, approvalInfo(ap))
				}
			}
		}
	}
	return &tk, nil
}

// waiting counts the tasks waiting for their next attempt.
func (t *tasks) waiting() (int, error) {
	n := 0
	err := t.cells.CellList(TasksTable, "", func(_ string, raw []byte) error {
		var r taskRecord
		if json.Unmarshal(raw, &r) == nil && r.State == TaskWaiting {
			n++
		}
		return nil
	})
	return n, err
}
