package trigger

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Expr is a metric trigger's threshold: COUNTER OP NUMBER, with /WINDOW
// for the counters of events (runs started, completed or failed within the
// last WINDOW; spend_usd, the dollars spent by the runs that ended within
// it, from their budget records), without for the gauges (runs parked
// now).
//
//	runs_failed>3/10m     more than 3 runs failed in the last 10 minutes
//	runs_started>=100/1h  at least 100 runs started in the last hour
//	spend_usd>5/1h        the runs that ended in the last hour spent over $5
//	runs_parked>50        more than 50 runs parked now
type Expr struct {
	Counter string
	Op      string
	Value   float64
	// Window is the span an event counter counts over; zero for a gauge.
	Window time.Duration
	// Text is the expression as given.
	Text string
}

// The counters a cell has, and whether each is a gauge (no window).
var counters = map[string]bool{
	"runs_started":   false,
	"runs_completed": false,
	"runs_failed":    false,
	"runs_cancelled": false,
	"spend_usd":      false,
	"runs_parked":    true,
	"runs_live":      true,
}

// CounterNames lists the counters an Expr may name.
func CounterNames() []string {
	return []string{"runs_started", "runs_completed", "runs_failed", "runs_cancelled", "spend_usd", "runs_parked", "runs_live"}
}

// IsGauge says whether counter is a gauge (a number now, without window).
func IsGauge(counter string) bool { return counters[counter] }

// ErrNoCounter is wrapped by ParseExpr for a counter the cell does not
// have.
var ErrNoCounter = errors.New("the cell has no such counter")

// unsupported names counters asked for that the cell cannot count yet,
// with why.
var unsupported = map[string]string{
	"queue_depth": "the cell has no queue yet (a run starts when it is submitted), so there is no queue depth to watch",
	"spend":       "write spend_usd: the dollars spent by the runs that ended within the window",
}

// MinWindow and MaxWindow bound an event counter's window.
const (
	MinWindow = time.Second
	MaxWindow = 7 * 24 * time.Hour
)

// ParseExpr parses COUNTER OP NUMBER[/WINDOW]; OP is one of > >= < <= ==,
// WINDOW a Go duration (10m, 1h30m).
func ParseExpr(s string) (Expr, error) {
	e := Expr{Text: s}
	t := strings.ReplaceAll(s, " ", "")
	i := strings.IndexAny(t, "<>=")
	if i <= 0 {
		return e, fmt.Errorf("metric %q: write COUNTER OP NUMBER[/WINDOW], e.g. runs_failed>3/10m (counters: %s)", s, strings.Join(CounterNames(), ", "))
	}
	e.Counter = t[:i]
	rest := t[i:]
	for _, op := range []string{">=", "<=", "==", ">", "<"} {
		if strings.HasPrefix(rest, op) {
			e.Op, rest = op, rest[len(op):]
			break
		}
	}
	if e.Op == "" {
		return e, fmt.Errorf("metric %q: the operator must be one of > >= < <= ==", s)
	}
	if why, ok := unsupported[e.Counter]; ok {
		return e, fmt.Errorf("metric %q: %w %q: %s (counters: %s)", s, ErrNoCounter, e.Counter, why, strings.Join(CounterNames(), ", "))
	}
	gauge, ok := counters[e.Counter]
	if !ok {
		return e, fmt.Errorf("metric %q: %w %q (counters: %s)", s, ErrNoCounter, e.Counter, strings.Join(CounterNames(), ", "))
	}
	num, win, hasWin := strings.Cut(rest, "/")
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 {
		return e, fmt.Errorf("metric %q: the threshold %q is not a number of zero or more", s, num)
	}
	e.Value = v
	switch {
	case gauge && hasWin:
		return e, fmt.Errorf("metric %q: %s is a number now, not a count over a window: leave /%s out", s, e.Counter, win)
	case !gauge && !hasWin:
		return e, fmt.Errorf("metric %q: %s counts over a window: add one, e.g. %s%s%s/10m", s, e.Counter, e.Counter, e.Op, num)
	case hasWin:
		d, err := time.ParseDuration(win)
		if err != nil || d < MinWindow || d > MaxWindow {
			return e, fmt.Errorf("metric %q: the window %q must be a duration from %s to %s (10m, 1h)", s, win, MinWindow, MaxWindow)
		}
		e.Window = d
	}
	return e, nil
}

// Holds says whether the threshold holds for the counter's value v.
func (e Expr) Holds(v float64) bool {
	switch e.Op {
	case ">":
		return v > e.Value
	case ">=":
		return v >= e.Value
	case "<":
		return v < e.Value
	case "<=":
		return v <= e.Value
	}
	return v == e.Value
}

// Edge is a metric trigger's state machine: it fires when the threshold
// comes to hold, and again only after it has stopped holding, so that a
// condition that lasts is one firing, not one per look.
type Edge struct {
	// High says the threshold held at the last look.
	High bool
}

// Look records the threshold's state now and says whether to fire.
func (e *Edge) Look(holds bool) bool {
	fire := holds && !e.High
	e.High = holds
	return fire
}
