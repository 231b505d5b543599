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
// This package must never import the host: the gate calls it.
package budget
