package cell

import (
	"time"
)

// The run queue of the scheduler (sched.go), without I/O: the scheduler
// pushes the runs that wait for a worker and pops the next one when a
// worker is free.
//
// Order:
//  1. A run's effective priority is its priority (1 lowest .. 9 highest)
//     plus one for each aging step it has waited, so a low-priority run
//     overtakes fresher high-priority ones after at most
//     (MaxPriority-p)×aging and is never starved.
//  2. Among the lanes whose head has the highest effective priority, the
//     lane served least recently goes first: runs of the same priority
//     are taken round-robin between tasks, triggers, parents (a spawn's
//     lane is its parent run) and API submissions, so one task with many
//     attempts does not hold off another.
//  3. Within a lane (a fairness key and a priority), first in, first out.
//
// A pop costs O(lanes); there are at most as many lanes as queued runs,
// and the queue is bounded (SchedulerOptions.MaxQueued).

// Priorities of runs: a run submitted without one has DefaultPriority; a
// spawned child without one has its parent's.
const (
	MinPriority     = 1
	MaxPriority     = 9
	DefaultPriority = 5
)

// queued is one run waiting for a worker.
type queued struct {
	key   string // the fairness key: a task, a trigger, a parent run, "submit"
	prio  uint8
	since time.Time
	// payload is what the scheduler executes; the queue never looks at it.
	payload any
}

// lane is the queued runs of one fairness key and priority, oldest first.
type lane struct {
	key    string
	prio   uint8
	items  []*queued
	served uint64 // the pop counter when the lane was last served (0: never)
}

// runQueue is the scheduler's queue. It is not safe for concurrent use.
type runQueue struct {
	aging time.Duration
	lanes map[laneID]*lane
	n     int
	pops  uint64
	// seq orders lanes never served by when they were made, so that a
	// tie between new lanes goes to the older one.
	seq uint64
}

type laneID struct {
	key  string
	prio uint8
}

func newRunQueue(aging time.Duration) *runQueue {
	return &runQueue{aging: aging, lanes: map[laneID]*lane{}}
}

// Len returns the number of queued runs.
func (q *runQueue) Len() int { return q.n }

// push queues it at the tail of its lane.
func (q *runQueue) push(it *queued) {
	id := laneID{it.key, it.prio}
	l := q.lanes[id]
	if l == nil {
		l = &lane{key: it.key, prio: it.prio}
		q.lanes[id] = l
	}
	l.items = append(l.items, it)
	q.n++
}

// effective is the priority of it at now, aged.
func (q *runQueue) effective(it *queued, now time.Time) int {
	p := int(it.prio)
	if q.aging > 0 {
		if w := now.Sub(it.since); w > 0 {
			p += int(w / q.aging)
		}
	}
	return p
}

// pop removes and returns the run to execute next at now, nil when the
// queue is empty.
func (q *runQueue) pop(now time.Time) *queued {
	var best *lane
	bestP := 0
	for _, l := range q.lanes {
		p := q.effective(l.items[0], now)
		switch {
		case best == nil, p > bestP:
		case p < bestP:
			continue
		case l.served != best.served:
			if l.served > best.served {
				continue
			}
		case !l.items[0].since.Before(best.items[0].since):
			// Equal priority, equally served: the older head first.
			continue
		}
		best, bestP = l, p
	}
	if best == nil {
		return nil
	}
	it := best.items[0]
	best.items[0] = nil
	best.items = best.items[1:]
	q.pops++
	best.served = q.pops
	q.n--
	if len(best.items) == 0 {
		delete(q.lanes, laneID{best.key, best.prio})
	}
	return it
}

// remove takes it out of the queue; it reports whether it was queued.
func (q *runQueue) remove(it *queued) bool {
	id := laneID{it.key, it.prio}
	l := q.lanes[id]
	if l == nil {
		return false
	}
	for i, x := range l.items {
		if x == it {
			l.items = append(l.items[:i], l.items[i+1:]...)
			q.n--
			if len(l.items) == 0 {
				delete(q.lanes, id)
			}
			return true
		}
	}
	return false
}

// oldest returns when the longest-waiting queued run was queued (zero for
// an empty queue).
func (q *runQueue) oldest() time.Time {
	var t time.Time
	for _, l := range q.lanes {
		if s := l.items[0].since; t.IsZero() || s.Before(t) {
			t = s
		}
	}
	return t
}

// byPriority counts the queued runs by priority.
func (q *runQueue) byPriority() [MaxPriority + 1]int {
	var out [MaxPriority + 1]int
	for _, l := range q.lanes {
		out[l.prio] += len(l.items)
	}
	return out
}
