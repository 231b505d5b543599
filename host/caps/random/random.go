// Package random is the random capability (agentrt:random): real random
// bytes, on explicit request.
//
//	random.bytes (abi.RandomBytesRequest) -> abi.RandomBytesResponse   pure, journaled
//
// WASI random_get is a stream seeded by the run seed; this op is how an
// agent asks for entropy the seed does not determine (a key, a nonce).
// Errors: StatusBadRequest for a malformed request, StatusTooLarge above
// 64 KiB, StatusFailed when the entropy source fails.
//
// The grant section is random: {} (Grant); the policy sees the context
// attribute n (the bytes asked). It needs the host's entropy (Deps.Rand).
package random

import (
	"context"
	"io"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host/caps"
)

// MaxBytes is the most bytes one random.bytes call returns.
const MaxBytes = 64 << 10

// Grant allows reading real random bytes. It has no members.
type Grant struct{}

// Check accepts the empty section.
func (*Grant) Check() error { return nil }

// Token sets the random capability of a token.
func (*Grant) Token(c *capability.Caps) error { c.Random = &capability.Unit{}; return nil }

// CheckToken has nothing beyond Within to check.
func (*Grant) CheckToken(capability.Caps) error { return nil }

// Deps is what the capability needs from its host.
type Deps struct {
	// Rand is the real entropy.
	Rand io.Reader
}

// Capability is the random capability, as the host registers it.
type Capability struct{}

// Cap names the capability.
func (Capability) Cap() abi.Capability { return abi.CapRandom }

// FromToken grants random: {} when the token's claims do.
func (Capability) FromToken(c capability.Caps) (*Grant, error) {
	if c.Random == nil {
		return nil, nil
	}
	return &Grant{}, nil
}

// Open returns the run's entropy source.
func (Capability) Open(_ *Grant, d Deps, _ *caps.Run) (caps.Instance, error) {
	return &instance{rand: d.Rand}, nil
}

type instance struct{ rand io.Reader }

func (in *instance) Handler(op abi.Op) caps.Handler {
	if op.Code != abi.OpRandomBytes {
		return caps.Handler{}
	}
	return caps.Handler{Serve: in.serveBytes}
}

func (in *instance) serveBytes(_ context.Context, c *caps.Call) (abi.Status, []byte) {
	var r abi.RandomBytesRequest
	if st, b, ok := caps.Decode(c, &r); !ok {
		return st, b
	}
	if r.N > MaxBytes {
		return caps.Error(abi.StatusTooLarge, "random.bytes: %d bytes asked, at most %d", r.N, MaxBytes)
	}
	buf := make([]byte, r.N)
	if _, err := io.ReadFull(in.rand, buf); err != nil {
		return caps.Error(abi.StatusFailed, "random.bytes: %v", err)
	}
	return caps.OK(&abi.RandomBytesResponse{Bytes: buf})
}

// Facts gives the policy the number of bytes asked.
func (*instance) Facts(c *caps.Call) (caps.Facts, error) {
	var r abi.RandomBytesRequest
	if err := abi.Unmarshal(c.Request, &r); err != nil {
		return caps.Facts{}, err
	}
	return caps.Facts{Attrs: []caps.Fact{{Name: "n", Num: int64(r.N), Kind: caps.FactNumber}}}, nil
}

func (*instance) Idempotent(*caps.Call) bool { return false }
func (*instance) Close()                     {}
