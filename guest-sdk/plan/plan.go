package plan

import (
	"errors"
	"fmt"
	"strings"

	"github.com/agentrt/agentrt/guest-sdk/abi"
	"github.com/agentrt/agentrt/guest-sdk/agent"
)

// Step is one subgoal of a plan: a local step (Do) or a sub-agent (Child),
// exactly one of the two.
type Step struct {
	// ID names the step, unique in its plan.
	ID string
	// Deps are the steps that must complete before this one runs.
	Deps []string
	// Do runs the step in the guest, given the outputs of its Deps.
	Do func(in Inputs) ([]byte, error)
	// Child runs the step as a sub-agent; its output is the child's.
	Child *Child
	// Undo is the step's compensation: it is given the step's output and
	// runs at a rollback if the step completed.
	Undo func(out []byte) error
	// Approval, when set, is asked before the step runs (ApproveBy asks
	// the cell's approvers); a denial sends a replan signal.
	Approval Approver
}

// Child is a sub-agent step: the module the cell holds under the SHA-256
// Module, run with the powers Caps and Budget (agent.SpawnOptions).
type Child struct {
	Module []byte
	// Input builds the child's input from the outputs of the step's Deps
	// (nil: an empty input).
	Input  func(in Inputs) ([]byte, error)
	Caps   string
	Budget string
}

// Inputs are the outputs of a step's dependencies, by step id.
type Inputs map[string][]byte

// SignalKind is why the planner asks for a new plan.
type SignalKind string

// The replan signals.
const (
	// StepFailed: a local step returned an error, or a child ended other
	// than completed (and not for its budget).
	StepFailed SignalKind = "step_failed"
	// BudgetThreshold: the run's spending crossed Options.BudgetThreshold,
	// a step failed with agent.ErrBudget, or a child ended
	// budget_exhausted.
	BudgetThreshold SignalKind = "budget"
	// ApprovalDenied: the approval a step asked for was not given.
	ApprovalDenied SignalKind = "approval_denied"
)

// Signal is a replan signal: its kind, the step it concerns (none for a
// threshold crossed between waves), why, and the budget as last read.
type Signal struct {
	Kind    SignalKind `json:"kind"`
	Step    string     `json:"step,omitempty"`
	Reason  string     `json:"reason"`
	Used    uint64     `json:"used,omitempty"`
	Ceiling uint64     `json:"ceiling,omitempty"`
}

// Replanner revises a plan on a signal: it returns the steps to run
// instead of the pending ones, which may depend on completed steps (a
// nil or empty list ends the plan with what completed), or an error to
// give up, which rolls the plan back.
type Replanner func(sig Signal, st *State) ([]Step, error)

// State is the plan as a Replanner sees it.
type State struct {
	// Outputs are the outputs of the completed steps; Done lists them in
	// completion order.
	Outputs map[string][]byte
	Done    []string
	// Failed are the steps that failed or were not approved, in order.
	Failed []StepError
	// Pending are the steps not yet run, in declaration order.
	Pending []Step
}

// StepError is a step that did not complete.
type StepError struct {
	Step string `json:"step"`
	// Run is the child's run id, for a child step that was spawned.
	Run string `json:"run,omitempty"`
	// Status is the child's terminal status, or "failed" for a local
	// step, "denied" for an approval not given.
	Status string `json:"status"`
	Err    string `json:"error"`
}

// Options configure Execute.
type Options struct {
	// Host is the host the plan runs on (nil: SDK()).
	Host Host
	// Replan revises the plan on a signal; without it a failure rolls
	// the plan back and a threshold crossed is only recorded.
	Replan Replanner
	// MaxReplans bounds the revisions (0: 3); the signal after the last
	// rolls the plan back.
	MaxReplans int
	// BudgetThreshold, between 0 and 1, is the fraction of the run's
	// ceiling on import calls past which the plan signals once, after a
	// wave (0: never).
	BudgetThreshold float64
	// Name names the plan in its log lines.
	Name string
}

// Errors of Execute and Validate.
var (
	// ErrInvalid is matched by every error of Validate: the steps do not
	// make a DAG the planner can run.
	ErrInvalid = errors.New("plan: invalid plan")
	// ErrRollback, returned by a step's Do, rolls the plan back at once,
	// without a replan.
	ErrRollback = errors.New("plan: rollback asked")
)

// Error is a plan that did not complete: the signal that ended it, and
// the errors of compensations that failed, if any.
type Error struct {
	Signal Signal
	// Replanner is the Replanner's error, when it gave up.
	Replanner error
	// Undo holds the compensations that failed.
	Undo []error
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "plan: %s", e.Signal.Kind)
	if e.Signal.Step != "" {
		fmt.Fprintf(&b, " at step %q", e.Signal.Step)
	}
	fmt.Fprintf(&b, ": %s; rolled back", e.Signal.Reason)
	if e.Replanner != nil {
		fmt.Fprintf(&b, " (the replanner gave up: %v)", e.Replanner)
	}
	for _, u := range e.Undo {
		fmt.Fprintf(&b, "; %v", u)
	}
	return b.String()
}

// Unwrap gives the replanner's error and those of the compensations.
func (e *Error) Unwrap() []error {
	if e.Replanner == nil {
		return e.Undo
	}
	return append([]error{e.Replanner}, e.Undo...)
}

// Result is what a plan did.
type Result struct {
	// Outputs are the completed steps' outputs; Done lists the steps in
	// completion order.
	Outputs map[string][]byte
	Done    []string
	// Runs are the children's run ids, by step.
	Runs map[string]string
	// Failed are the steps that did not complete, in order.
	Failed []StepError
	// Signals are the replan signals, in order.
	Signals []Signal
	// Undone lists the compensations run, in order.
	Undone []string
	// Waves is the number of waves run, Replans the revisions made.
	Waves   int
	Replans int
	// Spent is the import calls the plan made, when the host reports them.
	Spent uint64

	host  Host
	name  string
	undo  map[string]func([]byte) error
	taken map[string]bool
}

// Validate checks that steps make a DAG: every step has an id, unique,
// among them and done (the ids of completed steps, which a revision may
// depend on), exactly one of Do and Child, dependencies that name a step,
// and no cycle. Its errors match ErrInvalid and say what to change.
func Validate(steps []Step, done ...string) error {
	ids := map[string]int{}
	for _, d := range done {
		ids[d] = -1
	}
	for i, s := range steps {
		if s.ID == "" {
			return fmt.Errorf("%w: step %d has no id (hint: give every step a unique ID)", ErrInvalid, i+1)
		}
		if j, ok := ids[s.ID]; ok {
			if j < 0 {
				return fmt.Errorf("%w: step %q has the id of a completed step (hint: a revision names new steps by new ids)", ErrInvalid, s.ID)
			}
			return fmt.Errorf("%w: two steps are named %q (steps %d and %d)", ErrInvalid, s.ID, j+1, i+1)
		}
		ids[s.ID] = i
		if (s.Do == nil) == (s.Child == nil) {
			return fmt.Errorf("%w: step %q needs exactly one of Do (a local step) and Child (a sub-agent)", ErrInvalid, s.ID)
		}
		if s.Child != nil && len(s.Child.Module) != 32 {
			return fmt.Errorf("%w: step %q: Child.Module is %d bytes, not the module's 32-byte SHA-256", ErrInvalid, s.ID, len(s.Child.Module))
		}
	}
	for _, s := range steps {
		for _, d := range s.Deps {
			if _, ok := ids[d]; !ok {
				return fmt.Errorf("%w: step %q depends on %q, which no step names (hint: declare %q, or drop it from the Deps of %q)", ErrInvalid, s.ID, d, d, s.ID)
			}
			if d == s.ID {
				return fmt.Errorf("%w: step %q depends on itself", ErrInvalid, s.ID)
			}
		}
	}
	// Depth-first search for a cycle, in declaration order, so that the
	// one reported is always the same.
	const (
		white = iota
		grey
		black
	)
	color := make([]int, len(steps))
	var path []string
	var visit func(i int) []string
	visit = func(i int) []string {
		color[i] = grey
		path = append(path, steps[i].ID)
		for _, d := range steps[i].Deps {
			j := ids[d]
			if j < 0 {
				continue
			}
			switch color[j] {
			case grey:
				for k, id := range path {
					if id == d {
						return append(append([]string{}, path[k:]...), d)
					}
				}
			case white:
				if c := visit(j); c != nil {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		color[i] = black
		return nil
	}
	for i := range steps {
		if color[i] == white {
			if c := visit(i); c != nil {
				return fmt.Errorf("%w: the dependencies make a cycle: %s (hint: a step cannot wait, even indirectly, for itself)", ErrInvalid, strings.Join(c, " -> "))
			}
		}
	}
	return nil
}

// Execute runs steps as a plan (see the package doc). It returns the
// result and, when the plan did not complete, an *Error after rolling it
// back; the result is there either way.
func Execute(steps []Step, o Options) (*Result, error) {
	if o.Host == nil {
		o.Host = SDK()
	}
	if o.MaxReplans == 0 {
		o.MaxReplans = 3
	}
	if o.Name == "" {
		o.Name = "plan"
	}
	if o.BudgetThreshold < 0 || o.BudgetThreshold > 1 {
		return nil, fmt.Errorf("%w: BudgetThreshold %v is not a fraction between 0 and 1", ErrInvalid, o.BudgetThreshold)
	}
	if err := Validate(steps); err != nil {
		return nil, err
	}
	r := &Result{Outputs: map[string][]byte{}, Runs: map[string]string{}, host: o.Host, name: o.Name,
		undo: map[string]func([]byte) error{}, taken: map[string]bool{}}
	start, _, err := o.Host.Budget()
	if err != nil {
		return nil, fmt.Errorf("plan: reading the budget: %w", err)
	}
	defer func() {
		if end, _, err := o.Host.Budget(); err == nil && end >= start {
			r.Spent = end - start
		}
	}()
	pending := append([]Step{}, steps...)
	replans, thresholdSent := 0, false
	for len(pending) > 0 {
		var ready, rest []Step
		for _, s := range pending {
			if r.completed(s.Deps) {
				ready = append(ready, s)
			} else {
				rest = append(rest, s)
			}
		}
		if len(ready) == 0 {
			// Validate ruled out cycles and unknown ids: a step here
			// waits for one that failed and that a revision kept.
			sig := Signal{Kind: StepFailed, Step: rest[0].ID, Reason: fmt.Sprintf("its dependencies %s did not complete", strings.Join(rest[0].Deps, ", "))}
			return r, r.fail(sig, nil)
		}
		pending = rest
		r.Waves++
		failed, rollback := r.wave(ready)
		if rollback != nil {
			return r, r.fail(Signal{Kind: StepFailed, Step: rollback.Step, Reason: rollback.Err}, nil)
		}
		var sig *Signal
		if len(failed) > 0 {
			f := failed[0]
			sig = &Signal{Kind: StepFailed, Step: f.Step, Reason: f.Err}
			switch f.Status {
			case "denied":
				sig.Kind = ApprovalDenied
			case abi.ChildBudgetExhausted, "budget":
				sig.Kind = BudgetThreshold
			}
		}
		if o.BudgetThreshold > 0 && !thresholdSent {
			used, ceiling, err := o.Host.Budget()
			if err != nil {
				return r, fmt.Errorf("plan: reading the budget: %w", err)
			}
			if ceiling > 0 && float64(used) >= o.BudgetThreshold*float64(ceiling) {
				thresholdSent = true
				if sig == nil {
					sig = &Signal{Kind: BudgetThreshold, Reason: fmt.Sprintf("%d of %d calls used, past the threshold of %.0f%%", used, ceiling, 100*o.BudgetThreshold)}
				}
				sig.Used, sig.Ceiling = used, ceiling
			}
		}
		if sig == nil {
			continue
		}
		r.Signals = append(r.Signals, *sig)
		r.logf(agent.Warn, "signal %s %s: %s", sig.Kind, sig.Step, sig.Reason)
		if o.Replan == nil {
			if len(failed) == 0 {
				continue // a threshold crossed, and no one to tell
			}
			return r, r.fail(*sig, nil)
		}
		if replans == o.MaxReplans {
			return r, r.fail(*sig, fmt.Errorf("no revision left: %d made, MaxReplans is %d", replans, o.MaxReplans))
		}
		replans++
		r.Replans = replans
		next, err := o.Replan(*sig, &State{Outputs: r.Outputs, Done: r.Done, Failed: r.Failed, Pending: pending})
		if err == nil {
			err = Validate(next, r.Done...)
		}
		if err != nil {
			return r, r.fail(*sig, err)
		}
		pending = next
		ids := make([]string, len(next))
		for i, s := range next {
			ids[i] = s.ID
		}
		r.logf(agent.Info, "revised: pending %s", strings.Join(ids, ", "))
	}
	r.logf(agent.Info, "completed: %s", strings.Join(r.Done, ", "))
	return r, nil
}

// completed says whether every step of ids has completed.
func (r *Result) completed(ids []string) bool {
	for _, id := range ids {
		if _, ok := r.Outputs[id]; !ok {
			return false
		}
	}
	return true
}

func (r *Result) inputs(s Step) Inputs {
	in := Inputs{}
	for _, d := range s.Deps {
		in[d] = r.Outputs[d]
	}
	return in
}

func (r *Result) done(s Step, out []byte) {
	r.Outputs[s.ID] = out
	r.Done = append(r.Done, s.ID)
	if s.Undo != nil {
		r.undo[s.ID] = s.Undo
	}
}

// wave runs ready steps: approvals, then every spawn, then the local
// steps, then every await. It returns the steps that failed, and the one
// that asked for a rollback, if any.
func (r *Result) wave(ready []Step) ([]StepError, *StepError) {
	var failed []StepError
	fail := func(e StepError) { failed = append(failed, e); r.Failed = append(r.Failed, e) }
	var approved []Step
	for _, s := range ready {
		if s.Approval == nil {
			approved = append(approved, s)
			continue
		}
		a, err := s.Approval()
		switch {
		case err != nil:
			fail(StepError{Step: s.ID, Status: "failed", Err: "approval: " + err.Error()})
		case !a.Approved:
			fail(StepError{Step: s.ID, Status: "denied", Err: "approval denied: " + a.Reason})
		default:
			approved = append(approved, s)
		}
	}
	type spawned struct {
		step Step
		run  string
	}
	var kids []spawned
	var locals, names []string
	for _, s := range approved {
		if s.Child == nil {
			locals = append(locals, s.ID)
			continue
		}
		var in []byte
		if s.Child.Input != nil {
			b, err := s.Child.Input(r.inputs(s))
			if err != nil {
				fail(StepError{Step: s.ID, Status: "failed", Err: "input: " + err.Error()})
				continue
			}
			in = b
		}
		c, err := r.host.Spawn(s.Child.Module, in, agent.SpawnOptions{Caps: s.Child.Caps, Budget: s.Child.Budget})
		if err != nil {
			fail(StepError{Step: s.ID, Status: statusOf(err), Err: "spawn: " + err.Error()})
			continue
		}
		r.Runs[s.ID] = c.Run
		kids = append(kids, spawned{s, c.Run})
		names = append(names, s.ID+"="+c.Run)
	}
	r.logf(agent.Info, "wave %d: spawned [%s], local [%s]", r.Waves, strings.Join(names, " "), strings.Join(locals, " "))
	var rollback *StepError
	for _, s := range approved {
		if s.Child != nil || rollback != nil {
			continue
		}
		out, err := s.Do(r.inputs(s))
		if err != nil {
			e := StepError{Step: s.ID, Status: statusOf(err), Err: err.Error()}
			fail(e)
			if errors.Is(err, ErrRollback) {
				rollback = &e
			}
			continue
		}
		r.done(s, out)
	}
	for _, k := range kids {
		o, err := r.host.Await(k.run)
		switch {
		case err != nil:
			fail(StepError{Step: k.step.ID, Run: k.run, Status: "failed", Err: "await: " + err.Error()})
		case o.Status != abi.ChildCompleted:
			fail(StepError{Step: k.step.ID, Run: k.run, Status: o.Status, Err: fmt.Sprintf("child %s ended %s: %s", k.run, o.Status, o.Err)})
		default:
			r.done(k.step, o.Output)
		}
	}
	return failed, rollback
}

// statusOf is a failed call's status for a StepError: "budget" for a
// budget ceiling, "failed" for anything else.
func statusOf(err error) string {
	if errors.Is(err, agent.ErrBudget) {
		return "budget"
	}
	return "failed"
}

// fail rolls the plan back after sig and returns its *Error.
func (r *Result) fail(sig Signal, replanner error) error {
	if len(r.Signals) == 0 || r.Signals[len(r.Signals)-1] != sig {
		r.Signals = append(r.Signals, sig)
	}
	r.logf(agent.Warn, "rolling back after %s %s: %s", sig.Kind, sig.Step, sig.Reason)
	e := &Error{Signal: sig, Replanner: replanner}
	if err := r.Rollback(); err != nil {
		e.Undo = err.(interface{ Unwrap() []error }).Unwrap()
	}
	return e
}

// Rollback runs the compensations of the completed steps that have one
// and have not run it, in reverse completion order: each runs once, even
// if Rollback is called again. It goes on past a compensation that fails
// and returns their errors joined.
func (r *Result) Rollback() error {
	var errs []error
	for i := len(r.Done) - 1; i >= 0; i-- {
		id := r.Done[i]
		undo := r.undo[id]
		if undo == nil || r.taken[id] {
			continue
		}
		r.taken[id] = true
		if err := undo(r.Outputs[id]); err != nil {
			r.logf(agent.Error, "undo %s failed: %v", id, err)
			errs = append(errs, fmt.Errorf("plan: undo of step %q: %w", id, err))
			continue
		}
		r.Undone = append(r.Undone, id)
		r.logf(agent.Info, "undid %s", id)
	}
	return errors.Join(errs...)
}

// logf writes a line of the plan's progress to the run's log. The log is
// a record for people: an error writing it does not stop the plan.
func (r *Result) logf(level agent.Level, format string, args ...any) {
	_ = r.host.Log(level, r.name+": "+fmt.Sprintf(format, args...))
}
