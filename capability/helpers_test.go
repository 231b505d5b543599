package capability

import (
	"bytes"
	"crypto/ed25519"
	"encoding/binary"
	"slices"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/veraison/go-cose"
)

// Fixed keys and times: tests and vectors are byte-for-byte reproducible
// (ed25519 signatures are deterministic).
var (
	// rootA is the trusted root of every test unless one says otherwise.
	rootA = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0xa1}, ed25519.SeedSize))
	// rootB is a second root, trusted by no test: a stranger's cell.
	rootB = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0xb2}, ed25519.SeedSize))
	// holder1 holds the root token; holder2 holds holder1's delegation.
	holder1 = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0xc3}, ed25519.SeedSize))
	holder2 = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0xd4}, ed25519.SeedSize))
	// holder3 holds holder2's delegation.
	holder3 = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0xd5}, ed25519.SeedSize))
	// stranger holds nothing.
	stranger = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0xe5}, ed25519.SeedSize))
	// cellX and cellY are two cells a token may be bound to.
	cellX = pub(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0x58}, ed25519.SeedSize)))
	cellY = pub(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0x59}, ed25519.SeedSize)))

	t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	// during is a moment inside every test token's window.
	during = t0.Add(time.Hour)
)

func pub(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }

func nonce(b byte) []byte { return bytes.Repeat([]byte{b}, NonceSize) }

func trustA() []ed25519.PublicKey { return []ed25519.PublicKey{pub(rootA)} }

// testKeys are the private keys the tests hold, by public key: a token
// whose last subject is one of them is presented with that key as proof.
var testKeys = []ed25519.PrivateKey{rootA, rootB, holder1, holder2, holder3, stranger}

func keyOf(subject ed25519.PublicKey) ed25519.PrivateKey {
	for _, k := range testKeys {
		if bytes.Equal(pub(k), subject) {
			return k
		}
	}
	return nil
}

// testDecl is the declaration of a test tool called name.
func testDecl(name string) ToolDecl {
	return ToolDecl{Name: name, Exec: "/usr/bin/" + name, Read: []string{"/usr", "/srv/repo"},
		Args: &ToolArgsDecl{Fixed: []string{"-c"}}, Limits: &ToolLimitsDecl{Wall: "30s"}}
}

func digestOf(d ToolDecl) Digest {
	sum, err := d.Digest()
	if err != nil {
		panic(err)
	}
	return sum
}

// tools binds each named test tool to its test declaration.
func tools(names ...string) *Tool {
	t := &Tool{Tools: map[string]Digest{}}
	for _, n := range names {
		t.Tools[n] = digestOf(testDecl(n))
	}
	return t
}

// keyProof is the proof a holder of key presents a token with.
func keyProof(key ed25519.PrivateKey) Proof { return Proof{Kind: ProofKey, Seed: key.Seed()} }

// withProof returns tok with its proof replaced by p.
func withProof(tb testing.TB, tok []byte, p Proof) []byte {
	tb.Helper()
	b, err := encodeToken(splitToken(tb, tok), p)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// held returns tok with the key proof of its last subject, when a test
// holds that key: the token as its holder has it.
func held(tb testing.TB, tok []byte) []byte {
	tb.Helper()
	t, err := Parse(tok)
	if err != nil {
		tb.Fatal(err)
	}
	if k := keyOf(t.Leaf().Claims.Subject); k != nil {
		return withProof(tb, tok, keyProof(k))
	}
	return tok
}

// rootClaims is what rootA grants holder1 in most tests.
func rootClaims() Claims {
	return Claims{
		Subject: pub(holder1),
		Caps: Caps{
			Run:   &Unit{},
			KV:    &KV{Namespaces: []string{"crawler", "notes"}},
			HTTP:  &HTTP{Hosts: []string{"api.example.com:443", "example.com"}},
			Clock: &Unit{},
			Tool:  tools("curl", "grep", "ls"),
		},
		Budget:    Budget{Steps: Limit(1000), HTTPRequests: Limit(50), ToolCalls: Limit(20), WallSeconds: Limit(3600)},
		NotBefore: t0,
		Expires:   t0.Add(24 * time.Hour),
		Nonce:     nonce(0x01),
	}
}

// narrowClaims is a proper narrowing of rootClaims for holder2.
func narrowClaims() Claims {
	return Claims{
		Subject: pub(holder2),
		Caps: Caps{
			Run:  &Unit{},
			HTTP: &HTTP{Hosts: []string{"example.com:443"}},
			Tool: tools("grep"),
		},
		Budget:    Budget{Steps: Limit(100), HTTPRequests: Limit(10), ToolCalls: Limit(5), WallSeconds: Limit(600)},
		NotBefore: t0,
		Expires:   t0.Add(2 * time.Hour),
		Nonce:     nonce(0x02),
	}
}

// mustIssue issues c, held by its subject: with the subject's key as proof
// when a test holds it.
func mustIssue(tb testing.TB, key ed25519.PrivateKey, c Claims) []byte {
	tb.Helper()
	tok, err := Issue(key, c)
	if err != nil {
		tb.Fatal(err)
	}
	return held(tb, tok)
}

// mustAttenuate appends c signed by key, held by its subject as mustIssue's
// tokens are.
func mustAttenuate(tb testing.TB, tok []byte, key ed25519.PrivateKey, c Claims) []byte {
	tb.Helper()
	out, err := Attenuate(tok, key, c)
	if err != nil {
		tb.Fatal(err)
	}
	return held(tb, out)
}

// chain3 is root (rootA → holder1), link 1 (holder1 → holder2), link 2
// (holder2 → holder3, one hour less), held by holder3: each link has
// another subject, so each prefix is held by another key.
func chain3(tb testing.TB) []byte {
	tok := mustAttenuate(tb, mustIssue(tb, rootA, rootClaims()), holder1, narrowClaims())
	c := narrowClaims()
	c.Subject, c.Nonce, c.Expires = pub(holder3), nonce(0x03), t0.Add(time.Hour+30*time.Minute)
	return mustAttenuate(tb, tok, holder2, c)
}

// splitToken returns the raw links of a token.
func splitToken(tb testing.TB, tok []byte) [][]byte {
	tb.Helper()
	var outer []cbor.RawMessage
	if err := cbor.Unmarshal(tok, &outer); err != nil || len(outer) < 2 {
		tb.Fatalf("not a token: %v", err)
	}
	var raws []cbor.RawMessage
	if err := cbor.Unmarshal(outer[1], &raws); err != nil {
		tb.Fatal(err)
	}
	out := make([][]byte, len(raws))
	for i, r := range raws {
		out[i] = r
	}
	return out
}

// joinLinks encodes raw links as a token, with the key proof of the last
// link's subject when a test holds it (the token as its holder presents
// it), else none. The links are taken as they are, canonical or not.
func joinLinks(links ...[]byte) []byte {
	p := Proof{}
	var last Link
	if len(links) > 0 && parseLink(len(links)-1, links[len(links)-1], &last) == nil {
		if k := keyOf(last.Claims.Subject); k != nil {
			p = keyProof(k)
		}
	}
	return joinWith(p, links...)
}

// joinWith encodes raw links and proof p as a token, the links as given.
func joinWith(p Proof, links ...[]byte) []byte {
	arr := slices.Concat(append([][]byte{appendHead(nil, 4, uint64(len(links)))}, links...)...)
	n := uint64(2)
	var proof []byte
	if w := p.wire(); w != nil {
		n, proof = 3, cborBytesOf(w)
	}
	return slices.Concat(appendHead(nil, 4, n), []byte{Version}, arr, proof)
}

func cborBytesOf(v any) []byte {
	b, err := encMode.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// unchecked appends a link stating c, signed by key, without the narrowing
// check Attenuate makes: an attacker's tool, to show Verify catches it.
func unchecked(tb testing.TB, tok []byte, key ed25519.PrivateKey, c Claims) []byte {
	tb.Helper()
	links := splitToken(tb, tok)
	parent, err := Parse(tok)
	if err != nil {
		tb.Fatal(err)
	}
	c.Issuer, c.Parent, c.Depth = pub(key), parent.Leaf().Hash(), len(links)
	raw, err := signLink(key, c)
	if err != nil {
		tb.Fatal(err)
	}
	return joinLinks(append(links, raw)...)
}

// sealOver returns key's seal over the array of links.
func sealOver(key ed25519.PrivateKey, links ...[]byte) Proof {
	arr := slices.Concat(append([][]byte{appendHead(nil, 4, uint64(len(links)))}, links...)...)
	return Proof{Kind: ProofSeal, Seal: ed25519.Sign(key, SealMessage(arr))}
}

// Raw COSE building, for links no honest signer writes.

// appendHead appends a CBOR head of the given major type with the shortest
// argument.
func appendHead(b []byte, major byte, n uint64) []byte {
	m := major << 5
	switch {
	case n < 24:
		return append(b, m|byte(n))
	case n <= 0xff:
		return append(b, m|24, byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(b, m|25), uint16(n))
	case n <= 0xffffffff:
		return binary.BigEndian.AppendUint32(append(b, m|26), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(b, m|27), n)
}

func cborBytes(b []byte) []byte { return append(appendHead(nil, 2, uint64(len(b))), b...) }

func mustCBOR(tb testing.TB, v any) []byte {
	tb.Helper()
	b, err := encMode.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// edProtected is the canonical protected header of a link.
func edProtected(tb testing.TB) []byte {
	return mustCBOR(tb, map[int64]any{cose.HeaderLabelAlgorithm: int64(cose.AlgorithmEdDSA), cose.HeaderLabelType: ContentType})
}

// rawLink signs payload under protected with key (EdDSA over the COSE
// Sig_structure) and encodes the COSE_Sign1 with the given unprotected
// header, all bytes as given.
func rawLink(tb testing.TB, key ed25519.PrivateKey, protected, unprotected, payload []byte) []byte {
	tb.Helper()
	tbs := mustCBOR(tb, []any{"Signature1", protected, []byte{}, payload})
	sig := ed25519.Sign(key, tbs)
	return slices.Concat([]byte{0x84}, cborBytes(protected), unprotected, cborBytes(payload), cborBytes(sig))
}

// field is one key of a payload map and its encoded value.
type field struct {
	key uint64
	raw []byte
}

// payloadFields returns the fields of a link's claims, in key order.
func payloadFields(tb testing.TB, c Claims) []field {
	tb.Helper()
	b, err := encodePayload(&c)
	if err != nil {
		tb.Fatal(err)
	}
	var m map[uint64]cbor.RawMessage
	if err := cbor.Unmarshal(b, &m); err != nil {
		tb.Fatal(err)
	}
	var fs []field
	for k, v := range m {
		fs = append(fs, field{k, v})
	}
	slices.SortFunc(fs, func(a, b field) int { return int(a.key) - int(b.key) })
	return fs
}

// encodeFields writes fields as a map in the order given.
func encodeFields(fs []field) []byte {
	b := appendHead(nil, 5, uint64(len(fs)))
	for _, f := range fs {
		b = append(appendHead(b, 0, f.key), f.raw...)
	}
	return b
}

// completeRoot fills in what Issue and Attenuate would for a root link
// signed by key.
func completeRoot(key ed25519.PrivateKey, c Claims) Claims {
	c.Issuer = pub(key)
	c.Caps.Normalize()
	return c
}
