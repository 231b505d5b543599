package journal

import (
	"crypto/ed25519"
	"fmt"
	"sync/atomic"
)

// Chain links the entries of one run as they are written. It is a plain
// state machine: it numbers, links, encodes and seals entries, and leaves
// storing them to the caller.
type Chain struct {
	run RunID
	key ed25519.PrivateKey
	pub ed25519.PublicKey
	// next is read by Next from other goroutines (a capability's
	// process stamping its output with the seq), written by the one
	// goroutine that links.
	next atomic.Uint64
	head []byte
}

// NewChain starts a chain for a new run, signed by key.
func NewChain(run RunID, key ed25519.PrivateKey) *Chain {
	return &Chain{run: run, key: key, pub: key.Public().(ed25519.PublicKey), head: make([]byte, HashSize)}
}

// ResumeChain continues a chain whose last entry is seq with hash head.
func ResumeChain(run RunID, key ed25519.PrivateKey, seq uint64, head []byte) *Chain {
	c := NewChain(run, key)
	c.next.Store(seq + 1)
	c.head = append([]byte(nil), head...)
	return c
}

// Next returns the seq the next entry will get.
func (c *Chain) Next() uint64 { return c.next.Load() }

// Head returns the hash of the last entry linked.
func (c *Chain) Head() []byte { return c.head }

// Cell returns the public key that signs this chain.
func (c *Chain) Cell() ed25519.PublicKey { return c.pub }

// Link fills in e's run, seq, prev, cell and version, encodes it and
// advances the chain. The returned record carries no seal yet.
func (c *Chain) Link(e *Entry) (Record, error) {
	e.Version = FormatVersion
	e.Run = c.run
	e.Seq = c.next.Load()
	e.Prev = c.head
	e.Cell = c.pub
	if err := e.check(); err != nil {
		return Record{}, fmt.Errorf("journal: refusing to write a malformed entry: %w", err)
	}
	b, err := EncodeEntry(e)
	if err != nil {
		return Record{}, err
	}
	c.next.Add(1)
	c.head = Sum(b)
	return Record{Entry: b}, nil
}

// Seal signs the current head and returns the seal for the record that holds
// the head entry.
func (c *Chain) Seal() *Seal {
	sig := ed25519.Sign(c.key, SealMessage(c.run, c.next.Load()-1, c.head))
	return &Seal{Cell: c.pub, Sig: sig}
}
