package cell

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"time"

	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/placement"
)

// StartCluster starts the cell's cluster duties, until ctx ends or the
// server shuts down: every heartbeat, the cell writes its registry record
// (its descriptor with its live runs), then looks for runs whose lease has
// expired and that no cell of this process executes. For each, placement
// picks a cell among the live ones of the registry, the expired holder
// left out; the cell it picks takes the run over (Host.TakeOver, the
// decision journaled in its lease entry), the others leave it be. Cells
// that read the registry alike pick alike; two that do not both try, and
// the lease's compare-and-swap lets one through. The cell also answers the
// handoff envelopes sent to it (handoffs.go).
//
// A cell without a cluster has nothing to start: StartCluster returns nil.
func (s *Server) StartCluster(ctx context.Context) error {
	cl := s.cell.Cluster
	if cl == nil {
		return nil
	}
	if err := s.heartbeat(ctx); err != nil {
		return err
	}
	if err := s.serveHandoffs(ctx); err != nil {
		return err
	}
	go func() {
		t := time.NewTicker(cl.opts.Heartbeat)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return
			}
			if err := s.heartbeat(ctx); err != nil {
				s.logf("cluster: %v", err)
			}
			if err := s.takeOverExpired(ctx); err != nil && ctx.Err() == nil {
				s.logf("cluster: %v", err)
			}
		}
	}()
	return nil
}

// heartbeat writes the cell's registry record.
func (s *Server) heartbeat(ctx context.Context) error {
	cl := s.cell.Cluster
	self := cl.self(s.cell.Public(), s.cell.Host.LiveCount())
	return cl.Registry.Announce(ctx, Heartbeat{Cell: self, At: s.cell.Clock.Now().UnixNano(), Every: cl.opts.Heartbeat})
}

// takeOverExpired takes over the running runs whose lease expired and that
// placement gives to this cell.
func (s *Server) takeOverExpired(ctx context.Context) error {
	cl := s.cell.Cluster
	runs, err := s.cell.Journal.Runs(ctx)
	if err != nil {
		return err
	}
	s.forgetRefusals(runs)
	var hbs []Heartbeat
	for _, m := range runs {
		if m.Status != journal.StatusRunning || s.cell.Host.Live(m.ID) {
			continue
		}
		l, ok, err := cl.Store.Lease(ctx, m.ID)
		if err != nil {
			s.logf("cluster: run %s: %v", m.ID, err)
			continue
		}
		now := s.cell.Clock.Now()
		if !ok || l.Expires > now.UnixNano() {
			continue
		}
		if hbs == nil {
			if hbs, err = cl.Registry.Cells(ctx); err != nil {
				return err
			}
		}
		d, err := s.placeTakeover(hbs, l, now)
		if err != nil {
			s.logf("cluster: run %s: no cell to take it over: %v", m.ID, err)
			continue
		}
		if d.Cell != hex.EncodeToString(s.cell.Public()) {
			continue
		}
		dec, err := d.EncodeCBOR()
		if err != nil {
			return err
		}
		st, err := s.reopenAdmitted(ctx, m.ID, dec)
		var held *journal.HeldError
		if errors.As(err, &held) {
			continue // another cell was quicker
		}
		var refused *AdmissionError
		if errors.As(err, &refused) {
			// Left as it is, lease expired, until this cell admits it
			// (a queue with room, a cell budget with room) or placement
			// picks another: said once per reason.
			if s.refusedTakeover(m.ID, refused.Reason) {
				s.logf("cluster: take over run %s: %v; it waits, its lease expired, until a cell admits it", m.ID, err)
			}
			continue
		}
		if err != nil {
			s.logf("cluster: take over run %s: %v", m.ID, err)
			continue
		}
		s.refusedTakeover(m.ID, "")
		s.logf("cluster: took over run %s from cell %x (lease epoch %d expired)", m.ID, l.Owner, l.Epoch)
		if err := s.execute(st, "taken over"); err != nil {
			return err
		}
	}
	return nil
}

// refusedTakeover records why (an admission refusal's reason; "": it
// took the run) this cell last refused to take run over, and reports
// whether that is news.
func (s *Server) refusedTakeover(run journal.RunID, why string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.takeoverRefusals[run] == why {
		return false
	}
	if why == "" {
		delete(s.takeoverRefusals, run)
	} else {
		if s.takeoverRefusals == nil {
			s.takeoverRefusals = map[journal.RunID]string{}
		}
		s.takeoverRefusals[run] = why
	}
	return true
}

// forgetRefusals forgets the takeover refusals of the runs that no longer
// run, of those runs listed (a run another cell took goes on running, and
// is forgotten once it ends).
func (s *Server) forgetRefusals(runs []journal.RunMeta) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.takeoverRefusals) == 0 {
		return
	}
	running := map[journal.RunID]bool{}
	for _, m := range runs {
		if m.Status == journal.StatusRunning {
			running[m.ID] = true
		}
	}
	for run := range s.takeoverRefusals {
		if !running[run] {
			delete(s.takeoverRefusals, run)
		}
	}
}

// placeTakeover picks the cell that takes over a run whose lease l
// expired: among the cells live at now, the holder left out unless it is
// this cell (a holder that died has a heartbeat that may not be stale yet).
func (s *Server) placeTakeover(hbs []Heartbeat, l journal.Lease, now time.Time) (placement.Decision, error) {
	var cells []placement.Cell
	for _, c := range Live(hbs, now) {
		id, err := hex.DecodeString(c.ID)
		if err == nil && bytes.Equal(id, l.Owner) && !bytes.Equal(id, s.cell.Public()) {
			continue
		}
		cells = append(cells, c)
	}
	return placement.Place(placement.Need{}, cells)
}
