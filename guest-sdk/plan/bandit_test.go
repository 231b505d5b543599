package plan_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/guest-sdk/plan"
)

// The bandit learns from the outcomes it records in kv: over rounds where
// "careful" succeeds and "hasty" fails, it comes to choose "careful"
// almost always; and its choices are a function of the journaled random
// bytes and kv alone: the same seed gives the same sequence.
func TestBanditLearns(t *testing.T) {
	rounds := func(seed uint64) ([]string, *fakeHost) {
		f := newFake()
		f.seed = seed
		b := &plan.Bandit{Name: "publish", Arms: []string{"hasty", "careful", "lazy"}, Host: f}
		var chosen []string
		for i := 0; i < 120; i++ {
			arm, err := b.Choose()
			if err != nil {
				t.Fatal(err)
			}
			chosen = append(chosen, arm)
			reward := map[string]float64{"hasty": 0, "careful": 1, "lazy": 0.2}[arm]
			if err := b.Record(arm, reward); err != nil {
				t.Fatal(err)
			}
		}
		return chosen, f
	}
	a, f := rounds(7)
	careful := 0
	for _, arm := range a[80:] {
		if arm == "careful" {
			careful++
		}
	}
	if careful < 36 {
		t.Fatalf("the last 40 choices picked careful %d times: %v", careful, a)
	}
	var rec plan.Arm
	if err := json.Unmarshal(f.kv["plan/bandit/publish/careful"], &rec); err != nil || rec.Pulls == 0 || rec.Reward != float64(rec.Pulls) {
		t.Fatalf("careful's record %s: %v", f.kv["plan/bandit/publish/careful"], err)
	}
	again, _ := rounds(7)
	if !reflect.DeepEqual(a, again) {
		t.Fatal("the same seed gave two sequences of choices")
	}
	other, _ := rounds(8)
	if reflect.DeepEqual(a, other) {
		t.Fatal("two seeds gave the same 120 choices: the draws do not come from random.bytes")
	}

	b := &plan.Bandit{Name: "publish", Arms: []string{"hasty"}, Host: f}
	if err := b.Record("slow", 1); err == nil || !strings.Contains(err.Error(), `has no arm "slow"`) {
		t.Fatalf("Record of an unknown arm: %v", err)
	}
	if err := b.Record("hasty", 2); err == nil || !strings.Contains(err.Error(), "not between 0 and 1") {
		t.Fatalf("Record of reward 2: %v", err)
	}
	f.kv["plan/bandit/publish/hasty"] = []byte("{")
	if _, err := b.Choose(); err == nil || !strings.Contains(err.Error(), "hint: delete key plan/bandit/publish/hasty") {
		t.Fatalf("Choose over a damaged record: %v", err)
	}
	if _, err := (&plan.Bandit{Name: "x", Arms: []string{"a", "a"}, Host: f}).Choose(); err == nil {
		t.Fatal("a bandit with an arm named twice chose")
	}
}

// Reflect writes what a plan did to kv, numbered per goal.
func TestReflect(t *testing.T) {
	f := newFake()
	m := f.child("echo", echo)
	steps := []plan.Step{
		undoable(f, "stage"),
		{ID: "kid", Child: &plan.Child{Module: m}},
		{ID: "boom", Deps: []string{"stage", "kid"}, Do: func(plan.Inputs) ([]byte, error) { return nil, errors.New("on purpose") }},
	}
	r, err := plan.Execute(steps, plan.Options{Host: f})
	if err == nil {
		t.Fatal("the plan did not fail")
	}
	ref, key, rerr := plan.Reflect(f, "report", "careful", r, err)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if key != "plan/reflection/report/000001" || ref.Outcome != "rolled_back" || ref.Strategy != "careful" ||
		!reflect.DeepEqual(ref.Undone, []string{"stage"}) || ref.Cost.Children != 1 || ref.Cost.Waves != 2 || ref.Cost.Calls == 0 ||
		len(ref.Runs) != 1 || ref.Runs[0] != (plan.StepRun{Step: "kid", Run: "run1"}) {
		t.Fatalf("reflection %s %+v", key, ref)
	}
	var stored plan.Reflection
	if err := json.Unmarshal(f.kv[key], &stored); err != nil || !reflect.DeepEqual(&stored, ref) {
		t.Fatalf("stored %s: %v", f.kv[key], err)
	}
	r2, err := plan.Execute([]plan.Step{undoable(f, "other")}, plan.Options{Host: f})
	if err != nil {
		t.Fatal(err)
	}
	ref, key, rerr = plan.Reflect(f, "report", "hasty", r2, nil)
	if rerr != nil || key != "plan/reflection/report/000002" || ref.Outcome != "completed" {
		t.Fatalf("second reflection %s %+v: %v", key, ref, rerr)
	}
}
