// Package handoff seals and verifies the envelope that moves a live run
// from one cell to another (issue 14, part 5): a COSE_Sign1 (EdDSA) whose
// payload names the run, the source and destination cells, the audience,
// an expiry, a nonce, the lease epoch and journal head the source handed
// over, the previous envelope of the run, and the run's capability token,
// so that the run carries its authority.
//
// The destination verifies everything before it acquires the run's lease:
// the protected header first (algorithm, payload type, the signer's key
// id, which must be a trusted cell), then the signature, and only then
// does it parse the payload, and check audience, expiry, destination and
// the run's envelope chain (a Chain: replayed nonces refused, each
// envelope the last of its run's chain and naming the one before it).
//
// It never acquires a lease or reads a journal: the caller compares Epoch
// with the run's lease and Head and Token with the run's journal (ErrEpoch,
// ErrHead, ErrToken), then records the envelope's nonce (Chain.Accept),
// and only then acquires the lease.
package handoff

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/journal"
	"github.com/veraison/go-cose"
)

// ContentType is the protected typ header (label 16) of every handoff
// envelope. It keeps another COSE_Sign1 signed by a cell's key (a
// capability token link) from being taken for a handoff, and a handoff
// from being taken for one.
const ContentType = "application/agentrt-handoff+cbor"

// AudiencePrefix starts the audience of an envelope: it is followed by the
// destination cell's key in hex.
const AudiencePrefix = "agentrt-cell:"

// NonceSize is the length of an envelope's nonce.
const NonceSize = 16

// Payload is what an envelope carries.
type Payload struct {
	Run      journal.RunID `cbor:"1,keyasint"`
	From     []byte        `cbor:"2,keyasint"` // the source cell's key
	To       []byte        `cbor:"3,keyasint"` // the destination cell's key
	Audience string        `cbor:"4,keyasint"` // AudiencePrefix + hex(To)
	Expires  int64         `cbor:"5,keyasint"` // Unix ns
	Nonce    []byte        `cbor:"6,keyasint"`
	Epoch    uint64        `cbor:"7,keyasint"` // the source's lease epoch
	Head     []byte        `cbor:"8,keyasint"` // the journal's head hash
	Prev     []byte        `cbor:"9,keyasint,omitempty"`
	Token    []byte        `cbor:"10,keyasint"` // the run's capability token
}

// Errors of Verify, each for one reason an envelope is refused.
var (
	// ErrDecode: not a COSE_Sign1, or a payload that does not decode.
	ErrDecode = errors.New("handoff: malformed envelope")
	// ErrPayloadType: a COSE_Sign1 whose typ is not ContentType (a
	// capability token, say), or with another algorithm than EdDSA.
	ErrPayloadType = errors.New("handoff: not a handoff envelope")
	// ErrUntrusted: signed by a key that is not a trusted cell.
	ErrUntrusted = errors.New("handoff: signed by an untrusted cell")
	// ErrSignature: the signature does not verify (a changed byte).
	ErrSignature = errors.New("handoff: bad signature")
	// ErrAudience: the envelope is for another cell.
	ErrAudience = errors.New("handoff: envelope for another cell")
	// ErrExpired: past its expiry.
	ErrExpired = errors.New("handoff: envelope expired")
	// ErrReplayed: its nonce was accepted before, or it is not the last
	// envelope of its run's chain, or does not name the one before it.
	ErrReplayed = errors.New("handoff: envelope replayed")

	// The refusals of the destination's own checks, after Verify.

	// ErrEpoch: the run's lease is not the one the envelope hands over:
	// another epoch (a stale envelope: the run moved on since), or not
	// handed to this cell.
	ErrEpoch = errors.New("handoff: the run's lease is not the one the envelope hands over")
	// ErrHead: the journal's verified tail is not the head the envelope
	// names (entries added, lost or forked since it was sealed).
	ErrHead = errors.New("handoff: the journal's head is not the envelope's")
	// ErrToken: the envelope's capability token is not the one the run's
	// journal records in its header.
	ErrToken = errors.New("handoff: the envelope's capability token is not the run's")
	// ErrAdmission: the destination's scheduler does not admit the run
	// (its policy, its run budget, its queue full), as it would refuse a
	// submission of it.
	ErrAdmission = errors.New("handoff: the destination does not admit the run")
)

// Reasons names each refusal for the API and the logs, in the order
// Verify and the destination check them.
var Reasons = []struct {
	Name string
	Err  error
}{
	{"decode", ErrDecode},
	{"payload_type", ErrPayloadType},
	{"untrusted", ErrUntrusted},
	{"signature", ErrSignature},
	{"audience", ErrAudience},
	{"expired", ErrExpired},
	{"replayed", ErrReplayed},
	{"epoch", ErrEpoch},
	{"head", ErrHead},
	{"token", ErrToken},
	{"admission", ErrAdmission},
}

// Reason returns the name of the refusal err is (Reasons), "" for none.
func Reason(err error) string {
	for _, r := range Reasons {
		if errors.Is(err, r.Err) {
			return r.Name
		}
	}
	return ""
}

// Seal signs p as an envelope by the source cell key. It fills in From,
// Audience and a fresh Nonce.
func Seal(key ed25519.PrivateKey, p Payload) ([]byte, error) {
	p.From = key.Public().(ed25519.PublicKey)
	if len(p.To) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("handoff: destination key of %d bytes, want %d", len(p.To), ed25519.PublicKeySize)
	}
	p.Audience = AudiencePrefix + hex.EncodeToString(p.To)
	p.Nonce = make([]byte, NonceSize)
	if _, err := rand.Read(p.Nonce); err != nil {
		return nil, err
	}
	payload, err := abi.Marshal(&p)
	if err != nil {
		return nil, err
	}
	signer, err := cose.NewSigner(cose.AlgorithmEdDSA, key)
	if err != nil {
		return nil, err
	}
	msg := cose.Sign1Message{
		Headers: cose.Headers{Protected: cose.ProtectedHeader{
			cose.HeaderLabelAlgorithm: cose.AlgorithmEdDSA,
			cose.HeaderLabelType:      ContentType,
			cose.HeaderLabelKeyID:     []byte(p.From),
		}},
		Payload: payload,
	}
	if err := msg.Sign(rand.Reader, nil, signer); err != nil {
		return nil, err
	}
	return msg.MarshalCBOR()
}

// Options are what the destination verifies an envelope against.
type Options struct {
	// Self is the destination cell's key: the envelope must be for it.
	Self ed25519.PublicKey
	// Trusted are the cells whose envelopes it accepts.
	Trusted []ed25519.PublicKey
	// Now is the destination's clock.
	Now time.Time
	// Chain holds the runs' envelope chains and the nonces accepted.
	Chain *Chain
}

// Verify checks raw as described in the package comment and returns its
// payload. It writes nothing: the caller, once its own checks pass,
// records the envelope's nonce with o.Chain.Accept. An envelope refused
// after its signature verified is returned with the error, for the caller
// to name its run when it reports the refusal; nothing else of it may be
// acted on.
func Verify(ctx context.Context, raw []byte, o Options) (*Payload, error) {
	if o.Chain == nil || len(o.Self) != ed25519.PublicKeySize {
		return nil, errors.New("handoff: Verify needs the cell's key (Self) and its envelope chain (Chain)")
	}
	var msg cose.Sign1Message
	if err := msg.UnmarshalCBOR(raw); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDecode, err)
	}
	if alg, err := msg.Headers.Protected.Algorithm(); err != nil || alg != cose.AlgorithmEdDSA {
		return nil, fmt.Errorf("%w: algorithm %v, want EdDSA", ErrPayloadType, alg)
	}
	if typ, _ := msg.Headers.Protected[cose.HeaderLabelType].(string); typ != ContentType {
		return nil, fmt.Errorf("%w: payload type %q, want %q", ErrPayloadType, typ, ContentType)
	}
	kid, _ := msg.Headers.Protected[cose.HeaderLabelKeyID].([]byte)
	var from ed25519.PublicKey
	for _, k := range o.Trusted {
		if bytes.Equal(k, kid) {
			from = k
		}
	}
	if from == nil {
		return nil, fmt.Errorf("%w: key id %x", ErrUntrusted, kid)
	}
	verifier, err := cose.NewVerifier(cose.AlgorithmEdDSA, from)
	if err != nil {
		return nil, err
	}
	if err := msg.Verify(nil, verifier); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSignature, err)
	}
	var p Payload
	if err := abi.Unmarshal(msg.Payload, &p); err != nil {
		return nil, fmt.Errorf("%w: payload: %v", ErrDecode, err)
	}
	switch {
	case !bytes.Equal(p.From, from):
		return &p, fmt.Errorf("%w: signed by %x, the payload names %x as its source", ErrUntrusted, from, p.From)
	case !bytes.Equal(p.To, o.Self) || p.Audience != AudiencePrefix+hex.EncodeToString(o.Self):
		return &p, fmt.Errorf("%w: for %q, this cell is %s%x", ErrAudience, p.Audience, AudiencePrefix, []byte(o.Self))
	case o.Now.UnixNano() >= p.Expires:
		return &p, fmt.Errorf("%w: at %s", ErrExpired, time.Unix(0, p.Expires).UTC().Format(time.RFC3339Nano))
	case len(p.Nonce) != NonceSize:
		return &p, fmt.Errorf("%w: nonce of %d bytes", ErrDecode, len(p.Nonce))
	case len(p.Head) != sha256.Size || len(p.Token) == 0:
		return &p, fmt.Errorf("%w: a head of %d bytes, a token of %d", ErrDecode, len(p.Head), len(p.Token))
	}
	if err := o.Chain.check(ctx, &p, raw); err != nil {
		return &p, err
	}
	return &p, nil
}
