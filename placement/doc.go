// Package placement decides which cell runs a run. It is a pure function
// of its inputs: no I/O, no clock, no randomness, no state.
//
// A Cell describes a cell as its heartbeat reports it: its id (its ed25519
// public key in hex), its load (running runs of max_runs), its free GPUs
// and their kind, the models it serves, the datasets it holds, its cost
// per hour, its clearance and its topology labels. A Need says what a run
// requires and prefers. Place decides in two steps:
//
//  1. Hard constraints, each refusing a cell with a stated Reason: every
//     topology label the need names must match; the cell's clearance must
//     be at least the need's (a run needing clearance C never lands on a
//     cell below C; the levels are public < internal < confidential <
//     secret, and any other name is refused); the cell must not be full;
//     it must have the GPUs needed, of the kind needed; and an hour on it
//     must not cost more than the need's max.
//  2. A score for each cell left: GPU availability, model availability,
//     data locality and cost, each from 0 to 1000 and weighted, less the
//     weighted load (see Score). The highest total wins; a tie goes to the
//     lowest id.
//
// The same need and the same set of cells give the same Decision, in
// whatever order the cells come: Place sorts them by id first, and scores
// in integers, so that every platform computes the same bits. A Decision
// holds the cell chosen, every candidate's score and its parts, every
// refusal's reasons, the weights in force and a copy of its inputs; it
// encodes to canonical CBOR (EncodeCBOR) and to JSON, and Recheck places
// its inputs again to confirm it. When no cell is eligible, Place returns
// a *NoEligibleError listing why each was refused, with the Decision.
//
// What it must never do: read the registry, journal, or fall back to a
// cell that fails a hard constraint. The cluster calls Place, when a run
// is submitted and when a takeover picks a cell, with the cells of its
// registry, and journals the Decision with the run; neither the registry
// nor that journaling is here yet. agentrt place runs it on files.
package placement
