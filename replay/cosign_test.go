package replay_test

import (
	"bytes"
	"crypto/ed25519"
	"slices"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/replay"
)

// BUNDLE.md section 4 step 8: the keys that signed the checkpoint are every
// trusted key whose signature on it verifies. A checkpoint cosigned by a
// second cell, both trusted, is valid, and the key list must hold both.
func TestCosignedCheckpointInABundle(t *testing.T) {
	f := bundleFixture(t)
	cell := f.env.Key
	_, second, _ := ed25519.GenerateKey(nil)
	pub2 := second.Public().(ed25519.PublicKey)
	cosigned, err := journal.CosignCheckpoint(f.bundle.Checkpoint, f.trusted, second)
	if err != nil {
		t.Fatal(err)
	}
	// build returns the fixture's bundle with the cosigned checkpoint,
	// listing keys (sorted) and signed by the exporting cell.
	build := func(checkpoint []byte, keys ...ed25519.PublicKey) []byte {
		b := *f.bundle
		b.Checkpoint = checkpoint
		b.Keys = nil
		for _, k := range keys {
			b.Keys = append(b.Keys, []byte(k))
		}
		slices.SortFunc(b.Keys, bytes.Compare)
		if err := b.Sign(cell); err != nil {
			t.Fatal(err)
		}
		return marshal(t, &b)
	}
	pub := f.trusted[0]
	both := []ed25519.PublicKey{pub, pub2}
	verify := func(data []byte, trusted ...ed25519.PublicKey) (*replay.AuditReport, error) {
		g := *f
		g.trusted = trusted
		return g.verify(t, data)
	}

	// Both cells listed and trusted: valid, with both as signers.
	rep, err := verify(build(cosigned, pub, pub2), both...)
	if err != nil || len(rep.Checkpoint.Signers) != 2 {
		t.Fatalf("cosigned, both trusted: %v, signers %v", err, rep.Checkpoint.Signers)
	}
	// The same key trusted twice (a trust file with a line repeated).
	if _, err := verify(build(cosigned, pub, pub2), pub, pub2, pub); err != nil {
		t.Fatalf("a trusted key given twice: %v", err)
	}
	// Both listed, only the first trusted: the list names a key the
	// auditor does not trust (step 3).
	_, err = verify(build(cosigned, pub, pub2), pub)
	wantOutcome(t, err, outcome{"untrusted", -1})
	// Only the exporting cell listed and trusted: the second signature is
	// a witness's, which does not count.
	if _, err := verify(build(cosigned, pub), pub); err != nil {
		t.Fatalf("cosigned by a key not trusted (a witness): %v", err)
	}
	// Only the exporting cell listed, both trusted: a key that signed is
	// missing from the list.
	_, err = verify(build(cosigned, pub), both...)
	wantOutcome(t, err, outcome{"bundle-format", -1})
	// The second cell's signature damaged, both trusted: every signature
	// by a trusted key must verify.
	i := bytes.LastIndexByte(cosigned[:len(cosigned)-1], ' ') + 40
	bad := bytes.Clone(cosigned)
	bad[i] = otherBase64(bad[i])
	_, err = verify(build(bad, pub, pub2), both...)
	wantOutcome(t, err, outcome{"checkpoint", -1})
}

func otherBase64(c byte) byte {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	return alphabet[(strings.IndexByte(alphabet, c)+1)%len(alphabet)]
}
