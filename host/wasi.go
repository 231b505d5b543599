package host

import (
	"math/rand/v2"

	"github.com/agentrt/agentrt/journal"
	"github.com/tetratelabs/wazero"
)

// clockStep is how far the virtual clock moves on every read.
const clockStep = 1000 // ns

// virtualClock is the guest's only sense of time: it starts at zero,
// advances by clockStep on every read and by the requested duration on every
// sleep. It is derived from the run header alone, so replay sees the same
// instants without journaling a single clock read.
type virtualClock struct {
	base int64 // wall-clock origin, Unix ns, from the run header
	now  int64
}

func (c *virtualClock) nanotime() int64 {
	c.now += clockStep
	return c.now
}

func (c *virtualClock) walltime() (sec int64, nsec int32) {
	t := c.base + c.nanotime()
	return t / 1e9, int32(t % 1e9)
}

func (c *virtualClock) sleep(ns int64) {
	if ns > 0 {
		c.now += ns
	}
}

// moduleConfig is the virtual WASI a guest runs in: a virtual clock, a
// random stream seeded by the run seed, stdout and stderr into the event
// log, and no filesystem, environment, arguments beyond the module name, or
// network.
func moduleConfig(h *journal.Header, events *eventBuffer) wazero.ModuleConfig {
	clock := &virtualClock{base: h.WallBase}
	var seed [32]byte
	copy(seed[:], h.Seed)
	name := h.ModuleName
	if name == "" {
		name = "agent"
	}
	return wazero.NewModuleConfig().
		WithName("").
		WithArgs(name).
		WithStdout(events.writer(EventStdout)).
		WithStderr(events.writer(EventStderr)).
		WithRandSource(rand.NewChaCha8(seed)).
		WithNanotime(clock.nanotime, 1).
		WithWalltime(clock.walltime, 1).
		WithNanosleep(clock.sleep).
		WithOsyield(func() {}).
		WithStartFunctions()
}
