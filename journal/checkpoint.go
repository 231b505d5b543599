package journal

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
)

// Merkle checkpoints (SPEC.md section 14). The entries of a run's journal,
// in seq order, are the leaves of an RFC 6962 Merkle tree; leaf i is the
// canonical bytes of entry i, exactly as stored and hashed. A cell signs the
// tree's root at a size in a checkpoint, a C2SP signed note whose text is
// the tlog-checkpoint body. An auditor who keeps a checkpoint can later
// check that one entry is in the journal it describes (an inclusion proof)
// and that a newer checkpoint describes the same journal grown by appends
// only (a consistency proof): a journal rewritten or forked after the old
// checkpoint was signed fails that proof.

// ErrCheckpoint is the failure class of a checkpoint that is malformed,
// whose signature does not verify, or that does not describe the journal
// it is checked against; and of an inclusion or consistency proof that
// does not verify.
var ErrCheckpoint = errors.New("checkpoint")

// CheckpointOriginPrefix starts the origin line of every run's checkpoints;
// the run id in lower-case hex follows.
const CheckpointOriginPrefix = "agentrt.dev/run/"

// maxCheckpointSize bounds the checkpoint notes a parser accepts: a body of
// three short lines and a few signature lines is far below it.
const maxCheckpointSize = 4096

// LeafHash returns the RFC 6962 leaf hash of an entry whose canonical bytes
// are entry: SHA-256(0x00 || entry). It differs from the entry hash
// (SHA-256(entry)) by the leaf prefix, which keeps leaves and inner nodes
// of the tree apart.
func LeafHash(entry []byte) []byte { return rfc6962.DefaultHasher.HashLeaf(entry) }

// Tree is the Merkle tree over a journal's entries. It keeps every node
// hash of its perfect subtrees, so it answers roots, inclusion proofs and
// consistency proofs for any size up to its own.
type Tree struct {
	// levels[0] are the leaf hashes; levels[l][i] is the hash of the
	// perfect subtree of 2^l leaves starting at leaf i*2^l.
	levels [][][]byte
}

// NewTree returns the tree over the given leaf hashes.
func NewTree(leafHashes ...[]byte) *Tree {
	t := &Tree{}
	for _, h := range leafHashes {
		t.Append(h)
	}
	return t
}

// Append adds the next leaf hash.
func (t *Tree) Append(leafHash []byte) {
	if len(t.levels) == 0 {
		t.levels = [][][]byte{nil}
	}
	t.levels[0] = append(t.levels[0], bytes.Clone(leafHash))
	for l := 0; len(t.levels[l])%2 == 0; l++ {
		n := len(t.levels[l])
		parent := rfc6962.DefaultHasher.HashChildren(t.levels[l][n-2], t.levels[l][n-1])
		if l+1 == len(t.levels) {
			t.levels = append(t.levels, nil)
		}
		t.levels[l+1] = append(t.levels[l+1], parent)
	}
}

// Size returns the number of leaves.
func (t *Tree) Size() uint64 {
	if len(t.levels) == 0 {
		return 0
	}
	return uint64(len(t.levels[0]))
}

// LeafHash returns the hash of leaf i.
func (t *Tree) LeafHash(i uint64) ([]byte, error) {
	if i >= t.Size() {
		return nil, fmt.Errorf("%w: leaf %d of a tree of %d", ErrCheckpoint, i, t.Size())
	}
	return t.levels[0][i], nil
}

func (t *Tree) node(id compact.NodeID) []byte { return t.levels[id.Level][id.Index] }

// Root returns the root hash of the tree's first size leaves (RFC 6962
// section 2.1: the hash of the empty string for size 0).
func (t *Tree) Root(size uint64) ([]byte, error) {
	if size > t.Size() {
		return nil, fmt.Errorf("%w: a root at size %d of a tree of %d", ErrCheckpoint, size, t.Size())
	}
	if size == 0 {
		return rfc6962.DefaultHasher.EmptyRoot(), nil
	}
	// The perfect subtrees covering [0, size), largest first, folded from
	// the right: that is the RFC 6962 recursion unrolled.
	ids := compact.RangeNodes(0, size, nil)
	root := t.node(ids[len(ids)-1])
	for i := len(ids) - 2; i >= 0; i-- {
		root = rfc6962.DefaultHasher.HashChildren(t.node(ids[i]), root)
	}
	return root, nil
}

// InclusionProof returns the RFC 6962 inclusion proof of leaf index in the
// tree of the first size leaves, from the leaf upward.
func (t *Tree) InclusionProof(index, size uint64) ([][]byte, error) {
	if size > t.Size() {
		return nil, fmt.Errorf("%w: a proof at size %d of a tree of %d", ErrCheckpoint, size, t.Size())
	}
	nodes, err := proof.Inclusion(index, size)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCheckpoint, err)
	}
	return t.rehash(nodes)
}

// ConsistencyProof returns the RFC 6962 consistency proof between the trees
// of the first size1 and size2 leaves.
func (t *Tree) ConsistencyProof(size1, size2 uint64) ([][]byte, error) {
	if size2 > t.Size() {
		return nil, fmt.Errorf("%w: a proof at size %d of a tree of %d", ErrCheckpoint, size2, t.Size())
	}
	nodes, err := proof.Consistency(size1, size2)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCheckpoint, err)
	}
	return t.rehash(nodes)
}

func (t *Tree) rehash(nodes proof.Nodes) ([][]byte, error) {
	hashes := make([][]byte, len(nodes.IDs))
	for i, id := range nodes.IDs {
		hashes[i] = t.node(id)
	}
	return nodes.Rehash(hashes, rfc6962.DefaultHasher.HashChildren)
}

// VerifyInclusion checks that leafHash is leaf index of the tree of size
// leaves whose root is root, by the inclusion proof p.
func VerifyInclusion(index, size uint64, leafHash []byte, p [][]byte, root []byte) error {
	if err := proof.VerifyInclusion(rfc6962.DefaultHasher, index, size, leafHash, p, root); err != nil {
		return fmt.Errorf("%w: inclusion proof of entry %d in a tree of %d: %v", ErrCheckpoint, index, size, err)
	}
	return nil
}

// VerifyConsistency checks that the tree of size2 leaves with root root2
// extends the tree of size1 leaves with root root1, by the consistency
// proof p.
func VerifyConsistency(size1, size2 uint64, p [][]byte, root1, root2 []byte) error {
	if size1 > size2 {
		return fmt.Errorf("%w: the tree shrank from %d to %d entries", ErrCheckpoint, size1, size2)
	}
	if len(root1) != HashSize || len(root2) != HashSize {
		return fmt.Errorf("%w: a root is not %d bytes", ErrCheckpoint, HashSize)
	}
	if size1 == 0 && !bytes.Equal(root1, rfc6962.DefaultHasher.EmptyRoot()) {
		return fmt.Errorf("%w: the empty tree's root is not the hash of nothing", ErrCheckpoint)
	}
	if err := proof.VerifyConsistency(rfc6962.DefaultHasher, size1, size2, p, root1, root2); err != nil {
		return fmt.Errorf("%w: the tree of %d entries does not extend the tree of %d: %v", ErrCheckpoint, size2, size1, err)
	}
	return nil
}

// TreeOf reads the journal of run in store and returns the tree over its
// entries. It checks that every record decodes, not the chain or the seals
// (a Verifier does).
func TreeOf(ctx context.Context, store Store, run RunID) (*Tree, error) {
	t := &Tree{}
	err := store.Records(ctx, run, 0, func(_ uint64, raw []byte) error {
		rec, err := DecodeRecord(raw)
		if err != nil {
			return err
		}
		t.Append(LeafHash(rec.Entry))
		return nil
	})
	if err != nil {
		return nil, err
	}
	if t.Size() == 0 {
		return nil, fmt.Errorf("%w: run %s", ErrNotFound, run)
	}
	return t, nil
}

// Checkpoint is the body of a signed checkpoint: the tree of a run's
// journal at a size.
type Checkpoint struct {
	// Origin names the log: CheckpointOriginPrefix and the run id.
	Origin string
	// Size is the number of entries the tree holds.
	Size uint64
	// Root is the RFC 6962 root hash of the tree.
	Root []byte
}

// CheckpointOrigin returns the origin line of run's checkpoints.
func CheckpointOrigin(run RunID) string { return CheckpointOriginPrefix + run.String() }

// Run returns the run the checkpoint's origin names.
func (c *Checkpoint) Run() (RunID, error) {
	s, ok := strings.CutPrefix(c.Origin, CheckpointOriginPrefix)
	if !ok {
		return RunID{}, fmt.Errorf("%w: origin %q does not name an agentrt run", ErrCheckpoint, c.Origin)
	}
	id, err := ParseRunID(s)
	if err != nil || id.String() != s {
		return RunID{}, fmt.Errorf("%w: origin %q does not name an agentrt run", ErrCheckpoint, c.Origin)
	}
	return id, nil
}

// Text returns the checkpoint's note text: origin, size in decimal and the
// root in standard base64, each on its own line.
func (c *Checkpoint) Text() []byte {
	return fmt.Appendf(nil, "%s\n%d\n%s\n", c.Origin, c.Size, base64.StdEncoding.EncodeToString(c.Root))
}

// ParseCheckpoint parses a checkpoint's note text. It accepts exactly what
// Text writes: three lines, a size without leading zeros, a 32-byte root in
// canonical base64, and no extension lines (agentrt defines none, and an
// unknown line in a signed statement is refused rather than ignored).
func ParseCheckpoint(text []byte) (*Checkpoint, error) {
	lines := strings.Split(string(text), "\n")
	if len(lines) != 4 || lines[3] != "" {
		return nil, fmt.Errorf("%w: note text is not three lines (origin, size, root)", ErrCheckpoint)
	}
	c := &Checkpoint{Origin: lines[0]}
	if c.Origin == "" {
		return nil, fmt.Errorf("%w: empty origin", ErrCheckpoint)
	}
	size, err := strconv.ParseUint(lines[1], 10, 64)
	if err != nil || strconv.FormatUint(size, 10) != lines[1] {
		return nil, fmt.Errorf("%w: tree size %q is not a decimal number in shortest form", ErrCheckpoint, lines[1])
	}
	c.Size = size
	root, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(root) != HashSize || base64.StdEncoding.EncodeToString(root) != lines[2] {
		return nil, fmt.Errorf("%w: root %q is not the canonical base64 of a %d-byte hash", ErrCheckpoint, lines[2], HashSize)
	}
	c.Root = root
	return c, nil
}

// CheckpointKeyName returns the signed-note key name of a cell:
// "agentrt-cell-" and the first 8 bytes of its public key in hex. The name
// is a label; the key hash in each signature and the key itself decide.
func CheckpointKeyName(pub ed25519.PublicKey) string {
	return "agentrt-cell-" + hex.EncodeToString(pub[:8])
}

// checkpointVerifier returns the note verifier of a cell key.
func checkpointVerifier(pub ed25519.PublicKey) (note.Verifier, error) {
	vkey, err := note.NewEd25519VerifierKey(CheckpointKeyName(pub), pub)
	if err != nil {
		return nil, err
	}
	return note.NewVerifier(vkey)
}

// checkpointSigner returns the note signer of a cell key, built from the
// encoded signer key so that the note package checks name, hash and key
// together.
func checkpointSigner(key ed25519.PrivateKey) (note.Signer, error) {
	pub := key.Public().(ed25519.PublicKey)
	v, err := checkpointVerifier(pub)
	if err != nil {
		return nil, err
	}
	skey := fmt.Sprintf("PRIVATE+KEY+%s+%08x+%s", v.Name(), v.KeyHash(),
		base64.StdEncoding.EncodeToString(append([]byte{1}, key.Seed()...))) // 1: the note format's Ed25519 algorithm byte
	return note.NewSigner(skey)
}

// SignCheckpoint returns c as a signed note, signed by the cell key.
func SignCheckpoint(c *Checkpoint, key ed25519.PrivateKey) ([]byte, error) {
	if _, err := ParseCheckpoint(c.Text()); err != nil {
		return nil, err
	}
	s, err := checkpointSigner(key)
	if err != nil {
		return nil, err
	}
	return note.Sign(&note.Note{Text: string(c.Text())}, s)
}

// CheckpointOf returns the checkpoint of the whole journal of run in store,
// signed by key.
func CheckpointOf(ctx context.Context, store Store, run RunID, key ed25519.PrivateKey) ([]byte, error) {
	t, err := TreeOf(ctx, store, run)
	if err != nil {
		return nil, err
	}
	root, err := t.Root(t.Size())
	if err != nil {
		return nil, err
	}
	return SignCheckpoint(&Checkpoint{Origin: CheckpointOrigin(run), Size: t.Size(), Root: root}, key)
}

// OpenCheckpoint verifies the signed checkpoint msg and returns its body
// and the trusted keys that signed it, in the order of their signature
// lines. Every signature line of a trusted key must verify, and at least
// one must be there; a signature line of another key is ignored (a witness
// may cosign). The same key trusted twice is one key. It fails with
// ErrUntrusted when no trusted key signed, and with ErrCheckpoint for a
// malformed note, a signature by a trusted key's name and hash that does
// not verify, a signature line that is not in canonical base64, or a body
// ParseCheckpoint refuses.
func OpenCheckpoint(msg []byte, trusted []ed25519.PublicKey) (*Checkpoint, []ed25519.PublicKey, error) {
	if len(msg) > maxCheckpointSize {
		return nil, nil, fmt.Errorf("%w: note of %d bytes (at most %d)", ErrCheckpoint, len(msg), maxCheckpointSize)
	}
	verifiers := make([]note.Verifier, 0, len(trusted))
	keyOf := map[string]ed25519.PublicKey{}
	for _, k := range trusted {
		v, err := checkpointVerifier(k)
		if err != nil {
			return nil, nil, err
		}
		id := fmt.Sprintf("%s+%08x", v.Name(), v.KeyHash())
		if prev, dup := keyOf[id]; dup {
			if prev.Equal(k) {
				continue // the same key listed twice: one verifier, or note.Open calls it ambiguous
			}
			return nil, nil, fmt.Errorf("%w: trusted keys %x and %x have the same note key name and hash", ErrCheckpoint, prev, k)
		}
		verifiers = append(verifiers, v)
		keyOf[id] = k
	}
	n, err := note.Open(msg, note.VerifierList(verifiers...))
	var unverified *note.UnverifiedNoteError
	switch {
	case errors.As(err, &unverified):
		if err := canonicalSigs(unverified.Note); err != nil {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("%w: the checkpoint is signed by no trusted key (%s)", ErrUntrusted, sigNames(unverified.Note))
	case err != nil:
		return nil, nil, fmt.Errorf("%w: %v", ErrCheckpoint, err)
	}
	// Base64 decoding ignores the unused low bits of a final character:
	// two texts would then carry one signature. Only the canonical text
	// counts, so that the signed object is exactly its bytes.
	if err := canonicalSigs(n); err != nil {
		return nil, nil, err
	}
	c, err := ParseCheckpoint([]byte(n.Text))
	if err != nil {
		return nil, nil, err
	}
	// note.Open verified every signature line of a known key (and keeps
	// the first of repeated ones): each is a signer.
	signers := make([]ed25519.PublicKey, 0, len(n.Sigs))
	for _, s := range n.Sigs {
		signers = append(signers, keyOf[fmt.Sprintf("%s+%08x", s.Name, s.Hash)])
	}
	return c, signers, nil
}

// CosignCheckpoint adds key's signature to the signed checkpoint msg,
// whose existing signatures must verify with signers (each a key that
// signed it): the checkpoint a second cell, or a witness, countersigns.
func CosignCheckpoint(msg []byte, signers []ed25519.PublicKey, key ed25519.PrivateKey) ([]byte, error) {
	if _, _, err := OpenCheckpoint(msg, signers); err != nil {
		return nil, err
	}
	verifiers := make([]note.Verifier, 0, len(signers))
	for _, k := range signers {
		v, err := checkpointVerifier(k)
		if err != nil {
			return nil, err
		}
		verifiers = append(verifiers, v)
	}
	n, err := note.Open(msg, note.VerifierList(verifiers...))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCheckpoint, err)
	}
	s, err := checkpointSigner(key)
	if err != nil {
		return nil, err
	}
	return note.Sign(n, s)
}

func canonicalSigs(n *note.Note) error {
	for _, list := range [][]note.Signature{n.Sigs, n.UnverifiedSigs} {
		for _, s := range list {
			raw, err := base64.StdEncoding.DecodeString(s.Base64)
			if err != nil || base64.StdEncoding.EncodeToString(raw) != s.Base64 {
				return fmt.Errorf("%w: signature of %s is not in canonical base64", ErrCheckpoint, s.Name)
			}
		}
	}
	return nil
}

func sigNames(n *note.Note) string {
	var names []string
	for _, s := range n.UnverifiedSigs {
		names = append(names, fmt.Sprintf("%s+%08x", s.Name, s.Hash))
	}
	if len(names) == 0 {
		return "no signature lines"
	}
	return "signed by " + strings.Join(names, ", ")
}
