package budget

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentrt/agentrt/capability"
)

var update = flag.Bool("update", false, "rewrite the golden files of the report")

// reportOf is the report of a run with $9.90 spent of $10 over 3 model calls, one
// call in flight, and an overspent output-token ceiling.
func reportOf(t *testing.T) Report {
	c := CeilingsOf(budgetOf(t, "steps=100,model_calls=10,output_tokens=2000,usd=10,wall_seconds=3600"), budgetOf(t, "tool_calls=5"))
	var fields [][]byte
	add := func(ops ...Op) {
		b, err := EncodeRecord(ops...)
		if err != nil {
			t.Fatal(err)
		}
		fields = append(fields, b)
	}
	add(Op{Kind: OpReserve, ID: 1, Step: 2, Amounts: Amounts{ModelCalls: 1, InputTokens: 4000, OutputTokens: 1000, MicroUSD: 5_000_000}})
	add(Op{Kind: OpSettle, ID: 1, Amounts: Amounts{ModelCalls: 1, InputTokens: 3900, OutputTokens: 1800, MicroUSD: 4_900_000}})
	add(Op{Kind: OpReserve, ID: 2, Step: 3, Amounts: Amounts{ToolCalls: 1}})
	add(Op{Kind: OpSettle, ID: 2, Amounts: Amounts{ToolCalls: 1}})
	add(Op{Kind: OpReserve, ID: 3, Step: 5, Amounts: Amounts{ModelCalls: 1, InputTokens: 6000, MicroUSD: 5_000_000}})
	add(Op{Kind: OpSettle, ID: 3, Amounts: Amounts{ModelCalls: 1, InputTokens: 6000, OutputTokens: 400, MicroUSD: 5_000_000}})
	add(Op{Kind: OpReserve, ID: 4, Step: 7, Amounts: Amounts{ModelCalls: 1, InputTokens: 100, MicroUSD: 50_000}})
	rep, err := ReportFrom(c, Journal{Steps: 7, ElapsedSeconds: 42, Fields: fields})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestReportGolden(t *testing.T) {
	rep := reportOf(t)
	var text, js bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string][]byte{"report.txt": text.Bytes(), "report.json": js.Bytes()} {
		path := filepath.Join("testdata", name)
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs (go test -run TestReportGolden -update ./host/budget/ rewrites it):\n%s\nwant:\n%s", name, got, want)
		}
	}
	// The figures behind the golden files.
	row := rep.Rows[MicroUSD]
	if row.Spent != 9_900_000 || row.Reserved != 50_000 || *row.Left != 50_000 || *row.Ceiling != ten {
		t.Errorf("micro_usd row %+v", row)
	}
	if out := rep.Rows[OutputTokens]; out.Over != 200 || *out.Left != 0 {
		t.Errorf("output_tokens row %+v", out)
	}
	if rep.Open != 1 || rep.Rows[InputTokens].Ceiling != nil || rep.Rows[Steps].Spent != 7 || rep.Rows[WallSeconds].Spent != 42 {
		t.Errorf("report %+v", rep)
	}
}

func TestReportFromRefusesABadField(t *testing.T) {
	good, _ := EncodeRecord(Op{Kind: OpReserve, ID: 1, Step: 1})
	if _, err := ReportFrom(Ceilings{}, Journal{Steps: 1, Fields: [][]byte{good, {0x80}}}); err == nil || err.Error() != "budget field 1: budget record: an empty array (leave the field out)" {
		t.Errorf("a bad field: %v", err)
	}
}

func budgetOf(t *testing.T, s string) capability.Budget {
	t.Helper()
	b, err := capability.ParseBudget(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
