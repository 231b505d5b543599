package host

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/agentrt/agentrt/host/budget"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/policy"
	"github.com/cedar-policy/cedar-go/types"
)

// What a cell's scheduler needs of a started run that waits for a worker
// before it executes (host/cell's scheduler): its priority and origin, its
// budget ceilings and the policy's word on admitting it, its start made
// durable while it waits, and a way to stop it without executing it.

// Priority returns the run's scheduling priority, as its index record
// keeps it (RunSpec.Priority).
func (st *Started) Priority() uint8 { return st.meta.Priority }

// Origin returns what started the run (a task's attempt, a trigger's
// firing, a spawn), nil for a submission.
func (st *Started) Origin() *journal.Origin { return st.meta.Origin }

// Ceilings returns the run's budget ceilings: its token's, within its
// grant's.
func (st *Started) Ceilings() budget.Ceilings { return st.s.ledger.Ceilings() }

// Persist makes the run's start durable now, rather than with its first
// effect: a run that waits in a queue is then found by a cell that starts
// again after a crash, and queued again.
func (st *Started) Persist(ctx context.Context) error {
	if err := st.w.Commit(ctx, st.meta, true); err != nil {
		return fmt.Errorf("host: persist the start of %s: %w", st.Run, err)
	}
	return nil
}

// Halted is closed when the run is asked to stop (Cancel, Drain) before or
// while it executes.
func (st *Started) Halted() <-chan struct{} { return st.live.halt }

// Unexecuted stops a run that was asked to stop (Halted) before it
// executed: a cancelled run is marked cancelled, durably; a drained one
// stays running, to be resumed. It returns the cause the run was stopped
// for, wrapped in ErrInterrupted, as Execute would have.
func (st *Started) Unexecuted(ctx context.Context) error {
	cause := st.live.why()
	if cause == nil {
		return fmt.Errorf("host: run %s was not asked to stop", st.Run)
	}
	defer st.Abandon()
	if cause == ErrCancelled {
		st.meta.Status = journal.StatusCancelled
		if err := st.w.Commit(context.WithoutCancel(ctx), st.meta, true); err != nil {
			return fmt.Errorf("%w: %w (marking it cancelled: %w)", ErrInterrupted, cause, err)
		}
	}
	return fmt.Errorf("%w: %w", ErrInterrupted, cause)
}

// AdmitAction is the policy action a cell asks about before it queues a
// run: starting a run of an agent is what a spawn does, so one rule on it
// bars an agent from being started at all, by a submission, a task, a
// trigger or a spawn.
const AdmitAction = "agent.spawn"

// Admit asks the cell's policy (platform, then customer) whether the run
// may be admitted: action AdmitAction, the run itself as principal (in its
// Agent and its Cell) and as resource, the base context with nothing
// spent. A cell without a policy engine admits every run. It returns the
// decision's reason as an error when it is a denial.
func (st *Started) Admit() error { return st.h.admit(st.Run, st.s.header) }

// admit is the policy's admission of run, whose header is hdr.
func (h *Host) admit(run journal.RunID, hdr *journal.Header) error {
	eng := h.deps.Policy
	if eng == nil {
		return nil
	}
	cell := hex.EncodeToString(h.deps.Key.Public().(ed25519.PublicKey)[:8])
	agent := hdr.ModuleName
	if agent == "" {
		agent = "agent"
	}
	runUID := types.NewEntityUID(entRun, types.String(run.String()))
	agentUID := types.NewEntityUID(entAgent, types.String(agent))
	cellUID := types.NewEntityUID(entCell, types.String(cell))
	ents := types.EntityMap{
		runUID: {UID: runUID, Parents: types.NewEntityUIDSet(agentUID, cellUID),
			Attributes: types.NewRecord(types.RecordMap{"id": types.String(run.String())})},
		agentUID: {UID: agentUID, Attributes: types.NewRecord(types.RecordMap{"name": types.String(agent),
			"module_sha256": types.String(hex.EncodeToString(hdr.ModuleSHA256))})},
		cellUID: {UID: cellUID, Attributes: types.NewRecord(types.RecordMap{"name": types.String(cell),
			"clearance": types.Long(h.deps.Clearance)})},
	}
	mode := "unattended"
	if h.deps.Approver != nil {
		mode = "interactive"
	}
	ctx := types.RecordMap{
		"mode":      types.String(mode),
		"spent":     types.NewRecord(types.RecordMap{"calls": types.Long(0), "tokens": types.Long(0), "micros": types.Long(0)}),
		"clearance": types.Long(h.deps.Clearance),
		"time":      types.Long(h.deps.Now().Unix()),
	}
	d := eng.Decide(policy.Request{Principal: runUID, Action: AdmitAction, Resource: runUID, Context: types.NewRecord(ctx), Entities: ents})
	if d.Allowed {
		return nil
	}
	why := "no policy permits it"
	switch {
	case d.Reason != "":
		why = d.Reason
	case len(d.Errors) > 0:
		why = "policies failed to evaluate: " + strings.Join(d.ErrorIDs(), ", ")
	case len(d.Determining) > 0:
		why = "forbidden by " + strings.Join(d.Determining, ", ")
	}
	return fmt.Errorf("policy denies %s of agent %q (%s)", AdmitAction, agent, why)
}

// Refuse ends a started run that its cell will not execute, journaling a
// failed end that says why (reason), durably, and releases it: the refusal
// is auditable as a token's or a link check's is.
func (st *Started) Refuse(ctx context.Context, reason string) error {
	defer st.Abandon()
	now := st.h.deps.Now()
	end := &journal.End{Status: journal.StatusFailed, Error: strings.ToValidUTF8(reason, "\uFFFD")}
	if err := st.w.Add(&journal.Entry{Phase: journal.PhaseEnd, End: end, Time: now.UnixNano(), Epoch: st.lease.epoch()}); err != nil {
		return err
	}
	st.meta.Status, st.meta.Error, st.meta.Ended = journal.StatusFailed, end.Error, now.UnixNano()
	if err := st.w.Commit(context.WithoutCancel(ctx), st.meta, true); err != nil {
		return fmt.Errorf("host: journal the refusal of %s: %w", st.Run, err)
	}
	return nil
}

// StartHeader returns the header of run's start entry in store.
func StartHeader(ctx context.Context, store journal.Store, run journal.RunID) (*journal.Header, error) {
	return startHeader(ctx, store, run)
}

// HeaderCeilings returns the budget ceilings of the run whose start header
// is h: those of its grant, which holds its token's budget, as its ledger
// starts with them (Started.Ceilings).
func HeaderCeilings(h *journal.Header) (budget.Ceilings, error) {
	g, err := DecodeGrant(h.Grant)
	if err != nil {
		return budget.Ceilings{}, err
	}
	return runCeilings(g), nil
}
