// Package benchknobs holds the switches the benchmark harness (bench/)
// turns to measure what a protection costs, by running the same path with
// it and without. Nothing but the harness may set them: they weaken the
// host. Being internal, no program outside this module can.
package benchknobs

import "sync/atomic"

// NoGuestInterrupt, while set, makes host.NewEngine build engines whose
// guests cannot be stopped between two calls: wazero modules are not
// rewritten with yields, wasmtime runs without epoch interruption.
var NoGuestInterrupt atomic.Bool
