package capability

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/veraison/go-cose"
)

// Items 15-18 of shared/SECURITY-TESTS.md: each attack is built for real
// (signed by the key an attacker would have) and must fail with its class,
// at the link named.

// wantClass asserts that err is an *Error of class at link.
func wantClass(t *testing.T, err error, class error, link int) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want an *Error of class %q at link %d, got %v", class, link, err)
	}
	if !errors.Is(err, class) {
		t.Fatalf("want class %q, got %v", class, err)
	}
	if e.Link != link {
		t.Fatalf("want the failure at link %d, got %v", link, err)
	}
}

// Item 15: a delegated token that widens tools, budget or time window.
func TestWideningIsRefused(t *testing.T) {
	root := mustIssue(t, rootA, rootClaims())
	cases := []struct {
		name   string
		change func(c *Claims)
		// inherited: Attenuate reads the unset field as "the parent's",
		// so only a forged link can widen it.
		inherited bool
		// detail is part of the error's message: the one widening.
		detail string
	}{
		{"tool added", func(c *Claims) { c.Caps.Tool = tools("grep", "rm") }, false, `tool "rm"`},
		{"tool declared otherwise", func(c *Claims) {
			tee := testDecl("grep")
			tee.Exec, tee.Write = "/usr/bin/tee", []string{"/home"}
			c.Caps.Tool = &Tool{Tools: map[string]Digest{"grep": digestOf(tee)}}
		}, false, `tool "grep" is declared otherwise than in the parent`},
		{"capability absent in the parent", func(c *Claims) { c.Caps.Random = &Unit{} }, false, "capability random"},
		{"kv namespace added", func(c *Claims) { c.Caps.KV = &KV{Namespaces: []string{"crawler", "secrets"}} }, false, `namespace "secrets"`},
		{"http host with any port under host:port", func(c *Claims) { c.Caps.HTTP.Hosts = []string{"api.example.com"} }, false, `host "api.example.com"`},
		{"http idempotent added", func(c *Claims) { c.Caps.HTTP.Idempotent = true }, false, "idempotent"},
		{"budget above the parent's", func(c *Claims) { c.Budget.Steps = Limit(1001) }, false, "steps is 1001"},
		{"budget unlimited under a limited parent", func(c *Claims) { c.Budget.WallSeconds = nil }, true, "wall_seconds is unlimited"},
		{"expiry after the parent's", func(c *Claims) { c.Expires = t0.Add(24*time.Hour + time.Second) }, false, "expiry"},
		{"not-before before the parent's", func(c *Claims) { c.NotBefore = t0.Add(-time.Second) }, false, "not-before"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := narrowClaims()
			c.Budget = rootClaims().Budget // full budget: each case changes one thing
			c.NotBefore, c.Expires = t0, t0.Add(24*time.Hour)
			c.Caps.HTTP = &HTTP{Hosts: []string{"api.example.com:443"}}
			tc.change(&c)
			// Attenuate refuses to write it.
			tok, err := Attenuate(root, holder1, c)
			if tc.inherited {
				v, err := Verify(held(t, tok), trustA(), Options{Now: during})
				if err != nil || v.Claims.Budget.String() != rootClaims().Budget.String() {
					t.Fatalf("an unset ceiling is the parent's: got %v, %v", v, err)
				}
			} else {
				wantClass(t, err, ErrWidens, 1)
				wantDetail(t, err, tc.detail)
			}
			// Written anyway, by the holder's own key, Verify refuses it.
			forged := unchecked(t, root, holder1, c)
			_, err = Verify(forged, trustA(), Options{Now: during})
			wantClass(t, err, ErrWidens, 1)
			wantDetail(t, err, tc.detail)
		})
	}
	// The same claims without the change are accepted: the cases fail
	// for the change alone.
	c := narrowClaims()
	c.Budget = rootClaims().Budget
	c.NotBefore, c.Expires = t0, t0.Add(24*time.Hour)
	c.Caps.HTTP = &HTTP{Hosts: []string{"api.example.com:443"}}
	if _, err := Verify(mustAttenuate(t, root, holder1, c), trustA(), Options{Now: during}); err != nil {
		t.Fatalf("the unchanged narrowing: %v", err)
	}
}

func TestAudienceWideningIsRefused(t *testing.T) {
	rc := rootClaims()
	rc.Audience = cellX
	root := mustIssue(t, rootA, rc)
	for name, aud := range map[string][]byte{"another cell": cellY, "any cell": nil} {
		t.Run(name, func(t *testing.T) {
			c := narrowClaims()
			c.Audience = aud
			forged := unchecked(t, root, holder1, c)
			_, err := Verify(forged, trustA(), Options{Now: during, Audience: cellX})
			wantClass(t, err, ErrWidens, 1)
			wantDetail(t, err, "audience")
		})
	}
}

// Item 16: a spliced, reordered or dropped link; a link signed by the wrong
// key.
func TestBrokenChains(t *testing.T) {
	good := splitToken(t, chain3(t))
	// other is a chain of the same shape and keys, from another root link.
	rc := rootClaims()
	rc.Nonce = nonce(0x11)
	other := splitToken(t, mustAttenuate(t, mustIssue(t, rootA, rc), holder1, narrowClaims()))

	cases := []struct {
		name  string
		links [][]byte
		class error
		link  int
	}{
		{"spliced link from another chain", [][]byte{good[0], other[1], good[2]}, ErrBrokenChain, 1},
		{"reordered links", [][]byte{good[0], good[2], good[1]}, ErrBrokenChain, 1},
		{"middle link dropped", [][]byte{good[0], good[2]}, ErrBrokenChain, 1},
		{"root dropped", [][]byte{good[1], good[2]}, ErrBrokenChain, 0},
		{"leaf duplicated", [][]byte{good[0], good[1], good[2], good[2]}, ErrBrokenChain, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Verify(joinLinks(tc.links...), trustA(), Options{Now: during})
			wantClass(t, err, tc.class, tc.link)
		})
	}

	root := mustIssue(t, rootA, rootClaims())
	t.Run("link signed by a key that is not the parent's subject", func(t *testing.T) {
		// The stranger writes a well-formed link naming itself as issuer.
		forged := unchecked(t, root, stranger, narrowClaims())
		_, err := Verify(forged, trustA(), Options{Now: during})
		wantClass(t, err, ErrBrokenChain, 1)
	})
	t.Run("link naming the right issuer, signed by another key", func(t *testing.T) {
		p, _ := Parse(root)
		c := narrowClaims()
		c.Issuer, c.Parent, c.Depth = pub(holder1), p.Leaf().Hash(), 1
		c.Caps.Normalize()
		payload, err := encodePayload(&c)
		if err != nil {
			t.Fatal(err)
		}
		link := rawLink(t, stranger, edProtected(t), emptyMap, payload)
		_, err = Verify(joinLinks(splitToken(t, root)[0], link), trustA(), Options{Now: during})
		wantClass(t, err, ErrSignature, 1)
	})
	t.Run("root by an untrusted key", func(t *testing.T) {
		_, err := Verify(mustIssue(t, rootB, rootClaims()), trustA(), Options{Now: during})
		wantClass(t, err, ErrUntrustedRoot, 0)
	})
	t.Run("root re-signed by an untrusted key naming the trusted issuer", func(t *testing.T) {
		c := completeRoot(rootA, rootClaims())
		payload, err := encodePayload(&c)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Verify(joinLinks(rawLink(t, rootB, edProtected(t), emptyMap, payload)), trustA(), Options{Now: during})
		wantClass(t, err, ErrSignature, 0)
	})
	t.Run("one payload bit flipped", func(t *testing.T) {
		links := splitToken(t, chain3(t))
		l := slices.Clone(links[1])
		// A bit inside the subject key: the link still decodes, so only
		// the signature can catch the change.
		i := bytesIndex(l, pub(holder2))
		l[i+5] ^= 0x01
		_, err := Verify(joinLinks(links[0], l, links[2]), trustA(), Options{Now: during})
		wantClass(t, err, ErrSignature, 1)
	})
	t.Run("depth over the cap", func(t *testing.T) {
		tok := mustIssue(t, rootA, rootClaims())
		key := holder1
		for i := range 3 {
			c := narrowClaims()
			c.Subject, c.Nonce = pub(key), nonce(byte(0x40+i))
			tok = mustAttenuate(t, tok, key, c)
		}
		if _, err := Verify(tok, trustA(), Options{Now: during, MaxDepth: 3}); err != nil {
			t.Fatalf("depth 3 under a cap of 3: %v", err)
		}
		_, err := Verify(tok, trustA(), Options{Now: during, MaxDepth: 2})
		wantClass(t, err, ErrDepth, 3)
	})
}

func wantDetail(t *testing.T, err error, detail string) {
	t.Helper()
	if !strings.Contains(err.Error(), detail) {
		t.Fatalf("want the error to name %q, got %v", detail, err)
	}
}

func bytesIndex(b, sub []byte) int {
	for i := range len(b) - len(sub) + 1 {
		if string(b[i:i+len(sub)]) == string(sub) {
			return i
		}
	}
	panic("not found")
}

// Item 17: algorithm substitution, an unknown critical header,
// non-canonical CBOR, duplicate map keys. Every link here is signed
// correctly over the bytes it carries, so only the named check can catch
// it.
func TestHeaderAndEncodingAttacks(t *testing.T) {
	root := completeRoot(rootA, rootClaims())
	fields := payloadFields(t, root)
	payload := encodeFields(fields)

	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	es256, err := cose.NewSigner(cose.AlgorithmES256, ecKey)
	if err != nil {
		t.Fatal(err)
	}
	msg := cose.UntaggedSign1Message{Headers: cose.Headers{
		Protected:   cose.ProtectedHeader{cose.HeaderLabelAlgorithm: cose.AlgorithmES256, cose.HeaderLabelType: ContentType},
		Unprotected: cose.UnprotectedHeader{},
	}, Payload: payload}
	if err := msg.Sign(rand.Reader, nil, es256); err != nil {
		t.Fatal(err)
	}
	es256Link, err := msg.MarshalCBOR()
	if err != nil {
		t.Fatal(err)
	}

	hdr := func(m map[int64]any) []byte { return mustCBOR(t, m) }
	alg, typ := cose.HeaderLabelAlgorithm, cose.HeaderLabelType
	ed := int64(cose.AlgorithmEdDSA)

	// Payload variants.
	longDepth := slices.Clone(fields)
	longDepth[len(longDepth)-1].raw = []byte{0x18, 0x00} // depth 0 in a two-byte head
	swapped := slices.Clone(fields)
	swapped[0], swapped[1] = swapped[1], swapped[0]
	dupNonce := slices.Insert(slices.Clone(fields), 9, fields[8])
	indefCaps := slices.Clone(fields)
	for i, f := range indefCaps {
		if f.key == keyCaps {
			// The same caps map with an indefinite-length head.
			indefCaps[i].raw = append(append([]byte{0xbf}, f.raw[1:]...), 0xff)
		}
	}
	unsorted := completeRoot(rootA, rootClaims())
	unsorted.Caps.KV.Namespaces = []string{"notes", "crawler"} // not Normalized
	unsortedPayload, err := encodePayload(&unsorted)
	if err != nil {
		t.Fatal(err)
	}
	unknownKey := append(slices.Clone(fields), field{99, []byte{0x01}})

	cases := []struct {
		name  string
		token []byte
		class error
	}{
		{"ES256 header with a real ECDSA signature", joinLinks(es256Link), ErrAlgorithm},
		{"alg missing", joinLinks(rawLink(t, rootA, hdr(map[int64]any{typ: ContentType}), emptyMap, payload)), ErrAlgorithm},
		{"alg given as text", joinLinks(rawLink(t, rootA, hdr(map[int64]any{alg: "EdDSA", typ: ContentType}), emptyMap, payload)), ErrAlgorithm},
		{"alg only in the unprotected header",
			joinLinks(rawLink(t, rootA, hdr(map[int64]any{typ: ContentType}), hdr(map[int64]any{alg: ed}), payload)), ErrAlgorithm},
		{"unknown critical header",
			joinLinks(rawLink(t, rootA, hdr(map[int64]any{alg: ed, 2: []any{int64(99)}, typ: ContentType, 99: "x"}), emptyMap, payload)), ErrCriticalHeader},
		{"critical header naming alg", joinLinks(rawLink(t, rootA, hdr(map[int64]any{alg: ed, 2: []any{alg}, typ: ContentType}), emptyMap, payload)), ErrCriticalHeader},
		{"unprotected header not empty",
			joinLinks(rawLink(t, rootA, edProtected(t), hdr(map[int64]any{4: []byte("kid")}), payload)), ErrDecode},
		{"another content type", joinLinks(rawLink(t, rootA, hdr(map[int64]any{alg: ed, typ: "application/cose"}), emptyMap, payload)), ErrDecode},
		{"unknown protected label", joinLinks(rawLink(t, rootA, hdr(map[int64]any{alg: ed, typ: ContentType, 4: []byte("kid")}), emptyMap, payload)), ErrDecode},
		{"protected header with a long-form head",
			joinLinks(rawLink(t, rootA, append([]byte{0xb8, 0x02}, edProtected(t)[1:]...), emptyMap, payload)), ErrNonCanonical},
		{"payload integer in a long-form head", joinLinks(rawLink(t, rootA, edProtected(t), emptyMap, encodeFields(longDepth))), ErrNonCanonical},
		{"payload keys out of order", joinLinks(rawLink(t, rootA, edProtected(t), emptyMap, encodeFields(swapped))), ErrNonCanonical},
		{"payload with an indefinite-length map", joinLinks(rawLink(t, rootA, edProtected(t), emptyMap, encodeFields(indefCaps))), ErrNonCanonical},
		{"namespace list not sorted", joinLinks(rawLink(t, rootA, edProtected(t), emptyMap, unsortedPayload)), ErrNonCanonical},
		{"duplicate payload key", joinLinks(rawLink(t, rootA, edProtected(t), emptyMap, encodeFields(dupNonce))), ErrDecode},
		{"duplicate protected label",
			joinLinks(rawLink(t, rootA, append(append([]byte{0xa3}, edProtected(t)[1:]...), 0x01, 0x27), emptyMap, payload)), ErrDecode},
		{"unknown payload key", joinLinks(rawLink(t, rootA, edProtected(t), emptyMap, encodeFields(unknownKey))), ErrDecode},
		{"token array in a long-form head", append([]byte{0x98, 0x03}, mustIssue(t, rootA, rootClaims())[1:]...), ErrNonCanonical},
		{"links array in a long-form head", slices.Concat([]byte{0x83, 0x02, 0x98, 0x01}, splitToken(t, mustIssue(t, rootA, rootClaims()))[0], cborBytesOf(keyProof(holder1).wire())), ErrNonCanonical},
		{"tagged COSE_Sign1", slices.Concat([]byte{0x83, 0x02, 0x81, 0xd2}, splitToken(t, mustIssue(t, rootA, rootClaims()))[0], cborBytesOf(keyProof(holder1).wire())), ErrDecode},
		{"proof of an unknown kind", withProofBytes(t, mustIssue(t, rootA, rootClaims()), cborBytesOf([]any{uint64(2), holder1.Seed()})), ErrDecode},
		{"key proof of 31 bytes", withProofBytes(t, mustIssue(t, rootA, rootClaims()), cborBytesOf([]any{uint64(0), holder1.Seed()[:31]})), ErrDecode},
		{"version 3 token", append([]byte{0x83, 0x03}, mustIssue(t, rootA, rootClaims())[2:]...), ErrVersion},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Verify(tc.token, trustA(), Options{Now: during})
			link := 0
			if strings.Contains(tc.name, "array in a long-form head") || tc.name == "tagged COSE_Sign1" || strings.Contains(tc.name, "proof") || strings.Contains(tc.name, "version") {
				link = -1
			}
			wantClass(t, err, tc.class, link)
		})
	}
	// The well-formed link of the same payload verifies: each case fails
	// for its one change alone.
	if _, err := Verify(joinLinks(rawLink(t, rootA, edProtected(t), emptyMap, payload)), trustA(), Options{Now: during}); err != nil {
		t.Fatalf("the untampered link: %v", err)
	}
}

// Item 18: an expired token, a replayed nonce, a token for another cell.
func TestTimeAudienceAndReplay(t *testing.T) {
	tok := chain3(t)
	leaf := 2
	exp := t0.Add(time.Hour + 30*time.Minute)

	_, err := Verify(tok, trustA(), Options{Now: exp})
	wantClass(t, err, ErrExpired, leaf)
	if _, err := Verify(tok, trustA(), Options{Now: exp.Add(-time.Second)}); err != nil {
		t.Fatalf("one second before expiry: %v", err)
	}
	_, err = Verify(tok, trustA(), Options{Now: t0.Add(-time.Second)})
	wantClass(t, err, ErrNotYetValid, leaf)
	if _, err := Verify(tok, trustA(), Options{Now: t0}); err != nil {
		t.Fatalf("at not-before: %v", err)
	}

	t.Run("replayed nonce", func(t *testing.T) {
		cache := NewMemoryNonces(0)
		if _, err := Verify(tok, trustA(), Options{Now: during, Nonces: cache}); err != nil {
			t.Fatalf("first presentation: %v", err)
		}
		_, err := Verify(tok, trustA(), Options{Now: during.Add(time.Minute), Nonces: cache})
		wantClass(t, err, ErrReplay, leaf)
		// The parent token is another presentation: its own nonce.
		parent := joinLinks(splitToken(t, tok)[:2]...)
		if _, err := Verify(parent, trustA(), Options{Now: during, Nonces: cache}); err != nil {
			t.Fatalf("the parent token after its child: %v", err)
		}
	})
	t.Run("a failed verification records no nonce", func(t *testing.T) {
		cache := NewMemoryNonces(0)
		if _, err := Verify(tok, trustA(), Options{Now: exp, Nonces: cache}); !errors.Is(err, ErrExpired) {
			t.Fatalf("want expired, got %v", err)
		}
		if cache.Len() != 0 {
			t.Fatalf("an expired token left %d nonces in the cache", cache.Len())
		}
	})

	rc := rootClaims()
	rc.Audience = cellX
	bound := mustAttenuate(t, mustIssue(t, rootA, rc), holder1, narrowClaims())
	if _, err := Verify(bound, trustA(), Options{Now: during, Audience: cellX}); err != nil {
		t.Fatalf("the bound token at its cell: %v", err)
	}
	_, err = Verify(bound, trustA(), Options{Now: during, Audience: cellY})
	wantClass(t, err, ErrAudience, 1)
	_, err = Verify(bound, trustA(), Options{Now: during})
	wantClass(t, err, ErrAudience, 1)
	// A token for any cell verifies at every cell.
	if _, err := Verify(tok, trustA(), Options{Now: during, Audience: cellY}); err != nil {
		t.Fatalf("a token for any cell: %v", err)
	}
}

func TestAttenuateNeedsTheSubjectKey(t *testing.T) {
	root := mustIssue(t, rootA, rootClaims())
	_, err := Attenuate(root, stranger, narrowClaims())
	wantClass(t, err, ErrBrokenChain, 1)
	_, err = Attenuate(root, rootA, narrowClaims())
	wantClass(t, err, ErrBrokenChain, 1)
	// The key the token carries signs when none is given.
	child, err := Attenuate(root, nil, narrowClaims())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(held(t, child), trustA(), Options{Now: during}); err != nil {
		t.Fatalf("attenuated with the carried key: %v", err)
	}
	// A token issued to a key held elsewhere carries none.
	unproven := withProof(t, root, Proof{})
	_, err = Attenuate(unproven, nil, narrowClaims())
	wantClass(t, err, ErrNoProof, 0)
	// A sealed token is final.
	sealed, err := Seal(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Attenuate(sealed, holder1, narrowClaims()); !errors.Is(err, ErrSealed) {
		t.Fatalf("attenuating a sealed token: %v, want ErrSealed", err)
	}
	if _, err := Seal(sealed, nil); !errors.Is(err, ErrSealed) {
		t.Fatalf("sealing a sealed token: %v, want ErrSealed", err)
	}
}

// Item 32 of shared/SECURITY-TESTS.md, and finding 2 of issue 10: a token
// widened by dropping, reordering or replacing its last links. Each is
// made from a real attenuated token by its holder (holder3, who holds the
// leaf's key and nothing else) and must fail with the class named, at the
// link named.
func TestTruncationIsRefused(t *testing.T) {
	tok := chain3(t) // rootA → holder1 → holder2 → holder3, held by holder3
	links := splitToken(t, tok)
	sealed, err := Seal(tok, nil)
	if err != nil {
		t.Fatal(err)
	}
	seal := mustParse(t, sealed).Proof
	// A sibling: holder2 also delegated to the stranger, with the
	// parent's wider window.
	sib := narrowClaims()
	sib.Subject, sib.Nonce = pub(stranger), nonce(0x33)
	sibling := splitToken(t, mustAttenuate(t, joinLinks(links[:2]...), holder2, sib))

	for _, tc := range []struct {
		name  string
		token []byte
		class error
		link  int
	}{
		{"last link dropped, the leaf's key kept", joinWith(keyProof(holder3), links[0], links[1]), ErrProof, 1},
		{"last two links dropped, the leaf's key kept", joinWith(keyProof(holder3), links[0]), ErrProof, 0},
		{"last link dropped, the seal kept", joinWith(seal, links[0], links[1]), ErrProof, 1},
		{"last link dropped, no proof", joinWith(Proof{}, links[0], links[1]), ErrNoProof, 1},
		{"last link replaced by a sibling's, the leaf's key kept", joinWith(keyProof(holder3), links[0], links[1], sibling[2]), ErrProof, 2},
		{"last two links reordered", joinWith(keyProof(holder3), links[0], links[2], links[1]), ErrBrokenChain, 1},
		{"a link of another token spliced in", joinWith(keyProof(holder3), links[0], sibling[2], links[2]), ErrBrokenChain, 1},
		{"the leaf's key swapped for another", withProof(t, tok, keyProof(stranger)), ErrProof, 2},
		{"a seal by another key", withProof(t, tok, sealOver(stranger, links...)), ErrProof, 2},
		{"a seal over other links", withProof(t, tok, sealOver(holder3, links[0], links[1], sibling[2])), ErrProof, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Verify(tc.token, trustA(), Options{Now: during})
			wantClass(t, err, tc.class, tc.link)
		})
	}
	// The token as its holder has it, and sealed, verifies: each case fails
	// for its change alone.
	for name, b := range map[string][]byte{"key": tok, "seal": sealed} {
		v, err := Verify(b, trustA(), Options{Now: during})
		if err != nil || len(v.Links) != 3 {
			t.Fatalf("the whole token with its %s: %v", name, err)
		}
	}
	// And a prefix is a token in its own right for the one who holds its
	// leaf's key: holder2 may present the 2-link token it delegated from.
	if _, err := Verify(joinWith(keyProof(holder2), links[0], links[1]), trustA(), Options{Now: during}); err != nil {
		t.Fatalf("holder2's own token: %v", err)
	}
}

func mustParse(t *testing.T, tok []byte) *Token {
	t.Helper()
	p, err := Parse(tok)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// withProofBytes returns tok with its proof replaced by raw bytes.
func withProofBytes(t *testing.T, tok []byte, proof []byte) []byte {
	t.Helper()
	links := splitToken(t, tok)
	arr := slices.Concat(append([][]byte{appendHead(nil, 4, uint64(len(links)))}, links...)...)
	return slices.Concat([]byte{0x83, Version}, arr, proof)
}

func TestMemoryNoncesForgetExpired(t *testing.T) {
	m := NewMemoryNonces(2)
	check := func(id string, exp, now time.Time, wantSeen bool, wantErr error) {
		t.Helper()
		seen, err := m.CheckAndRecord([]byte(id), exp, now)
		if seen != wantSeen || !errors.Is(err, wantErr) {
			t.Fatalf("%s at %s: seen %v, %v; want %v, %v", id, now, seen, err, wantSeen, wantErr)
		}
	}
	check("a", t0.Add(time.Minute), t0, false, nil)
	check("a", t0.Add(time.Minute), t0.Add(time.Second), true, nil)
	check("b", t0.Add(time.Hour), t0, false, nil)
	// Full: a third id is refused, not dropped.
	check("c", t0.Add(time.Hour), t0, false, ErrCacheFull)
	// Once a expires its slot is free again, and a itself is new.
	check("c", t0.Add(time.Hour), t0.Add(time.Minute), false, nil)
	if m.Len() != 2 {
		t.Fatalf("%d ids held, want b and c", m.Len())
	}
	check("b", t0.Add(time.Hour), t0.Add(2*time.Minute), true, nil)
}

// TestApprovalGroupsAndTimerNarrowOnly: a link may ask fewer approver
// groups than its parent, never another one, and may not add the timer
// capability its parent lacks; written anyway by the holder, Verify
// refuses the link (capability rule 5b).
func TestApprovalGroupsAndTimerNarrowOnly(t *testing.T) {
	rc := rootClaims()
	rc.Caps.Approval = &Approval{Groups: []string{"finance", "ops"}}
	root := mustIssue(t, rootA, rc)
	narrow := func(change func(c *Caps)) Claims {
		c := narrowClaims()
		c.Caps.Approval = &Approval{Groups: []string{"ops"}}
		change(&c.Caps)
		return c
	}
	ok := narrow(func(*Caps) {})
	v, err := Verify(mustAttenuate(t, root, holder1, ok), trustA(), Options{Now: during})
	if err != nil || v.Claims.Caps.Approval == nil || fmt.Sprint(v.Claims.Caps.Approval.Groups) != "[ops]" {
		t.Fatalf("one group of the two: %+v, %v", v, err)
	}
	for _, tc := range []struct {
		name, detail string
		change       func(c *Caps)
	}{
		{"a group the parent lacks", `approval group "legal"`, func(c *Caps) { c.Approval.Groups = []string{"legal", "ops"} }},
		{"timer absent in the parent", "capability timer", func(c *Caps) { c.Timer = &Unit{} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := narrow(tc.change)
			_, err := Attenuate(root, holder1, c)
			wantClass(t, err, ErrWidens, 1)
			wantDetail(t, err, tc.detail)
			_, err = Verify(unchecked(t, root, holder1, c), trustA(), Options{Now: during})
			wantClass(t, err, ErrWidens, 1)
			wantDetail(t, err, tc.detail)
		})
	}
	// Under a parent without the capability, no group at all.
	plain := mustIssue(t, rootA, rootClaims())
	_, err = Attenuate(plain, holder1, ok)
	wantClass(t, err, ErrWidens, 1)
	wantDetail(t, err, "capability approval")
}
