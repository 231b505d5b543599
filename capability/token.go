package capability

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/veraison/go-cose"
)

// Issue returns a new token of one link, the root, stating c and signed by
// root. Issue sets c.Issuer to root's public key and draws a nil c.Nonce at
// random. NotBefore and Expires are required and are kept to the second.
//
// A nil c.Subject makes Issue generate the subject's key pair and carry its
// private key as the token's proof (ProofKey): the token is then a bearer
// secret, which its holder presents, attenuates or seals. A c.Subject held
// elsewhere gives a token without a proof, which that key's holder must seal
// (Seal) or attenuate before it can be presented.
//
// Issue does not refuse budget ceilings that a host does not enforce: that
// is the host's decision (host.CheckEnforced).
func Issue(root ed25519.PrivateKey, c Claims) ([]byte, error) {
	if c.NotBefore.IsZero() || c.Expires.IsZero() {
		return nil, fmt.Errorf("capability token: a root link needs both a not-before and an expiry time")
	}
	c.Issuer = root.Public().(ed25519.PublicKey)
	if err := c.Caps.requireDigests(); err != nil {
		return nil, err
	}
	proof, err := subjectOf(&c)
	if err != nil {
		return nil, err
	}
	c.Parent, c.Depth = nil, 0
	raw, err := signLink(root, c)
	if err != nil {
		return nil, err
	}
	return encodeToken([][]byte{raw}, proof)
}

// subjectOf generates c's subject key when c names none and returns the
// proof the token carries: the new key, or none.
func subjectOf(c *Claims) (Proof, error) {
	if c.Subject != nil {
		return Proof{}, nil
	}
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return Proof{}, err
	}
	c.Subject = pub
	return Proof{Kind: ProofKey, Seed: key.Seed()}, nil
}

// Attenuate returns token with one more link, stating c and signed by the
// key of the token's last link's subject: holder, or, when holder is nil,
// the key the token carries. A sealed token cannot be attenuated
// (ErrSealed). The new link must be within the last one (ErrWidens
// otherwise). For convenience, what c leaves unset is taken from the last
// link: a nil Audience, zero NotBefore or Expires, each nil budget ceiling
// and each nil tool digest. The capabilities are not: c.Caps is exactly
// what the new link allows. A nil c.Subject makes Attenuate generate the
// new subject's key and carry it as the proof, as Issue does; a named one
// gives a token without a proof. A nil c.Nonce is drawn at random.
//
// Attenuate checks the token's encoding but not its signatures; a verifier
// does that.
func Attenuate(token []byte, holder ed25519.PrivateKey, c Claims) ([]byte, error) {
	t, err := Parse(token)
	if err != nil {
		return nil, err
	}
	next := len(t.Links)
	key, err := t.holderKey(holder, "attenuate")
	if err != nil {
		return nil, err
	}
	leaf := t.Leaf().Claims
	pub := key.Public().(ed25519.PublicKey)
	if next >= MaxLinks {
		return nil, fail(ErrDepth, next, "a token has at most %d links", MaxLinks)
	}
	if c.Audience == nil {
		c.Audience = leaf.Audience
	}
	if c.NotBefore.IsZero() {
		c.NotBefore = leaf.NotBefore
	}
	if c.Expires.IsZero() {
		c.Expires = leaf.Expires
	}
	c.Budget.inherit(leaf.Budget)
	if c.Caps.Tool != nil {
		tool := *c.Caps.Tool
		tool.inheritTools(leaf.Caps.Tool)
		c.Caps.Tool = &tool
	}
	if c.Caps.MCP != nil {
		m := *c.Caps.MCP
		m.inherit(leaf.Caps.MCP)
		c.Caps.MCP = &m
	}
	proof, err := subjectOf(&c)
	if err != nil {
		return nil, err
	}
	c.Issuer, c.Parent, c.Depth = pub, t.Leaf().Hash(), next
	c.Caps.Normalize()
	c.NotBefore, c.Expires = c.NotBefore.Truncate(time.Second), c.Expires.Truncate(time.Second)
	if err := c.Within(leaf); err != nil {
		return nil, widenError(next, err)
	}
	raw, err := signLink(key, c)
	if err != nil {
		return nil, err
	}
	raws := make([][]byte, 0, next+1)
	for _, l := range t.Links {
		raws = append(raws, l.Raw)
	}
	return encodeToken(append(raws, raw), proof)
}

// signLink encodes c, signs it with key as a COSE_Sign1 and checks that the
// result parses back to c: a link this package writes is one it accepts.
func signLink(key ed25519.PrivateKey, c Claims) ([]byte, error) {
	c.Caps.Normalize()
	c.NotBefore, c.Expires = c.NotBefore.Truncate(time.Second), c.Expires.Truncate(time.Second)
	if c.Nonce == nil {
		c.Nonce = make([]byte, NonceSize)
		if _, err := rand.Read(c.Nonce); err != nil {
			return nil, err
		}
	}
	if err := c.check(); err != nil {
		return nil, fmt.Errorf("capability token: %w", err)
	}
	payload, err := encodePayload(&c)
	if err != nil {
		return nil, err
	}
	signer, err := cose.NewSigner(cose.AlgorithmEdDSA, key)
	if err != nil {
		return nil, err
	}
	msg := cose.UntaggedSign1Message{
		Headers: cose.Headers{
			Protected:   cose.ProtectedHeader{cose.HeaderLabelAlgorithm: cose.AlgorithmEdDSA, cose.HeaderLabelType: ContentType},
			Unprotected: cose.UnprotectedHeader{},
		},
		Payload: payload,
	}
	if err := msg.Sign(rand.Reader, nil, signer); err != nil {
		return nil, err
	}
	raw, err := msg.MarshalCBOR()
	if err != nil {
		return nil, err
	}
	var l Link
	if err := parseLink(c.Depth, raw, &l); err != nil {
		return nil, fmt.Errorf("capability token: a signed link does not parse back: %w", err)
	}
	return raw, nil
}

// widenError turns an error of Within into an *Error of class ErrWidens.
func widenError(link int, err error) *Error {
	detail := err.Error()
	if prefix := ErrWidens.Error() + ": "; len(detail) > len(prefix) && detail[:len(prefix)] == prefix {
		detail = detail[len(prefix):]
	}
	return &Error{Class: ErrWidens, Link: link, Detail: detail}
}
