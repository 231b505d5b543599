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
// Steps and wall-clock seconds are counters, not reservations: Step (or
// CountSteps) counts the run's import calls (the journal's step numbers
// are its record), Tick (or Elapse) records the run's elapsed time. A
// carve is the exception: it reserves the child's steps, which its settle
// charges as the child made them (ChildSteps).
//
// A child ledger is carved out of its parent (Carve): the child's ceilings
// are reserved in the parent, the child's settles charge the parent as they
// happen, and closing the child returns what it left unused. A child that
// runs apart (a sub-agent, in its own run and journal) has its ceilings
// reserved by ReserveCarve, and its parent settles the carve at what the
// child's journal says it spent (SettleCarve): the host's budget bridge.
//
// Every amount is an integer (money in micro-USD), every sum is exact, and
// the ledger never takes a float, a clock or a lock other than its own: a
// rebuilt ledger equals the live one that wrote the records.
//
// # Wiring into the gate
//
// host/budget.go wires it (the gate's layer 3, host/gate.go), with one
// *Ledger per run in its session:
//
//   - At a run's start: New(CeilingsOf(token budget, {})): the run's grant
//     holds its token's ceilings.
//   - Per call whose capability instance is a caps.Meter, after policy
//     allowed it (and whether or not the cell has a policy): Reserve its
//     Estimate. An ExceededError is the call's denial, status `budget`,
//     its text as the message, GateRecord{Layer: "budget"}, no record.
//     Otherwise Reservation.Op goes on the call's first entry (the
//     intent, or a pure call's one entry).
//   - When the approval layer refuses: Release, on the failed entry. A
//     call whose approval wait the run's stop cut short is not journaled:
//     its reservation is released and its reserve dropped.
//   - After dispatch: Settle at the Meter's Usage, on the completed or
//     failed entry. A Usage that holds leaves the reservation open; the
//     call a caps.Settler names settles it, on its own entry; the run's
//     end settles any still open at their worst case, on the end entry.
//   - On resume: the budget fields of the journal (from the last
//     checkpoint, whose response carries the ledger's Snapshot) and the
//     run.limit responses rebuild it (RebuildFrom). The resolver keeps
//     every orphan open (ResolveKeep), to be settled as live: the call in
//     doubt's by its re-dispatch, or at its worst case by the in_doubt
//     answer; a held one by the call that settles it (a resumed stream's
//     last batch, at its actual usage), or at its worst case at the end.
//   - run.limit: Lower each dimension to Used (or the steps made, or the
//     seconds since the run's start) plus the amount asked.
//   - Steps and wall clock are not stepped or ticked live: a steps ceiling
//     ends the run at the call past it, as the calls quota does, and the
//     wall-clock ceiling is the run's wall-time timer. Replay and
//     ReportFrom count them from the journal.
//   - agent.spawn: CountSteps and Elapse, then ReserveCarve of the
//     child's ceilings (its wall clock cut to what is left when the spawn
//     leaves it out); a live call past the steps ceiling with the run's
//     ChildSteps counted ends the run; SettleCarve at what the child's
//     journal says it spent once it ended.
//   - agentrt budget RUN [--json]: host.LoadBudget, which verifies the
//     journal and calls ReportFrom; then WriteText or WriteJSON.
//
// This package must never import the host: the gate calls it.
package budget
