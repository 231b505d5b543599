package replay_test

import (
	"bytes"
	"crypto/ed25519"
	"testing"

	"github.com/agentrt/agentrt/replay"
)

// seedBundle is a small bundle of the right shape (its contents verify as
// nothing: DecodeBundle checks the shape only).
func seedBundle(t testing.TB) []byte {
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{3}, 32))
	b := &replay.Bundle{
		Format:     replay.BundleFormat,
		Module:     []byte("\x00asm\x01\x00\x00\x00"),
		Records:    [][]byte{{0x82, 0x41, 0x00, 0xf6}, {0x82, 0x41, 0x01, 0xf6}},
		Keys:       [][]byte{key.Public().(ed25519.PublicKey)},
		Checkpoint: []byte("agentrt.dev/run/00\n2\nAAAA\n\n— x AAAA\n"),
		Engine:     replay.EngineSettings{Engine: "wazero", ABI: 1, MaxRequest: 1 << 20},
	}
	if err := b.Sign(key); err != nil {
		t.Fatal(err)
	}
	data, err := b.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// FuzzDecodeBundle: hostile input never panics, and whatever decodes
// encodes back to exactly the input (the decoder accepts canonical
// bundles only). Counts and sizes are capped by the decoder's options
// before anything is allocated for them.
func FuzzDecodeBundle(f *testing.F) {
	seed := seedBundle(f)
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	f.Add([]byte{0xa7})
	f.Add([]byte{0xa1, 0x03, 0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}) // 2^64-1 records claimed
	f.Add([]byte{0xa1, 0x02, 0x5b, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}) // a huge module claimed
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := replay.DecodeBundle(data)
		if err != nil {
			if replay.Class(err) != "bundle-format" {
				t.Fatalf("error of class %q: %v", replay.Class(err), err)
			}
			return
		}
		again, err := b.Marshal()
		if err != nil || !bytes.Equal(again, data) {
			t.Fatalf("decoded bundle re-encodes to other bytes (%v)", err)
		}
	})
}

func TestDecodeBundleRefuses(t *testing.T) {
	seed := seedBundle(t)
	if _, err := replay.DecodeBundle(seed); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"empty":            nil,
		"truncated":        seed[:len(seed)-1],
		"trailing garbage": append(bytes.Clone(seed), 0),
		"huge count":       {0xa1, 0x03, 0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		"not canonical":    append([]byte{0xb8, 0x07}, seed[1:]...), // map length in a long head
	} {
		if _, err := replay.DecodeBundle(data); replay.Class(err) != "bundle-format" {
			t.Errorf("%s: %v, want a bundle-format error", name, err)
		}
	}
}
