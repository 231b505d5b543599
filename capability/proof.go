package capability

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
)

// ProofKind says how a token proves that its presenter holds its leaf.
type ProofKind int

const (
	// ProofNone: the token carries no proof. Its leaf names a subject key
	// held elsewhere, whose holder seals or attenuates it; Verify refuses
	// it (ErrNoProof).
	ProofNone ProofKind = iota
	// ProofKey: the token carries the private key (the Ed25519 seed) of
	// its leaf's subject, which lets its holder attenuate it or seal it.
	// Such a token is a bearer secret.
	ProofKey
	// ProofSeal: the token carries the leaf subject's signature over all
	// of its links. Nothing can be appended to a sealed token.
	ProofSeal
)

func (k ProofKind) String() string {
	switch k {
	case ProofKey:
		return "key"
	case ProofSeal:
		return "seal"
	}
	return "none"
}

// Proof is a token's proof of possession of its leaf's subject key.
type Proof struct {
	Kind ProofKind
	// Seed is the leaf subject's Ed25519 seed, for ProofKey.
	Seed []byte
	// Seal is the leaf subject's signature over SealMessage, for ProofSeal.
	Seal []byte
}

// The proof kinds' codes on the wire (SPEC.md, "Token").
const (
	wireKey  = 0
	wireSeal = 1
)

// proofWire is a proof on the wire: [kind, bytes].
type proofWire struct {
	_     struct{} `cbor:",toarray"`
	Kind  uint64
	Value []byte
}

func (p Proof) wire() *proofWire {
	switch p.Kind {
	case ProofKey:
		return &proofWire{Kind: wireKey, Value: p.Seed}
	case ProofSeal:
		return &proofWire{Kind: wireSeal, Value: p.Seal}
	}
	return nil
}

func decodeProof(b []byte) (Proof, error) {
	var w proofWire
	if err := decMode.Unmarshal(b, &w); err != nil {
		return Proof{}, fail(decodeClass(err), -1, "proof: %v", err)
	}
	switch {
	case w.Kind == wireKey && len(w.Value) == ed25519.SeedSize:
		return Proof{Kind: ProofKey, Seed: w.Value}, nil
	case w.Kind == wireSeal && len(w.Value) == ed25519.SignatureSize:
		return Proof{Kind: ProofSeal, Seal: w.Value}, nil
	case w.Kind == wireKey, w.Kind == wireSeal:
		return Proof{}, fail(ErrDecode, -1, "proof of kind %d: %d bytes", w.Kind, len(w.Value))
	}
	return Proof{}, fail(ErrDecode, -1, "proof of unknown kind %d (want 0, a key, or 1, a seal)", w.Kind)
}

// sealContext separates seals from every other signature by a subject key
// (a link it signs is a COSE_Sign1 of another structure).
const sealContext = "agentrt/capability/v2 seal\x00"

// SealMessage returns the bytes a seal signs for a token whose array of
// links encodes as links: the context string and the SHA-256 of links.
func SealMessage(links []byte) []byte {
	sum := sha256.Sum256(links)
	return append([]byte(sealContext), sum[:]...)
}

// key returns the private key of a ProofKey.
func (p Proof) key() ed25519.PrivateKey { return ed25519.NewKeyFromSeed(p.Seed) }

// checkProof verifies t's proof against its leaf, whose index is leaf.
func (t *Token) checkProof(leaf int) error {
	subject := t.Links[leaf].Claims.Subject
	switch t.Proof.Kind {
	case ProofKey:
		if held := t.Proof.key().Public().(ed25519.PublicKey); !bytes.Equal(held, subject) {
			return fail(ErrProof, leaf, "the token carries the key %x, which is not link %d's subject %x (a truncated token, or another token's key)", []byte(held), leaf, []byte(subject))
		}
	case ProofSeal:
		if !ed25519.Verify(subject, SealMessage(t.links), t.Proof.Seal) {
			return fail(ErrProof, leaf, "the seal is not link %d's subject's signature over these %d links (a truncated or altered token, or a seal by another key)", leaf, len(t.Links))
		}
	default:
		return fail(ErrNoProof, leaf, "the token carries neither a key nor a seal; the holder of link %d's subject key %x must seal it", leaf, []byte(subject))
	}
	return nil
}

// Seal returns token sealed by its leaf's subject key: holder, or, when
// holder is nil, the key the token carries. The seal ends delegation and
// drops the carried key, so a sealed token can be recorded and shown
// without giving anyone the power to attenuate it. Seal checks that the key
// is the leaf's subject, but not the chain: Verify does that.
func Seal(token []byte, holder ed25519.PrivateKey) ([]byte, error) {
	t, err := Parse(token)
	if err != nil {
		return nil, err
	}
	key, err := t.holderKey(holder, "seal")
	if err != nil {
		return nil, err
	}
	raws := make([][]byte, len(t.Links))
	for i := range t.Links {
		raws[i] = t.Links[i].Raw
	}
	return encodeToken(raws, Proof{Kind: ProofSeal, Seal: ed25519.Sign(key, SealMessage(t.links))})
}

// holderKey returns the key that may extend or seal t: holder, which must
// be the leaf's subject, or the key t carries.
func (t *Token) holderKey(holder ed25519.PrivateKey, what string) (ed25519.PrivateKey, error) {
	if t.Proof.Kind == ProofSeal {
		return nil, ErrSealed
	}
	leaf := len(t.Links) - 1
	subject := t.Links[leaf].Claims.Subject
	if holder == nil {
		if t.Proof.Kind != ProofKey {
			return nil, fail(ErrNoProof, leaf, "the token carries no key; %s it with the private key of link %d's subject %x", what, leaf, []byte(subject))
		}
		// A carried key that is not the leaf's is a bad proof (a
		// truncated token), not a choice of the wrong key.
		if err := t.checkProof(leaf); err != nil {
			return nil, err
		}
		holder = t.Proof.key()
	}
	if !bytes.Equal(holder.Public().(ed25519.PublicKey), subject) {
		return nil, fail(ErrBrokenChain, leaf+1, "the signing key is not the subject of link %d, so it cannot %s the token", leaf, what)
	}
	return holder, nil
}

// String describes p for people.
func (p Proof) String() string {
	switch p.Kind {
	case ProofKey:
		return "key (the subject's private key: the token may be attenuated or sealed; keep it secret)"
	case ProofSeal:
		return "seal (final: it may be presented, not attenuated)"
	}
	return "none (seal it with the subject's key before presenting it)"
}
