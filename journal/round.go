package journal

import (
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// Round seals. A store that writes the commits of many runs together (one
// round of group commit) may seal them all with one signature: the heads
// of the round's commits are the leaves of an RFC 6962 Merkle tree, the
// cell signs the tree's root, and each commit's seal carries the signature
// with the inclusion proof of its own head. A round of one commit is sealed
// over its head directly, as a commit sealed on its own.

// roundContext separates round-root signatures from every other use of a
// cell key.
const roundContext = "agentrt/journal/v1 round\x00"

// RoundMessage returns the bytes a cell signs to seal a round of size
// heads whose Merkle root is root.
func RoundMessage(size uint64, root []byte) []byte {
	m := make([]byte, 0, len(roundContext)+8+len(root))
	m = append(m, roundContext...)
	m = binary.BigEndian.AppendUint64(m, size)
	return append(m, root...)
}

// SealBatches seals the last record of every batch in bs that asks for a
// seal (SealWith set): one signature per signing key for all the batches
// it signs. Stores call it on the batches they write in one round, before
// encoding them.
func SealBatches(bs []*Batch) {
	byKey := map[string][]*Batch{}
	var keys []string
	for _, b := range bs {
		if b.SealWith == nil || len(b.Records) == 0 {
			continue
		}
		k := string(b.SealWith)
		if byKey[k] == nil {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], b)
	}
	for _, k := range keys {
		sealRound(byKey[k])
	}
}

func sealRound(bs []*Batch) {
	key := bs[0].SealWith
	pub := key.Public().(ed25519.PublicKey)
	last := func(b *Batch) *Record { return &b.Records[len(b.Records)-1] }
	if len(bs) == 1 {
		b := bs[0]
		seq := b.Next + uint64(len(b.Records)) - 1
		last(b).Seal = &Seal{Cell: pub, Sig: ed25519.Sign(key, SealMessage(b.Run, seq, b.Head))}
		return
	}
	leaves := make([][]byte, len(bs))
	for i, b := range bs {
		seq := b.Next + uint64(len(b.Records)) - 1
		leaves[i] = rfc6962.DefaultHasher.HashLeaf(SealMessage(b.Run, seq, b.Head))
	}
	paths := make([][][]byte, len(bs))
	root := merkleTree(leaves, paths)
	sig := ed25519.Sign(key, RoundMessage(uint64(len(bs)), root))
	for i, b := range bs {
		last(b).Seal = &Seal{Cell: pub, Sig: sig, Index: uint64(i), Size: uint64(len(bs)), Path: paths[i]}
	}
}

// merkleTree returns the RFC 6962 root of leaves (leaf hashes) and fills
// paths[i] with the inclusion proof of leaf i, from the leaf upward.
func merkleTree(leaves [][]byte, paths [][][]byte) []byte {
	n := len(leaves)
	if n == 1 {
		return leaves[0]
	}
	k := 1
	for k<<1 < n {
		k <<= 1
	}
	left := merkleTree(leaves[:k], paths[:k])
	right := merkleTree(leaves[k:], paths[k:])
	for i := range k {
		paths[i] = append(paths[i], right)
	}
	for i := k; i < n; i++ {
		paths[i] = append(paths[i], left)
	}
	return rfc6962.DefaultHasher.HashChildren(left, right)
}

// VerifySeal checks that s is a valid signature of s.Cell on entry seq of
// run, whose entry hash is head: a signature over the head itself, or over
// the root of a round that the seal's inclusion proof ties the head to. It
// does not decide whether s.Cell is trusted.
func VerifySeal(s *Seal, run RunID, seq uint64, head []byte) error {
	msg := SealMessage(run, seq, head)
	if s.Size == 0 {
		if len(s.Path) != 0 || s.Index != 0 {
			return errors.New("a seal of one commit carries a round proof")
		}
		if !ed25519.Verify(s.Cell, msg, s.Sig) {
			return errors.New("signature does not verify")
		}
		return nil
	}
	if s.Size < 2 {
		return fmt.Errorf("a round of %d commits", s.Size)
	}
	root, err := proof.RootFromInclusionProof(rfc6962.DefaultHasher, s.Index, s.Size, rfc6962.DefaultHasher.HashLeaf(msg), s.Path)
	if err != nil {
		return fmt.Errorf("round proof: %v", err)
	}
	if !ed25519.Verify(s.Cell, RoundMessage(s.Size, root), s.Sig) {
		return errors.New("round signature does not verify for this head")
	}
	return nil
}
