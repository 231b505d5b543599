package replay

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/journal"
)

// ErrToken is the failure class of a bundle whose run header's capability
// token does not hold up offline (capability/SPEC.md, "Presentation and
// recording"): it does not verify against the trusted keys at the run's
// start with the recording cell as audience, it is not sealed (a cell
// never records a private key), or the grant the header records is not
// within it. The cell that recorded it signed a grant its token did not
// give.
var ErrToken = errors.New("token")

// checkToken verifies the capability token of the run's header, offline,
// and records in the report that it holds. The journal has been verified
// (sum is what it established): the header, the start entry's time
// (started) and the first seal's cell (cell) are the recording cell's. The
// keys trusted to issue tokens are the trusted cell keys and the
// auditor's token roots.
func (a *auditor) checkToken(sum *journal.Summary, started time.Time, cell ed25519.PublicKey) error {
	if err := checkToken(sum.Header, started, cell, append(slices.Clone(a.trusted), a.tokenRoots...)); err != nil {
		return err
	}
	a.rep.TokenValid = true
	return nil
}

func checkToken(hdr *journal.Header, started time.Time, cell ed25519.PublicKey, roots []ed25519.PublicKey) error {
	fail := func(format string, args ...any) error {
		return &AuditError{Class: ErrToken, HasSeq: true, Seq: 0, Err: fmt.Errorf(format, args...)}
	}
	if len(hdr.Token) == 0 {
		return fail("the run header records no capability token")
	}
	if cell == nil {
		return fail("no seal covers the start entry")
	}
	tok, err := capability.Parse(hdr.Token)
	if err != nil {
		return fail("the run header's capability token: %w", err)
	}
	if tok.Proof.Kind != capability.ProofSeal {
		return fail("the run header's capability token is not sealed (its proof is %s): a cell records tokens sealed, never a private key", tok.Proof.Kind)
	}
	v, err := capability.Verify(hdr.Token, roots, capability.Options{Now: started, Audience: cell})
	if err != nil {
		return fail("the run header's capability token, verified at the run's start (%s) for the recording cell %x: %w",
			started.UTC().Format(time.RFC3339), []byte(cell), err)
	}
	g, err := host.DecodeGrant(hdr.Grant)
	if err != nil {
		return fail("the run header's grant: %w", err)
	}
	if err := g.WithinToken(v.Claims); err != nil {
		return fail("the run header's grant is not within its capability token: %w", err)
	}
	return nil
}
