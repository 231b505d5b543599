// Package clock is the time a cell daemon's schedules run on (durable
// timers, trigger schedules, task backoffs, approval expiries): the system's
// clock in a cell, a Fake that tests move by hand.
package clock

import "time"

// A Clock tells the time and calls functions later.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in a goroutine of its own once d has passed,
	// unless the returned timer is stopped first.
	AfterFunc(d time.Duration, f func()) Timer
}

// A Timer is a pending AfterFunc.
type Timer interface {
	// Stop keeps the timer from firing; it reports whether it did.
	Stop() bool
}

// Real is the system's clock.
var Real Clock = real{}

type real struct{}

func (real) Now() time.Time { return time.Now() }

func (real) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
