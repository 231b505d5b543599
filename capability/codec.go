package capability

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/veraison/go-cose"
)

// Format constants. SPEC.md defines them.
const (
	// Version is the format version of the tokens and link claims this
	// package writes and reads. Version 1 tokens (a bare chain of links,
	// without a proof of possession) are refused with ErrVersion.
	Version = 2
	// ContentType is the protected typ header (label 16) of every link. It
	// keeps any other COSE_Sign1 signed by the same key (a handoff
	// envelope, say) from being taken for a link.
	ContentType = "application/agentrt-capability+cbor"
	// MaxTokenSize bounds the bytes of a whole token.
	MaxTokenSize = 64 << 10
	// MaxLinks bounds the links of a token whatever a verifier's MaxDepth.
	MaxLinks = 32
	// DefaultMaxDepth is the deepest link Verify accepts by default: the
	// root is depth 0, so a token has at most DefaultMaxDepth+1 links.
	DefaultMaxDepth = 8
)

// Payload map keys (SPEC.md, "Claims").
const (
	keyVersion = iota + 1
	keyIssuer
	keySubject
	keyAudience
	keyCaps
	keyBudget
	keyNotBefore
	keyExpires
	keyNonce
	keyParent
	keyDepth
)

// requiredKeys must be present in every payload.
var requiredKeys = []uint64{keyVersion, keyIssuer, keySubject, keyCaps, keyNotBefore, keyExpires, keyNonce, keyDepth}

// payload is the CBOR form of Claims.
type payload struct {
	Version   uint64 `cbor:"1,keyasint"`
	Issuer    []byte `cbor:"2,keyasint"`
	Subject   []byte `cbor:"3,keyasint"`
	Audience  []byte `cbor:"4,keyasint,omitempty"`
	Caps      Caps   `cbor:"5,keyasint"`
	Budget    Budget `cbor:"6,keyasint,omitempty"`
	NotBefore int64  `cbor:"7,keyasint"`
	Expires   int64  `cbor:"8,keyasint"`
	Nonce     []byte `cbor:"9,keyasint"`
	Parent    []byte `cbor:"10,keyasint,omitempty"`
	Depth     uint64 `cbor:"11,keyasint"`
}

// sign1 is an untagged COSE_Sign1 (RFC 9052 section 4.2).
type sign1 struct {
	_           struct{} `cbor:",toarray"`
	Protected   []byte
	Unprotected cbor.RawMessage
	Payload     []byte
	Signature   []byte
}

// protected is the only protected header a link has: alg EdDSA and typ.
type protected struct {
	Alg cose.Algorithm `cbor:"1,keyasint"`
	Typ string         `cbor:"16,keyasint"`
}

var (
	encMode cbor.EncMode
	decMode cbor.DecMode
	// emptyMap is the encoding of the unprotected header: an empty map.
	emptyMap = []byte{0xa0}
)

func init() {
	var err error
	encMode, err = cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		panic(err)
	}
	decMode, err = cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		IndefLength:       cbor.IndefLengthForbidden,
		TagsMd:            cbor.TagsForbidden,
		MaxNestedLevels:   8,
		MaxArrayElements:  MaxListLen + MaxLinks,
		MaxMapPairs:       MaxListLen,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
		UTF8:              cbor.UTF8RejectInvalid,
		IntDec:            cbor.IntDecConvertSigned,
	}.DecMode()
	if err != nil {
		panic(err)
	}
}

// Token is a parsed token: its links, root first, and its proof of
// possession. Parse checks each link's encoding and header on its own; only
// Verify checks signatures, the chain, the narrowing and the proof.
type Token struct {
	Links []Link
	Proof Proof
	// links is the encoding of the array of links, which a seal signs.
	links []byte
}

// Link is one parsed link.
type Link struct {
	// Raw is the link's bytes, whose SHA-256 its child names as parent.
	Raw    []byte
	Claims Claims
	// protected and payload are the signed bytes, signature the signature.
	protected, payload, signature []byte
}

// Hash returns the SHA-256 of the link's bytes.
func (l *Link) Hash() []byte {
	h := sha256.Sum256(l.Raw)
	return h[:]
}

// Leaf returns the last link.
func (t *Token) Leaf() *Link { return &t.Links[len(t.Links)-1] }

// Bytes returns the token's encoding: its version, the array of its links
// and its proof.
func (t *Token) Bytes() []byte {
	raws := make([][]byte, len(t.Links))
	for i := range t.Links {
		raws[i] = t.Links[i].Raw
	}
	b, err := encodeToken(raws, t.Proof)
	if err != nil {
		panic(err) // raw messages of parsed links always encode
	}
	return b
}

// Parse decodes a token and checks each link's encoding and protected
// header, and the proof's shape. It verifies nothing cryptographic: use
// Verify for that.
func Parse(b []byte) (*Token, error) {
	w, err := decodeToken(b)
	if err != nil {
		return nil, err
	}
	t := &Token{Links: make([]Link, len(w.links)), Proof: w.proof, links: w.linksRaw}
	for i, raw := range w.links {
		if err := parseLink(i, raw, &t.Links[i]); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// wireToken is a token split into its parts, each checked for shape and
// canonical form but not parsed further.
type wireToken struct {
	links    []cbor.RawMessage
	linksRaw []byte
	proof    Proof
}

// decodeToken decodes the outer array: the version, the array of links
// (into the links' raw bytes) and the proof, if any.
func decodeToken(b []byte) (*wireToken, error) {
	if len(b) > MaxTokenSize {
		return nil, fail(ErrDecode, -1, "%d bytes, at most %d", len(b), MaxTokenSize)
	}
	var outer []cbor.RawMessage
	if err := decMode.Unmarshal(b, &outer); err != nil {
		return nil, fail(decodeClass(err), -1, "%v", err)
	}
	if len(outer) > 0 && len(outer[0]) > 0 && outer[0][0]>>5 == 4 {
		// Version 1 was the array of links itself: its first element
		// is a link, a COSE_Sign1 array, where version 2 has its version.
		return nil, fail(ErrVersion, -1, "a version 1 token (a bare chain of links, without a proof of possession); this verifier reads version %d tokens: have it issued again", Version)
	}
	if len(outer) < 2 || len(outer) > 3 {
		return nil, fail(ErrDecode, -1, "an array of %d items, want [version, links, proof] (the proof may be left out)", len(outer))
	}
	var version uint64
	if err := decMode.Unmarshal(outer[0], &version); err != nil {
		return nil, fail(ErrDecode, -1, "version: %v", err)
	}
	if version != Version {
		return nil, fail(ErrVersion, -1, "a version %d token; this verifier reads version %d", version, Version)
	}
	w := &wireToken{linksRaw: outer[1]}
	if err := decMode.Unmarshal(outer[1], &w.links); err != nil {
		return nil, fail(decodeClass(err), -1, "links: %v", err)
	}
	if len(w.links) == 0 {
		return nil, fail(ErrDecode, -1, "no links")
	}
	if len(w.links) > MaxLinks {
		return nil, fail(ErrDepth, -1, "%d links, at most %d", len(w.links), MaxLinks)
	}
	if len(outer) == 3 {
		var err error
		if w.proof, err = decodeProof(outer[2]); err != nil {
			return nil, err
		}
	}
	raws := make([][]byte, len(w.links))
	for i, l := range w.links {
		raws[i] = l
	}
	if again, _ := encodeToken(raws, w.proof); !bytes.Equal(again, b) {
		return nil, fail(ErrNonCanonical, -1, "the token is not in canonical form")
	}
	return w, nil
}

// encodeToken returns the canonical encoding of a token of the given links
// and proof.
func encodeToken(links [][]byte, p Proof) ([]byte, error) {
	raws := make([]cbor.RawMessage, len(links))
	for i, l := range links {
		raws[i] = l
	}
	parts := []any{uint64(Version), raws}
	if w := p.wire(); w != nil {
		parts = append(parts, w)
	}
	return encMode.Marshal(parts)
}

// decodeClass tells a non-canonical encoding (indefinite lengths) from
// malformed input.
func decodeClass(err error) error {
	var indef *cbor.IndefiniteLengthError
	if errors.As(err, &indef) {
		return ErrNonCanonical
	}
	return ErrDecode
}

// parseLink decodes link i from raw into l, checking in order: the
// COSE_Sign1 structure, the protected header (critical parameters, then
// algorithm, then the rest), and the payload; each, once decoded, must
// re-encode to the bytes it came from.
func parseLink(i int, raw []byte, l *Link) error {
	var m sign1
	if err := decMode.Unmarshal(raw, &m); err != nil {
		return fail(decodeClass(err), i, "COSE_Sign1: %v", err)
	}
	if m.Payload == nil {
		return fail(ErrDecode, i, "COSE_Sign1: detached payload")
	}
	if again, err := encMode.Marshal(m); err != nil || !bytes.Equal(again, raw) {
		return fail(ErrNonCanonical, i, "COSE_Sign1 is not in canonical form")
	}
	if err := checkProtected(i, m.Protected); err != nil {
		return err
	}
	if !bytes.Equal(m.Unprotected, emptyMap) {
		return fail(ErrDecode, i, "the unprotected header must be empty (every header of a link is signed)")
	}
	if len(m.Signature) != ed25519.SignatureSize {
		return fail(ErrSignature, i, "signature of %d bytes, want %d", len(m.Signature), ed25519.SignatureSize)
	}
	c, err := decodePayload(i, m.Payload)
	if err != nil {
		return err
	}
	*l = Link{Raw: raw, Claims: c, protected: m.Protected, payload: m.Payload, signature: m.Signature}
	return nil
}

// checkProtected checks the protected header: no crit, alg EdDSA, typ
// ContentType, nothing else, canonically encoded.
func checkProtected(i int, b []byte) error {
	var h map[any]cbor.RawMessage
	if err := decMode.Unmarshal(b, &h); err != nil {
		return fail(decodeClass(err), i, "protected header: %v", err)
	}
	if crit, ok := h[cose.HeaderLabelCritical]; ok {
		var labels []any
		_ = decMode.Unmarshal(crit, &labels)
		return fail(ErrCriticalHeader, i, "crit lists %v; this version understands no critical extension", labels)
	}
	rawAlg, ok := h[cose.HeaderLabelAlgorithm]
	if !ok {
		return fail(ErrAlgorithm, i, "no alg in the protected header (want EdDSA)")
	}
	var alg any
	if err := decMode.Unmarshal(rawAlg, &alg); err != nil {
		return fail(ErrAlgorithm, i, "alg: %v", err)
	}
	if a, ok := alg.(int64); !ok || cose.Algorithm(a) != cose.AlgorithmEdDSA {
		name := fmt.Sprint(alg)
		if ok {
			name = cose.Algorithm(a).String()
		}
		return fail(ErrAlgorithm, i, "alg %s, only EdDSA (-8) is allowed", name)
	}
	for label := range h {
		if label != cose.HeaderLabelAlgorithm && label != cose.HeaderLabelType {
			return fail(ErrDecode, i, "protected header: unknown label %v", label)
		}
	}
	var p protected
	if err := decMode.Unmarshal(b, &p); err != nil {
		return fail(ErrDecode, i, "protected header: %v", err)
	}
	if p.Typ != ContentType {
		return fail(ErrDecode, i, "protected header: typ %q, want %q", p.Typ, ContentType)
	}
	if again, err := encMode.Marshal(p); err != nil || !bytes.Equal(again, b) {
		return fail(ErrNonCanonical, i, "protected header is not in canonical form")
	}
	return nil
}

// decodePayload decodes and checks one link's claims.
func decodePayload(i int, b []byte) (Claims, error) {
	var keys map[uint64]cbor.RawMessage
	if err := decMode.Unmarshal(b, &keys); err != nil {
		return Claims{}, fail(decodeClass(err), i, "claims: %v", err)
	}
	// The version first: the claims of another version may not decode
	// as this one's.
	var version uint64
	if raw, ok := keys[keyVersion]; ok {
		if err := decMode.Unmarshal(raw, &version); err == nil && version != Version {
			return Claims{}, fail(ErrVersion, i, "claims of version %d; this verifier reads version %d", version, Version)
		}
	}
	for _, k := range requiredKeys {
		if _, ok := keys[k]; !ok {
			return Claims{}, fail(ErrDecode, i, "claims: required key %d is missing", k)
		}
	}
	var p payload
	if err := decMode.Unmarshal(b, &p); err != nil {
		return Claims{}, fail(decodeClass(err), i, "claims: %v", err)
	}
	if again, err := encMode.Marshal(p); err != nil || !bytes.Equal(again, b) {
		return Claims{}, fail(ErrNonCanonical, i, "claims are not in canonical form")
	}
	if p.Depth >= MaxLinks {
		// Verify would refuse it at its index anyway; this keeps the
		// conversion to int below exact.
		return Claims{}, fail(ErrBrokenChain, i, "depth %d at index %d", p.Depth, i)
	}
	c := Claims{
		Issuer: p.Issuer, Subject: p.Subject, Audience: p.Audience,
		Caps: p.Caps, Budget: p.Budget,
		NotBefore: time.Unix(p.NotBefore, 0).UTC(), Expires: time.Unix(p.Expires, 0).UTC(),
		Nonce: p.Nonce, Parent: p.Parent, Depth: int(p.Depth),
	}
	if err := c.check(); err != nil {
		if errors.Is(err, errUnsorted) {
			return Claims{}, fail(ErrNonCanonical, i, "claims: %v", err)
		}
		return Claims{}, fail(ErrDecode, i, "claims: %v", err)
	}
	return c, nil
}

// encodePayload returns the canonical CBOR of c.
func encodePayload(c *Claims) ([]byte, error) {
	return encMode.Marshal(payload{
		Version: Version, Issuer: c.Issuer, Subject: c.Subject, Audience: c.Audience,
		Caps: c.Caps, Budget: c.Budget,
		NotBefore: c.NotBefore.Unix(), Expires: c.Expires.Unix(),
		Nonce: c.Nonce, Parent: c.Parent, Depth: uint64(c.Depth),
	})
}
