// Package plan is a planner for agentrt agents: a goal decomposed into a
// DAG of steps with dependencies, run wave by wave, with compensations,
// replanning and a bandit over named strategies.
//
// # Running a plan
//
// Execute validates the steps (every dependency names a step, no cycle, no
// duplicate id; the error says which) and runs them in waves. A wave is
// every step whose dependencies have completed, taken in the order the
// steps are declared:
//
//  1. the approvals the wave's steps ask for are requested, one by one;
//  2. every ready sub-agent step (Step.Child) is spawned, all of them
//     before any await: a wasm guest is single-threaded, the parallelism
//     is the children's, which run at once in the cell;
//  3. the ready local steps (Step.Do) run in order, while the children run;
//  4. the children are awaited, in spawn order.
//
// A step's completion order is the order its result was recorded: the
// local steps of a wave, then its children.
//
// # Resume after a crash
//
// The planner keeps no state of its own outside the guest's memory: every
// decision it makes depends only on the steps the caller declared, on
// answers of the host (spawn, await, approval, kv, random, budget), which
// the journal records, and on the caller's functions. When the run resumes
// after a crash, the host replays the recorded answers to the same calls in
// the same order, so the planner walks the same path to the point of the
// crash (a spawn journaled before the crash returns the same child, which
// the cell kept running; it is not spawned again) and goes on live from
// there. The caller's Do, Undo, Input and Replanner functions must keep
// this property: decide only on their inputs and on what the host answers,
// never on Go map iteration order or on anything outside the run. The plan
// also logs each wave, signal and compensation (run.log), so the journal
// shows the plan's progress in words.
//
// # Rollback
//
// A step with Undo has a compensation. When the plan fails (a failure no
// replanner revises, a step returning ErrRollback) or when the caller calls
// Result.Rollback, the compensations of the completed steps run in reverse
// completion order, each once.
//
// # Replanning
//
// A failed step, a denied approval, or the budget crossing
// Options.BudgetThreshold sends a Signal to Options.Replan, which returns
// the steps to run instead of the pending ones (it may name completed
// steps as dependencies), or an error to give up and roll back.
//
// The budget is read with Host.Budget: the SDK's host reads the ceiling
// on the run's import calls ("steps") from run.limit and the calls made so
// far from run.introspect, both journaled; a step that fails with
// agent.ErrBudget, or a child that ends budget_exhausted, is a budget
// signal too.
//
// # Strategies and reflection
//
// Bandit chooses among named strategies by Thompson sampling over the
// outcomes recorded in kv, with a sampler seeded by random.bytes, so that
// a replay chooses the same. Reflect writes a Reflection (what ran, its
// outcome, its cost, the strategy) to kv after a plan.
//
// Every function reaches the host through a Host or a Memory; SDK is the
// one agents use. The package must never read the clock, the environment or Go's
// global random source for a decision: only what the journal records.
package plan
