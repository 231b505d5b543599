package approval

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"math"
	"time"
)

// Principal is one who asked for an approval: a key, a name, or both. Under
// the two-person rule no member matching a requester (by key or by name)
// may approve.
type Principal struct {
	Name string            `cbor:"1,keyasint,omitempty"`
	Key  ed25519.PublicKey `cbor:"2,keyasint,omitempty"`
}

// Request is what was asked: it is journaled on the parked call's intent,
// with the group and the rule as they stood, so that a later change to the
// cell's configuration changes no decision and an auditor needs nothing
// else.
type Request struct {
	Run   [16]byte `cbor:"1,keyasint"`
	Step  uint64   `cbor:"2,keyasint"`
	Op    string   `cbor:"3,keyasint"`
	Group string   `cbor:"4,keyasint"`
	// Digest is the call's ActionDigest, 32 bytes.
	Digest []byte `cbor:"5,keyasint"`
	// Rule is the rule as it applied.
	Rule Rule `cbor:"6,keyasint"`
	// Members is the group at request time, in file order.
	Members []Member `cbor:"7,keyasint"`
	// Requesters are the principals who asked (the two-person rule).
	Requesters []Principal `cbor:"8,keyasint,omitempty"`
	// Asked is when the request was made, Unix nanoseconds.
	Asked int64 `cbor:"9,keyasint"`
	// Expires is when a pending request is denied, Unix nanoseconds; 0 is
	// never.
	Expires int64 `cbor:"10,keyasint,omitempty"`
}

// Vote is one signed statement as the cell received it.
type Vote struct {
	// Statement is the statement's text (ParseStatement).
	Statement []byte `cbor:"1,keyasint"`
	// Signature is its armored SSH signature (Verify).
	Signature []byte `cbor:"2,keyasint"`
	// At is when the cell received it, Unix nanoseconds.
	At int64 `cbor:"3,keyasint"`
}

// Decision is how a request ended.
type Decision struct {
	Approved bool   `cbor:"1,keyasint,omitempty"`
	Reason   string `cbor:"2,keyasint"`
	// At is when the cell decided, Unix nanoseconds.
	At int64 `cbor:"3,keyasint"`
}

// Record is an approval as the journal carries it: the request, every vote
// received in order, and the decision once there is one.
type Record struct {
	Request  Request   `cbor:"1,keyasint"`
	Votes    []Vote    `cbor:"2,keyasint,omitempty"`
	Decision *Decision `cbor:"3,keyasint,omitempty"`
}

// NewRequest returns the request for a call of op with the given request
// bytes, at run and step, to group under rule, made by requesters at asked
// (Unix ns); Expires follows from the rule. It refuses what Check refuses.
func NewRequest(op string, request []byte, run [16]byte, step uint64, g *Group, rule Rule, requesters []Principal, asked int64) (*Request, error) {
	d := ActionDigest(op, request, run, step)
	r := &Request{Run: run, Step: step, Op: op, Group: g.Name, Digest: d[:], Rule: rule,
		Members: append([]Member(nil), g.Members...), Requesters: append([]Principal(nil), requesters...), Asked: asked}
	r.Expires, _ = expiry(asked, rule.Expires)
	if err := r.Check(); err != nil {
		return nil, err
	}
	return r, nil
}

// Check refuses a request that could not be decided as its rule says: a
// bad op or group name, a digest that is not 32 bytes, a requester with
// neither name nor key, a two-person rule with no requester (it could not
// be enforced), members with bad or
// repeated names or keys, a quorum below 1 or above what the members
// (less the requesters, under the two-person rule) can reach, an Expires
// other than Asked plus the rule's expiry (0 when the rule has none).
func (r *Request) Check() error {
	if err := checkOp(r.Op); err != nil {
		return fmt.Errorf("approval request: %w", err)
	}
	if err := checkGroupName(r.Group); err != nil {
		return fmt.Errorf("approval request: %w", err)
	}
	if len(r.Digest) != 32 {
		return fmt.Errorf("approval request: a digest of %d bytes, want 32", len(r.Digest))
	}
	for i, p := range r.Requesters {
		if p.Name == "" && len(p.Key) == 0 {
			return fmt.Errorf("approval request: requester %d has neither a name nor a key", i)
		}
		if len(p.Key) != 0 && len(p.Key) != ed25519.PublicKeySize {
			return fmt.Errorf("approval request: requester %d: a key of %d bytes, want %d", i, len(p.Key), ed25519.PublicKeySize)
		}
	}
	if r.Rule.TwoPerson && len(r.Requesters) == 0 {
		return fmt.Errorf("approval request: the two-person rule applies, but the request names no requester it could keep from approving")
	}
	names, keys := map[string]bool{}, map[string]bool{}
	eligible := 0
	for i, m := range r.Members {
		if err := checkName(m.Name); err != nil {
			return fmt.Errorf("approval request: member %d: %w", i, err)
		}
		if len(m.Key) != ed25519.PublicKeySize {
			return fmt.Errorf("approval request: member %d (%s): a key of %d bytes, want %d", i, m.Name, len(m.Key), ed25519.PublicKeySize)
		}
		if names[m.Name] || keys[string(m.Key)] {
			return fmt.Errorf("approval request: member %d (%s) repeats a name or a key", i, m.Name)
		}
		names[m.Name], keys[string(m.Key)] = true, true
		if !r.Rule.TwoPerson || !r.isRequester(m) {
			eligible++
		}
	}
	if err := reachable(r.Rule, len(r.Members)); err != nil {
		return fmt.Errorf("approval request: %w", err)
	}
	if r.Rule.Quorum > eligible {
		return fmt.Errorf("approval request: quorum %d, but the two-person rule leaves %d of the %d members who may approve", r.Rule.Quorum, eligible, len(r.Members))
	}
	if r.Rule.Expires < 0 {
		return fmt.Errorf("approval request: a negative expiry (%s)", r.Rule.Expires)
	}
	if want, ok := expiry(r.Asked, r.Rule.Expires); !ok || r.Expires != want {
		return fmt.Errorf("approval request: it expires at %d, but asked at %d under a rule of %s it expires at %d", r.Expires, r.Asked, r.Rule.Expires, want)
	}
	return nil
}

// expiry returns when a request asked at asked expires under an expiry of
// d (0: never), and false when that is past the largest time.
func expiry(asked int64, d time.Duration) (int64, bool) {
	if d <= 0 {
		return 0, d == 0
	}
	if asked > math.MaxInt64-int64(d) {
		return 0, false
	}
	return asked + int64(d), true
}

// isRequester reports whether m is one of the request's principals, by key
// or by name.
func (r *Request) isRequester(m Member) bool {
	for _, p := range r.Requesters {
		if (len(p.Key) > 0 && bytes.Equal(p.Key, m.Key)) || (p.Name != "" && p.Name == m.Name) {
			return true
		}
	}
	return false
}

// ErrNotCanonical is returned by DecodeRecord for bytes that decode but
// are not the canonical encoding of the record they hold.
var ErrNotCanonical = errors.New("approval record: not in canonical CBOR form")

// EncodeRecord returns the canonical CBOR (core deterministic) encoding of
// r, the bytes the journal carries.
func EncodeRecord(r *Record) ([]byte, error) {
	b, err := encMode.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("approval record: %w", err)
	}
	return b, nil
}

// DecodeRecord reads a record written by EncodeRecord, strictly: unknown
// fields, duplicate keys, tags, indefinite lengths, invalid UTF-8,
// trailing bytes and any encoding but the canonical one are refused
// (ErrNotCanonical for the last). It does not judge the votes: Evaluate
// and Verify do.
func DecodeRecord(b []byte) (*Record, error) {
	var r Record
	if err := decMode.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("approval record: %w", err)
	}
	again, err := encMode.Marshal(&r)
	if err != nil {
		return nil, fmt.Errorf("approval record: re-encode: %w", err)
	}
	if !bytes.Equal(again, b) {
		return nil, ErrNotCanonical
	}
	return &r, nil
}
