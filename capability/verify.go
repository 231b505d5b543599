package capability

import (
	"bytes"
	"crypto/ed25519"
	"slices"
	"time"

	"github.com/veraison/go-cose"
)

// Options says who verifies, when, and how strictly.
type Options struct {
	// Now is the verifier's time; the zero time means time.Now().
	Now time.Time
	// Audience is the verifying cell's public key. A token bound to
	// another cell, or to any cell when Audience is nil, fails with
	// ErrAudience unless IgnoreAudience is set.
	Audience ed25519.PublicKey
	// IgnoreAudience skips the audience check, for tools that inspect a
	// token rather than act on it. A cell never sets it.
	IgnoreAudience bool
	// MaxDepth is the deepest link accepted (the root is depth 0);
	// 0 means DefaultMaxDepth. It cannot exceed MaxLinks-1.
	MaxDepth int
	// Nonces, when set, records the token's identity (its leaf's issuer
	// and nonce) until it expires and refuses a token seen before. Set it
	// where a token is presented to a cell to start work, so that a
	// captured token cannot be presented twice.
	Nonces NonceCache
	// Accept, when set, is called with the verified token after every
	// check of Verify and before its nonce is recorded: a cell checks there
	// what it adds (the ceilings it enforces, the grant file given with the
	// token). An error refuses the token, records nothing and is returned
	// as it is, so that a token refused for a fixable reason can be
	// presented again.
	Accept func(*Verified) error
}

// Verified is the outcome of a successful Verify.
type Verified struct {
	// Claims are the effective claims: the leaf's, which are within every
	// link above it.
	Claims Claims
	// Root is the trusted key that signed the root link.
	Root ed25519.PublicKey
	// Links are every link's claims, root first.
	Links []Claims
	// Proof is how the presenter proved it holds the leaf: ProofKey or
	// ProofSeal.
	Proof ProofKind
}

// Verify checks token against the trusted root keys and returns the
// effective claims, or an *Error whose Class says why it failed (see the
// package comment for the order of the checks), or the error of
// opts.Accept. It is a pure function of its arguments, except for what
// opts.Nonces records and opts.Accept does.
func Verify(token []byte, roots []ed25519.PublicKey, opts Options) (*Verified, error) {
	maxDepth := opts.MaxDepth
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	maxDepth = min(maxDepth, MaxLinks-1)
	w, err := decodeToken(token)
	if err != nil {
		return nil, err
	}
	raws := w.links
	if len(raws)-1 > maxDepth {
		return nil, fail(ErrDepth, maxDepth+1, "%d links; this verifier accepts depth %d at most", len(raws), maxDepth)
	}
	t := &Token{Links: make([]Link, len(raws)), Proof: w.proof, links: w.linksRaw}
	v := &Verified{Links: make([]Claims, 0, len(raws))}
	var parent *Link
	for i, raw := range raws {
		l := &t.Links[i]
		if err := parseLink(i, raw, l); err != nil {
			return nil, err
		}
		c := &l.Claims
		if c.Depth != i {
			return nil, fail(ErrBrokenChain, i, "the link states depth %d at index %d", c.Depth, i)
		}
		var key ed25519.PublicKey
		if parent == nil {
			if !slices.ContainsFunc(roots, func(k ed25519.PublicKey) bool { return bytes.Equal(k, c.Issuer) }) {
				return nil, fail(ErrUntrustedRoot, i, "issuer %x is not a trusted root", []byte(c.Issuer))
			}
			key, v.Root = c.Issuer, c.Issuer
		} else {
			if !bytes.Equal(c.Parent, parent.Hash()) {
				return nil, fail(ErrBrokenChain, i, "parent hash %x is not the hash of link %d", c.Parent, i-1)
			}
			if !bytes.Equal(c.Issuer, parent.Claims.Subject) {
				return nil, fail(ErrBrokenChain, i, "issuer %x is not link %d's subject", []byte(c.Issuer), i-1)
			}
			key = parent.Claims.Subject
		}
		if err := verifySignature(l, key); err != nil {
			return nil, fail(ErrSignature, i, "%v", err)
		}
		if parent != nil {
			if err := c.Within(parent.Claims); err != nil {
				return nil, widenError(i, err)
			}
		}
		v.Links = append(v.Links, *c)
		parent = l
	}
	leaf := len(raws) - 1
	// The proof binds the presentation to the leaf: without it, dropping
	// the last links would leave a valid token of wider rights.
	if err := t.checkProof(leaf); err != nil {
		return nil, err
	}
	v.Claims, v.Proof = v.Links[leaf], t.Proof.Kind
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	// Windows are whole seconds: valid from NotBefore, until Expires.
	if now.Unix() < v.Claims.NotBefore.Unix() {
		return nil, fail(ErrNotYetValid, leaf, "valid from %s, now is %s", stamp(v.Claims.NotBefore), stamp(now))
	}
	if now.Unix() >= v.Claims.Expires.Unix() {
		return nil, fail(ErrExpired, leaf, "expired at %s, now is %s", stamp(v.Claims.Expires), stamp(now))
	}
	if !opts.IgnoreAudience && v.Claims.Audience != nil && !bytes.Equal(v.Claims.Audience, opts.Audience) {
		return nil, fail(ErrAudience, leaf, "the token is for cell %x", []byte(v.Claims.Audience))
	}
	if opts.Accept != nil {
		if err := opts.Accept(v); err != nil {
			return nil, err
		}
	}
	if opts.Nonces != nil {
		id := append(slices.Clip(v.Claims.Issuer), v.Claims.Nonce...)
		seen, err := opts.Nonces.CheckAndRecord(id, v.Claims.Expires, now)
		if err != nil {
			return nil, fail(ErrReplay, leaf, "the nonce cache refused the token: %v", err)
		}
		if seen {
			return nil, fail(ErrReplay, leaf, "nonce %x was presented before", v.Claims.Nonce)
		}
	}
	return v, nil
}

// verifySignature checks l's COSE_Sign1 signature under key, through
// go-cose with the exact protected bytes the link carries.
func verifySignature(l *Link, key ed25519.PublicKey) error {
	verifier, err := cose.NewVerifier(cose.AlgorithmEdDSA, key)
	if err != nil {
		return err
	}
	// go-cose wants the protected header as it appears in the message: a
	// byte string wrapping the header map.
	rawProtected, err := encMode.Marshal(l.protected)
	if err != nil {
		return err
	}
	msg := cose.UntaggedSign1Message{
		Headers: cose.Headers{
			RawProtected: rawProtected,
			Protected:    cose.ProtectedHeader{cose.HeaderLabelAlgorithm: cose.AlgorithmEdDSA, cose.HeaderLabelType: ContentType},
		},
		Payload:   l.payload,
		Signature: l.signature,
	}
	return msg.Verify(nil, verifier)
}
