package cell

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/clock"
	"github.com/agentrt/agentrt/journal"
)

// The daemon's parked runs. A parked run holds no instance and no memory
// beyond one timer per run that waits for a time (a durable sleep's wake
// time, an approval's expiry): its state is its journal and its index
// record, which says what it waits for (RunMeta.Wait). The daemon resumes
// it, through Reopen, the path of every resume, when
//   - its timer fires (the cell's clock passes the wait's Until);
//   - a vote decides its approval (Book.Vote);
//   - the child it awaits ends (agents.go);
// and when the daemon starts (Recover): every parked run is armed again,
// and one whose time has passed, or whose approval was decided while no
// daemon ran, is resumed at once. A cancelled run keeps its wait and is
// not resumed on its own; agentrt resume continues it.

// waker keeps the timers of the daemon's parked runs.
type waker struct {
	clock clock.Clock
	wake  func(run journal.RunID, why string)

	mu     sync.Mutex
	timers map[journal.RunID]clock.Timer
	closed bool
}

func newWaker(c clock.Clock, wake func(journal.RunID, string)) *waker {
	return &waker{clock: c, wake: wake, timers: map[journal.RunID]clock.Timer{}}
}

// arm makes run wake at w.Until, when it is set (a timer's wake time, an
// approval's expiry); a time past fires at once.
func (k *waker) arm(run journal.RunID, w *journal.Wait) {
	if w == nil || w.Until == 0 {
		return
	}
	why := "timer"
	if w.Kind == journal.WaitApproval {
		why = "approval expiry"
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return
	}
	if t := k.timers[run]; t != nil {
		t.Stop()
	}
	d := time.Unix(0, w.Until).Sub(k.clock.Now())
	k.timers[run] = k.clock.AfterFunc(d, func() {
		k.mu.Lock()
		delete(k.timers, run)
		closed := k.closed
		k.mu.Unlock()
		if !closed {
			k.wake(run, why)
		}
	})
}

// disarm stops run's timer, if any.
func (k *waker) disarm(run journal.RunID) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if t := k.timers[run]; t != nil {
		t.Stop()
		delete(k.timers, run)
	}
}

// close stops every timer: a daemon shutting down wakes no run.
func (k *waker) close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.closed = true
	for run, t := range k.timers {
		t.Stop()
		delete(k.timers, run)
	}
}

// wake resumes run, parked, because why happened. A run that is no longer
// parked (cancelled meanwhile, resumed by hand, live) is left alone.
func (s *Server) wake(run journal.RunID, why string) {
	ctx := context.Background()
	m, err := s.cell.Journal.Meta(ctx, run)
	if err != nil {
		s.logf("run %s: wake (%s): %v", run, why, err)
		return
	}
	if m.Status != journal.StatusParked || s.cell.Host.Live(run) {
		return
	}
	st, err := s.cell.Host.Reopen(ctx, run)
	if errors.Is(err, host.ErrActive) {
		return // a resume of it began meanwhile
	}
	if err != nil {
		s.logf("run %s: wake (%s): %v", run, why, err)
		return
	}
	if err := s.execute(st, "woke ("+why+")"); err != nil {
		s.logf("run %s: wake (%s): %v", run, why, err)
	}
}

// parked is told of each run this server executed that parked: it arms the
// run's timer and announces an approval to the run's followers and the
// approvals stream.
func (s *Server) parked(run journal.RunID, w *journal.Wait) {
	if w == nil {
		return
	}
	s.waker.arm(run, w)
	switch w.Kind {
	case journal.WaitApproval:
		line := fmt.Sprintf("step %d (%s) waits for the approval of group %q, digest %x", w.Step, w.Op, w.Group, w.Digest)
		if w.Until != 0 {
			line += ", until " + time.Unix(0, w.Until).UTC().Format(time.RFC3339)
		}
		s.logf("run %s %s", run, line)
		l := StreamLine{Time: s.cell.Clock.Now().UTC(), Kind: EventApproval, Data: line, RunID: run.String()}
		s.publish(run, l)
		s.publishApproval(l)
	case journal.WaitTimer:
		s.logf("run %s parked until %s (step %d)", run, time.Unix(0, w.Until).UTC().Format(time.RFC3339Nano), w.Step)
	case journal.WaitRun:
		s.logf("run %s parked awaiting its child %s (step %d)", run, w.Run, w.Step)
		if s.awaitedEnded(w) {
			// The child ended between the parent's look and its park.
			go s.wake(run, "child "+w.Run.String()+" ended")
		}
	}
}

// recoverParked arms the wait of run, parked when the daemon started, or
// resumes it at once when what it waits for happened while no daemon ran
// (an approval decided by votes stored before a crash).
func (s *Server) recoverParked(m journal.RunMeta) {
	if m.Wait == nil {
		return
	}
	if m.Wait.Kind == journal.WaitRun {
		// Woken by the child's end; one that ended while no daemon ran
		// wakes it now.
		if s.awaitedEnded(m.Wait) {
			go s.wake(m.ID, "child "+m.Wait.Run.String()+" ended")
		}
		return
	}
	if m.Wait.Kind == journal.WaitApproval && s.cell.Book != nil {
		if p, err := s.cell.Book.Get(m.ID, m.Wait.Step); err == nil && p.Tally.State != "pending" {
			go s.wake(m.ID, "approval decided")
			return
		}
	}
	s.waker.arm(m.ID, m.Wait)
}
