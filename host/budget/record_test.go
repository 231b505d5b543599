package budget

import (
	"encoding/hex"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
)

// The records of one model call, as journal/SPEC.md's example shows them.
var (
	exampleReserve = Op{Kind: OpReserve, ID: 1, Step: 3, Amounts: Amounts{ModelCalls: 1, InputTokens: 1200, OutputTokens: 800, MicroUSD: 5100}}
	exampleSettle  = Op{Kind: OpSettle, ID: 1, Amounts: Amounts{ModelCalls: 1, InputTokens: 1180, OutputTokens: 212, MicroUSD: 2716}}
)

const (
	// [{"id": 1, "op": "reserve", "step": 3, "amounts": {"micro_usd": 5100,
	// "model_calls": 1, "input_tokens": 1200, "output_tokens": 800}}]: keys in
	// the order of their encodings, shorter first.
	exampleReserveHex = "81a462696401626f70677265736572766564737465700367616d6f756e7473a4696d6963726f5f7573641913ec6b6d6f64656c5f63616c6c73016c696e7075745f746f6b656e731904b06d6f75747075745f746f6b656e73190320"
	exampleSettleHex  = "81a362696401626f7066736574746c6567616d6f756e7473a4696d6963726f5f757364190a9c6b6d6f64656c5f63616c6c73016c696e7075745f746f6b656e7319049c6d6f75747075745f746f6b656e7318d4"
)

func TestRecordEncoding(t *testing.T) {
	for _, tc := range []struct {
		op  Op
		hex string
	}{{exampleReserve, exampleReserveHex}, {exampleSettle, exampleSettleHex}} {
		b, err := EncodeRecord(tc.op)
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(b); got != tc.hex {
			t.Errorf("%s encodes as\n%s\nwant\n%s", tc.op, got, tc.hex)
		}
		ops, err := DecodeRecord(b)
		if err != nil || len(ops) != 1 || ops[0] != tc.op {
			t.Errorf("decode of %s: %v, %v", tc.op, ops, err)
		}
	}
	all := []Op{
		exampleReserve, exampleSettle,
		{Kind: OpReserve, ID: 2, Step: 4, Amounts: Amounts{ToolCalls: 1}},
		{Kind: OpRelease, ID: 2},
		{Kind: OpReserve, ID: 3, Step: 5, Amounts: Amounts{Steps: 50, MicroUSD: 1}, Carve: true},
		{Kind: OpSettle, ID: 3, Amounts: Amounts{Steps: 7}, Carve: true},
		{Kind: OpSettle, ID: 4, Amounts: Amounts{HTTPRequests: 1}, Orphan: true, WorstCase: true},
		{Kind: OpRelease, ID: 5, Orphan: true},
		{Kind: OpSettle, ID: 6, Orphan: true},
	}
	b, err := EncodeRecord(all...)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeRecord(b)
	if err != nil || !slices.Equal(back, all) {
		t.Fatalf("round trip: %v, %v", back, err)
	}
}

func TestRecordRefusals(t *testing.T) {
	bad := map[string]Op{
		"no kind":                {ID: 1},
		"id 0":                   {Kind: OpSettle},
		"reserve without a step": {Kind: OpReserve, ID: 1},
		"settle with a step":     {Kind: OpSettle, ID: 1, Step: 2},
		"release with amounts":   {Kind: OpRelease, ID: 1, Amounts: usd(1)},
		"wall clock":             {Kind: OpSettle, ID: 1, Amounts: Amounts{WallSeconds: 1}},
		"steps outside a carve":  {Kind: OpReserve, ID: 1, Step: 1, Amounts: Amounts{Steps: 1}},
		"carve release":          {Kind: OpRelease, ID: 1, Carve: true},
		"orphan reserve":         {Kind: OpReserve, ID: 1, Step: 1, Orphan: true},
		"worst case, no orphan":  {Kind: OpSettle, ID: 1, WorstCase: true},
	}
	for name, o := range bad {
		if _, err := EncodeRecord(o); !errors.Is(err, ErrRecord) {
			t.Errorf("%s: EncodeRecord: %v", name, err)
		}
	}
	if _, err := EncodeRecord(); err == nil {
		t.Error("an empty record encodes")
	}
	h := func(s string) []byte {
		b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for name, b := range map[string][]byte{
		"empty input":  {},
		"empty array":  h("80"),
		"not an array": h("a0"),
		// {"id": 1, "op": "release", "step": 0}: a zero written out.
		"zero written out": h("81 a3 626964 01 626f70 6772656c65617365 6473746570 00"),
		// {"op": "release", "id": 1}: keys out of order.
		"keys out of order": h("81 a2 626f70 6772656c65617365 626964 01"),
		// {"id": 1, "op": "release", "id": 1}
		"duplicate key": h("81 a3 626964 01 626f70 6772656c65617365 626964 01"),
		// {"id": 1, "op": "refund"}
		"unknown op": h("81 a2 626964 01 626f70 66726566756e64"),
		// {"id": 1, "op": "release", "gpu": 1}
		"unknown key": h("81 a3 626964 01 626f70 6772656c65617365 63677075 01"),
		// {"id": 1, "op": "settle", "amounts": {"wall_seconds": 5}}
		"wall in amounts": h("81 a3 626964 01 626f70 66736574746c65 67616d6f756e7473 a1 6c77616c6c5f7365636f6e6473 05"),
		// {"id": 1, "op": "settle", "amounts": {}}
		"empty amounts": h("81 a3 626964 01 626f70 66736574746c65 67616d6f756e7473 a0"),
		"tagged":        h("c1 81 a2 626964 01 626f70 6772656c65617365"),
		"trailing":      h("81 a2 626964 01 626f70 6772656c65617365 00"),
		"indefinite":    h("9f a2 626964 01 626f70 6772656c65617365 ff"),
	} {
		if ops, err := DecodeRecord(b); !errors.Is(err, ErrRecord) {
			t.Errorf("%s: decoded %v, %v", name, ops, err)
		}
	}
	if ops, err := DecodeRecord(h("81 a2 626964 01 626f70 6772656c65617365")); err != nil || ops[0] != (Op{Kind: OpRelease, ID: 1}) {
		t.Fatalf("the well-formed release: %v %v", ops, err)
	}
	if ops, err := DecodeRecord(h("81 a2 626964 1801 626f70 6772656c65617365")); !errors.Is(err, ErrRecord) {
		t.Errorf("id 1 in a one-byte head after 0x18: decoded %v, %v", ops, err)
	}
}

// FuzzRecord: whatever DecodeRecord accepts encodes back to the same bytes.
func FuzzRecord(f *testing.F) {
	for _, s := range []string{exampleReserveHex, exampleSettleHex} {
		b, _ := hex.DecodeString(s)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ops, err := DecodeRecord(b)
		if err != nil {
			return
		}
		again, err := EncodeRecord(ops...)
		if err != nil || string(again) != string(b) {
			t.Fatalf("decoded %v from %x, which encodes as %x, %v", ops, b, again, err)
		}
	})
}

// TestSpecExample: the bytes journal/SPEC.md section 6.1 shows are the
// encoding of exampleReserve.
func TestSpecExample(t *testing.T) {
	spec, err := os.ReadFile("../../journal/SPEC.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(spec)
	i := strings.Index(s, "\n81 a4 62 6964 01")
	if i < 0 {
		t.Fatal("journal/SPEC.md has no budget record example")
	}
	block := s[i : i+strings.Index(s[i:], "```")]
	if got := strings.Join(strings.Fields(block), ""); got != exampleReserveHex {
		t.Fatalf("journal/SPEC.md's example is\n%s\nthe encoding is\n%s", got, exampleReserveHex)
	}
}
