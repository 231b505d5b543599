// Package budget is the gate's budget layer: a ledger per run that holds
// the run's ceilings (tokens, money, calls, steps, wall clock), admits a
// call only when its worst case fits in what is left, and charges what the
// call actually used. It is a state machine without I/O, like the journal's
// Chain: the caller journals the records it returns and feeds them back on
// resume.
//
// The ordering rule, for one costly call (a model call, a tool launch, an
// HTTP request):
//
//  1. Before anything of the call is journaled as intent, Reserve its worst
//     case (WorstCase for a model call). A refusal is an *ExceededError
//     (errors.Is ErrBudget): the call is refused with the ABI status
//     `budget` and nothing leaves the host.
//  2. Journal the reservation's record (Reservation.Op) on the call's intent
//     entry: write-ahead makes it durable before the effect is dispatched.
//  3. Dispatch.
//  4. Settle the reservation with the actual usage (which may exceed the
//     reserve: the overspend is recorded, and later reserves see it), or
//     Release it when the call never left the host, and journal the
//     returned record on the call's completed or failed entry, in the same
//     entry as the result.
//  5. On resume, Rebuild the ledger from the records in journal order. A
//     reservation that a crash left without its settle is resolved there
//     (the Resolver; by default at its worst case) and the records of those
//     resolutions are returned for the host to journal on the call's next
//     entry.
//
// Steps and wall-clock seconds are counters, not reservations: Step charges
// one import call (the journal's step numbers are its record), Tick records
// the run's elapsed time.
//
// A child ledger is carved out of its parent (Carve): the child's ceilings
// are reserved in the parent, the child's settles charge the parent as they
// happen, and closing the child returns what it left unused.
//
// Every amount is an integer (money in micro-USD), every sum is exact, and
// the ledger never takes a float, a clock or a lock other than its own: a
// rebuilt ledger equals the live one that wrote the records.
//
// # Wiring into the gate
//
// The calls the host makes (host/gate.go's budget stage, between policy and
// approval), with s.ledger a *Ledger per run:
//
//   - At a run's start: s.ledger = budget.New(budget.CeilingsOf(claims.Budget, grantBudget)).
//   - On resume: decode every entry's budget field (DecodeRecord), in
//     journal order, then l, resolved, err := budget.Rebuild(ceilings,
//     lastStep, ops, resolver). The resolver answers ResolveKeep for an
//     orphan whose call's last entry is its intent (never dispatched: the
//     dispatch that follows uses the same reservation), ResolveActual when
//     the provider's usage is known, and the default (worst case)
//     otherwise. EncodeRecord(resolved...) goes on the next entry of each
//     orphan's call.
//   - Per costly call, after policy allowed it: r, err :=
//     s.ledger.Reserve(c.Step, cost), cost being budget.WorstCase(estimate,
//     maxOutputTokens, price) for a model call, Amounts{ToolCalls: 1} for a
//     tool launch, Amounts{HTTPRequests: 1} for an HTTP request. An error
//     matching ErrBudget is a denial: status `budget`, the error's text as
//     the message, GateRecord{Layer: "budget", Reason: err.Error()}, and no
//     budget record. Otherwise EncodeRecord(r.Op()) is the intent's budget
//     field (the pure call's one entry, for a pure call).
//   - When the approval layer then refuses, or the call fails before it
//     is dispatched: op, _ := s.ledger.Release(r), on the failed entry.
//   - After dispatch: op, _ := s.ledger.Settle(r, actual), actual being
//     budget.Charge(usage, price) for a model call and the reserved
//     amounts for a tool or HTTP call (a call that was sent is charged even
//     when it failed), on the completed or failed entry.
//   - Steps: the step ceiling needs no lock on the hot path: refuse a call
//     whose c.Step exceeds ceilings.Get(Steps). Step is for a child ledger,
//     whose steps charge its parent's carve.
//   - Wall clock: s.ledger.Tick(elapsed seconds) from the run's existing
//     wall-time timer, so that reserves stop once it has run out.
//   - agentrt budget RUN [--json]: rep, err := budget.ReportFrom(ceilings,
//     budget.Journal{Steps: lastStep, ElapsedSeconds: secs, Fields: fields}),
//     then rep.WriteText(stdout) or rep.WriteJSON(stdout).
//
// This package must never import the host: the gate calls it.
package budget
