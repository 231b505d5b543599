package handoff

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"sync"

	"github.com/agentrt/agentrt/journal"
)

// Chain keeps the handoff envelopes a cell accepted, per run, each naming
// the hash of the run's envelope before it (Payload.Prev), and every nonce
// it saw. It lives in memory: a cell that restarts forgets it (the
// envelopes' expiry bounds what it could be replayed).
type Chain struct {
	mu     sync.Mutex
	runs   map[journal.RunID][][]byte
	nonces map[string]bool
}

// NewChain returns an empty chain.
func NewChain() *Chain {
	return &Chain{runs: map[journal.RunID][][]byte{}, nonces: map[string]bool{}}
}

// Head returns the hash of run's last envelope, nil when it has none: the
// Prev of its next.
func (c *Chain) Head(run journal.RunID) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.head(run)
}

func (c *Chain) head(run journal.RunID) []byte {
	envs := c.runs[run]
	if len(envs) == 0 {
		return nil
	}
	h := sha256.Sum256(envs[len(envs)-1])
	return h[:]
}

// Envelopes returns run's envelopes, oldest first.
func (c *Chain) Envelopes(run journal.RunID) [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([][]byte(nil), c.runs[run]...)
}

// Append records an envelope the cell sent (its Prev the chain's head).
func (c *Chain) Append(run journal.RunID, raw []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.runs[run] = append(c.runs[run], raw)
}

func (c *Chain) accept(p *Payload, raw []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nonces[string(p.Nonce)] {
		return fmt.Errorf("%w: nonce %x was accepted before", ErrReplayed, p.Nonce)
	}
	if head := c.head(p.Run); !bytes.Equal(head, p.Prev) {
		return fmt.Errorf("%w: it follows envelope %x, the run's last is %x", ErrReplayed, p.Prev, head)
	}
	c.nonces[string(p.Nonce)] = true
	c.runs[p.Run] = append(c.runs[p.Run], raw)
	return nil
}
