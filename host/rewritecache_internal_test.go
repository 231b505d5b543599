package host

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// rewriteWAT is host/testdata/wat/rewrite.wat as wat2wasm 1.0.32 assembles
// it, kept as bytes so that the pin below does not follow the machine's
// wabt.
const rewriteWAT = "0061736d01000000010e0360017f017f60000060017f017e03060500000001020404017000040503010001060b027f0141000b7000d2020b071402066d656d6f7279020007636f6d707574650004080103090c020041000b020001010001020a62050700200041026c0b0700200020006c0b0700200041016a0b0600410724000b4102017f017e410241004101fc0c01004103230126000340200220012001410470110000200110016a23006aad7c2102200141016a210120012000490d000b20020b"

// TestRewriteOutputIsPinned holds wasmModule.rewrite's output to digests
// taken when rewriteVersion was last bumped. Cells keep rewrites on disk
// under rewriteVersion (rewritecache.go): a rewrite that changes without
// a bump would have every cell compile what the old code wrote.
func TestRewriteOutputIsPinned(t *testing.T) {
	code, err := hex.DecodeString(rewriteWAT)
	if err != nil {
		t.Fatal(err)
	}
	m, err := readModule(code, DefaultCompileLimits())
	if err != nil {
		t.Fatal(err)
	}
	pinned := map[bool]string{
		false: "73e52ef1c9e5bc3b6aad37482db3b9688654b8240417bc39a09695440513d3f5",
		true:  "c786fa256c2ff65fdf1ce17d988c48e6d0f95a0a86fa9d08dc1808afcedb5e9a",
	}
	for _, instrument := range []bool{false, true} {
		out, err := m.rewrite(moduleLimits{memoryPages: 300, tableElements: 70000, tables: 4}, instrument)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(out)
		if got := hex.EncodeToString(sum[:]); got != pinned[instrument] {
			t.Errorf("rewrite (instrumented %t) writes other bytes than it did at rewriteVersion %d (SHA-256 %s, pinned %s): bump rewriteVersion in rewritecache.go, then pin the new digests here",
				instrument, rewriteVersion, got, pinned[instrument])
		}
	}
}
