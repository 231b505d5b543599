package handoff

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"

	"github.com/agentrt/agentrt/journal"
)

// Store keeps the envelope chains of runs and the nonces accepted: the
// source of a handoff appends its envelope to the run's chain before it
// sends it, and the destination records the envelope's nonce when it
// accepts it. Both writes are create-only, so that two cells racing for
// one place of a chain, or two copies of one envelope racing to be
// accepted, have one winner. The cluster's store is a JetStream KV bucket
// (host/cell); MemStore keeps them in memory.
type Store interface {
	// Envelopes returns the envelopes of run, oldest first.
	Envelopes(ctx context.Context, run journal.RunID) ([][]byte, error)
	// Put stores raw as envelope n (from 0) of run. It returns
	// ErrChainMoved when the run already has an envelope n.
	Put(ctx context.Context, run journal.RunID, n int, raw []byte) error
	// Seen reports whether nonce was recorded.
	Seen(ctx context.Context, nonce []byte) (bool, error)
	// See records nonce. It returns ErrReplayed when it was recorded
	// before.
	See(ctx context.Context, nonce []byte) error
}

// ErrChainMoved is returned by Store.Put and Chain.Append when another
// envelope took the place in the run's chain: another handoff of the run
// was sent meanwhile.
var ErrChainMoved = errors.New("handoff: the run's envelope chain moved (another handoff of the run was sent)")

// Chain is the envelope chains of a Store: each envelope of a run names
// the hash of the one before it (Payload.Prev).
type Chain struct {
	s Store
}

// NewChain returns a chain over a fresh MemStore.
func NewChain() *Chain { return ChainOn(NewMemStore()) }

// ChainOn returns the chain kept in s.
func ChainOn(s Store) *Chain { return &Chain{s: s} }

// Head returns the hash of run's last envelope, nil when it has none: the
// Prev of its next.
func (c *Chain) Head(ctx context.Context, run journal.RunID) ([]byte, error) {
	envs, err := c.s.Envelopes(ctx, run)
	if err != nil || len(envs) == 0 {
		return nil, err
	}
	return Sum(envs[len(envs)-1]), nil
}

// Envelopes returns run's envelopes, oldest first.
func (c *Chain) Envelopes(ctx context.Context, run journal.RunID) ([][]byte, error) {
	return c.s.Envelopes(ctx, run)
}

// Append adds raw, an envelope the cell sealed for run, to the run's
// chain. Its Prev must be the chain's head; ErrChainMoved otherwise.
func (c *Chain) Append(ctx context.Context, run journal.RunID, prev, raw []byte) error {
	envs, err := c.s.Envelopes(ctx, run)
	if err != nil {
		return err
	}
	if head := last(envs); !bytes.Equal(head, prev) {
		return fmt.Errorf("%w: the envelope follows %x, the run's last is %x", ErrChainMoved, prev, head)
	}
	return c.s.Put(ctx, run, len(envs), raw)
}

// Sum is the hash an envelope is named by in the next one's Prev and in
// the lease entry of the cell that received it.
func Sum(raw []byte) []byte {
	h := sha256.Sum256(raw)
	return h[:]
}

func last(envs [][]byte) []byte {
	if len(envs) == 0 {
		return nil
	}
	return Sum(envs[len(envs)-1])
}

// check refuses, without writing anything, an envelope whose nonce was
// accepted before, or that is not the last of its run's chain (an older
// envelope of the run, or one its source never recorded), or whose Prev
// is not the envelope before it.
func (c *Chain) check(ctx context.Context, p *Payload, raw []byte) error {
	seen, err := c.s.Seen(ctx, p.Nonce)
	if err != nil {
		return err
	}
	if seen {
		return fmt.Errorf("%w: nonce %x was accepted before", ErrReplayed, p.Nonce)
	}
	envs, err := c.s.Envelopes(ctx, p.Run)
	if err != nil {
		return err
	}
	if len(envs) == 0 || !bytes.Equal(envs[len(envs)-1], raw) {
		return fmt.Errorf("%w: it is not the last envelope of run %s's chain (of %d), which its source records before sending it", ErrReplayed, p.Run, len(envs))
	}
	if prev := last(envs[:len(envs)-1]); !bytes.Equal(prev, p.Prev) {
		return fmt.Errorf("%w: it follows envelope %x, the envelope before it in the chain is %x", ErrReplayed, p.Prev, prev)
	}
	return nil
}

// Accept records the nonce of p, an envelope Verify passed, once the
// caller's own checks passed too, and before the caller acts on it: of
// two copies of one envelope, only one is accepted (ErrReplayed).
func (c *Chain) Accept(ctx context.Context, p *Payload) error {
	return c.s.See(ctx, p.Nonce)
}

// MemStore is a Store in memory: a process that restarts forgets it.
type MemStore struct {
	mu     sync.Mutex
	runs   map[journal.RunID][][]byte
	nonces map[string]bool
}

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore {
	return &MemStore{runs: map[journal.RunID][][]byte{}, nonces: map[string]bool{}}
}

// Envelopes implements Store.
func (m *MemStore) Envelopes(_ context.Context, run journal.RunID) ([][]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([][]byte(nil), m.runs[run]...), nil
}

// Put implements Store.
func (m *MemStore) Put(_ context.Context, run journal.RunID, n int, raw []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n != len(m.runs[run]) {
		return fmt.Errorf("%w: place %d of %d", ErrChainMoved, n, len(m.runs[run]))
	}
	m.runs[run] = append(m.runs[run], bytes.Clone(raw))
	return nil
}

// Seen implements Store.
func (m *MemStore) Seen(_ context.Context, nonce []byte) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.nonces[string(nonce)], nil
}

// See implements Store.
func (m *MemStore) See(_ context.Context, nonce []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.nonces[string(nonce)] {
		return fmt.Errorf("%w: nonce %x was accepted before", ErrReplayed, nonce)
	}
	m.nonces[string(nonce)] = true
	return nil
}
