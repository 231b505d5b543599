// Package trigger is the pure part of a cell daemon's triggers: what a
// trigger's --on SPEC, misfire and overlap policies mean, which scheduled
// moments are due and how a catch-up treats them, the metric grammar and
// the webhook signature. It does no I/O and reads no clock: the daemon
// (host/cell, triggers*.go) passes the time and does the claiming,
// starting and logging, so the rules here are tested exactly.
package trigger

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/robfig/cron/v3"
)

// Kind is what fires a trigger.
type Kind string

// The kinds of SPEC.
const (
	// Schedule fires at the moments of a cron expression.
	Schedule Kind = "schedule"
	// KV fires on a write under a key prefix of a kv namespace.
	KV Kind = "kv"
	// File fires on a file that arrives in a watched folder.
	File Kind = "file"
	// Webhook fires on a signed POST to the daemon.
	Webhook Kind = "webhook"
	// Metric fires when a threshold over the cell's own counters is
	// crossed.
	Metric Kind = "metric"
)

// ErrSpec is wrapped by every error of Parse.
var ErrSpec = errors.New("trigger spec")

// Spec is a parsed --on SPEC.
type Spec struct {
	Kind Kind
	// Text is the SPEC as given.
	Text string
	// Cron is the schedule of a Schedule trigger.
	Cron cron.Schedule
	// Namespace and Prefix are a KV trigger's.
	Namespace, Prefix string
	// Dir and Glob are a File trigger's: Dir is absolute and has no glob
	// characters; Glob is matched (doublestar) against the path of an
	// arriving file relative to Dir, with slashes.
	Dir, Glob string
	// Expr is a Metric trigger's threshold.
	Expr Expr
}

// cronParser takes the standard five fields, an optional leading seconds
// field, and the descriptors (@hourly, @every 10s, ...).
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Parse parses an --on SPEC: schedule:CRON, kv:NAMESPACE/PREFIX,
// file:DIR/GLOB (DIR absolute), webhook, or metric:EXPR.
func Parse(s string) (Spec, error) {
	kind, rest, _ := strings.Cut(s, ":")
	sp := Spec{Kind: Kind(kind), Text: s}
	switch sp.Kind {
	case Schedule:
		if strings.TrimSpace(rest) == "" {
			return sp, fmt.Errorf("%w %q: no cron expression (write schedule:'*/5 * * * *', schedule:@hourly or schedule:'@every 30s')", ErrSpec, s)
		}
		sched, err := cronParser.Parse(rest)
		if err != nil {
			return sp, fmt.Errorf("%w %q: cron: %v (five fields minute hour day-of-month month day-of-week, an optional leading seconds field, or @every DURATION)", ErrSpec, s, err)
		}
		if sched.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
			return sp, fmt.Errorf("%w %q: the schedule has no moment", ErrSpec, s)
		}
		sp.Cron = sched
	case KV:
		ns, prefix, ok := strings.Cut(rest, "/")
		if !ok || ns == "" {
			return sp, fmt.Errorf("%w %q: write kv:NAMESPACE/PREFIX (the prefix may be empty: kv:NAMESPACE/)", ErrSpec, s)
		}
		sp.Namespace, sp.Prefix = ns, prefix
	case File:
		if rest == "" {
			return sp, fmt.Errorf("%w %q: write file:/ABSOLUTE/DIR/GLOB, e.g. file:/srv/inbox/*.csv", ErrSpec, s)
		}
		rest = filepath.ToSlash(rest)
		base, pattern := doublestar.SplitPattern(rest)
		if pattern == "" || pattern == "." || !strings.ContainsAny(rest, "*?[{") {
			// No glob: the last element is the one name to watch for.
			base, pattern = filepath.ToSlash(filepath.Dir(filepath.FromSlash(rest))), filepath.Base(filepath.FromSlash(rest))
		}
		if !filepath.IsAbs(filepath.FromSlash(base)) {
			return sp, fmt.Errorf("%w %q: the folder %q is not absolute (agentrt trigger add makes a relative one absolute; through the API, send an absolute path)", ErrSpec, s, base)
		}
		if !doublestar.ValidatePattern(pattern) {
			return sp, fmt.Errorf("%w %q: the glob %q is not valid", ErrSpec, s, pattern)
		}
		sp.Dir, sp.Glob = filepath.Clean(filepath.FromSlash(base)), pattern
	case Webhook:
		if rest != "" || strings.Contains(s, ":") {
			return sp, fmt.Errorf("%w %q: a webhook trigger takes nothing after its kind: write webhook", ErrSpec, s)
		}
	case Metric:
		e, err := ParseExpr(rest)
		if err != nil {
			return sp, fmt.Errorf("%w %q: %w", ErrSpec, s, err)
		}
		sp.Expr = e
	default:
		return sp, fmt.Errorf("%w %q: unknown kind %q (schedule:CRON, kv:NAMESPACE/PREFIX, file:DIR/GLOB, webhook, metric:EXPR)", ErrSpec, s, kind)
	}
	return sp, nil
}

// Match says whether rel, a path relative to a File trigger's Dir, is one
// its glob takes.
func (sp Spec) Match(rel string) bool {
	ok, err := doublestar.Match(sp.Glob, filepath.ToSlash(rel))
	return err == nil && ok
}

// Recursive says whether a File trigger's glob can match below Dir, so
// that its subfolders are watched too.
func (sp Spec) Recursive() bool {
	return strings.Contains(sp.Glob, "/") || strings.Contains(sp.Glob, "**")
}

// Misfire says what a schedule does with moments it missed (the cell was
// down, or busy past a moment's grace).
type Misfire struct {
	// Mode is MisfireSkip, MisfireOnce or MisfireAll.
	Mode string
	// N bounds MisfireAll: at most the N newest missed moments fire.
	N int
}

// The misfire modes.
const (
	MisfireSkip = "skip"
	MisfireOnce = "once"
	MisfireAll  = "all"
)

// MaxCatchup bounds the N of all:N.
const MaxCatchup = 1000

// String is the policy as ParseMisfire takes it.
func (m Misfire) String() string {
	if m.Mode == MisfireAll {
		return fmt.Sprintf("all:%d", m.N)
	}
	return m.Mode
}

// ParseMisfire parses skip, once or all:N; empty is once.
func ParseMisfire(s string) (Misfire, error) {
	switch {
	case s == "" || s == MisfireOnce:
		return Misfire{Mode: MisfireOnce}, nil
	case s == MisfireSkip:
		return Misfire{Mode: MisfireSkip}, nil
	case strings.HasPrefix(s, MisfireAll+":"):
		n, err := strconv.Atoi(strings.TrimPrefix(s, MisfireAll+":"))
		if err != nil || n < 1 || n > MaxCatchup {
			return Misfire{}, fmt.Errorf("misfire %q: N of all:N must be a number from 1 to %d", s, MaxCatchup)
		}
		return Misfire{Mode: MisfireAll, N: n}, nil
	}
	return Misfire{}, fmt.Errorf("misfire %q: want skip, once or all:N", s)
}

// Overlap says what a firing does while a run the trigger started is still
// going.
type Overlap string

// The overlap policies.
const (
	// OverlapSkip drops the firing (logged as skipped).
	OverlapSkip Overlap = "skip"
	// OverlapQueue keeps the firing until the runs going have ended, then
	// starts it; firings queue in order, up to MaxQueued.
	OverlapQueue Overlap = "queue"
	// OverlapAllow starts the firing at once, beside the runs going.
	OverlapAllow Overlap = "allow"
)

// MaxQueued bounds the firings a queueing trigger keeps waiting; one more
// is skipped, and logged so.
const MaxQueued = 100

// ParseOverlap parses skip, queue or allow; empty is the default of kind:
// skip for schedule and metric triggers (a moment or a threshold a run is
// still answering needs no second run), queue for the kinds whose firings
// are events (kv, file, webhook), each of which is to be answered.
func ParseOverlap(s string, kind Kind) (Overlap, error) {
	switch Overlap(s) {
	case "":
		if kind == Schedule || kind == Metric {
			return OverlapSkip, nil
		}
		return OverlapQueue, nil
	case OverlapSkip, OverlapQueue, OverlapAllow:
		return Overlap(s), nil
	}
	return "", fmt.Errorf("overlap %q: want skip, queue or allow", s)
}

// Grace is how late a scheduled moment may be looked at and still be on
// time. A moment later than that, or one whose next moment has come too,
// is missed, and the misfire policy decides it.
const Grace = time.Minute

// Plan is what a schedule does with the moments due at a look.
type Plan struct {
	// Fire are the moments to fire, oldest first: the first at once, the
	// others (a catch-up) spaced CatchupSpacing apart.
	Fire []time.Time
	// Skipped are the moments due that the misfire policy drops, oldest
	// first; the log records them as one entry.
	Skipped []time.Time
	// Catchup says the moments were missed (the plan is a catch-up).
	Catchup bool
}

// CatchupSpacing is the time between two firings of a catch-up: after an
// outage the missed moments are not started in a burst.
const CatchupSpacing = 10 * time.Second

// maxDue bounds the moments Due lists: a schedule of every second down for
// a week has 604 800, of which no policy fires more than MaxCatchup.
const maxDue = 100000

// Due returns the plan for the moments of sched after cursor up to now,
// under the misfire policy m. On time, the one moment due fires. Missed
// (more than one due, or the one due later than Grace):
//   - skip fires none, except the newest when it is on time;
//   - once fires the newest, once, for all of them;
//   - all:N fires the N newest, spaced.
//
// The others are skipped. When more than maxDue moments are due, the
// oldest are not listed: the plan then skips from the first listed.
func Due(sched cron.Schedule, cursor, now time.Time, m Misfire) Plan {
	var due []time.Time
	for t := sched.Next(cursor); !t.IsZero() && !t.After(now); t = sched.Next(t) {
		due = append(due, t)
		if len(due) > maxDue {
			due = due[len(due)-maxDue/2:]
		}
	}
	if len(due) == 0 {
		return Plan{}
	}
	newest := due[len(due)-1]
	onTime := now.Sub(newest) <= Grace
	if len(due) == 1 && onTime {
		return Plan{Fire: due}
	}
	p := Plan{Catchup: true}
	keep := 0
	switch m.Mode {
	case MisfireSkip:
		if onTime {
			keep = 1
		}
	case MisfireOnce:
		keep = 1
	case MisfireAll:
		keep = min(m.N, len(due))
	}
	p.Skipped = due[:len(due)-keep]
	p.Fire = due[len(due)-keep:]
	return p
}
