package policy

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentrt/agentrt/capability"
)

var rewriteTokens = flag.Bool("rewrite-tokens", false, "write testdata/parity/tokens from the table in parity_tokens_test.go")

// The parity corpus's tokens are made from fixed keys, nonces and times,
// so that the files are reproducible: go test ./policy -run TestParityTokens
// -rewrite-tokens writes them, and without the flag the test checks that
// the files are what the table makes. The expectations of the fixtures
// that use them are written by hand.

// parityKey derives a key from a name, for the corpus only.
func parityKey(name string) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("agentrt parity key: " + name))
	return ed25519.NewKeyFromSeed(seed[:])
}

var parityEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func parityNonce(name string) []byte {
	n := sha256.Sum256([]byte("agentrt parity nonce: " + name))
	return n[:capability.NonceSize]
}

// parityTokens builds each token of the corpus.
func parityTokens(t testing.TB) map[string][]byte {
	t.Helper()
	root, cell, other, holder := parityKey("root"), parityKey("cell"), parityKey("other-cell"), parityKey("holder")
	full := capability.Caps{
		Run: &capability.Unit{}, KV: &capability.KV{Namespaces: []string{"crawler", "secrets"}},
		HTTP:  &capability.HTTP{Hosts: []string{"169.254.169.254", "api.example.com", "metadata.google.internal"}},
		Clock: &capability.Unit{}, Random: &capability.Unit{}, Tool: &capability.Tool{Names: []string{"search", "shell"}},
	}
	year := capability.Claims{Audience: cell.Public().(ed25519.PublicKey), Caps: full,
		NotBefore: parityEpoch, Expires: parityEpoch.AddDate(1, 0, 0)}
	issue := func(name string, key ed25519.PrivateKey, c capability.Claims) []byte {
		c.Nonce = parityNonce(name)
		b, err := capability.Issue(key, c)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return b
	}
	out := map[string][]byte{}
	out["full"] = issue("full", root, year)
	delegated := year
	delegated.Subject = holder.Public().(ed25519.PublicKey)
	toHolder := issue("to-holder", root, delegated)
	narrow, err := capability.Attenuate(toHolder, holder, capability.Claims{
		Caps: capability.Caps{Run: &capability.Unit{}, KV: &capability.KV{Namespaces: []string{"crawler"}},
			HTTP: &capability.HTTP{Hosts: []string{"api.example.com:443"}}},
		Nonce: parityNonce("narrow")})
	if err != nil {
		t.Fatal(err)
	}
	out["narrow"] = narrow
	expired := year
	expired.Expires = parityEpoch.AddDate(0, 1, 0)
	out["expired"] = issue("expired", root, expired)
	elsewhere := year
	elsewhere.Audience = other.Public().(ed25519.PublicKey)
	out["other-cell"] = issue("other-cell", root, elsewhere)
	out["untrusted"] = issue("untrusted", parityKey("stranger"), year)
	return out
}

// TestParityTokens checks (or, with -rewrite-tokens, writes) the corpus's
// token files, and prints the keys the fixtures name.
func TestParityTokens(t *testing.T) {
	dir := filepath.Join(parityDir, "tokens")
	for name, b := range parityTokens(t) {
		path := filepath.Join(dir, name+".cbor")
		if *rewriteTokens {
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		// Signatures are deterministic (ed25519), so the files are too.
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (write the corpus's tokens with -rewrite-tokens)", err)
		}
		if string(got) != string(b) {
			t.Errorf("%s differs from what the table makes (rewrite with -rewrite-tokens if the table changed on purpose)", path)
		}
	}
	t.Logf("root %s cell %s", hex.EncodeToString(parityKey("root").Public().(ed25519.PublicKey)), hex.EncodeToString(parityKey("cell").Public().(ed25519.PublicKey)))
}
