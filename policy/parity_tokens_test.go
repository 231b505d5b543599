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

// parityTool is the digest of a corpus tool's declaration.
func parityTool(t testing.TB, name string) capability.Digest {
	d, err := capability.ToolDecl{Name: name, Exec: "/usr/bin/" + name}.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// parityTokens builds each token of the corpus. Each is issued to a fixed
// holder key and sealed by it, as a cell records tokens: reproducible, and
// carrying no private key.
func parityTokens(t testing.TB) map[string][]byte {
	t.Helper()
	root, cell, other, holder := parityKey("root"), parityKey("cell"), parityKey("other-cell"), parityKey("holder")
	full := capability.Caps{
		Run: &capability.Unit{}, KV: &capability.KV{Namespaces: []string{"crawler", "secrets"}},
		HTTP:  &capability.HTTP{Hosts: []string{"169.254.169.254", "api.example.com", "metadata.google.internal"}},
		Clock: &capability.Unit{}, Random: &capability.Unit{},
		Tool: &capability.Tool{Tools: map[string]capability.Digest{"search": parityTool(t, "search"), "shell": parityTool(t, "shell")}},
	}
	year := capability.Claims{Audience: cell.Public().(ed25519.PublicKey), Caps: full,
		NotBefore: parityEpoch, Expires: parityEpoch.AddDate(1, 0, 0)}
	seal := func(name string, tok []byte, key ed25519.PrivateKey) []byte {
		b, err := capability.Seal(tok, key)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return b
	}
	issue := func(name string, key ed25519.PrivateKey, c capability.Claims) []byte {
		c.Nonce = parityNonce(name)
		c.Subject = holder.Public().(ed25519.PublicKey)
		b, err := capability.Issue(key, c)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return b
	}
	out := map[string][]byte{}
	out["full"] = seal("full", issue("full", root, year), holder)
	sub := parityKey("sub-holder")
	narrow, err := capability.Attenuate(issue("to-holder", root, year), holder, capability.Claims{
		Subject: sub.Public().(ed25519.PublicKey),
		Caps: capability.Caps{Run: &capability.Unit{}, KV: &capability.KV{Namespaces: []string{"crawler"}},
			HTTP: &capability.HTTP{Hosts: []string{"api.example.com:443"}}},
		Nonce: parityNonce("narrow")})
	if err != nil {
		t.Fatal(err)
	}
	out["narrow"] = seal("narrow", narrow, sub)
	// narrow without its last link, the seal kept: the root's claims,
	// which the sub-holder must not get.
	truncated, err := capability.Parse(out["narrow"])
	if err != nil {
		t.Fatal(err)
	}
	truncated.Links = truncated.Links[:1]
	out["truncated"] = truncated.Bytes()
	expired := year
	expired.Expires = parityEpoch.AddDate(0, 1, 0)
	out["expired"] = seal("expired", issue("expired", root, expired), holder)
	elsewhere := year
	elsewhere.Audience = other.Public().(ed25519.PublicKey)
	out["other-cell"] = seal("other-cell", issue("other-cell", root, elsewhere), holder)
	out["untrusted"] = seal("untrusted", issue("untrusted", parityKey("stranger"), year), holder)
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
