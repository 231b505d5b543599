package capability

import (
	"errors"
	"fmt"
)

// The classes of verification failure. Verify, Parse and Attenuate return
// an *Error whose Class is one of these; test with errors.Is.
var (
	// ErrDecode is returned when a token or one of its links is not
	// well-formed CBOR of the specified shape: wrong types, a missing or
	// unknown field, a duplicate map key, a tag, trailing bytes, a
	// detached payload, a non-empty unprotected header, a wrong content
	// type, a bad key or nonce length, or a token over MaxTokenSize.
	ErrDecode = errors.New("malformed token")
	// ErrNonCanonical is returned when a link decodes but its bytes are not
	// the deterministic encoding of what they hold (long-form heads,
	// unsorted map keys, indefinite lengths, unsorted or repeated list
	// entries): two encodings of one link would have two hashes.
	ErrNonCanonical = errors.New("not canonical CBOR")
	// ErrAlgorithm is returned when a link's protected header names an
	// algorithm other than EdDSA, or none.
	ErrAlgorithm = errors.New("algorithm not allowed")
	// ErrCriticalHeader is returned when a link's protected header has a
	// crit parameter: this version understands no critical extension.
	ErrCriticalHeader = errors.New("unknown critical header")
	// ErrDepth is returned when a chain has more links than the verifier's
	// MaxDepth allows (or than MaxLinks).
	ErrDepth = errors.New("chain too deep")
	// ErrBrokenChain is returned when a link's parent hash is not the hash
	// of the link before it (spliced, reordered or dropped links), its
	// depth is not its index, or its issuer is not its parent's subject.
	ErrBrokenChain = errors.New("broken chain")
	// ErrUntrustedRoot is returned when the root link's issuer is not one
	// of the trusted root keys.
	ErrUntrustedRoot = errors.New("untrusted root")
	// ErrSignature is returned when a link's signature does not verify
	// under its issuer's key.
	ErrSignature = errors.New("bad signature")
	// ErrWidens is returned when a link allows something its parent does
	// not: a capability, a resource, a budget ceiling, time or audience.
	ErrWidens = errors.New("widens its parent")
	// ErrNotYetValid is returned when the verifier's time is before the
	// token's not-before.
	ErrNotYetValid = errors.New("not yet valid")
	// ErrExpired is returned when the verifier's time is at or after the
	// token's expiry.
	ErrExpired = errors.New("expired")
	// ErrAudience is returned when the token is bound to another cell than
	// the verifier's.
	ErrAudience = errors.New("wrong audience")
	// ErrReplay is returned when the token's nonce was presented before
	// (or the nonce cache refuses to record it).
	ErrReplay = errors.New("replayed")
	// ErrVersion is returned for a token or a link of another format
	// version than Version, such as a version 1 token (a bare chain of
	// links, which had no proof of possession).
	ErrVersion = errors.New("unsupported version")
	// ErrNoProof is returned by Verify for a token that carries no proof
	// of possession: it names a subject key held elsewhere, whose holder
	// must seal it (Seal) or attenuate it before it can be presented.
	ErrNoProof = errors.New("no proof of possession")
	// ErrProof is returned by Verify when the token's proof does not match
	// its leaf: a carried key that is not the leaf's subject, or a seal
	// that is not the leaf subject's signature over exactly these links.
	// A truncated token fails so: its new leaf names a key the presenter
	// does not hold.
	ErrProof = errors.New("bad proof of possession")
)

// ErrSealed is returned by Attenuate and Seal for a token that is sealed
// already: a seal ends delegation, so nothing can be appended to it.
var ErrSealed = errors.New("capability token: the token is sealed (a sealed token can be presented but not attenuated or sealed again)")

// Error is a failed verification: its class, the link at fault (-1 for the
// token as a whole) and what exactly is wrong.
type Error struct {
	Class  error
	Link   int
	Detail string
}

func (e *Error) Error() string {
	if e.Link < 0 {
		return fmt.Sprintf("capability token: %v: %s", e.Class, e.Detail)
	}
	return fmt.Sprintf("capability token: link %d: %v: %s", e.Link, e.Class, e.Detail)
}

// Unwrap returns the class.
func (e *Error) Unwrap() error { return e.Class }

func fail(class error, link int, format string, args ...any) *Error {
	return &Error{Class: class, Link: link, Detail: fmt.Sprintf(format, args...)}
}
