package host

import (
	"crypto/sha256"
	"encoding/binary"
	"io"
	"math/rand/v2"
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

// virtualWASI is the environment of one guest instance as WASI shows it:
// a virtual clock, a random stream seeded by the run seed, stdout and
// stderr into the event log, one argument (the module name), and no
// filesystem, environment or network (abi/SPEC.md §10). Each segment of a
// run that checkpoints gets one of its own: its clock goes on from the
// checkpoint's, its random stream is seeded for the segment. Every engine
// adapter serves WASI from it: wazero through moduleConfig, the others
// through preview1 (wasi_preview1.go).
type virtualWASI struct {
	clock          *virtualClock
	rand           *rand.ChaCha8
	args           []string
	stdout, stderr io.Writer
}

// newVirtualWASI returns the virtual WASI of the current segment of s and
// sets s.clock to its clock.
func newVirtualWASI(s *session) *virtualWASI {
	h, events := s.header, s.events
	clock := &virtualClock{base: h.WallBase, now: s.seg.clock}
	s.clock = clock
	name := h.ModuleName
	if name == "" {
		name = "agent"
	}
	return &virtualWASI{
		clock:  clock,
		rand:   rand.NewChaCha8(segmentSeed(h.Seed, s.seg.number)),
		args:   []string{name},
		stdout: events.writer(EventStdout),
		stderr: events.writer(EventStderr),
	}
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
