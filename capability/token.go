package capability

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/veraison/go-cose"
)

// Issue returns a new token of one link, the root, stating c and signed by
// root. Issue sets c.Issuer to root's public key; a nil c.Subject makes root
// its own subject (the issuer keeps the right to attenuate); a nil c.Nonce
// is drawn at random. NotBefore and Expires are required and are kept to
// the second.
func Issue(root ed25519.PrivateKey, c Claims) ([]byte, error) {
	if c.NotBefore.IsZero() || c.Expires.IsZero() {
		return nil, fmt.Errorf("capability token: a root link needs both a not-before and an expiry time")
	}
	c.Issuer = root.Public().(ed25519.PublicKey)
	if c.Subject == nil {
		c.Subject = c.Issuer
	}
	c.Parent, c.Depth = nil, 0
	raw, err := signLink(root, c)
	if err != nil {
		return nil, err
	}
	return encMode.Marshal([]cbor.RawMessage{raw})
}

// Attenuate returns token with one more link, stating c and signed by
// holder, which must be the key the token's last link names as subject.
// The new link must be within the last one (ErrWidens otherwise). For
// convenience, what c leaves unset is taken from the last link: a nil
// Audience, zero NotBefore or Expires, and each nil budget ceiling. The
// capabilities are not: c.Caps is exactly what the new link allows. A nil
// c.Subject makes holder the subject again; a nil c.Nonce is drawn at
// random.
//
// Attenuate checks the token's encoding but not its signatures; a verifier
// does that.
func Attenuate(token []byte, holder ed25519.PrivateKey, c Claims) ([]byte, error) {
	t, err := Parse(token)
	if err != nil {
		return nil, err
	}
	leaf := t.Leaf().Claims
	next := len(t.Links)
	pub := holder.Public().(ed25519.PublicKey)
	if !bytes.Equal(pub, leaf.Subject) {
		return nil, fail(ErrBrokenChain, next, "the signing key is not the subject of link %d, so it cannot attenuate the token", next-1)
	}
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
	if c.Subject == nil {
		c.Subject = pub
	}
	c.Issuer, c.Parent, c.Depth = pub, t.Leaf().Hash(), next
	c.Caps.Normalize()
	c.NotBefore, c.Expires = c.NotBefore.Truncate(time.Second), c.Expires.Truncate(time.Second)
	if err := c.Within(leaf); err != nil {
		return nil, widenError(next, err)
	}
	raw, err := signLink(holder, c)
	if err != nil {
		return nil, err
	}
	raws := make([]cbor.RawMessage, 0, next+1)
	for _, l := range t.Links {
		raws = append(raws, l.Raw)
	}
	return encMode.Marshal(append(raws, raw))
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
