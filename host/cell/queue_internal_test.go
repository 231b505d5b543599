package cell

import (
	"fmt"
	"testing"
	"time"
)

// TestQueueAgingServesALowPriorityRun: one priority-1 run queued at t0
// behind a stream of priority-9 runs, one queued and one popped per aging
// step, is popped once it has aged past them: after at most 9 steps, and
// not before it outranks every fresh arrival.
func TestQueueAgingServesALowPriorityRun(t *testing.T) {
	const aging = time.Second
	t0 := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	q := newRunQueue(aging)
	q.push(&queued{key: "submit", prio: 1, since: t0, payload: "low"})
	for i := 0; ; i++ {
		now := t0.Add(time.Duration(i) * aging)
		q.push(&queued{key: fmt.Sprintf("task:%d", i), prio: 9, since: now, payload: fmt.Sprintf("high %d", i)})
		it := q.pop(now)
		if it.payload == "low" {
			// Effective 1+i against 9 for the fresh arrival: ties go to
			// the lane never served with the older head, the low run.
			if i != 8 {
				t.Fatalf("the low-priority run was served after %d aging steps, want 8", i)
			}
			return
		}
		if i > 8 {
			t.Fatalf("the low-priority run starves: %d steps and still queued", i)
		}
	}
}

// TestQueueRoundRobinBetweenLanes: three tasks with three runs each, all
// queued at once at one priority, are served one run of each in turn, in
// the order the tasks first queued; FIFO within a task.
func TestQueueRoundRobinBetweenLanes(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	q := newRunQueue(time.Hour)
	n := 0
	for _, task := range []string{"a", "b", "c"} {
		for i := range 3 {
			q.push(&queued{key: "task:" + task, prio: DefaultPriority, since: t0.Add(time.Duration(n) * time.Millisecond), payload: fmt.Sprintf("%s%d", task, i)})
			n++
		}
	}
	var got []any
	for q.Len() > 0 {
		got = append(got, q.pop(t0.Add(time.Second)).payload)
	}
	if s := fmt.Sprint(got); s != "[a0 b0 c0 a1 b1 c1 a2 b2 c2]" {
		t.Fatalf("served %s", s)
	}
	if q.pop(t0) != nil || len(q.lanes) != 0 {
		t.Fatal("an empty queue popped a run or kept a lane")
	}
}

// TestQueueRemove: a removed run is never popped, and the count follows.
func TestQueueRemove(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	q := newRunQueue(time.Hour)
	a := &queued{key: "submit", prio: 5, since: t0, payload: "a"}
	b := &queued{key: "submit", prio: 5, since: t0.Add(time.Millisecond), payload: "b"}
	q.push(a)
	q.push(b)
	if !q.remove(a) || q.remove(a) || q.Len() != 1 {
		t.Fatalf("remove: len %d", q.Len())
	}
	if it := q.pop(t0); it != b || q.Len() != 0 {
		t.Fatalf("popped %v", it)
	}
}
