package host

import (
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"

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
// network. Each segment of a run that checkpoints gets an instance of its
// own: its clock goes on from the checkpoint's, its random stream is seeded
// for the segment, and s.clock is set to its clock.
func moduleConfig(s *session) wazero.ModuleConfig {
	h, events := s.header, s.events
	clock := &virtualClock{base: h.WallBase, now: s.seg.clock}
	s.clock = clock
	seed := segmentSeed(h.Seed, s.seg.number)
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

// segmentSeed returns the seed of the random stream of segment n of a run
// with seed: the run seed itself for the first segment, a hash of it and n
// for the next, so that no two segments draw the same numbers.
func segmentSeed(seed []byte, n uint32) [32]byte {
	if n == 0 {
		var s [32]byte
		copy(s[:], seed)
		return s
	}
	h := sha256.New()
	h.Write([]byte("agentrt segment seed\x00"))
	h.Write(seed)
	h.Write(binary.BigEndian.AppendUint32(nil, n))
	return [32]byte(h.Sum(nil))
}
