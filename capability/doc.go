// Package capability issues, attenuates, seals and verifies capability
// tokens: the signed ceiling of what a run may do.
//
// A token is a chain of COSE_Sign1 delegation certificates (links) and a
// proof of possession. The root link is signed by a trusted key (a cell's
// key) and names a subject key; each further link is signed by its parent's
// subject and may only narrow what its parent allows: fewer capabilities and
// resources, each tool bound to the same declaration digest, lower budget
// ceilings, a shorter time window, the same or a narrower audience. The
// proof is the leaf subject's private key (which lets its holder attenuate
// or seal the token) or its seal, a signature over all the links: a token
// with links dropped carries a proof for a link it no longer has. SPEC.md
// is the normative description of the format and the rules.
//
// Verification is offline and fails closed. After the token as a whole
// (ErrDecode, ErrNonCanonical, ErrVersion, and ErrDepth against the
// verifier's MaxDepth), each link is checked, root first:
//
//  1. it decodes as canonical CBOR (ErrDecode, ErrNonCanonical);
//  2. its protected header has no crit parameter (ErrCriticalHeader) and
//     names EdDSA (ErrAlgorithm);
//  3. its claims are of this version (ErrVersion), decode and are
//     canonical (ErrDecode, ErrNonCanonical);
//  4. its depth is its index, and a later link names the previous one's
//     hash as parent and its subject as issuer (ErrBrokenChain); the root's
//     issuer is a trusted root (ErrUntrustedRoot);
//  5. the signature verifies under the issuer's key (ErrSignature);
//  6. a later link is within the previous one (ErrWidens).
//
// Then the proof must be for the leaf (ErrNoProof, ErrProof), and the
// leaf, whose claims are the effective ones, is checked against the
// verifier's clock, identity and nonce cache (ErrNotYetValid, ErrExpired,
// ErrAudience, ErrReplay).
//
// The package reads no key file and no network, and the clock only when
// Options.Now is left zero: the caller passes the keys, the time and the
// token bytes. It must never import the host: the host maps the verified
// Claims onto its own grant, and converts its tool declarations to
// ToolDecl to compute their digests.
package capability
