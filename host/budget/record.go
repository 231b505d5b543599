package budget

import (
	"bytes"
	"fmt"

	"github.com/fxamacker/cbor/v2"
)

// OpKind says what a budget record does.
type OpKind uint8

// The kinds of budget records.
const (
	OpReserve OpKind = iota + 1
	OpSettle
	OpRelease
)

var opNames = map[OpKind]string{OpReserve: "reserve", OpSettle: "settle", OpRelease: "release"}

func (k OpKind) String() string {
	if n, ok := opNames[k]; ok {
		return n
	}
	return fmt.Sprintf("op(%d)", uint8(k))
}

// Op is one budget record, as journaled (journal/SPEC.md, "Budget
// records"): the reserve of a call's worst case, its settle at the actual
// usage, or its release.
type Op struct {
	Kind OpKind
	// ID names the reservation: ids count from 1 per ledger, in the order
	// the ledger admitted them.
	ID uint64
	// Step is the step of the call that reserved; only on a reserve.
	Step uint64
	// Amounts is a reserve's worst case or a settle's actual usage; zero
	// on a release.
	Amounts Amounts
	// Carve marks the reserve of a child ledger's ceilings, and the settle
	// of what the child spent when it closed.
	Carve bool
	// Orphan marks a settle or release written on resume, by Rebuild, for
	// a reservation a crash left open.
	Orphan bool
	// WorstCase marks an orphan's settle at its reserved worst case, the
	// actual usage being unknown.
	WorstCase bool
}

func (o Op) String() string {
	s := fmt.Sprintf("%s #%d", o.Kind, o.ID)
	if o.Kind == OpReserve {
		s += fmt.Sprintf(" step %d", o.Step)
	}
	if o.Kind != OpRelease {
		s += " " + o.Amounts.String()
	}
	for _, f := range []struct {
		on   bool
		name string
	}{{o.Carve, "carve"}, {o.Orphan, "orphan"}, {o.WorstCase, "worst case"}} {
		if f.on {
			s += " (" + f.name + ")"
		}
	}
	return s
}

// wireOp and wireAmounts are the CDDL of journal/SPEC.md's budget-op;
// every key is omitted at its zero value, so a record has one encoding.
type wireOp struct {
	Op        string       `cbor:"op"`
	ID        uint64       `cbor:"id"`
	Step      uint64       `cbor:"step,omitempty"`
	Amounts   *wireAmounts `cbor:"amounts,omitempty"`
	Carve     bool         `cbor:"carve,omitempty"`
	Orphan    bool         `cbor:"orphan,omitempty"`
	WorstCase bool         `cbor:"worst_case,omitempty"`
}

type wireAmounts struct {
	Steps        uint64 `cbor:"steps,omitempty"`
	ModelCalls   uint64 `cbor:"model_calls,omitempty"`
	InputTokens  uint64 `cbor:"input_tokens,omitempty"`
	OutputTokens uint64 `cbor:"output_tokens,omitempty"`
	MicroUSD     uint64 `cbor:"micro_usd,omitempty"`
	ToolCalls    uint64 `cbor:"tool_calls,omitempty"`
	HTTPRequests uint64 `cbor:"http_requests,omitempty"`
}

func toWire(a Amounts) *wireAmounts {
	if a.IsZero() {
		return nil
	}
	return &wireAmounts{a[Steps], a[ModelCalls], a[InputTokens], a[OutputTokens], a[MicroUSD], a[ToolCalls], a[HTTPRequests]}
}

func (w *wireAmounts) amounts() Amounts {
	if w == nil {
		return Amounts{}
	}
	return Amounts{Steps: w.Steps, ModelCalls: w.ModelCalls, InputTokens: w.InputTokens, OutputTokens: w.OutputTokens,
		MicroUSD: w.MicroUSD, ToolCalls: w.ToolCalls, HTTPRequests: w.HTTPRequests}
}

var (
	encMode cbor.EncMode
	decMode cbor.DecMode
)

func init() {
	var err error
	if encMode, err = cbor.CoreDetEncOptions().EncMode(); err != nil {
		panic(err)
	}
	decMode, err = cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		IndefLength:       cbor.IndefLengthForbidden,
		TagsMd:            cbor.TagsForbidden,
		MaxNestedLevels:   4,
		MaxArrayElements:  MaxOps,
		MaxMapPairs:       16,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
		UTF8:              cbor.UTF8RejectInvalid,
	}.DecMode()
	if err != nil {
		panic(err)
	}
}

// MaxOps is the most records one entry's budget field holds: a call's own
// and, on resume, the resolution of a crash's orphans.
const MaxOps = 1024

// check returns why o is not a record a ledger writes, or "".
func (o Op) check() string {
	a := o.Amounts
	switch {
	case o.Kind < OpReserve || o.Kind > OpRelease:
		return fmt.Sprintf("unknown op %d", uint8(o.Kind))
	case o.ID == 0:
		return "id 0 (ids count from 1)"
	case (o.Kind == OpReserve) != (o.Step != 0):
		return "a step on another record than a reserve, or a reserve without one"
	case o.Kind == OpRelease && !a.IsZero():
		return "a release with amounts"
	case a[WallSeconds] != 0:
		return "an amount of wall_seconds (counted, not reserved)"
	case a[Steps] != 0 && !o.Carve:
		return "an amount of steps outside a carve (steps are counted, not reserved)"
	case o.Carve && o.Kind == OpRelease:
		return "a carve on a release (a carve is settled when its child closes)"
	case o.Orphan && o.Kind == OpReserve:
		return "an orphan reserve"
	case o.WorstCase && !(o.Orphan && o.Kind == OpSettle):
		return "worst_case on another record than an orphan's settle"
	}
	return ""
}

// EncodeRecord returns the canonical CBOR of ops, the value of a journal
// entry's budget field (budget-record in journal/SPEC.md).
func EncodeRecord(ops ...Op) ([]byte, error) {
	if len(ops) == 0 || len(ops) > MaxOps {
		return nil, fmt.Errorf("budget record: %d records (want 1 to %d)", len(ops), MaxOps)
	}
	w := make([]wireOp, len(ops))
	for i, o := range ops {
		if why := o.check(); why != "" {
			return nil, &RecordError{Index: i, Reason: why}
		}
		w[i] = wireOp{Op: o.Kind.String(), ID: o.ID, Step: o.Step, Amounts: toWire(o.Amounts), Carve: o.Carve, Orphan: o.Orphan, WorstCase: o.WorstCase}
	}
	return encMode.Marshal(w)
}

// DecodeRecord decodes a budget field. It accepts exactly what
// EncodeRecord writes: canonical CBOR (decoded, re-encoded and compared),
// no unknown keys, and records a ledger could write (Op.check); anything
// else is a *RecordError.
func DecodeRecord(b []byte) ([]Op, error) {
	var w []wireOp
	if err := decMode.Unmarshal(b, &w); err != nil {
		return nil, &RecordError{Index: -1, Reason: err.Error()}
	}
	if len(w) == 0 {
		return nil, &RecordError{Index: -1, Reason: "an empty array (leave the field out)"}
	}
	ops := make([]Op, len(w))
	for i, x := range w {
		k := OpKind(0)
		for kind, name := range opNames {
			if name == x.Op {
				k = kind
			}
		}
		if k == 0 {
			return nil, &RecordError{Index: i, Reason: fmt.Sprintf("unknown op %q", x.Op)}
		}
		if x.Amounts != nil && x.Amounts.amounts().IsZero() {
			return nil, &RecordError{Index: i, Reason: "empty amounts (leave the key out)"}
		}
		ops[i] = Op{Kind: k, ID: x.ID, Step: x.Step, Amounts: x.Amounts.amounts(), Carve: x.Carve, Orphan: x.Orphan, WorstCase: x.WorstCase}
		if why := ops[i].check(); why != "" {
			return nil, &RecordError{Index: i, Reason: why}
		}
	}
	again, err := encMode.Marshal(w)
	if err != nil || !bytes.Equal(again, b) {
		return nil, &RecordError{Index: -1, Reason: "not in canonical form (core deterministic CBOR, zero values omitted)"}
	}
	return ops, nil
}
