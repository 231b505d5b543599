package cell

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/budget"
	"github.com/agentrt/agentrt/host/caps/agent"
	"github.com/agentrt/agentrt/journal"
)

// Sub-agents. A run granted agent: {...} starts child runs (agent.spawn);
// the daemon is the host's Spawner. A child is a run of its own, with its
// own journal, whose header names its parent (Header.Parent) and whose
// origin names the spawning step (Origin{Kind: "spawn", ID: parent, Seq:
// step}); its token is issued by this cell within the parent's
// (Host.ChildToken). A parent that awaits a child parks (RunMeta.Wait of
// kind run) and is woken
//   - when the child ends, is cancelled or held (the end hook, agentEnded);
//   - when it parks and the child has ended meanwhile (parked);
//   - when the daemon starts and the child ended while no daemon ran
//     (recoverParked);
// so no end is lost between the parent's check and its park. After a
// crash, the children are recovered as any run, and their parents, parked,
// are woken by their ends: the family is re-attached by the journals
// alone.
//
// A child's budget is carved out of its parent's (the budget bridge,
// host/budget.go): the parent's session asks Spend what the child of a
// spawning step spent once it ended, read from the child's verified
// journal, and settles the carve with it. A child's tools are declared in
// its caps, which become its grant: it runs them under those
// declarations, each bound to its parent's (runnable or delegable) by
// digest.

// OriginSpawn is the Origin.Kind of a sub-agent: Origin.ID is its parent
// run, Origin.Seq the parent's spawning step.
const OriginSpawn = "spawn"

// agents is the daemon's agent.Spawner.
type agents struct{ s *Server }

var _ agent.Spawner = agents{}

// child is a child run as its index record says it.
type child struct {
	meta journal.RunMeta
	step uint64
}

// children lists parent's children, in spawn order (by the parent's
// step).
func (a agents) children(ctx context.Context, parent journal.RunID) ([]child, error) {
	runs, err := a.s.cell.Journal.Runs(ctx)
	if err != nil {
		return nil, err
	}
	p := parent.String()
	var out []child
	for _, m := range runs {
		if o := m.Origin; o != nil && o.Kind == OriginSpawn && o.ID == p {
			out = append(out, child{meta: m, step: o.Seq})
		}
	}
	slices.SortFunc(out, func(x, y child) int { return cmp.Compare(x.step, y.step) })
	return out, nil
}

// Spawn implements agent.Spawner.
func (a agents) Spawn(ctx context.Context, sp agent.Spawn) (abi.SpawnResponse, error) {
	kids, err := a.children(ctx, sp.Parent)
	if err != nil {
		return abi.SpawnResponse{}, err
	}
	for _, k := range kids {
		if k.step == sp.Step {
			// Sent again after a crash: the step's child, started once.
			return a.spawned(ctx, k.meta.ID)
		}
	}
	if uint32(len(kids)) >= sp.Grant.MaxChildren {
		return abi.SpawnResponse{}, fmt.Errorf("%w: the run has spawned %d children, its grant's max_children", agent.ErrDenied, len(kids))
	}
	// A child runs at its parent's priority or below: a spawn asking more
	// is refused, as a wider token is, rather than quietly lowered.
	pm, err := a.s.cell.Journal.Meta(ctx, sp.Parent)
	if err != nil {
		return abi.SpawnResponse{}, err
	}
	prio := effectivePriority(pm.Priority)
	if p := sp.Req.Priority; p > prio {
		return abi.SpawnResponse{}, fmt.Errorf("%w: priority %d is above the caller's, %d", agent.ErrDenied, p, prio)
	} else if p != 0 {
		prio = p
	}
	want := sp.Req.Budget
	if sp.Budget != nil && len(sp.Budget.Set()) > 0 {
		// What the parent's ledger carved: its token holds the child to
		// it (a wall clock left out, cut to what the parent has left).
		want = sp.Budget.String()
	}
	token, claims, err := a.s.cell.Host.ChildToken(sp.Token, sp.Grant.MaxDepth, sp.Req.Caps, want)
	if err != nil {
		return abi.SpawnResponse{}, err
	}
	st, err := a.s.cell.Host.Start(ctx, host.RunSpec{ModuleSHA256: sp.Req.Module, Input: sp.Req.Input, Token: token, Grant: claims.Grant,
		Parent: sp.Parent, Origin: &journal.Origin{Kind: OriginSpawn, ID: sp.Parent.String(), Seq: sp.Step}, Priority: prio})
	switch {
	case errors.Is(err, host.ErrUnknownModule):
		return abi.SpawnResponse{}, fmt.Errorf("%w: module %x: %w", agent.ErrNotFound, sp.Req.Module, err)
	case err != nil:
		var le *host.LinkError
		if errors.As(err, &le) {
			return abi.SpawnResponse{}, fmt.Errorf("%w: %w", agent.ErrDenied, err)
		}
		return abi.SpawnResponse{}, err
	}
	if err := a.s.sched.admit(ctx, st, true); err != nil {
		// Refused by the cell's policy: the child is journaled as
		// refused, and counts against max_children, as one refused by
		// its link check does.
		return abi.SpawnResponse{}, fmt.Errorf("%w: %w", agent.ErrDenied, err)
	}
	if err := a.s.execute(st, fmt.Sprintf("spawned by run %s step %d:", sp.Parent, sp.Step)); err != nil {
		return abi.SpawnResponse{}, err
	}
	sum := sha256.Sum256(token)
	return abi.SpawnResponse{Run: st.Run.String(), TokenHash: sum[:], Budget: budgetText(claims.Budget.String())}, nil
}

// spawned answers a spawn sent again with the child it started, from the
// child's journal header.
func (a agents) spawned(ctx context.Context, run journal.RunID) (abi.SpawnResponse, error) {
	var hdr *journal.Header
	stop := errors.New("stop")
	err := journal.ReadEntries(ctx, a.s.cell.Journal, run, func(e *journal.Entry, _ *journal.Record) error {
		hdr = e.Header
		return stop
	})
	if !errors.Is(err, stop) || hdr == nil {
		return abi.SpawnResponse{}, fmt.Errorf("child %s: read its start: %v", run, err)
	}
	sum := sha256.Sum256(hdr.Token)
	g, err := host.DecodeGrant(hdr.Grant)
	if err != nil {
		return abi.SpawnResponse{}, err
	}
	b := ""
	if g.Budget != nil {
		b = budgetText(g.Budget.String())
	}
	return abi.SpawnResponse{Run: run.String(), TokenHash: sum[:], Budget: b}, nil
}

// budgetText is "" for a budget without ceilings.
func budgetText(s string) string {
	if s == "unlimited" {
		return ""
	}
	return s
}

// own returns child's index record, or agent.ErrDenied when it is not
// parent's child.
func (a agents) own(ctx context.Context, parent, child journal.RunID) (journal.RunMeta, error) {
	m, err := a.s.cell.Journal.Meta(ctx, child)
	if errors.Is(err, journal.ErrNotFound) {
		return m, fmt.Errorf("%w: run %s is not a child of run %s", agent.ErrDenied, child, parent)
	}
	if err != nil {
		return m, err
	}
	if o := m.Origin; o == nil || o.Kind != OriginSpawn || o.ID != parent.String() {
		return m, fmt.Errorf("%w: run %s is not a child of run %s", agent.ErrDenied, child, parent)
	}
	return m, nil
}

// childState is the state of a child as its parent sees it.
func childState(m journal.RunMeta) (status string, done bool) {
	switch m.Status {
	case journal.StatusCompleted:
		return abi.ChildCompleted, true
	case journal.StatusFailed:
		if strings.HasPrefix(m.Error, "stopped: budget") {
			return abi.ChildBudgetExhausted, true
		}
		return abi.ChildFailed, true
	case journal.StatusCancelled:
		return abi.ChildCancelled, true
	case journal.StatusHeld:
		// The cell stopped recovering it: what its last effect did is
		// not known.
		return abi.ChildInDoubt, true
	}
	return abi.ChildRunning, false
}

// Outcome implements agent.Spawner.
func (a agents) Outcome(ctx context.Context, parent, child journal.RunID) (abi.AwaitResponse, bool, error) {
	m, err := a.own(ctx, parent, child)
	if err != nil {
		return abi.AwaitResponse{}, false, err
	}
	status, done := childState(m)
	if !done {
		return abi.AwaitResponse{}, false, nil
	}
	return abi.AwaitResponse{Run: child.String(), Status: status, Output: m.Output, OutputHash: journal.Sum(m.Output), Error: m.Error}, true, nil
}

// Cancel implements agent.Spawner: child, then its descendants.
func (a agents) Cancel(ctx context.Context, parent, child journal.RunID) error {
	if _, err := a.own(ctx, parent, child); err != nil {
		return err
	}
	return a.cancelTree(ctx, child)
}

// cancelTree cancels run and every run below it: run first, so that it
// spawns no more, then each child's tree.
func (a agents) cancelTree(ctx context.Context, run journal.RunID) error {
	if err := a.s.cell.Host.Cancel(ctx, run); err != nil && !errors.Is(err, host.ErrFinished) {
		return err
	}
	return a.cancelDescendants(ctx, run)
}

// cancelDescendants cancels the tree of each child of run.
func (a agents) cancelDescendants(ctx context.Context, run journal.RunID) error {
	kids, err := a.children(ctx, run)
	if err != nil {
		return err
	}
	var errs []error
	for _, k := range kids {
		errs = append(errs, a.cancelTree(ctx, k.meta.ID))
	}
	return errors.Join(errs...)
}

// Cancel cancels run, as Host.Cancel does, and then every run below it, its
// sub-agents and theirs: a cancelled parent's family stops with it.
func (s *Server) Cancel(ctx context.Context, run journal.RunID) error {
	if err := s.cell.Host.Cancel(ctx, run); err != nil {
		return err
	}
	// A parked run has no worker to end it: it gives its share of the
	// cell budget back now. (Its sub-agents hold none: their parents'
	// carves bound them.)
	s.sched.cell.ended(s, run, nil)
	if err := (agents{s}).cancelDescendants(ctx, run); err != nil {
		return fmt.Errorf("run %s is cancelled; cancelling its sub-agents: %w", run, err)
	}
	return nil
}

// Children implements agent.Spawner.
func (a agents) Children(ctx context.Context, parent journal.RunID) ([]abi.Child, error) {
	kids, err := a.children(ctx, parent)
	if err != nil {
		return nil, err
	}
	out := make([]abi.Child, 0, len(kids))
	for _, k := range kids {
		status, _ := childState(k.meta)
		out = append(out, abi.Child{Run: k.meta.ID.String(), Step: k.step, Status: status})
	}
	return out, nil
}

// Spend implements agent.Spawner: what the child of parent's step spent,
// from its journal (verified), once it has ended.
// A child stopped with reservations open (cancelled mid-call, or holding
// its own children's budgets) spent them, as far as its parent knows.
func (a agents) Spend(ctx context.Context, parent journal.RunID, step uint64) (agent.ChildSpend, error) {
	kids, err := a.children(ctx, parent)
	if err != nil {
		return agent.ChildSpend{}, err
	}
	i := slices.IndexFunc(kids, func(k child) bool { return k.step == step })
	if i < 0 {
		return agent.ChildSpend{}, nil
	}
	k := kids[i]
	// A run's index says it ended only with its last entries durable
	// (the end entry, or what it journaled before it stopped).
	if _, done := childState(k.meta); !done {
		return agent.ChildSpend{Started: true}, nil
	}
	rep, err := host.LoadBudget(ctx, a.s.cell.Journal, k.meta.ID, a.s.cell.Host.Trust())
	if err != nil {
		return agent.ChildSpend{}, fmt.Errorf("child %s: its spend: %w", k.meta.ID, err)
	}
	var spent budget.Amounts
	for _, row := range rep.Rows {
		spent[row.Dim] = row.Spent + row.Reserved
	}
	return agent.ChildSpend{Started: true, Ended: true, Spent: spent}, nil
}

// agentEnded wakes the parent of run, a child that ended, was cancelled or
// held (Server.OnEnd), if it awaits run.
func (s *Server) agentEnded(run journal.RunID, _ *host.Result, _ error) {
	ctx := context.Background()
	m, err := s.cell.Journal.Meta(ctx, run)
	if err != nil || m.Origin == nil || m.Origin.Kind != OriginSpawn {
		return
	}
	if _, done := childState(m); !done {
		return
	}
	parent, err := journal.ParseRunID(m.Origin.ID)
	if err != nil {
		return
	}
	s.wakeAwaiting(parent, run)
}

// wakeAwaiting wakes parent if it is parked awaiting child.
func (s *Server) wakeAwaiting(parent, child journal.RunID) {
	pm, err := s.cell.Journal.Meta(context.Background(), parent)
	if err != nil || pm.Status != journal.StatusParked || pm.Wait == nil || pm.Wait.Kind != journal.WaitRun || pm.Wait.Run != child {
		return
	}
	go s.wake(parent, "child "+child.String()+" ended")
}

// awaitedEnded reports whether the child a parked run awaits has ended.
func (s *Server) awaitedEnded(w *journal.Wait) bool {
	m, err := s.cell.Journal.Meta(context.Background(), w.Run)
	if err != nil {
		return false
	}
	_, done := childState(m)
	return done
}
