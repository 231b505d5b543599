package replay_test

import (
	"crypto/ed25519"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/replay"
)

// The audit checks the run header's capability token offline: it verifies
// at the run's start for the recording cell, it is sealed, and the header's
// grant is within it. These tests change the token a real run's header
// records and then re-chain, re-seal and re-sign the whole bundle with the
// cell's own key: what a cell that recorded a grant its token did not give
// (compromised, or buggy) would export. Only the token check can catch
// that; every other check passes.

// headerToken returns the fixture's header grant, its start time and the
// cell's public key.
func headerFacts(t *testing.T, f *fixture) (*host.Grant, time.Time, ed25519.PublicKey) {
	t.Helper()
	g, err := host.DecodeGrant(f.entries[0].Header.Grant)
	if err != nil {
		t.Fatal(err)
	}
	return g, time.Unix(0, f.entries[0].Time), f.env.Key.Public().(ed25519.PublicKey)
}

// tokenFor issues a token by key for caps, valid around start, for cell.
func tokenFor(t *testing.T, key ed25519.PrivateKey, caps capability.Caps, start time.Time, cell ed25519.PublicKey) []byte {
	t.Helper()
	tok, err := capability.Issue(key, capability.Claims{Audience: cell, Caps: caps,
		NotBefore: start.Add(-time.Minute), Expires: start.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func sealed(t *testing.T, tok []byte) []byte {
	t.Helper()
	s, err := capability.Seal(tok, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// withHeaderToken returns the fixture's bundle with the header's token
// replaced, re-chained and re-signed by the cell's key.
func withHeaderToken(t *testing.T, f *fixture, tok []byte) []byte {
	t.Helper()
	editEntry(t, f.bundle, 0, func(_ *journal.Record, e *journal.Entry) { e.Header.Token = tok })
	relink(t, f.bundle, 0, f.env.Key)
	return marshal(t, f.bundle)
}

func TestAuditChecksTheHeaderToken(t *testing.T) {
	base := bundleFixture(t)
	rep, err := base.verify(t, base.data)
	if err != nil || !rep.TokenValid {
		t.Fatalf("the untouched bundle: token_valid %v, %v", rep.TokenValid, err)
	}
	g, start, cell := headerFacts(t, base)
	caps, err := g.TokenCaps()
	if err != nil {
		t.Fatal(err)
	}
	_, stranger, _ := ed25519.GenerateKey(nil)
	key := base.env.Key

	// A real attenuated token, truncated: the cell issues the header's
	// caps plus the clock, its holder narrows them to the header's, and
	// the header records the root link with the child's seal.
	wide := caps
	wide.Clock = &capability.Unit{}
	child, err := capability.Attenuate(tokenFor(t, key, wide, start, cell), nil, capability.Claims{Caps: caps})
	if err != nil {
		t.Fatal(err)
	}
	truncated, err := capability.Parse(sealed(t, child))
	if err != nil {
		t.Fatal(err)
	}
	truncated.Links = truncated.Links[:1]
	// One bit of the recorded token's seal.
	flipped := []byte(string(base.entries[0].Header.Token))
	flipped[len(flipped)-1] ^= 0x01
	runOnly := capability.Caps{Run: &capability.Unit{}}
	early := start.Add(-3 * time.Hour)

	for _, tc := range []struct {
		name, token, detail string
	}{
		{"a truncated attenuated token", string(truncated.Bytes()), "bad proof of possession"},
		{"a bit of the seal flipped", string(flipped), "bad proof of possession"},
		{"not sealed: the header keeps the subject's private key", string(tokenFor(t, key, caps, start, cell)), "not sealed"},
		{"issued by a key nobody trusts", string(sealed(t, tokenFor(t, stranger, caps, start, cell))), "untrusted root"},
		{"a token for the run alone, while the header grants kv and http", string(sealed(t, tokenFor(t, key, runOnly, start, cell))), "not within its capability token"},
		{"expired before the run started", string(sealed(t, tokenFor(t, key, caps, early, cell))), "expired"},
		{"for another cell", string(sealed(t, tokenFor(t, key, caps, start, stranger.Public().(ed25519.PublicKey)))), "wrong audience"},
		{"no token at all", "", "records no capability token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := bundleFixture(t)
			var tok []byte
			if tc.token != "" {
				tok = []byte(tc.token)
			}
			rep, err := f.verify(t, withHeaderToken(t, f, tok))
			wantOutcome(t, err, outcome{"token", 0})
			if !strings.Contains(err.Error(), tc.detail) {
				t.Fatalf("the failure does not say %q: %v", tc.detail, err)
			}
			// Every check before the token's held: only it catches this.
			if !rep.ChainIntact || !rep.CheckpointValid || !rep.BundleSignatureValid || rep.TokenValid || rep.ReplayIdentical {
				t.Fatalf("report %+v", rep)
			}
			if rep.Failure == nil || rep.Failure.Class != "token" {
				t.Fatalf("the report's failure: %+v", rep.Failure)
			}
		})
	}

	// A token the recording cell trusted through DATA/token_roots, not its
	// own key: the auditor passes that root with TokenRoots.
	t.Run("a token root besides the cell keys", func(t *testing.T) {
		f := bundleFixture(t)
		_, org, _ := ed25519.GenerateKey(nil)
		data := withHeaderToken(t, f, sealed(t, tokenFor(t, org, caps, start, cell)))
		_, err := f.verify(t, data)
		wantOutcome(t, err, outcome{"token", 0})
		rep, err := replay.VerifyBundle(t.Context(), data, replay.VerifyOptions{Trusted: f.trusted, Engine: f.env.Engine,
			TokenRoots: []ed25519.PublicKey{org.Public().(ed25519.PublicKey)}})
		if err != nil || !rep.TokenValid || !rep.ReplayIdentical {
			t.Fatalf("with the token root trusted: %v %+v", err, rep)
		}
	})
}
