package journal_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/journal"
)

// mth is RFC 6962's Merkle Tree Hash written from section 2.1, recursively
// and with no shared code: the reference the Tree is held to.
func mth(leaves [][]byte) []byte {
	switch n := len(leaves); n {
	case 0:
		h := sha256.Sum256(nil)
		return h[:]
	case 1:
		h := sha256.Sum256(append([]byte{0}, leaves[0]...))
		return h[:]
	default:
		k := 1
		for k*2 < n {
			k *= 2
		}
		h := sha256.Sum256(append(append([]byte{1}, mth(leaves[:k])...), mth(leaves[k:])...))
		return h[:]
	}
}

// ctLeaves are the eight leaves of the Certificate Transparency reference
// tests, whose roots are published.
var ctLeaves = [][]byte{
	{}, {0x00}, {0x10}, {0x20, 0x21}, {0x30, 0x31}, {0x40, 0x41, 0x42, 0x43},
	{0x50, 0x51, 0x52, 0x53, 0x54, 0x55, 0x56, 0x57},
	{0x60, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6a, 0x6b, 0x6c, 0x6d, 0x6e, 0x6f},
}

var ctRoots = []string{
	"6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
	"fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
	"aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
	"d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
	"4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
	"76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
	"ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
	"5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
}

func leavesN(n int, salt string) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = fmt.Appendf(nil, "entry %d %s", i, salt)
	}
	return out
}

func treeOf(leaves [][]byte) *journal.Tree {
	t := journal.NewTree()
	for _, l := range leaves {
		t.Append(journal.LeafHash(l))
	}
	return t
}

func TestTreeRootsMatchRFC6962(t *testing.T) {
	tr := treeOf(ctLeaves)
	for i, want := range ctRoots {
		got, err := tr.Root(uint64(i + 1))
		if err != nil || hex.EncodeToString(got) != want {
			t.Fatalf("root of the first %d CT leaves = %x (%v), want %s", i+1, got, err, want)
		}
	}
	leaves := leavesN(70, "a")
	tr = treeOf(leaves)
	for n := 0; n <= len(leaves); n++ {
		got, err := tr.Root(uint64(n))
		if err != nil || !bytes.Equal(got, mth(leaves[:n])) {
			t.Fatalf("root at size %d = %x (%v), want %x", n, got, err, mth(leaves[:n]))
		}
	}
	if _, err := tr.Root(71); !errors.Is(err, journal.ErrCheckpoint) {
		t.Fatalf("root past the tree's size: %v, want ErrCheckpoint", err)
	}
}

// TestInclusionProofs proves every leaf of every tree up to 33 leaves, and
// checks that each kind of altered proof (the probes of transparency-dev's
// proof tests: bit flips, index ±1, wrong size, size ×2 and ÷2, trailing
// garbage, a missing hash, another leaf) is refused.
func TestInclusionProofs(t *testing.T) {
	leaves := leavesN(70, "b")
	tr := treeOf(leaves)
	for size := uint64(1); size <= 33; size++ {
		root, _ := tr.Root(size)
		for i := uint64(0); i < size; i++ {
			p, err := tr.InclusionProof(i, size)
			if err != nil {
				t.Fatal(err)
			}
			leaf := journal.LeafHash(leaves[i])
			if err := journal.VerifyInclusion(i, size, leaf, p, root); err != nil {
				t.Fatalf("entry %d of %d: %v", i, size, err)
			}
			bad := func(what string, index, sz uint64, leaf []byte, p [][]byte) {
				t.Helper()
				if err := journal.VerifyInclusion(index, sz, leaf, p, root); !errors.Is(err, journal.ErrCheckpoint) {
					t.Fatalf("entry %d of %d, %s: %v, want ErrCheckpoint", i, size, what, err)
				}
			}
			for k := range p {
				for _, bit := range []int{0, 7, 255} {
					q := clone(p)
					q[k][bit/8] ^= 1 << (bit % 8)
					bad(fmt.Sprintf("bit %d of hash %d flipped", bit, k), i, size, leaf, q)
				}
			}
			bad("index+1", i+1, size, leaf, p)
			if i > 0 {
				bad("index-1", i-1, size, leaf, p)
			}
			// A proof does not bind the tree size by itself: the path of
			// leaf i can be the same in trees of two sizes, and then the
			// same hashes lead to the same root (the signed checkpoint
			// fixes the size). A wrong size must fail whenever it changes
			// the proof's length, which is what the verifier checks.
			for _, wrong := range []uint64{size + 1, size - 1, size * 2, size / 2} {
				if wrong <= i || wrong == size {
					continue
				}
				if q, _ := tr.InclusionProof(i, wrong); len(q) != len(p) {
					bad(fmt.Sprintf("size %d", wrong), i, wrong, leaf, p)
				}
			}
			bad("trailing garbage", i, size, leaf, append(clone(p), bytes.Repeat([]byte{7}, 32)))
			if len(p) > 0 {
				bad("last hash dropped", i, size, leaf, clone(p)[:len(p)-1])
			}
			bad("another leaf", i, size, journal.LeafHash([]byte("not an entry")), p)
			bad("the entry hash instead of the leaf hash", i, size, journal.Sum(leaves[i]), p)
		}
	}
}

func clone(p [][]byte) [][]byte {
	q := make([][]byte, len(p))
	for i := range p {
		q[i] = bytes.Clone(p[i])
	}
	return q
}

// TestConsistencyProofs checks every pair of sizes of a growing journal,
// and that a journal rewritten at entry k fails against every old root
// that covered entry k, and only those.
func TestConsistencyProofs(t *testing.T) {
	leaves := leavesN(24, "c")
	tr := treeOf(leaves)
	big := treeOf(leavesN(60, "c"))
	for m := uint64(0); m <= uint64(len(leaves)); m++ {
		for n := m; n <= uint64(len(leaves)); n++ {
			r1, _ := tr.Root(m)
			r2, _ := tr.Root(n)
			p, err := tr.ConsistencyProof(m, n)
			if err != nil {
				t.Fatal(err)
			}
			if err := journal.VerifyConsistency(m, n, p, r1, r2); err != nil {
				t.Fatalf("%d -> %d: %v", m, n, err)
			}
			if m == 0 || m == n {
				continue
			}
			bad := func(what string, s1, s2 uint64, p [][]byte) {
				t.Helper()
				if err := journal.VerifyConsistency(s1, s2, p, r1, r2); !errors.Is(err, journal.ErrCheckpoint) {
					t.Fatalf("%d -> %d, %s: %v, want ErrCheckpoint", m, n, what, err)
				}
			}
			for k := range p {
				q := clone(p)
				q[k][5] ^= 0x10
				bad(fmt.Sprintf("hash %d flipped", k), m, n, q)
			}
			bad("trailing garbage", m, n, append(clone(p), make([]byte, 32)))
			bad("sizes swapped", n, m, p)
			// As for inclusion proofs, a wrong size must fail when it
			// changes the proof's length.
			for _, w := range [][2]uint64{{m + 1, n}, {m - 1, n}, {m, n + 1}, {m, n * 2}, {m / 2, n}} {
				if w[0] == 0 || w[0] >= w[1] || w == [2]uint64{m, n} {
					continue
				}
				if q, _ := big.ConsistencyProof(w[0], w[1]); len(q) != len(p) {
					bad(fmt.Sprintf("sizes %d -> %d", w[0], w[1]), w[0], w[1], p)
				}
			}
			if len(p) > 0 {
				bad("first hash dropped", m, n, p[1:])
			}
		}
	}
	// A fork: the same journal with entry k rewritten, same length.
	for k := range leaves {
		forked := leavesN(len(leaves), "c")
		forked[k] = []byte("rewritten")
		ft := treeOf(forked)
		for m := uint64(1); m <= uint64(len(leaves)); m++ {
			oldRoot, _ := tr.Root(m)
			n := uint64(len(leaves))
			newRoot, _ := ft.Root(n)
			p, _ := ft.ConsistencyProof(m, n)
			err := journal.VerifyConsistency(m, n, p, oldRoot, newRoot)
			if covered := uint64(k) < m; covered != (err != nil) {
				t.Fatalf("entry %d rewritten, old checkpoint of %d entries: %v (want a failure iff the old checkpoint covered the entry)", k, m, err)
			}
		}
	}
}

func testKey(seed byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, 32))
}

func TestCheckpointSignOpen(t *testing.T) {
	key, other := testKey(1), testKey(2)
	pub := key.Public().(ed25519.PublicKey)
	run := journal.RunID{1, 2, 3}
	cp := &journal.Checkpoint{Origin: journal.CheckpointOrigin(run), Size: 42, Root: journal.Sum([]byte("root"))}
	msg, err := journal.SignCheckpoint(cp, key)
	if err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf("agentrt.dev/run/%s\n42\n%s\n\n— %s ", run, base64.StdEncoding.EncodeToString(cp.Root), journal.CheckpointKeyName(pub))
	if !strings.HasPrefix(string(msg), body) {
		t.Fatalf("checkpoint is\n%s\nwant it to start with\n%s", msg, body)
	}
	got, signers, err := journal.OpenCheckpoint(msg, []ed25519.PublicKey{other.Public().(ed25519.PublicKey), pub})
	if err != nil || got.Size != 42 || !bytes.Equal(got.Root, cp.Root) || got.Origin != cp.Origin || len(signers) != 1 || !signers[0].Equal(pub) {
		t.Fatalf("open: %+v %x %v", got, signers, err)
	}
	if r, err := got.Run(); err != nil || r != run {
		t.Fatalf("run of origin: %v %v", r, err)
	}

	if _, _, err := journal.OpenCheckpoint(msg, []ed25519.PublicKey{other.Public().(ed25519.PublicKey)}); !errors.Is(err, journal.ErrUntrusted) {
		t.Fatalf("signed by an untrusted key: %v, want ErrUntrusted", err)
	}
	altered := bytes.Replace(msg, []byte("\n42\n"), []byte("\n43\n"), 1)
	if _, _, err := journal.OpenCheckpoint(altered, []ed25519.PublicKey{pub}); !errors.Is(err, journal.ErrCheckpoint) {
		t.Fatalf("altered size: %v, want ErrCheckpoint", err)
	}
	// The signature's last base64 character carries 2 unused bits: a text
	// that differs there decodes to the same signature, and is refused.
	i := bytes.LastIndexByte(msg[:len(msg)-1], ' ') + 1
	sig := string(msg[i : len(msg)-2]) // without "=\n"
	last := strings.IndexByte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", sig[len(sig)-1])
	twin := append(bytes.Clone(msg[:i+len(sig)-1]), "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"[last^1])
	twin = append(twin, "=\n"...)
	if _, _, err := journal.OpenCheckpoint(twin, []ed25519.PublicKey{pub}); !errors.Is(err, journal.ErrCheckpoint) {
		t.Fatalf("non-canonical base64 signature: %v, want ErrCheckpoint", err)
	}
	// A witness's cosignature by a key the verifier does not know is
	// ignored; the cell's own still counts.
	cosigned, err := journal.SignCheckpoint(cp, other)
	if err != nil {
		t.Fatal(err)
	}
	both := append(bytes.Clone(msg), cosigned[bytes.LastIndex(cosigned, []byte("\n\n"))+2:]...)
	if _, signers, err := journal.OpenCheckpoint(both, []ed25519.PublicKey{pub}); err != nil || len(signers) != 1 || !signers[0].Equal(pub) {
		t.Fatalf("cosigned checkpoint: %v", err)
	}
}

// TestCosignedCheckpoint: when both cells that signed a checkpoint are
// trusted, both are its signers; a trusted key listed twice is one key
// (not an ambiguous verifier); a cosignature by a trusted key that does not
// verify fails the checkpoint, whatever the other signature.
func TestCosignedCheckpoint(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(nil)
	_, second, _ := ed25519.GenerateKey(nil)
	pub, pub2 := key.Public().(ed25519.PublicKey), second.Public().(ed25519.PublicKey)
	cp := &journal.Checkpoint{Origin: journal.CheckpointOrigin(journal.RunID{7}), Size: 3, Root: make([]byte, 32)}
	msg, err := journal.SignCheckpoint(cp, key)
	if err != nil {
		t.Fatal(err)
	}
	both, err := journal.CosignCheckpoint(msg, []ed25519.PublicKey{pub}, second)
	if err != nil {
		t.Fatal(err)
	}
	for _, trusted := range [][]ed25519.PublicKey{{pub, pub2}, {pub2, pub, pub2, pub}} {
		_, signers, err := journal.OpenCheckpoint(both, trusted)
		if err != nil || len(signers) != 2 || !signers[0].Equal(pub) || !signers[1].Equal(pub2) {
			t.Fatalf("trusting %d keys: signers %x, %v; want both cells", len(trusted), signers, err)
		}
	}
	if _, signers, err := journal.OpenCheckpoint(msg, []ed25519.PublicKey{pub, pub}); err != nil || len(signers) != 1 {
		t.Fatalf("one key trusted twice: %x %v", signers, err)
	}
	// The second signature damaged: a trusted key's signature must verify.
	i := bytes.LastIndexByte(both[:len(both)-1], ' ') + 40 // in the signature, past the 4-byte key hash
	bad := bytes.Clone(both)
	bad[i] = otherBase64(bad[i])
	if _, _, err := journal.OpenCheckpoint(bad, []ed25519.PublicKey{pub, pub2}); !errors.Is(err, journal.ErrCheckpoint) {
		t.Fatalf("a trusted cosigner's bad signature: %v, want ErrCheckpoint", err)
	}
	if _, signers, err := journal.OpenCheckpoint(bad, []ed25519.PublicKey{pub}); err != nil || len(signers) != 1 {
		t.Fatalf("the same, the cosigner not trusted (a witness): %x %v", signers, err)
	}
}

func TestParseCheckpointIsStrict(t *testing.T) {
	root := base64.StdEncoding.EncodeToString(make([]byte, 32))
	ok := "agentrt.dev/run/x\n7\n" + root + "\n"
	if _, err := journal.ParseCheckpoint([]byte(ok)); err != nil {
		t.Fatal(err)
	}
	// The example body of the C2SP tlog-checkpoint text parses too.
	if c, err := journal.ParseCheckpoint([]byte("example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n")); err != nil || c.Size != 20852163 {
		t.Fatalf("C2SP example: %+v %v", c, err)
	}
	for _, bad := range []string{
		"agentrt.dev/run/x\n07\n" + root + "\n",                   // leading zero
		"agentrt.dev/run/x\n-7\n" + root + "\n",                   // sign
		"agentrt.dev/run/x\n7\n" + root + "\nextension\n",         // extension line
		"agentrt.dev/run/x\n7\n" + root,                           // no final newline
		"\n7\n" + root + "\n",                                     // empty origin
		"agentrt.dev/run/x\n7\n" + root[:40] + "\n",               // short root
		"agentrt.dev/run/x\n7\n" + root[:42] + "B=\n",             // non-canonical base64
		"agentrt.dev/run/x\n18446744073709551616\n" + root + "\n", // size overflows
	} {
		if _, err := journal.ParseCheckpoint([]byte(bad)); !errors.Is(err, journal.ErrCheckpoint) {
			t.Errorf("%q: %v, want ErrCheckpoint", bad, err)
		}
	}
	if _, err := (&journal.Checkpoint{Origin: "agentrt.dev/run/zz"}).Run(); !errors.Is(err, journal.ErrCheckpoint) {
		t.Errorf("origin with a bad run id: %v", err)
	}
}

// otherBase64 returns the base64 character after c: a signature line
// changed in one character that still decodes.
func otherBase64(c byte) byte {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	return alphabet[(strings.IndexByte(alphabet, c)+1)%len(alphabet)]
}
