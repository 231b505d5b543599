// Package host runs agent modules: the engine adapters (wazero; wasmtime
// behind the build tag wasmtime), the link check, the virtual WASI, the
// session every import call enters, the gate, the journal path (write
// ahead, group commit), resume and replay's serving of recorded calls, and
// forks (a new run answered from another run's journal up to a fork point,
// then live).
//
// The capabilities are not here: each is a package under host/caps/
// behind the interface of host/caps, registered in registry.go, and the
// host binds a run's handlers into the session's slots when the run
// starts executing. The host journals what a capability answers; a
// capability never reaches the journal, the session or the engine.
package host
