package abi

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/fxamacker/cbor/v2"
)

// Limits every decoder of this package applies to hostile input.
const (
	// MaxRequest is the default largest request body the host accepts.
	MaxRequest = 1 << 20
	maxNested  = 16
	maxItems   = 1 << 16
)

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
		MaxNestedLevels:   maxNested,
		MaxArrayElements:  maxItems,
		MaxMapPairs:       maxItems,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
		UTF8:              cbor.UTF8RejectInvalid,
	}.DecMode()
	if err != nil {
		panic(err)
	}
}

// ErrNotCanonical is returned by Unmarshal when the bytes decode but are not
// the deterministic encoding of the value they hold.
var ErrNotCanonical = errors.New("cbor: not in canonical (core deterministic) form")

// Marshal returns the canonical CBOR encoding of v (RFC 8949 section 4.2.1,
// core deterministic encoding).
func Marshal(v any) ([]byte, error) { return encMode.Marshal(v) }

// DecodeStrict decodes data into v with every check of Unmarshal but the
// canonical one: it rejects duplicate keys, unknown fields, indefinite
// lengths, tags, invalid UTF-8, trailing bytes, values of the wrong type and
// empty input. It exists for packages whose hand-written encoders re-encode
// faster than Marshal does.
//
// Callers MUST check canonicity themselves, by re-encoding v with an encoder
// that writes exactly what Marshal writes and requiring the bytes to equal
// data (returning ErrNotCanonical otherwise); without that check a decoder
// accepts long-form heads, unsorted keys and zero values that the canonical
// form omits.
func DecodeStrict(data []byte, v any) error { return decMode.Unmarshal(data, v) }

// Unmarshal decodes canonical CBOR into v, which must point to a zero value
// (an empty buffer leaves it so, and the canonical check re-encodes it). It rejects duplicate keys, unknown fields, indefinite lengths,
// tags, trailing bytes and any encoding that is not canonical.
func Unmarshal(data []byte, v any) error {
	if len(data) == 0 {
		return nil
	}
	if err := decMode.Unmarshal(data, v); err != nil {
		return err
	}
	again, err := encMode.Marshal(v)
	if err != nil {
		return fmt.Errorf("cbor: re-encode: %w", err)
	}
	if !bytes.Equal(again, data) {
		return ErrNotCanonical
	}
	return nil
}
