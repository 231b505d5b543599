package capability

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/fxamacker/cbor/v2"
)

func TestParseUSD(t *testing.T) {
	for in, want := range map[string]uint64{
		"10": 10_000_000, "9.90": 9_900_000, "9.9": 9_900_000, "$0.000125": 125, "0.000001": 1,
		".5": 500_000, "0": 0, "007": 7_000_000, "18446744073709.551615": 1<<64 - 1,
	} {
		got, err := ParseUSD(in)
		if err != nil || got != want {
			t.Errorf("ParseUSD(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", ".", "$", "1.", "0.0000001", "-1", "+1", "1e3", "1,5", "1.2.3", " 1",
		"18446744073709.551616", "18446744073710", "99999999999999999999"} {
		if got, err := ParseUSD(bad); !errors.Is(err, ErrUSD) {
			t.Errorf("ParseUSD(%q) = %d, %v; want ErrUSD", bad, got, err)
		}
	}
}

func TestFormatUSDParsesBack(t *testing.T) {
	for _, n := range []uint64{0, 1, 10, 125, 999_999, 1_000_000, 9_900_000, 10_000_001, 1<<64 - 1} {
		s := FormatUSD(n)
		back, err := ParseUSD(s)
		if err != nil || back != n {
			t.Errorf("FormatUSD(%d) = %q, which parses as %d, %v", n, s, back, err)
		}
	}
	if got := FormatUSD(9_900_000); got != "9.9" {
		t.Errorf("FormatUSD(9 900 000) = %q, want 9.9", got)
	}
}

func TestParseBudgetModelCeilings(t *testing.T) {
	b, err := ParseBudget("usd=9.90,input_tokens=200000,output_tokens=8000,model_calls=30,steps=5")
	if err != nil {
		t.Fatal(err)
	}
	if *b.MicroUSD != 9_900_000 || *b.InputTokens != 200_000 || *b.OutputTokens != 8000 || *b.ModelCalls != 30 {
		t.Fatalf("parsed %+v", b)
	}
	s := b.String()
	if want := "steps=5,model_calls=30,input_tokens=200000,output_tokens=8000,usd=9.9"; s != want {
		t.Errorf("String() = %q, want %q", s, want)
	}
	again, err := ParseBudget(s)
	if err != nil || again.String() != s {
		t.Errorf("ParseBudget(String()) = %v, %v", again, err)
	}
	if m, err := ParseBudget("micro_usd=125"); err != nil || *m.MicroUSD != 125 {
		t.Errorf("micro_usd=125: %v, %v", m, err)
	}
	if !slices.Equal(b.Set(), []string{"steps", "model_calls", "input_tokens", "output_tokens", "micro_usd"}) {
		t.Errorf("Set() = %v", b.Set())
	}
	for _, bad := range []string{"usd=1.0000001", "usd=ten", "usd=-1", "input_tokens=1.5", "output_tokens=1h"} {
		if _, err := ParseBudget(bad); err == nil {
			t.Errorf("ParseBudget(%q) accepted", bad)
		}
	}
}

func TestOverride(t *testing.T) {
	b := Budget{Steps: Limit(5), MicroUSD: Limit(10)}
	b.Override(Budget{MicroUSD: Limit(3), InputTokens: Limit(7)})
	if b.String() != "steps=5,input_tokens=7,usd=0.000003" {
		t.Errorf("after Override: %s", b)
	}
}

// TestModelCeilingsNarrowOnly: each new ceiling may only be lowered by a
// child, through Attenuate and against a forged link in Verify alike.
func TestModelCeilingsNarrowOnly(t *testing.T) {
	full := func() Budget {
		return Budget{Steps: Limit(1000), HTTPRequests: Limit(50), ToolCalls: Limit(20), WallSeconds: Limit(3600),
			ModelCalls: Limit(40), InputTokens: Limit(1_000_000), OutputTokens: Limit(50_000), MicroUSD: Limit(10_000_000)}
	}
	rc := rootClaims()
	rc.Budget = full()
	root := mustIssue(t, rootA, rc)
	v, err := Verify(root, trustA(), Options{Now: during})
	if err != nil {
		t.Fatal(err)
	}
	if v.Claims.Budget.String() != full().String() {
		t.Fatalf("verified budget %s, issued %s", v.Claims.Budget, full())
	}
	cases := []struct {
		name   string
		change func(b *Budget)
		detail string
	}{
		{"model calls raised", func(b *Budget) { b.ModelCalls = Limit(41) }, "model_calls is 41 but the parent's is 40"},
		{"input tokens raised", func(b *Budget) { b.InputTokens = Limit(1_000_001) }, "input_tokens is 1000001"},
		{"output tokens raised", func(b *Budget) { b.OutputTokens = Limit(50_001) }, "output_tokens is 50001"},
		{"money raised by one micro-USD", func(b *Budget) { b.MicroUSD = Limit(10_000_001) }, "micro_usd is 10000001 but the parent's is 10000000"},
		{"money unlimited", func(b *Budget) { b.MicroUSD = nil }, "micro_usd is unlimited"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := narrowClaims()
			c.Budget = full()
			tc.change(&c.Budget)
			// Attenuate reads an unset ceiling as the parent's: only a
			// forged link can make one unlimited.
			if c.Budget.MicroUSD != nil {
				if _, err := Attenuate(root, holder1, c); !errors.Is(err, ErrWidens) {
					t.Fatalf("Attenuate: want ErrWidens, got %v", err)
				}
			}
			_, err := Verify(unchecked(t, root, holder1, c), trustA(), Options{Now: during})
			wantClass(t, err, ErrWidens, 1)
			wantDetail(t, err, tc.detail)
		})
	}
	c := narrowClaims()
	c.Budget = full()
	c.Budget.MicroUSD, c.Budget.InputTokens = Limit(9_900_000), Limit(0)
	v, err = Verify(mustAttenuate(t, root, holder1, c), trustA(), Options{Now: during})
	if err != nil || *v.Claims.Budget.MicroUSD != 9_900_000 || *v.Claims.Budget.InputTokens != 0 {
		t.Fatalf("a lowered ceiling: %v, %v", v, err)
	}
}

// TestMoneyCeilingEncoding: the money ceiling is an unsigned integer of
// micro-USD under "micro_usd" in the claims' budget map (never a float or
// a string), and a token carrying it is canonical.
func TestMoneyCeilingEncoding(t *testing.T) {
	rc := rootClaims()
	rc.Budget = Budget{MicroUSD: Limit(9_900_000), ModelCalls: Limit(3)}
	tok := mustIssue(t, rootA, rc)
	p, err := Parse(tok)
	if err != nil {
		t.Fatal(err)
	}
	payload := p.Leaf().payload
	var claims map[int]cbor.RawMessage
	if err := cbor.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	var budget map[string]any
	if err := cbor.Unmarshal(claims[keyBudget], &budget); err != nil {
		t.Fatal(err)
	}
	if budget["micro_usd"] != uint64(9_900_000) || budget["llm"] != uint64(3) || len(budget) != 2 {
		t.Fatalf("budget map %#v", budget)
	}
	want := []byte{0xa2, 0x63, 'l', 'l', 'm', 0x03, 0x69, 'm', 'i', 'c', 'r', 'o', '_', 'u', 's', 'd', 0x1a, 0x00, 0x97, 0x0f, 0xe0}
	if !bytes.Equal(claims[keyBudget], want) {
		t.Errorf("budget bytes % x, want % x", []byte(claims[keyBudget]), want)
	}
}
