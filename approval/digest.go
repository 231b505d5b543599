package approval

import (
	"crypto/sha256"

	"github.com/fxamacker/cbor/v2"
)

// DigestDomain is the first element of the array ActionDigest hashes: it
// keeps an action digest from ever equalling a hash made for another
// purpose, and names the version of the construction.
const DigestDomain = "agentrt-approval-action/1"

var (
	encMode cbor.EncMode
	decMode cbor.DecMode
)

func init() {
	var err error
	encMode, err = cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		panic(err)
	}
	decMode, err = cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		IndefLength:       cbor.IndefLengthForbidden,
		TagsMd:            cbor.TagsForbidden,
		MaxNestedLevels:   8,
		MaxArrayElements:  maxItems,
		MaxMapPairs:       maxItems,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
		UTF8:              cbor.UTF8RejectInvalid,
	}.DecMode()
	if err != nil {
		panic(err)
	}
}

// ActionDigest is what a vote is bound to: SHA-256 over the canonical CBOR
// (RFC 8949 core deterministic encoding) of the array
//
//	["agentrt-approval-action/1", op, request, run, step]
//
// where request is the call's canonical request bytes as the guest sent
// them (a byte string, empty when there are none), run the run id (a
// 16-byte byte string) and step the call's step (an unsigned integer). A
// vote for one call therefore never counts for another call, another run
// or the same call with other arguments.
func ActionDigest(op string, request []byte, run [16]byte, step uint64) [32]byte {
	if request == nil {
		request = []byte{}
	}
	b, err := encMode.Marshal([]any{DigestDomain, op, request, run[:], step})
	if err != nil {
		panic("approval: encoding the action digest's array: " + err.Error()) // strings, bytes and an integer always encode
	}
	return sha256.Sum256(b)
}
