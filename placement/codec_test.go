package placement

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/internal/yamlkeys"
)

// placeExample places testdata's need file on testdata/cells.yaml.
func placeExample(t *testing.T, needFile string) Decision {
	t.Helper()
	cells, err := ParseCells("cells.yaml", readTestdata(t, "cells.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	need, err := ParseNeed(needFile, readTestdata(t, needFile))
	if err != nil {
		t.Fatal(err)
	}
	d, err := Place(need, cells)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestExampleNeedInYAMLAndJSON: the two example need files say the same.
func TestExampleNeedInYAMLAndJSON(t *testing.T) {
	y, err := ParseNeed("need.yaml", readTestdata(t, "need.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	j, err := ParseNeed("need.json", readTestdata(t, "need.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(y, j) {
		t.Fatalf("need.yaml %+v, need.json %+v", y, j)
	}
	if *y.MaxCost != 4_500_000 {
		t.Fatalf("max_cost_per_hour: 4.50 read as %d millionths", *y.MaxCost)
	}
}

// TestExampleCellsInYAMLAndJSON: cells.json lists cells.yaml's cells in
// reverse order; they place the same, to the byte.
func TestExampleCellsInYAMLAndJSON(t *testing.T) {
	y, err := ParseCells("cells.yaml", readTestdata(t, "cells.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	j, err := ParseCells("cells.json", readTestdata(t, "cells.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(y) != 5 || len(j) != 5 || y[0].ID != j[4].ID || !reflect.DeepEqual(y[2], j[2]) {
		t.Fatalf("cells.json is not cells.yaml reversed:\n%+v\n%+v", y, j)
	}
	need, err := ParseNeed("need.yaml", readTestdata(t, "need.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dy, _ := Place(need, y)
	dj, _ := Place(need, j)
	by, _ := dy.EncodeCBOR()
	bj, _ := dj.EncodeCBOR()
	if string(by) != string(bj) {
		t.Fatal("the same cells in another order and format place otherwise")
	}
}

// TestDecisionCBOR round-trips the example decision through its canonical
// CBOR, rechecks it, and refuses it changed.
func TestDecisionCBOR(t *testing.T) {
	d := placeExample(t, "need.yaml")
	b, err := d.EncodeCBOR()
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeDecision(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*back, d) {
		t.Fatalf("decoded\n%+v\nplaced\n%+v", *back, d)
	}
	again, _ := back.EncodeCBOR()
	if string(again) != string(b) {
		t.Fatal("decode then encode changed the bytes")
	}
	if err := Recheck(back); err != nil {
		t.Fatal(err)
	}

	// Changed after the fact: another cell, another score, a refusal
	// dropped, a cell's clearance raised.
	for name, change := range map[string]func(*Decision){
		"cell":      func(d *Decision) { d.Cell = d.Candidates[1].Cell },
		"score":     func(d *Decision) { d.Candidates[1].Score.Cost++ },
		"refusal":   func(d *Decision) { d.Refused = d.Refused[1:] },
		"clearance": func(d *Decision) { d.Inputs.Cells[3].Clearance = Secret },
	} {
		x, _ := DecodeDecision(b)
		change(x)
		if err := Recheck(x); !errors.Is(err, ErrBadDecision) {
			t.Errorf("%s changed: Recheck = %v, want ErrBadDecision", name, err)
		}
	}

	// Changed bytes: a trailing byte, a map key out of order, another
	// version, nothing.
	var m map[int]any
	if err := abi.DecodeStrict(b, &m); err != nil {
		t.Fatal(err)
	}
	m[1] = uint64(2)
	v2, _ := abi.Marshal(m)
	for name, bad := range map[string][]byte{
		"trailing byte": append(append([]byte(nil), b...), 0),
		"not canonical": append([]byte{0xb9, 0x00, byte(len(m))}, b[1:]...), // a long-form map head
		"version 2":     v2,
		"empty":         nil,
	} {
		if _, err := DecodeDecision(bad); !errors.Is(err, ErrBadDecision) {
			t.Errorf("%s: DecodeDecision = %v, want ErrBadDecision", name, err)
		}
	}
}

// TestDecisionJSON: the JSON holds the decision and its inputs, costs as
// decimal numbers, and no null lists.
func TestDecisionJSON(t *testing.T) {
	d := placeExample(t, "need.yaml")
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Cell       string
		Candidates []struct{ Cell string }
		Refused    []struct {
			Cell    string
			Reasons []struct{ Code, Detail string }
		}
		Inputs struct {
			Need  map[string]any
			Cells []map[string]any
		}
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Cell != d.Cell || len(got.Candidates) != 2 || len(got.Refused) != 3 || len(got.Inputs.Cells) != 5 {
		t.Fatalf("JSON %s", b)
	}
	if got.Inputs.Need["max_cost_per_hour"] != 4.5 || got.Refused[1].Reasons[0].Code != "clearance" {
		t.Fatalf("JSON need %v, refusal %v", got.Inputs.Need, got.Refused[1])
	}
	if !strings.Contains(string(b), `"cost_per_hour":3.2,`) {
		t.Fatalf("cost not a decimal number: %s", b)
	}
	_, err = Place(Need{Clearance: Secret}, []Cell{c(1)})
	var ne *NoEligibleError
	if !errors.As(err, &ne) {
		t.Fatal(err)
	}
	none, _ := Place(Need{}, nil)
	b, _ = json.Marshal(none)
	if strings.Contains(string(b), "null") {
		t.Fatalf("empty lists as null: %s", b)
	}
}

func TestParseCost(t *testing.T) {
	for in, want := range map[string]Cost{"2.5": 2_500_000, "0.000125": 125, "3": 3_000_000, "007.10": 7_100_000, ".5": 500_000, "5.": 5_000_000, "0": 0, "1000000000": MaxCost} {
		got, err := ParseCost(in)
		if err != nil || got != want {
			t.Errorf("ParseCost(%q) = %d, %v; want %d", in, got, err, want)
		}
		if again, _ := ParseCost(got.String()); again != got {
			t.Errorf("%q prints as %q, which parses as %d", in, got.String(), again)
		}
	}
	for _, in := range []string{"-1", "1e3", "1.0000001", ".", "", "1,5", "0x10", "1000000000.000001", "99999999999", " 1", "NaN", "inf"} {
		if got, err := ParseCost(in); err == nil {
			t.Errorf("ParseCost(%q) = %d, want an error", in, got)
		}
	}
}

func TestParseFiles(t *testing.T) {
	const cell = "cells:\n  - id: " + "0000000000000000000000000000000000000000000000000000000000000001" + "\n    max_runs: 1\n"
	for _, tc := range []struct {
		name, doc, want string
		need            bool
	}{
		{"misspelt key", cell + "    cost_per_hr: 2\n", "cells.yaml:4: unknown key \"cost_per_hr\" in cells[0]", false},
		{"quoted cost", cell + "    cost_per_hour: \"2.5\"\n", "line 4: not a cost: \"2.5\"", false},
		{"float cost too precise", cell + "    cost_per_hour: 0.0000001\n", "more than 6 decimal places", false},
		{"unknown clearance", cell + "    clearance: topsecret\n", "cells.yaml: cells[0].clearance: unknown clearance \"topsecret\"", false},
		{"cell twice", cell + "  - id: 0000000000000000000000000000000000000000000000000000000000000001\n    max_runs: 1\n", "cells[1].id: cell 000000000000 is listed twice", false},
		{"empty", "", "the document is empty", false},
		{"two documents", cell + "---\n" + cell, "more than one YAML document", false},
		{"need with an unknown key", "clearance: secret\nregion: eu\n", "need.yaml:2: unknown key \"region\" at the top level", true},
		{"need with a misspelt weight", "weights: {lod: 2}\n", "unknown key \"lod\" in weights", true},
		{"need in JSON with a bad clearance", `{"clearance": "SECRET"}`, "need.yaml: need.clearance: unknown clearance \"SECRET\"", true},
		{"need with gpus as text", "gpus: two\n", "cannot unmarshal", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.need {
				_, err = ParseNeed("need.yaml", []byte(tc.doc))
			} else {
				_, err = ParseCells("cells.yaml", []byte(tc.doc))
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
	_, err := ParseCells("cells.yaml", []byte(cell+"    cost_per_hr: 2\n"))
	var uk *yamlkeys.UnknownKeyError
	if !errors.As(err, &uk) || uk.Suggestion != "cost_per_hour" {
		t.Fatalf("misspelt key: %#v", err)
	}
}
