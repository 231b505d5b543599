package cell

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/agentrt/agentrt/journal"
)

// The crash-loop breaker of the daemon's recovery. A daemon resumes the
// unfinished runs it finds when it starts (Server.Recover); a run that
// kills its host would be resumed, and kill it, at every start, and every
// other run with it. So each recovery attempt is recorded durably before
// it starts, with the number of calls the run's journal held then. A run
// whose journal gained a call since its last attempt made progress, and
// its count starts again. Otherwise the attempt waits out a backoff that
// doubles with each attempt (counted from the last one, across restarts),
// and once Attempts attempts made no progress the run is held: marked
// held in the index with the reason, not resumed on its own, listed by
// agentrt runs; agentrt resume RUN continues it, and the count with it.

// RecoveryStore keeps the breaker's records, one opaque value per run,
// durably (badgerstore.Store is one).
type RecoveryStore interface {
	RecoveryRecord(run journal.RunID) ([]byte, bool, error)
	SetRecoveryRecord(run journal.RunID, rec []byte) error
	DeleteRecoveryRecord(run journal.RunID) error
}

// BreakerOptions tune the crash-loop breaker. Zero fields take the
// defaults of DefaultBreakerOptions.
type BreakerOptions struct {
	// Attempts is how many recoveries in a row may make no progress
	// before the run is held.
	Attempts int
	// Backoff is the wait before the second attempt without progress;
	// it doubles with each attempt, up to MaxBackoff.
	Backoff, MaxBackoff time.Duration
}

// DefaultBreakerOptions hold a run after 3 recoveries without progress,
// waiting 2 s before the second and 4 s before the third.
func DefaultBreakerOptions() BreakerOptions {
	return BreakerOptions{Attempts: 3, Backoff: 2 * time.Second, MaxBackoff: 5 * time.Minute}
}

// recoveryRecord is what the breaker keeps of a run (RecoveryStore's
// value, JSON).
type recoveryRecord struct {
	// Attempts counts the recoveries since the run last made progress.
	Attempts int `json:"attempts"`
	// Calls is the number of calls the journal held at the last attempt.
	Calls uint64 `json:"calls"`
	// Seq is the journal's length then, where the count of calls goes on.
	Seq uint64 `json:"seq"`
	// Last is when the last attempt started, Unix ns.
	Last int64 `json:"last"`
	// Held says the breaker held the run.
	Held bool `json:"held,omitempty"`
}

// breaker decides the recoveries of one daemon.
type breaker struct {
	store RecoveryStore
	st    journal.Store
	opts  BreakerOptions
	now   func() time.Time

	mu     sync.Mutex
	timers map[journal.RunID]*time.Timer
	closed bool
}

func newBreaker(store RecoveryStore, st journal.Store, opts BreakerOptions) *breaker {
	d := DefaultBreakerOptions()
	if opts.Attempts <= 0 {
		opts.Attempts = d.Attempts
	}
	if opts.Backoff <= 0 {
		opts.Backoff = d.Backoff
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = d.MaxBackoff
	}
	return &breaker{store: store, st: st, opts: opts, now: time.Now, timers: map[journal.RunID]*time.Timer{}}
}

// verdict is what to do with a run to recover.
type verdict struct {
	// wait is how long to back off before the attempt; hold, when set,
	// why the run is held instead.
	wait time.Duration
	hold string
	// rec is the run's record with the journal counted up to now, for
	// attempt.
	rec recoveryRecord
}

// decide returns what to do with run, unfinished, before its next
// recovery.
func (b *breaker) decide(ctx context.Context, run journal.RunID) (verdict, error) {
	rec, err := b.load(run)
	if err != nil {
		return verdict{}, err
	}
	if rec.Held {
		// Held before, and running again: resumed by hand since.
		rec = recoveryRecord{}
	}
	calls, seq, err := b.calls(ctx, run, rec)
	if err != nil {
		return verdict{}, err
	}
	if calls > rec.Calls {
		rec.Attempts = 0 // progress since the last attempt
	}
	rec.Calls, rec.Seq = calls, seq
	if rec.Attempts >= b.opts.Attempts {
		rec.Held = true
		if err := b.save(run, rec); err != nil {
			return verdict{}, err
		}
		return verdict{hold: fmt.Sprintf("held by the crash-loop breaker: %d recoveries in a row made no progress (the daemon died each time with the run at %d calls); agentrt resume RUN continues it", rec.Attempts, calls)}, nil
	}
	v := verdict{rec: rec}
	if rec.Attempts == 0 {
		return v, nil
	}
	wait := b.opts.Backoff << (rec.Attempts - 1)
	if wait > b.opts.MaxBackoff || wait <= 0 {
		wait = b.opts.MaxBackoff
	}
	v.wait = time.Unix(0, rec.Last).Add(wait).Sub(b.now())
	return v, nil
}

// attempt records, durably, that a recovery of run with the record v.rec
// (decide's) starts now.
func (b *breaker) attempt(run journal.RunID, v verdict) error {
	rec := v.rec
	rec.Attempts++
	rec.Last = b.now().UnixNano()
	return b.save(run, rec)
}

// forget drops the record of run, if any.
func (b *breaker) forget(run journal.RunID) {
	if _, ok, err := b.store.RecoveryRecord(run); err == nil && ok {
		_ = b.store.DeleteRecoveryRecord(run)
	}
}

// later calls fn after d, unless the daemon shuts down first.
func (b *breaker) later(run journal.RunID, d time.Duration, fn func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	if t := b.timers[run]; t != nil {
		t.Stop()
	}
	b.timers[run] = time.AfterFunc(d, func() {
		b.mu.Lock()
		closed := b.closed
		delete(b.timers, run)
		b.mu.Unlock()
		if !closed {
			fn()
		}
	})
}

// close stops every recovery still waiting out its backoff.
func (b *breaker) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for _, t := range b.timers {
		t.Stop()
	}
}

func (b *breaker) load(run journal.RunID) (recoveryRecord, error) {
	var rec recoveryRecord
	raw, ok, err := b.store.RecoveryRecord(run)
	if err != nil || !ok {
		return rec, err
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		return recoveryRecord{}, fmt.Errorf("cell: recovery record of %s: %w", run, err)
	}
	return rec, nil
}

func (b *breaker) save(run journal.RunID, rec recoveryRecord) error {
	raw, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return b.store.SetRecoveryRecord(run, raw)
}

// calls counts the calls of run's journal, reading on from where the last
// count ended (rec.Seq: only the entries since the last attempt are read),
// and returns it with the journal's length.
func (b *breaker) calls(ctx context.Context, run journal.RunID, rec recoveryRecord) (calls, seq uint64, err error) {
	calls, seq = rec.Calls, rec.Seq
	err = b.st.Records(ctx, run, rec.Seq, func(s uint64, raw []byte) error {
		seq = s + 1
		r, err := journal.DecodeRecord(raw)
		if err != nil {
			return err
		}
		e, err := journal.DecodeEntry(r.Entry)
		if err != nil {
			return err
		}
		if e.Op != "" && (e.Phase == journal.PhaseCompleted || e.Phase == journal.PhaseFailed) {
			calls++
		}
		return nil
	})
	return calls, seq, err
}

// recoverRun resumes run through the breaker: it is held, deferred or
// started now (what names how, in the log). It returns whether it started.
func (s *Server) recoverRun(ctx context.Context, run journal.RunID, what string) (bool, error) {
	v, err := s.breaker.decide(ctx, run)
	if err != nil {
		s.logf("recover run %s: %v", run, err)
		return false, nil
	}
	switch {
	case v.hold != "":
		if err := s.cell.Host.Hold(ctx, run, v.hold); err != nil {
			s.logf("hold run %s: %v", run, err)
			return false, nil
		}
		s.logf("run %s %s", run, v.hold)
		return false, nil
	case v.wait > 0:
		s.logf("run %s: its last recovery made no progress; the next waits %v", run, v.wait.Round(time.Millisecond))
		s.breaker.later(run, v.wait, func() {
			if _, err := s.recoverRun(context.Background(), run, "recovered (after a backoff)"); err != nil {
				s.logf("recover run %s: %v", run, err)
			}
		})
		return false, nil
	}
	if err := s.breaker.attempt(run, v); err != nil {
		s.logf("recover run %s: %v", run, err)
		return false, nil
	}
	st, err := s.cell.Host.Reopen(ctx, run)
	if err != nil {
		s.logf("recover run %s: %v", run, err)
		return false, nil
	}
	return true, s.execute(st, what)
}

// liveRuns lists the runs this server's host is executing.
func (s *Server) liveRuns(ctx context.Context) []journal.RunID {
	runs, err := s.cell.Journal.Runs(ctx)
	if err != nil {
		return nil
	}
	var out []journal.RunID
	for _, m := range runs {
		if s.cell.Host.Live(m.ID) {
			out = append(out, m.ID)
		}
	}
	return out
}
