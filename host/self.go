package host

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/host/budget"
	"github.com/agentrt/agentrt/host/caps"
	"github.com/agentrt/agentrt/host/caps/run"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/policy"
)

// The host's answers to the run.self family (host/caps/run, abi/SPEC.md
// §9.15): the session reads them from the run's header, grant, gate,
// ledger and journal. Each is served live only: the ops are pure, so a
// replay or a resume answers them from the journal.

// Origin kinds of a run header that run.self reports (host/cell names
// them when it starts a task's attempt or a sub-agent).
const (
	originTask  = "task"
	originSpawn = "spawn"
)

// maxDepth bounds the walk up a run's ancestors: a chain longer than any
// grant's max_depth allows is a broken journal, not a deep family.
const maxDepth = 64

// cellID names a cell by its key: the first 8 bytes of its ed25519 public
// key, in hex, as the policy's Cell entity does (initPolicy).
func cellID(k ed25519.PrivateKey) string {
	return hex.EncodeToString(k.Public().(ed25519.PublicKey)[:8])
}

// Self answers run.self.
func (s *session) Self(ctx context.Context) (abi.SelfResponse, error) {
	r := abi.SelfResponse{ABI: abi.Version, RunID: s.run.String(), ModuleSHA256: s.header.ModuleSHA256, Cell: cellID(s.deps.Key)}
	if o := s.header.Origin; o != nil {
		switch o.Kind {
		case originTask:
			r.Task, r.Attempt = o.ID, o.Seq
		case originSpawn:
			r.ParentStep = o.Seq
		}
	}
	if p, ok := runIDOf(s.header.Parent); ok {
		r.Parent = p.String()
	}
	if !s.depthKnown {
		d, err := s.ancestors(ctx)
		if err != nil {
			return r, err
		}
		s.depth, s.depthKnown = d, true
	}
	r.Depth = s.depth
	return r, nil
}

func runIDOf(b []byte) (journal.RunID, bool) {
	var id journal.RunID
	if len(b) != len(id) {
		return id, false
	}
	copy(id[:], b)
	return id, true
}

// ancestors counts the runs above this one, following each journal
// header's parent in the cell's store.
func (s *session) ancestors(ctx context.Context) (uint32, error) {
	var n uint32
	parent, ok := runIDOf(s.header.Parent)
	for ok {
		if n == maxDepth {
			return 0, fmt.Errorf("run.self: the run has more than %d ancestors; its family's journals are broken", maxDepth)
		}
		n++
		h, err := startHeader(ctx, s.deps.Store, parent)
		if err != nil {
			return 0, fmt.Errorf("run.self: the header of ancestor %s: %w", parent, err)
		}
		parent, ok = runIDOf(h.Parent)
	}
	return n, nil
}

// startHeader returns the header of run's start entry.
func startHeader(ctx context.Context, st journal.Store, run journal.RunID) (*journal.Header, error) {
	var h *journal.Header
	stop := errors.New("stop")
	err := st.Records(ctx, run, 0, func(_ uint64, raw []byte) error {
		rec, err := journal.DecodeRecord(raw)
		if err != nil {
			return err
		}
		e, err := journal.DecodeEntry(rec.Entry)
		if err != nil {
			return err
		}
		h = e.Header
		return stop
	})
	if err != nil && !errors.Is(err, stop) {
		return nil, err
	}
	if h == nil {
		return nil, fmt.Errorf("no start entry")
	}
	return h, nil
}

// SelfCaps answers run.self_caps: the grant the gate enforces, in the
// token's terms.
func (s *session) SelfCaps() (abi.SelfCapsResponse, error) {
	tc, err := s.grant.TokenCaps()
	if err != nil {
		return abi.SelfCapsResponse{}, err
	}
	b, err := json.Marshal(tc)
	if err != nil {
		return abi.SelfCapsResponse{}, err
	}
	r := abi.SelfCapsResponse{Caps: string(b), Capabilities: []string{}}
	for _, c := range s.grant.Capabilities() {
		r.Capabilities = append(r.Capabilities, string(c))
	}
	if s.grant.Budget != nil {
		r.Budget = s.grant.Budget.String()
	}
	return r, nil
}

// May answers run.self_may: the gate's decision on the call the request
// describes, had the run made it as its next step (the asking call is step
// step). It runs the gate itself (gate.go) with the session in dry mode:
// the budget layer checks that the call's worst case fits and holds
// nothing, the approval layer reports an ask and asks no one, and the
// capability's check and policy facts are those of the call. The session
// is left as the asking call found it.
func (s *session) May(ctx context.Context, step uint64, r abi.MayRequest) (abi.MayResponse, error) {
	op, ok := abi.LookupOpName(r.Op)
	if !ok {
		return abi.MayResponse{}, &run.BadRequestError{Msg: fmt.Sprintf("run.self_may: unknown op %q (the ops are those of abi/SPEC.md §9, e.g. \"http.request\", \"kv.put\")", r.Op)}
	}
	ci := capIndex(op.Cap)
	sl := s.lookup(ci, op.Code)
	c := &Call{Step: step + 1, Op: &sl.op, Request: r.Request}
	h := sl.h
	if len(r.Request) > s.maxRequest {
		c.TooLarge, c.Request, h = true, nil, caps.Handler{}
		c.SetInputHash(journal.Sum(r.Request))
	}
	if op.Class == abi.Effect {
		c.Key = fmt.Sprintf("%s-%d", s.run, c.Step)
	}
	saved := struct {
		ci              int
		known, reserved bool
		asking          *askState
	}{s.ci, s.known, s.reserved, s.asking}
	s.ci, s.known, s.dry = ci, sl.known, true
	defer func() {
		s.ci, s.known, s.reserved, s.asking, s.dry = saved.ci, saved.known, saved.reserved, saved.asking, false
	}()
	d, rec, err := s.gate(ctx, c, h)
	if err != nil {
		return abi.MayResponse{}, err
	}
	var g GateRecord
	if rec != nil {
		if err := abi.Unmarshal(rec, &g); err != nil {
			return abi.MayResponse{}, fmt.Errorf("run.self_may: the gate's record: %w", err)
		}
	}
	switch {
	case d != nil:
		stage := g.Layer
		if rec == nil {
			// The gate journals no record of a refusal only in its
			// capability layer, when the cell runs no policy or modes.
			stage = LayerCapability
		}
		return abi.MayResponse{Decision: abi.MayDeny, Stage: stage, Status: d.Status, Reason: errorMessage(d.Body)}, nil
	case g.Mode == policy.Ask:
		return abi.MayResponse{Decision: abi.MayAsk, Stage: LayerMode,
			Reason: fmt.Sprintf("%s would park for approval (permission mode rule %q asks)", op.Name, g.Rule)}, nil
	}
	return abi.MayResponse{Decision: abi.MayAllow}, nil
}

// SelfBudget answers run.self_budget from the run's ledger. The counted
// dimensions are the host's: steps are the calls so far, this one (step)
// included, plus those its ended children made (its running children's
// are reserved), and wall_seconds the whole seconds since the run started.
func (s *session) SelfBudget(step uint64) (abi.SelfBudgetResponse, error) {
	if s.ledger == nil {
		return abi.SelfBudgetResponse{}, errors.New("run.self_budget: the run has no budget ledger")
	}
	var children budget.Amounts
	for _, r := range s.ledger.Open() {
		if r.Carve {
			for d := range budget.NumDims {
				children[d] += r.Amounts[d]
			}
		}
	}
	rep := s.ledger.Report()
	out := abi.SelfBudgetResponse{Dims: make([]abi.SelfBudget, 0, len(rep.Rows))}
	for _, row := range rep.Rows {
		b := abi.SelfBudget{Dim: row.Name, Spent: row.Spent, Reserved: row.Reserved, Children: children[row.Dim]}
		switch row.Dim {
		case budget.Steps:
			b.Spent = step + (s.ledger.ChildSteps() - min(s.ledger.ChildSteps(), row.Reserved))
		case budget.WallSeconds:
			if el := s.deps.Now().UnixNano() - s.started; el > 0 {
				b.Spent = uint64(el / 1e9)
			}
		}
		if row.Ceiling != nil {
			b.Limited, b.Ceiling = true, *row.Ceiling
			if used := b.Spent + b.Reserved; used < b.Ceiling {
				b.Left = b.Ceiling - used
			}
		}
		out.Dims = append(out.Dims, b)
	}
	return out, nil
}

// SelfMode answers run.self_mode.
func (s *session) SelfMode() abi.SelfModeResponse {
	r := abi.SelfModeResponse{Mode: s.policyMode()}
	if m := s.deps.Modes; m != nil {
		r.Modes, r.Default = true, string(m.Default)
		for _, rule := range m.Rules {
			r.Rules = append(r.Rules, abi.ModeRule{Name: rule.Name, Op: rule.Op, Resource: rule.Resource, Method: rule.Method, Effect: string(rule.Effect)})
		}
	}
	return r
}

// phaseNames are the phases run.self_journal filters on.
var phaseNames = func() map[string]journal.Phase {
	m := map[string]journal.Phase{}
	for p := journal.PhaseStart; p.Valid(); p++ {
		m[p.String()] = p
	}
	return m
}()

// SelfJournal answers run.self_journal: a page of the run's own journal,
// the entries journaled before the asking call. The run's group of
// buffered entries is committed first, so that the page sees them.
func (s *session) SelfJournal(ctx context.Context, r abi.JournalRequest) (abi.JournalResponse, error) {
	var phase journal.Phase
	if r.Phase != "" {
		p, ok := phaseNames[r.Phase]
		if !ok {
			names := make([]string, 0, len(phaseNames))
			for p := journal.PhaseStart; p.Valid(); p++ {
				names = append(names, p.String())
			}
			return abi.JournalResponse{}, &run.BadRequestError{Msg: fmt.Sprintf("run.self_journal: unknown phase %q (one of: %s)", r.Phase, strings.Join(names, ", "))}
		}
		phase = p
	}
	limit := int(r.Limit)
	if limit == 0 {
		limit = abi.MaxJournalPage
	}
	if lp := s.livePath(); lp != nil {
		// A group still on its way to the store lands, and what is
		// buffered is committed, before the journal is read.
		err := lp.w.Wait()
		if err == nil && lp.w.Pending() > 0 {
			err = lp.commit(ctx, false)
		}
		if err != nil {
			return abi.JournalResponse{}, err
		}
	}
	out := abi.JournalResponse{Entries: []abi.JournalEntry{}}
	full := errors.New("page full")
	err := s.deps.Store.Records(ctx, s.run, r.From, func(seq uint64, raw []byte) error {
		if len(out.Entries) == limit {
			out.Next = seq
			return full
		}
		rec, err := journal.DecodeRecord(raw)
		if err != nil {
			return err
		}
		e, err := journal.DecodeEntry(rec.Entry)
		if err != nil {
			return err
		}
		if (r.Op != "" && e.Op != r.Op) || (phase != 0 && e.Phase != phase) {
			return nil
		}
		out.Entries = append(out.Entries, abi.JournalEntry{Seq: e.Seq, Phase: e.Phase.String(), Step: e.Step, Op: e.Op,
			Status: e.Status, Input: e.InputHash, Output: e.OutputHash, Hash: journal.Sum(rec.Entry)})
		return nil
	})
	if err != nil && !errors.Is(err, full) {
		return abi.JournalResponse{}, fmt.Errorf("run.self_journal: reading the run's journal: %w", err)
	}
	return out, nil
}

// livePath returns the path that journals the run's live calls, or nil.
func (s *session) livePath() *livePath {
	switch p := s.path.(type) {
	case *livePath:
		return p
	case *resumePath:
		return p.live
	case *forkPath:
		return p.live
	}
	return nil
}
