package replay_test

import (
	"bytes"
	"crypto/ed25519"
	"slices"
	"testing"

	"github.com/agentrt/agentrt/journal"
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
	f.Add(withBlobs(f, seed, []byte("one blob"), []byte("another")))
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

// withBlobs returns the bundle seed with blobs in key 8, sorted by hash.
func withBlobs(t testing.TB, seed []byte, blobs ...[]byte) []byte {
	b, err := replay.DecodeBundle(seed)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range blobs {
		bl := journal.NewBlob(d)
		b.Blobs = append(b.Blobs, replay.BundleBlob{Sum: bl.Sum, Data: bl.Data})
	}
	slices.SortFunc(b.Blobs, func(x, y replay.BundleBlob) int { return bytes.Compare(x.Sum, y.Sum) })
	data, err := b.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestDecodeBundleBlobList: key 8 decodes to its blobs, re-encodes to the
// same bytes, and is refused out of order, repeated, with a short hash,
// an empty blob or empty.
func TestDecodeBundleBlobList(t *testing.T) {
	seed := seedBundle(t)
	data := withBlobs(t, seed, []byte("one blob"), []byte("another"))
	b, err := replay.DecodeBundle(data)
	if err != nil || len(b.Blobs) != 2 {
		t.Fatalf("%v, %d blobs", err, len(b.Blobs))
	}
	if again, _ := b.Marshal(); !bytes.Equal(again, data) {
		t.Fatal("a bundle with blobs does not re-encode to its bytes")
	}
	edit := func(f func(b *replay.Bundle)) []byte {
		b, _ := replay.DecodeBundle(data)
		f(b)
		out, err := b.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	for name, bad := range map[string][]byte{
		"unsorted":   edit(func(b *replay.Bundle) { b.Blobs[0], b.Blobs[1] = b.Blobs[1], b.Blobs[0] }),
		"repeated":   edit(func(b *replay.Bundle) { b.Blobs[1] = b.Blobs[0] }),
		"short hash": edit(func(b *replay.Bundle) { b.Blobs[0].Sum = b.Blobs[0].Sum[:31] }),
		"empty blob": edit(func(b *replay.Bundle) { b.Blobs[0].Data = []byte{} }),
		"empty list": append(append([]byte{0xa8}, seed[1:]...), 0x08, 0x80),
	} {
		if _, err := replay.DecodeBundle(bad); replay.Class(err) != "bundle-format" {
			t.Errorf("%s: %v, want a bundle-format error", name, err)
		}
	}
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
