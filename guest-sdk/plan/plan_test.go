package plan_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/guest-sdk/abi"
	"github.com/agentrt/agentrt/guest-sdk/agent"
	"github.com/agentrt/agentrt/guest-sdk/plan"
)

// local is a local step that records its run in order and outputs its id
// followed by its inputs, in Deps order.
func local(order *[]string, id string, deps ...string) plan.Step {
	return plan.Step{ID: id, Deps: deps, Do: func(in plan.Inputs) ([]byte, error) {
		*order = append(*order, id)
		out := id
		for _, d := range deps {
			out += "(" + string(in[d]) + ")"
		}
		return []byte(out), nil
	}}
}

func echo(input []byte) (string, []byte) {
	return abi.ChildCompleted, append([]byte("echo:"), input...)
}

func static(b string) func(plan.Inputs) ([]byte, error) {
	return func(plan.Inputs) ([]byte, error) { return []byte(b), nil }
}

func TestValidate(t *testing.T) {
	do := func(plan.Inputs) ([]byte, error) { return nil, nil }
	st := func(id string, deps ...string) plan.Step { return plan.Step{ID: id, Deps: deps, Do: do} }
	cases := []struct {
		name  string
		steps []plan.Step
		done  []string
		want  string
	}{
		{"cycle", []plan.Step{st("a", "c"), st("b", "a"), st("c", "b"), st("d")}, nil, "the dependencies make a cycle: a -> c -> b -> a"},
		{"self", []plan.Step{st("a", "a")}, nil, `step "a" depends on itself`},
		{"unknown", []plan.Step{st("a"), st("b", "a", "z")}, nil, `step "b" depends on "z", which no step names (hint: declare "z", or drop it from the Deps of "b")`},
		{"duplicate", []plan.Step{st("a"), st("a")}, nil, `two steps are named "a" (steps 1 and 2)`},
		{"no id", []plan.Step{st("")}, nil, "step 1 has no id"},
		{"no action", []plan.Step{{ID: "a"}}, nil, `step "a" needs exactly one of Do (a local step) and Child (a sub-agent)`},
		{"both", []plan.Step{{ID: "a", Do: do, Child: &plan.Child{Module: mod("m")}}}, nil, `step "a" needs exactly one of Do`},
		{"module", []plan.Step{{ID: "a", Child: &plan.Child{Module: []byte("m")}}}, nil, "Child.Module is 1 bytes, not the module's 32-byte SHA-256"},
		{"revision reuses an id", []plan.Step{st("a")}, []string{"a"}, `step "a" has the id of a completed step`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := plan.Validate(c.steps, c.done...)
			if !errors.Is(err, plan.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate: %v, want ErrInvalid saying %q", err, c.want)
			}
		})
	}
	if err := plan.Validate([]plan.Step{st("b", "a"), st("c", "b")}, "a"); err != nil {
		t.Fatalf("a revision depending on a completed step: %v", err)
	}
	if _, err := plan.Execute([]plan.Step{st("a", "b")}, plan.Options{Host: newFake()}); !errors.Is(err, plan.ErrInvalid) {
		t.Fatalf("Execute of an invalid plan: %v", err)
	}
}

// Steps run after their dependencies, wave by wave in declaration order,
// each given its dependencies' outputs.
func TestDAGOrder(t *testing.T) {
	f := newFake()
	var order []string
	steps := []plan.Step{
		local(&order, "d", "b", "c"),
		local(&order, "b", "a"),
		local(&order, "a"),
		local(&order, "c", "a"),
		local(&order, "e"),
		local(&order, "f", "d", "e"),
	}
	r, err := plan.Execute(steps, plan.Options{Host: f})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "e", "b", "c", "d", "f"}; !reflect.DeepEqual(order, want) || !reflect.DeepEqual(r.Done, want) {
		t.Fatalf("ran %v, done %v; want %v", order, r.Done, want)
	}
	if r.Waves != 4 {
		t.Fatalf("%d waves, want 4", r.Waves)
	}
	if got := string(r.Outputs["f"]); got != "f(d(b(a))(c(a)))(e)" {
		t.Fatalf("f's output %q", got)
	}
	if !strings.Contains(f.logs(), "plan: wave 1: spawned [], local [a e]") || !strings.Contains(f.logs(), "plan: completed: a, e, b, c, d, f") {
		t.Fatalf("the plan's log:\n%s", f.logs())
	}
}

// Every ready child is spawned before any is awaited, the wave's local
// steps run between, and a child of the next wave gets its input from the
// outputs of the first.
func TestChildrenSpawnedBeforeAnyAwait(t *testing.T) {
	f := newFake()
	m := f.child("echo", echo)
	var order []string
	steps := []plan.Step{
		{ID: "x", Child: &plan.Child{Module: m, Input: static("x"), Caps: "{run: {}}"}},
		{ID: "y", Child: &plan.Child{Module: m, Input: static("y")}},
		local(&order, "l"),
		{ID: "z", Child: &plan.Child{Module: m, Input: static("z")}},
		{ID: "join", Deps: []string{"x", "l", "z"}, Child: &plan.Child{Module: m, Input: func(in plan.Inputs) ([]byte, error) {
			return []byte(string(in["x"]) + "+" + string(in["l"]) + "+" + string(in["z"])), nil
		}}},
	}
	r, err := plan.Execute(steps, plan.Options{Host: f})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"spawn x", "spawn y", "spawn z", "await run1", "await run2", "await run3", "spawn echo:x+l+echo:z", "await run4"}
	if !reflect.DeepEqual(f.trace, want) {
		t.Fatalf("calls %q\nwant %q", f.trace, want)
	}
	if len(order) != 1 || !reflect.DeepEqual(r.Done, []string{"l", "x", "y", "z", "join"}) {
		t.Fatalf("done %v", r.Done)
	}
	if string(r.Outputs["join"]) != "echo:echo:x+l+echo:z" || r.Runs["join"] != "run4" {
		t.Fatalf("join: %q run %s", r.Outputs["join"], r.Runs["join"])
	}
}

// undoable is a local step that puts key in kv and whose compensation
// deletes it.
func undoable(f *fakeHost, id string, deps ...string) plan.Step {
	key := "staged/" + id
	return plan.Step{ID: id, Deps: deps,
		Do:   func(plan.Inputs) ([]byte, error) { return []byte(key), f.KVPut(key, []byte(id)) },
		Undo: func(out []byte) error { return f.kvDelete(string(out)) },
	}
}

// A failure with no replanner rolls the plan back: the compensations of
// the completed steps run in reverse completion order, once each, and
// steps without one are passed over.
func TestRollbackOrder(t *testing.T) {
	f := newFake()
	m := f.child("echo", echo)
	var order []string
	steps := []plan.Step{
		undoable(f, "a"),
		{ID: "kid", Child: &plan.Child{Module: m}, Undo: func(out []byte) error { return f.KVPut("kid-undone", out) }},
		undoable(f, "b", "a"),
		local(&order, "plain", "a"),
		undoable(f, "c", "b", "kid"),
		{ID: "boom", Deps: []string{"c"}, Do: func(plan.Inputs) ([]byte, error) { return nil, errors.New("the channel is closed") }},
		undoable(f, "never", "boom"),
	}
	r, err := plan.Execute(steps, plan.Options{Host: f})
	var pe *plan.Error
	if !errors.As(err, &pe) || pe.Signal.Kind != plan.StepFailed || pe.Signal.Step != "boom" {
		t.Fatalf("Execute: %v", err)
	}
	if want := `plan: step_failed at step "boom": the channel is closed; rolled back`; err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
	if want := []string{"a", "kid", "b", "plain", "c"}; !reflect.DeepEqual(r.Done, want) {
		t.Fatalf("done %v, want %v", r.Done, want)
	}
	if want := []string{"c", "b", "kid", "a"}; !reflect.DeepEqual(r.Undone, want) {
		t.Fatalf("undone %v, want %v", r.Undone, want)
	}
	for _, k := range []string{"staged/a", "staged/b", "staged/c"} {
		if _, ok := f.kv[k]; ok {
			t.Errorf("%s is still in kv after the rollback", k)
		}
	}
	if string(f.kv["kid-undone"]) != "echo:" {
		t.Errorf("the child step's compensation got %q", f.kv["kid-undone"])
	}
	if err := r.Rollback(); err != nil || len(r.Undone) != 4 || f.live["kv.delete"] != 3 {
		t.Fatalf("a second Rollback: %v, undone %v, %d deletes", err, r.Undone, f.live["kv.delete"])
	}
}

// A step may ask for the rollback (ErrRollback), and a caller may roll a
// completed plan back; a compensation that fails does not stop the others.
func TestExplicitRollback(t *testing.T) {
	f := newFake()
	steps := []plan.Step{
		undoable(f, "a"),
		{ID: "stop", Deps: []string{"a"}, Do: func(plan.Inputs) ([]byte, error) {
			return nil, fmt.Errorf("the user cancelled: %w", plan.ErrRollback)
		}},
		undoable(f, "b", "stop"),
	}
	replans := 0
	r, err := plan.Execute(steps, plan.Options{Host: f, Replan: func(plan.Signal, *plan.State) ([]plan.Step, error) {
		replans++
		return nil, nil
	}})
	if err == nil || !strings.Contains(err.Error(), `at step "stop": the user cancelled: plan: rollback asked; rolled back`) ||
		replans != 0 || !reflect.DeepEqual(r.Undone, []string{"a"}) || len(f.kv) != 0 {
		t.Fatalf("ErrRollback: %v, %d replans, undone %v", err, replans, r.Undone)
	}

	g := newFake()
	r, err = plan.Execute([]plan.Step{undoable(g, "x"), undoable(g, "y", "x"),
		{ID: "z", Deps: []string{"x"}, Do: func(plan.Inputs) ([]byte, error) { return nil, nil }, Undo: func([]byte) error { return errors.New("z cannot be undone") }}},
		plan.Options{Host: g})
	if err != nil {
		t.Fatal(err)
	}
	err = r.Rollback()
	if err == nil || err.Error() != `plan: undo of step "z": z cannot be undone` || !reflect.DeepEqual(r.Undone, []string{"y", "x"}) {
		t.Fatalf("Rollback: %v, undone %v", err, r.Undone)
	}
	if len(g.kv) != 0 {
		t.Fatalf("kv after the rollback: %v", g.kv)
	}
}

// A failed local step and a failed child each send StepFailed to the
// replanner, which sees the state and revises the plan around the
// failure; the plan then completes.
func TestReplanOnFailedStep(t *testing.T) {
	f := newFake()
	m := f.child("echo", echo)
	flaky := f.child("flaky", func([]byte) (string, []byte) { return abi.ChildFailed, []byte("exited with status 1") })
	var order []string
	steps := []plan.Step{
		local(&order, "a"),
		{ID: "kid", Child: &plan.Child{Module: flaky}},
		{ID: "b", Do: func(plan.Inputs) ([]byte, error) { return nil, errors.New("the page moved") }},
		local(&order, "c", "b", "kid"),
	}
	var sigs []plan.Signal
	var seen []*plan.State
	r, err := plan.Execute(steps, plan.Options{Host: f, Replan: func(sig plan.Signal, st *plan.State) ([]plan.Step, error) {
		sigs = append(sigs, sig)
		seen = append(seen, st)
		return []plan.Step{
			{ID: "kid2", Child: &plan.Child{Module: m, Input: static("again")}},
			local(&order, "b2", "a"),
			local(&order, "c2", "b2", "kid2"),
		}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(sigs) != 1 || sigs[0] != (plan.Signal{Kind: plan.StepFailed, Step: "b", Reason: "the page moved"}) {
		t.Fatalf("signals %+v", sigs)
	}
	st := seen[0]
	if !reflect.DeepEqual(st.Done, []string{"a"}) || len(st.Pending) != 1 || st.Pending[0].ID != "c" || len(st.Failed) != 2 ||
		st.Failed[1] != (plan.StepError{Step: "kid", Run: "run1", Status: abi.ChildFailed, Err: "child run1 ended failed: exited with status 1"}) {
		t.Fatalf("the replanner's state %+v", st)
	}
	if !reflect.DeepEqual(r.Done, []string{"a", "b2", "kid2", "c2"}) || string(r.Outputs["c2"]) != "c2(b2(a))(echo:again)" || r.Replans != 1 {
		t.Fatalf("done %v, c2 %q", r.Done, r.Outputs["c2"])
	}
	if !strings.Contains(f.logs(), "plan: signal step_failed b: the page moved\nplan: revised: pending kid2, b2, c2") {
		t.Fatalf("log:\n%s", f.logs())
	}
}

// Crossing the threshold on the run's calls sends one BudgetThreshold
// signal between waves, with the figures read; a step failing on a
// budget ceiling and a child ending budget_exhausted are budget signals
// too.
func TestReplanOnBudgetThreshold(t *testing.T) {
	f := newFake()
	f.ceiling = 20
	var order []string
	spend := func(id string, n int, deps ...string) plan.Step {
		return plan.Step{ID: id, Deps: deps, Do: func(plan.Inputs) ([]byte, error) {
			order = append(order, id)
			for i := 0; i < n; i++ {
				if _, err := f.KVGet("x"); !errors.Is(err, agent.ErrNotFound) {
					return nil, err
				}
			}
			return nil, nil
		}}
	}
	steps := []plan.Step{spend("a", 4), spend("b", 6, "a"), spend("expensive", 30, "b")}
	var sigs []plan.Signal
	r, err := plan.Execute(steps, plan.Options{Host: f, BudgetThreshold: 0.5, Replan: func(sig plan.Signal, st *plan.State) ([]plan.Step, error) {
		sigs = append(sigs, sig)
		return []plan.Step{spend("cheap", 1, "b")}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(sigs) != 1 || sigs[0].Kind != plan.BudgetThreshold || sigs[0].Step != "" || sigs[0].Ceiling != 20 || sigs[0].Used < 10 ||
		!strings.Contains(sigs[0].Reason, "of 20 calls used, past the threshold of 50%") {
		t.Fatalf("signals %+v", sigs)
	}
	if !reflect.DeepEqual(order, []string{"a", "b", "cheap"}) {
		t.Fatalf("ran %v", order)
	}
	if r.Spent == 0 {
		t.Fatal("the result does not say what the plan spent")
	}

	g := newFake()
	poor := g.child("poor", func([]byte) (string, []byte) { return abi.ChildBudgetExhausted, []byte("http_requests: 5 of 5") })
	for _, s := range []plan.Step{
		{ID: "host", Do: func(plan.Inputs) ([]byte, error) {
			return nil, &agent.HostError{Code: abi.StatusBudget, Message: "model_calls: ceiling 3 reached"}
		}},
		{ID: "kid", Child: &plan.Child{Module: poor}},
	} {
		var got plan.Signal
		_, err := plan.Execute([]plan.Step{s}, plan.Options{Host: g, Replan: func(sig plan.Signal, _ *plan.State) ([]plan.Step, error) {
			got = sig
			return nil, nil
		}})
		if err != nil || got.Kind != plan.BudgetThreshold || got.Step != s.ID {
			t.Fatalf("step %s: %v, signal %+v", s.ID, err, got)
		}
	}
}

// A denied approval sends ApprovalDenied; the step does not run, and
// the replanner's revision does.
func TestReplanOnDeniedApproval(t *testing.T) {
	f := newFake()
	f.denied["ops"] = "vetoed by bob"
	var order []string
	deploy := local(&order, "deploy")
	deploy.Approval = f.approver("ops", "deploy to prod")
	review := local(&order, "review")
	review.Approval = f.approver("qa", "mark reviewed")
	var got plan.Signal
	r, err := plan.Execute([]plan.Step{review, deploy}, plan.Options{Host: f, Replan: func(sig plan.Signal, st *plan.State) ([]plan.Step, error) {
		got = sig
		return []plan.Step{local(&order, "staging", "review")}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got != (plan.Signal{Kind: plan.ApprovalDenied, Step: "deploy", Reason: "approval denied: vetoed by bob"}) {
		t.Fatalf("signal %+v", got)
	}
	if !reflect.DeepEqual(order, []string{"review", "staging"}) || !reflect.DeepEqual(r.Done, order) {
		t.Fatalf("ran %v", order)
	}
	if want := []string{"approval qa: mark reviewed", "approval ops: deploy to prod"}; !reflect.DeepEqual(f.trace, want) {
		t.Fatalf("calls %q", f.trace)
	}
}

// A replanner that gives up, or one that returns an invalid revision, or
// one past MaxReplans, ends the plan rolled back, saying why.
func TestReplannerGivesUp(t *testing.T) {
	boom := plan.Step{ID: "boom", Deps: []string{"a"}, Do: func(plan.Inputs) ([]byte, error) { return nil, errors.New("no") }}
	cases := []struct {
		name   string
		replan plan.Replanner
		want   string
	}{
		{"gives up", func(plan.Signal, *plan.State) ([]plan.Step, error) { return nil, errors.New("nothing else to try") },
			"(the replanner gave up: nothing else to try)"},
		{"invalid revision", func(plan.Signal, *plan.State) ([]plan.Step, error) {
			return []plan.Step{{ID: "c", Deps: []string{"ghost"}, Do: boom.Do}}, nil
		}, `depends on "ghost", which no step names`},
		{"retries forever", func(s plan.Signal, st *plan.State) ([]plan.Step, error) {
			b := boom
			b.ID = fmt.Sprintf("boom%d", len(st.Failed))
			return []plan.Step{b}, nil
		}, "no revision left: 3 made, MaxReplans is 3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFake()
			r, err := plan.Execute([]plan.Step{undoable(f, "a"), boom}, plan.Options{Host: f, Replan: c.replan})
			var pe *plan.Error
			if !errors.As(err, &pe) || pe.Replanner == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Execute: %v, want an *Error saying %q", err, c.want)
			}
			if !reflect.DeepEqual(r.Undone, []string{"a"}) || len(f.kv) != 0 {
				t.Fatalf("undone %v, kv %v", r.Undone, f.kv)
			}
		})
	}
}

// A plan killed at any host call and resumed from its journal (the answers
// recorded before the kill replayed to the same calls, then live) makes
// the same decisions: the same steps, outputs, child runs and rollback,
// and no call the journal answered is made live again: no child is
// spawned twice, no kv write repeated.
func TestResumeAfterKillAtEveryCall(t *testing.T) {
	build := func(f *fakeHost) ([]plan.Step, plan.Options) {
		m := f.child("echo", echo)
		bad := f.child("bad", func([]byte) (string, []byte) { return abi.ChildFailed, []byte("bad luck") })
		steps := []plan.Step{
			undoable(f, "stage"),
			{ID: "p", Child: &plan.Child{Module: m, Input: static("p")}},
			{ID: "q", Child: &plan.Child{Module: bad}},
			{ID: "r", Deps: []string{"p", "stage"}, Child: &plan.Child{Module: m, Input: func(in plan.Inputs) ([]byte, error) { return in["p"], nil }}},
			{ID: "fail", Deps: []string{"r"}, Do: func(plan.Inputs) ([]byte, error) { return nil, errors.New("on purpose") }},
		}
		return steps, plan.Options{Host: f, Replan: func(sig plan.Signal, st *plan.State) ([]plan.Step, error) {
			if sig.Step == "fail" {
				return nil, errors.New("give up")
			}
			return []plan.Step{steps[3], steps[4]}, nil
		}}
	}
	run := func(f *fakeHost) (r *plan.Result, err error, killed bool) {
		defer func() {
			if p := recover(); p != nil {
				if p != errCrash {
					panic(p)
				}
				killed = true
			}
		}()
		steps, o := build(f)
		r, err = plan.Execute(steps, o)
		return r, err, false
	}
	base := newFake()
	want, wantErr, _ := run(base)
	if wantErr == nil || !reflect.DeepEqual(want.Undone, []string{"stage"}) {
		t.Fatalf("the uninterrupted plan: %v, undone %v", wantErr, want.Undone)
	}
	total := len(base.journal)
	for k := 1; k <= total; k++ {
		f := newFake()
		f.crashAt = k
		if _, _, killed := run(f); !killed {
			t.Fatalf("kill at call %d: the plan ended first", k)
		}
		g := f.replaying()
		got, err, _ := run(g)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got.Done, want.Done) || !reflect.DeepEqual(got.Outputs, want.Outputs) ||
			!reflect.DeepEqual(got.Runs, want.Runs) || !reflect.DeepEqual(got.Undone, want.Undone) || !reflect.DeepEqual(got.Signals, want.Signals) {
			t.Fatalf("kill at call %d: resumed to %v %+v\nwant %v %+v", k, err, got, wantErr, want)
		}
		for op, n := range base.live {
			if f.live[op]+g.live[op] != n {
				t.Fatalf("kill at call %d: %s made %d times live before the kill and %d after, want %d in all", k, op, f.live[op], g.live[op], n)
			}
		}
		if len(g.runs) != 3 || len(g.kv) != 0 {
			t.Fatalf("kill at call %d: %d children, kv %v", k, len(g.runs), g.kv)
		}
	}
}
