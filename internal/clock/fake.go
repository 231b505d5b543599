package clock

import (
	"sort"
	"sync"
	"time"
)

// Fake is a clock that tests move by hand: its timers fire when Advance or
// Set passes their time, never on their own. The zero value is not usable;
// use NewFake.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers []*timer
	seq    int
}

type timer struct {
	c    *Fake
	at   time.Time
	seq  int
	f    func()
	done bool
}

// NewFake returns a clock that reads start until it is moved.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

// Now returns the clock's time.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// fakeTimer is a pending AfterFunc of the fake clock.
type fakeTimer struct{ t *timer }

// Stop keeps the timer from firing; it reports whether it did.
func (t fakeTimer) Stop() bool {
	t.t.c.mu.Lock()
	defer t.t.c.mu.Unlock()
	if t.t.done {
		return false
	}
	t.t.done = true
	return true
}

// AfterFunc calls f, in a goroutine of its own, once the clock has been
// moved d or more past now. A d of zero or less fires at once.
func (c *Fake) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &timer{c: c, at: c.now.Add(d), seq: c.seq, f: f}
	if d <= 0 {
		t.done = true
		go f()
		return fakeTimer{t}
	}
	c.timers = append(c.timers, t)
	return fakeTimer{t}
}

// Advance moves the clock forward by d and fires, in time order, every
// timer due by then. It returns the number fired.
func (c *Fake) Advance(d time.Duration) int {
	c.mu.Lock()
	to := c.now.Add(d)
	c.mu.Unlock()
	return c.Set(to)
}

// Set moves the clock to t (never backwards) and fires the timers due.
func (c *Fake) Set(t time.Time) int {
	c.mu.Lock()
	if t.After(c.now) {
		c.now = t
	}
	var due []*timer
	keep := c.timers[:0]
	for _, tm := range c.timers {
		switch {
		case tm.done:
		case !tm.at.After(c.now):
			tm.done = true
			due = append(due, tm)
		default:
			keep = append(keep, tm)
		}
	}
	c.timers = keep
	c.mu.Unlock()
	sort.Slice(due, func(i, j int) bool {
		if !due[i].at.Equal(due[j].at) {
			return due[i].at.Before(due[j].at)
		}
		return due[i].seq < due[j].seq
	})
	for _, tm := range due {
		go tm.f()
	}
	return len(due)
}

// Pending returns the number of timers not fired or stopped.
func (c *Fake) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, tm := range c.timers {
		if !tm.done {
			n++
		}
	}
	return n
}
