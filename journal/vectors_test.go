package journal_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/host/cell/handoff"
	"github.com/agentrt/agentrt/internal/golden"
	"github.com/agentrt/agentrt/journal"
	"github.com/fxamacker/cbor/v2"
	"github.com/veraison/go-cose"
)

// The vectors in testdata/vectors are written by TestGenerateVectors from the
// fixed inputs below. Run
//
//	go test ./journal -run TestGenerateVectors -rewrite
//
// after a deliberate change to the generator; without -rewrite the test
// fails when the files on disk differ from what the code generates, so a
// change to the format cannot slip through unnoticed.
var rewrite = flag.Bool("rewrite", false, "rewrite testdata/vectors from the generator")

const vectorDir = "testdata/vectors"

// Fixed keys, times and run ids: the vectors are byte-for-byte reproducible.
var (
	// cellA writes every journal unless a vector says otherwise.
	cellA = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0xa1}, ed25519.SeedSize))
	// cellB is a second trusted cell (a handoff target, a wrong sealer).
	cellB = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0xb2}, ed25519.SeedSize))
	// cellC is a cell that no vector trusts.
	cellC = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0xc3}, ed25519.SeedSize))

	t0   = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	runX = fixedRun(t0, 0x58)
	runY = fixedRun(t0.Add(time.Second), 0x59)
)

func fixedRun(t time.Time, fill byte) journal.RunID {
	var id journal.RunID
	binary.BigEndian.PutUint64(id[:8], uint64(t.UnixNano()))
	copy(id[8:], bytes.Repeat([]byte{fill}, 8))
	return id
}

func pub(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }

// classes names the failure classes of the vector files.
var classes = map[string]error{
	"decode":    journal.ErrDecode,
	"sequence":  journal.ErrSequence,
	"chain":     journal.ErrChain,
	"hash":      journal.ErrHash,
	"signature": journal.ErrSignature,
	"untrusted": journal.ErrUntrusted,
	"uncovered": journal.ErrUncovered,
	"blob":      journal.ErrBlob,
}

// vector is one test vector: a journal's stored records and what a verifier
// trusting the listed keys must conclude.
type vector struct {
	name string
	// expect is "valid" or a key of classes.
	expect   string
	badEntry uint64
	trust    []ed25519.PublicKey
	comment  []string
	// blobs are the blob area the verifier is given (SPEC.md section 15),
	// each under the hash its references name.
	blobs   []vblob
	records [][]byte
}

// vblob is one blob of a vector: the name its references use and its bytes
// (which a vector may have changed, so that they no longer hash to it).
type vblob struct{ sum, data []byte }

// blobArea is a vector's blobs as the verifier reads them.
func (v *vector) blobArea() journal.Blobs {
	m := memBlobs{}
	for _, b := range v.blobs {
		m[string(b.sum)] = b.data
	}
	return m
}

func (v *vector) marshal() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "expect: %s\n", v.expect)
	if v.expect != "valid" {
		fmt.Fprintf(&b, "bad-entry: %d\n", v.badEntry)
	}
	for _, k := range v.trust {
		fmt.Fprintf(&b, "trust: %x\n", []byte(k))
	}
	for _, c := range v.comment {
		fmt.Fprintf(&b, "comment: %s\n", c)
	}
	for _, bl := range v.blobs {
		fmt.Fprintf(&b, "blob: %x %x\n", bl.sum, bl.data)
	}
	for _, r := range v.records {
		fmt.Fprintf(&b, "record: %x\n", r)
	}
	return b.Bytes()
}

func parseVector(name string, data []byte) (*vector, error) {
	v := &vector{name: name}
	err := golden.Headers(name, data, func(key, val string) error {
		if key != "record" && len(v.records) > 0 {
			return fmt.Errorf("%s after the first record", key)
		}
		switch key {
		case "expect":
			if _, known := classes[val]; !known && val != "valid" {
				return fmt.Errorf("unknown expectation %q", val)
			}
			v.expect = val
		case "bad-entry":
			n, err := strconv.ParseUint(val, 10, 64)
			if err != nil {
				return err
			}
			v.badEntry = n
		case "trust":
			k, err := hex.DecodeString(val)
			if err != nil || len(k) != ed25519.PublicKeySize {
				return fmt.Errorf("trust wants %d hex-encoded bytes", ed25519.PublicKeySize)
			}
			v.trust = append(v.trust, k)
		case "comment":
			v.comment = append(v.comment, val)
		case "blob":
			sum, data, ok := strings.Cut(val, " ")
			s, err1 := hex.DecodeString(sum)
			d, err2 := hex.DecodeString(data)
			if !ok || err1 != nil || err2 != nil || len(s) != journal.HashSize {
				return fmt.Errorf("blob wants a %d-byte hash and the bytes, both in hex", journal.HashSize)
			}
			v.blobs = append(v.blobs, vblob{s, d})
		case "record":
			r, err := hex.DecodeString(val)
			if err != nil {
				return err
			}
			v.records = append(v.records, r)
		default:
			return fmt.Errorf("unknown header %q", key)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if v.expect == "" {
		return nil, fmt.Errorf("%s: no expect line", name)
	}
	return v, nil
}

// loadVectors reads every vector file, in name order.
func loadVectors(tb testing.TB) []*vector {
	tb.Helper()
	return golden.Files(tb, vectorDir, "*.txt", parseVector)
}

// TestVectors runs every vector through a Verifier trusting the vector's
// keys, stopping at the first error as a caller does.
func TestVectors(t *testing.T) {
	for _, v := range loadVectors(t) {
		t.Run(strings.TrimSuffix(v.name, ".txt"), func(t *testing.T) {
			sum, err := verifyRecords(v.records, journal.TrustKeys(v.trust...), v.blobArea())
			if v.expect == "valid" {
				if err != nil {
					t.Fatalf("want a valid journal, got %v", err)
				}
				if sum.Entries != uint64(len(v.records)) {
					t.Errorf("summary counts %d entries, the vector holds %d", sum.Entries, len(v.records))
				}
				last, err := journal.DecodeRecord(v.records[len(v.records)-1])
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(sum.Head, journal.Sum(last.Entry)) {
					t.Errorf("summary head %x, want the hash of the last entry %x", sum.Head, journal.Sum(last.Entry))
				}
				return
			}
			t.Log(err)
			var verr *journal.VerifyError
			if !errors.As(err, &verr) {
				t.Fatalf("want a *VerifyError of class %s at entry %d, got %v", v.expect, v.badEntry, err)
			}
			if !errors.Is(err, classes[v.expect]) {
				t.Errorf("want class %s, got %v", v.expect, err)
			}
			if verr.Seq != v.badEntry {
				t.Errorf("want bad entry %d, got %v", v.badEntry, err)
			}
		})
	}
}

// TestVerifyStreamMatchesAdd runs every vector through VerifyStream, whose
// preparing of records runs in parallel, and expects the outcome of Add one
// record at a time: the same error, at the same entry, or the same summary.
func TestVerifyStreamMatchesAdd(t *testing.T) {
	for _, v := range loadVectors(t) {
		trust := journal.TrustKeys(v.trust...)
		want, wantErr := verifyRecords(v.records, trust, v.blobArea())
		// Many copies of a valid journal's records make the stream span
		// several chunks; the verifier must stop at the first copy's end.
		records := v.records
		if v.expect == "valid" {
			for range 300 / max(len(v.records), 1) {
				records = append(records, v.records...)
			}
		}
		ver := journal.NewVerifier(trust)
		ver.Blobs = v.blobArea()
		err := journal.VerifyStream(context.Background(), ver, func(fn func([]byte) error) error {
			for _, r := range records {
				if err := fn(r); err != nil {
					return err
				}
			}
			return nil
		})
		var got *journal.Summary
		if err == nil && len(records) == len(v.records) {
			got, err = ver.Finish()
		}
		if len(records) > len(v.records) {
			// The copies repeat seq 0: a sequence error right after the
			// first copy (or after its end entry).
			var verr *journal.VerifyError
			if !errors.As(err, &verr) || verr.Seq != uint64(len(v.records)) {
				t.Errorf("%s repeated: %v, want an error at entry %d", v.name, err, len(v.records))
			}
			continue
		}
		if fmt.Sprint(err) != fmt.Sprint(wantErr) || (err == nil && !bytes.Equal(got.Head, want.Head)) {
			t.Errorf("%s: VerifyStream gives %v, Add gives %v", v.name, err, wantErr)
		}
	}
}

func verifyRecords(records [][]byte, trust journal.TrustFunc, blobs journal.Blobs) (*journal.Summary, error) {
	ver := journal.NewVerifier(trust)
	ver.Blobs = blobs
	for _, r := range records {
		if err := ver.Add(r); err != nil {
			return nil, err
		}
	}
	return ver.Finish()
}

// TestGenerateVectors checks that testdata/vectors holds exactly what the
// generator writes, or rewrites it with -rewrite.
func TestGenerateVectors(t *testing.T) {
	vs := generateVectors(t)
	want := map[string][]byte{}
	for _, v := range vs {
		want[v.name] = v.marshal()
	}
	golden.Sync(t, vectorDir, "*.txt", want, *rewrite)
}

// item is one entry of a journal plan, and whether its commit ends there.
type item struct {
	e    *journal.Entry
	seal bool
}

// writeJournal links and seals a plan's entries as a Writer would. A tamper
// function replaces the canonical bytes of entry seq; the chain then goes on
// from the tampered bytes and later seals sign them, so that the vector has
// exactly one defect.
func writeJournal(tb testing.TB, run journal.RunID, key ed25519.PrivateKey, plan []item, tamper map[uint64]func([]byte) []byte) []journal.Record {
	tb.Helper()
	c := journal.NewChain(run, key)
	var recs []journal.Record
	for _, it := range plan {
		seq := c.Next()
		if it.e.Time == 0 {
			it.e.Time = t0.Add(time.Duration(seq) * time.Millisecond).UnixNano()
		}
		r, err := c.Link(it.e)
		if err != nil {
			tb.Fatalf("entry %d: %v", seq, err)
		}
		if f := tamper[seq]; f != nil {
			r.Entry = f(r.Entry)
			c = journal.ResumeChain(run, key, seq, journal.Sum(r.Entry))
		}
		if it.seal {
			r.Seal = c.Seal()
		}
		recs = append(recs, r)
	}
	return recs
}

func encodeRecords(tb testing.TB, recs []journal.Record) [][]byte {
	tb.Helper()
	out := make([][]byte, len(recs))
	for i := range recs {
		b, err := journal.EncodeRecord(&recs[i])
		if err != nil {
			tb.Fatal(err)
		}
		out[i] = b
	}
	return out
}

func mustCBOR(tb testing.TB, v any) []byte {
	tb.Helper()
	b, err := abi.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// Entries of the plans, as the host writes them.

func startEntry(tb testing.TB) *journal.Entry {
	return &journal.Entry{Phase: journal.PhaseStart, Header: &journal.Header{
		ModuleSHA256: journal.Sum([]byte("vector module")),
		ABI:          abi.Version,
		Input:        []byte("hello"),
		Seed:         bytes.Repeat([]byte{0x5e}, 32),
		WallBase:     t0.UnixNano(),
		Grant:        mustCBOR(tb, map[string]any{"run": map[string]any{}, "kv": map[string]any{"namespace": "vectors"}}),
		ModuleName:   "vector",
	}}
}

// forkHeader is the header of startEntry forked from run 0x77.. at its
// entry 7, after its step 2.
func forkHeader(tb testing.TB) *journal.Header {
	var parent journal.RunID
	for i := range parent {
		parent[i] = 0x77
	}
	h := *startEntry(tb).Header
	h.Fork = &journal.Fork{Parent: parent, Seq: 7, Entry: journal.Sum([]byte("parent entry 7")), Step: 2}
	return &h
}

// forkPlan is a fork's journal with header h: a pure call and an effect
// served from the parent, then a live pure call.
func forkPlan(tb testing.TB, h *journal.Header) []item {
	put := putRequest(tb)
	return []item{
		{&journal.Entry{Phase: journal.PhaseStart, Header: h}, false},
		{pureEntry(1, "run.input", nil, inputResponse(tb), abi.StatusOK), false},
		{intentEntry(2, "kv.put", put), false},
		{outcomeEntry(2, "kv.put", put, nil, abi.StatusOK), false},
		{pureEntry(3, "run.set_output", outputRequest(tb), nil, abi.StatusOK), false},
		{endEntry(3, []byte("done")), true},
	}
}

func endEntry(steps uint64, output []byte) *journal.Entry {
	return &journal.Entry{Phase: journal.PhaseEnd, End: &journal.End{Status: journal.StatusCompleted, Output: output, Steps: steps}}
}

// pureEntry is a pure call: one completed (or failed) entry with request and
// response.
func pureEntry(step uint64, op string, req, resp []byte, status abi.Status) *journal.Entry {
	phase := journal.PhaseCompleted
	if status != abi.StatusOK {
		phase = journal.PhaseFailed
	}
	return &journal.Entry{Phase: phase, Step: step, Op: op, InputHash: journal.Sum(req), Request: req,
		OutputHash: journal.Sum(resp), Response: resp, Status: uint32(status)}
}

func intentEntry(step uint64, op string, req []byte) *journal.Entry {
	return &journal.Entry{Phase: journal.PhaseIntent, Step: step, Op: op, InputHash: journal.Sum(req), Request: req}
}

func executingEntry(run journal.RunID, step uint64, op string, req []byte) *journal.Entry {
	return &journal.Entry{Phase: journal.PhaseExecuting, Step: step, Op: op, InputHash: journal.Sum(req),
		Key: fmt.Sprintf("%s-%d", run, step)}
}

// outcomeEntry closes an effect: it repeats step, op and input hash, and
// carries no request.
func outcomeEntry(step uint64, op string, req, resp []byte, status abi.Status) *journal.Entry {
	e := pureEntry(step, op, req, resp, status)
	e.Request = nil
	return e
}

func inputResponse(tb testing.TB) []byte {
	return mustCBOR(tb, abi.InputResponse{Input: []byte("hello")})
}

func logRequest(tb testing.TB, msg string) []byte {
	return mustCBOR(tb, abi.LogRequest{Level: abi.LevelInfo, Message: msg})
}

func putRequest(tb testing.TB) []byte {
	return mustCBOR(tb, abi.KVPutRequest{Key: "greeting", Value: []byte("hi")})
}

func outputRequest(tb testing.TB) []byte {
	return mustCBOR(tb, abi.SetOutputRequest{Output: []byte("done")})
}

// effectPlan is the base journal of most vectors, committed as the host
// commits: the start alone; then pure calls and an effect's intent and
// executing entries, sealed before the effect is dispatched; then the rest.
//
//	0 start             sealed
//	1 run.input         (step 1, pure)
//	2 run.log           (step 2, pure)
//	3 kv.put intent     (step 3)
//	4 kv.put executing  sealed
//	5 kv.put completed
//	6 run.set_output    (step 4, pure)
//	7 end               sealed
func effectPlan(tb testing.TB, run journal.RunID) []item {
	put := putRequest(tb)
	return []item{
		{startEntry(tb), true},
		{pureEntry(1, "run.input", nil, inputResponse(tb), abi.StatusOK), false},
		{pureEntry(2, "run.log", logRequest(tb, "hello"), nil, abi.StatusOK), false},
		{intentEntry(3, "kv.put", put), false},
		{executingEntry(run, 3, "kv.put", put), true},
		{outcomeEntry(3, "kv.put", put, nil, abi.StatusOK), false},
		{pureEntry(4, "run.set_output", outputRequest(tb), nil, abi.StatusOK), false},
		{endEntry(4, []byte("done")), true},
	}
}

// Tampering helpers on an entry's CBOR map, field by field.

type field struct {
	key uint64
	raw []byte
}

func entryFields(tb testing.TB, b []byte) []field {
	tb.Helper()
	var m map[uint64]cbor.RawMessage
	if err := cbor.Unmarshal(b, &m); err != nil {
		tb.Fatal(err)
	}
	var fs []field
	for k, v := range m {
		fs = append(fs, field{k, v})
	}
	slices.SortFunc(fs, func(a, b field) int { return int(a.key) - int(b.key) })
	return fs
}

// appendHead appends a CBOR head of the given major type with the shortest
// argument.
func appendHead(b []byte, major byte, n uint64) []byte {
	m := major << 5
	switch {
	case n < 24:
		return append(b, m|byte(n))
	case n <= 0xff:
		return append(b, m|24, byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(b, m|25), uint16(n))
	case n <= 0xffffffff:
		return binary.BigEndian.AppendUint32(append(b, m|26), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(b, m|27), n)
}

func encodeFields(fs []field) []byte {
	b := appendHead(nil, 5, uint64(len(fs)))
	for _, f := range fs {
		b = appendHead(b, 0, f.key)
		b = append(b, f.raw...)
	}
	return b
}

func setField(fs []field, key uint64, raw []byte) []field {
	for i := range fs {
		if fs[i].key == key {
			fs[i].raw = raw
			return fs
		}
	}
	panic(fmt.Sprintf("no field %d", key))
}

func indexOf(fs []field, key uint64) int {
	return slices.IndexFunc(fs, func(f field) bool { return f.key == key })
}

// reencode decodes an entry, lets f change it, and encodes it canonically.
func reencode(tb testing.TB, f func(*journal.Entry)) func([]byte) []byte {
	return func(b []byte) []byte {
		e, err := journal.DecodeEntry(b)
		if err != nil {
			tb.Fatal(err)
		}
		f(e)
		out, err := journal.EncodeEntry(e)
		if err != nil {
			tb.Fatal(err)
		}
		return out
	}
}

func withFields(tb testing.TB, f func([]field) []byte) func([]byte) []byte {
	return func(b []byte) []byte { return f(entryFields(tb, b)) }
}

func trustA() []ed25519.PublicKey { return []ed25519.PublicKey{pub(cellA)} }

func trustAB() []ed25519.PublicKey { return []ed25519.PublicKey{pub(cellA), pub(cellB)} }

// generateVectors builds every vector from the fixed inputs.
func generateVectors(tb testing.TB) []*vector {
	var vs []*vector
	add := func(name, expect string, bad uint64, trust []ed25519.PublicKey, records [][]byte, comment ...string) {
		vs = append(vs, &vector{name: name + ".txt", expect: expect, badEntry: bad, trust: trust, comment: comment, records: records})
	}
	base := func(tamper map[uint64]func([]byte) []byte) []journal.Record {
		return writeJournal(tb, runX, cellA, effectPlan(tb, runX), tamper)
	}
	enc := func(recs []journal.Record) [][]byte { return encodeRecords(tb, recs) }

	// Valid journals.
	add("valid-effect", "valid", 0, trustA(), enc(base(nil)),
		"pure calls and one effect (intent, executing, completed), committed as the host commits:",
		"seals on entries 0, 4 (before the effect is dispatched) and 7")

	add("valid-single-commit", "valid", 0, trustA(), enc(writeJournal(tb, runX, cellA, []item{
		{startEntry(tb), false},
		{pureEntry(1, "run.input", nil, inputResponse(tb), abi.StatusOK), false},
		{endEntry(1, nil), true},
	}, nil)), "a whole run in one commit: one seal, on the last entry, covers all three")

	var group []item
	group = append(group, item{startEntry(tb), true})
	for step := uint64(1); step <= 8; step++ {
		group = append(group, item{pureEntry(step, "run.log", logRequest(tb, fmt.Sprintf("line %d", step)), nil, abi.StatusOK), false})
	}
	group = append(group, item{endEntry(8, nil), true})
	add("valid-group-commit", "valid", 0, trustA(), enc(writeJournal(tb, runX, cellA, group, nil)),
		"eight pure calls and the end entry group-committed under one seal on entry 9")

	every := effectPlan(tb, runX)
	for i := range every {
		every[i].seal = true
	}
	add("valid-seal-every-entry", "valid", 0, trustA(), enc(writeJournal(tb, runX, cellA, every, nil)),
		"every entry is a commit of its own and carries a seal")

	tooLarge := mustCBOR(tb, abi.Error{Code: abi.StatusTooLarge, Message: "request exceeds the limit of 1048576 bytes"})
	big := bytes.Repeat([]byte{0xee}, 64)
	refused := pureEntry(1, "run.log", big, tooLarge, abi.StatusTooLarge)
	refused.Request = nil
	add("valid-too-large", "valid", 0, trustA(), enc(writeJournal(tb, runX, cellA, []item{
		{startEntry(tb), true},
		{refused, false},
		{endEntry(1, nil), true},
	}, nil)), "a failed too_large call keeps the input hash of the refused request but not the request")

	put := putRequest(tb)
	denied := mustCBOR(tb, abi.Error{Code: abi.StatusDenied, Message: "approval refused"})
	add("valid-intent-failed", "valid", 0, trustA(), enc(writeJournal(tb, runX, cellA, []item{
		{startEntry(tb), true},
		{intentEntry(1, "kv.put", put), true},
		{outcomeEntry(1, "kv.put", put, denied, abi.StatusDenied), false},
		{endEntry(1, nil), true},
	}, nil)), "an intent closed by a failed entry without executing: the effect was never dispatched")

	unfinished := base(nil)[:5]
	add("valid-unfinished", "valid", 0, trustA(), enc(unfinished),
		"a run still in progress (or cut at a commit boundary): entries 0..4, no end entry;",
		"format version 1 cannot tell the two apart")

	handoff := effectPlan(tb, runX)
	ca := journal.NewChain(runX, cellA)
	var hrecs []journal.Record
	for i, it := range handoff[:5] {
		it.e.Time = t0.Add(time.Duration(i) * time.Millisecond).UnixNano()
		r, err := ca.Link(it.e)
		if err != nil {
			tb.Fatal(err)
		}
		if it.seal {
			r.Seal = ca.Seal()
		}
		hrecs = append(hrecs, r)
	}
	handoffTail := func(key ed25519.PrivateKey) []journal.Record {
		cb := journal.ResumeChain(runX, key, ca.Next()-1, ca.Head())
		out := slices.Clone(hrecs)
		for i, it := range effectPlan(tb, runX)[5:] {
			it.e.Time = t0.Add(time.Duration(5+i) * time.Millisecond).UnixNano()
			r, err := cb.Link(it.e)
			if err != nil {
				tb.Fatal(err)
			}
			if it.seal {
				r.Seal = cb.Seal()
			}
			out = append(out, r)
		}
		return out
	}
	add("valid-handoff", "valid", 0, trustAB(), enc(handoffTail(cellB)),
		"cell A writes and seals entries 0..4, then trusted cell B continues the chain and seals 5..7")

	add("valid-fork", "valid", 0, trustA(), enc(writeJournal(tb, runX, cellA, forkPlan(tb, forkHeader(tb)), nil)),
		"a fork (header field 10): calls 1 and 2 were served from the parent's journal, the effect",
		"journaled as intent and completed, never dispatched; step 3 ran live")

	llmFork := forkHeader(tb)
	llmFork.Fork.Provider, llmFork.Fork.Model = "openai", "gpt-4o-mini"
	add("valid-fork-llm-override", "valid", 0, trustA(), enc(writeJournal(tb, runX, cellA, forkPlan(tb, llmFork), nil)),
		"a fork whose live llm.complete calls went to another provider and model (fork fields 5 and 6)")

	traced := *startEntry(tb).Header
	traced.Trace = &journal.TraceRef{ID: bytes.Repeat([]byte{0x4b}, 16), Span: bytes.Repeat([]byte{0x5c}, 8)}
	tracedPlan := func() []item {
		p := effectPlan(tb, runX)
		p[0].e.Header = &traced
		return p
	}
	add("valid-traced", "valid", 0, trustA(), enc(writeJournal(tb, runX, cellA, tracedPlan(), nil)),
		"a run whose header names its OpenTelemetry trace and span (header field 12)")

	// Decode failures.
	add("empty-journal", "decode", 0, trustA(), nil, "no records at all")

	truncated := enc(base(nil))
	truncated[7] = truncated[7][:len(truncated[7])-10]
	add("truncated-record", "decode", 7, trustA(), truncated, "the last record lost its final 10 bytes (a torn write)")

	trailing := enc(base(nil))
	trailing[2] = append(trailing[2], 0x00)
	add("trailing-bytes", "decode", 2, trustA(), trailing, "record 2 is followed by one extra byte")

	add("noncanonical-integer", "decode", 2, trustA(), enc(base(map[uint64]func([]byte) []byte{
		2: withFields(tb, func(fs []field) []byte { return encodeFields(setField(fs, 3, []byte{0x18, 0x02})) }),
	})), "entry 2 encodes its seq as 0x18 0x02 instead of 0x02; the chain and seals are",
		"recomputed over those bytes, so only the canonical check catches it")

	add("map-keys-out-of-order", "decode", 2, trustA(), enc(base(map[uint64]func([]byte) []byte{
		2: withFields(tb, func(fs []field) []byte {
			i, j := indexOf(fs, 13), indexOf(fs, 14)
			fs[i], fs[j] = fs[j], fs[i]
			return encodeFields(fs)
		}),
	})), "entry 2 writes key 14 before key 13; chain and seals recomputed over those bytes")

	add("duplicate-map-key", "decode", 2, trustA(), enc(base(map[uint64]func([]byte) []byte{
		2: withFields(tb, func(fs []field) []byte {
			i := indexOf(fs, 14)
			fs = slices.Insert(fs, i+1, fs[i])
			return encodeFields(fs)
		}),
	})), "entry 2 holds key 14 (time) twice with the same value; chain and seals recomputed")

	add("unknown-field", "decode", 2, trustA(), enc(base(map[uint64]func([]byte) []byte{
		2: withFields(tb, func(fs []field) []byte { return encodeFields(append(fs, field{21, []byte{0x00}})) }),
	})), "entry 2 carries key 21, which format version 1 does not define; chain and seals recomputed")

	add("wrong-version", "decode", 2, trustA(), enc(base(map[uint64]func([]byte) []byte{
		2: withFields(tb, func(fs []field) []byte { return encodeFields(setField(fs, 1, []byte{0x02})) }),
	})), "entry 2 claims format version 2; chain and seals recomputed")

	add("indefinite-length", "decode", 2, trustA(), enc(base(map[uint64]func([]byte) []byte{
		2: withFields(tb, func(fs []field) []byte {
			b := encodeFields(fs)
			b[0] = 0xbf
			return append(b, 0xff)
		}),
	})), "entry 2 is an indefinite-length map; chain and seals recomputed")

	add("tagged-value", "decode", 2, trustA(), enc(base(map[uint64]func([]byte) []byte{
		2: withFields(tb, func(fs []field) []byte {
			i := indexOf(fs, 9)
			fs[i].raw = append([]byte{0xd8, 0x18}, fs[i].raw...)
			return encodeFields(fs)
		}),
	})), "entry 2 wraps its request in tag 24; chain and seals recomputed")

	add("header-on-call-entry", "decode", 2, trustA(), enc(base(map[uint64]func([]byte) []byte{
		2: reencode(tb, func(e *journal.Entry) { e.Header = startEntry(tb).Header }),
	})), "entry 2, a call, carries a run header; chain and seals recomputed")

	badFork := forkHeader(tb)
	badFork.Fork.Entry = badFork.Fork.Entry[:31]
	add("fork-short-entry-hash", "decode", 0, trustA(), enc(writeJournal(tb, runX, cellA, forkPlan(tb, forkHeader(tb)), map[uint64]func([]byte) []byte{
		0: withFields(tb, func(fs []field) []byte { return encodeFields(setField(fs, 17, mustCBOR(tb, badFork))) }),
	})), "the header's fork names a 31-byte entry hash; a fork point binds a 32-byte one; chain and seals recomputed")

	badTrace := traced
	badTrace.Trace = &journal.TraceRef{ID: traced.Trace.ID[:15], Span: traced.Trace.Span}
	add("trace-short-id", "decode", 0, trustA(), enc(writeJournal(tb, runX, cellA, tracedPlan(), map[uint64]func([]byte) []byte{
		0: withFields(tb, func(fs []field) []byte { return encodeFields(setField(fs, 17, mustCBOR(tb, &badTrace))) }),
	})), "the header's trace names a 15-byte trace id; a W3C trace id is 16 bytes; chain and seals recomputed")

	short := base(nil)
	short[4].Seal.Sig = short[4].Seal.Sig[:63]
	add("short-signature", "decode", 4, trustA(), enc(short), "the seal of entry 4 holds a 63-byte signature")

	repeats := writeJournal(tb, runX, cellA, []item{
		{startEntry(tb), true},
		{intentEntry(1, "kv.put", put), false},
		{executingEntry(runX, 1, "kv.put", put), true},
		{pureEntry(1, "kv.put", put, nil, abi.StatusOK), false},
		{endEntry(1, nil), true},
	}, nil)
	add("outcome-repeats-request", "decode", 3, trustA(), enc(repeats),
		"the completed entry of an effect carries the request again (only its intent may)")

	// Gate records (field 19): on a call's first entry only.
	gated := func(e *journal.Entry, rec map[string]any) *journal.Entry {
		e.Gate = mustCBOR(tb, rec)
		return e
	}
	allowed := map[string]any{"allow": true, "policy": map[string]any{"allowed": true, "by": "platform", "determining": []string{"platform:allow-run"}}}
	allowedAsked := map[string]any{"allow": true, "policy": map[string]any{"allowed": true, "by": "both"}, "mode": "ask", "rule": "ask-before-put", "approved": true, "approver": "operator"}
	refusedCap := map[string]any{"allow": false, "layer": "capability", "reason": "capability http is not granted"}
	refusedSize := map[string]any{"allow": false, "layer": "capability", "reason": "request exceeds the limit of 1048576 bytes"}
	deniedHTTP := mustCBOR(tb, abi.Error{Code: abi.StatusDenied, Message: "capability http is not granted"})
	httpReq := mustCBOR(tb, abi.HTTPRequest{Method: "GET", URL: "http://example.com/"})
	tooBig := pureEntry(4, "run.log", big, tooLarge, abi.StatusTooLarge)
	tooBig.Request = nil
	gatePlan := func() []item {
		return []item{
			{startEntry(tb), true},
			{gated(pureEntry(1, "run.input", nil, inputResponse(tb), abi.StatusOK), allowed), false},
			{gated(intentEntry(2, "kv.put", put), allowedAsked), false},
			{executingEntry(runX, 2, "kv.put", put), false},
			{outcomeEntry(2, "kv.put", put, nil, abi.StatusOK), true},
			{gated(pureEntry(3, "http.request", httpReq, deniedHTTP, abi.StatusDenied), refusedCap), false},
			{gated(tooBig, refusedSize), false},
			{endEntry(4, nil), true},
		}
	}
	add("valid-gate-records", "valid", 0, trustA(), enc(writeJournal(tb, runX, cellA, gatePlan(), nil)),
		"gate records (field 19) where the host writes them, on each call's first entry: a pure call,",
		"the intent of an effect (asked and approved), a call the capability layer refused, a too_large call")
	// gateOn adds a gate record to entry seq of gatePlan as bytes: a Chain
	// refuses to link an entry whose phase may not carry one.
	gateOn := func(seq uint64, rec map[string]any) [][]byte {
		return enc(writeJournal(tb, runX, cellA, gatePlan(), map[uint64]func([]byte) []byte{
			seq: withFields(tb, func(fs []field) []byte {
				return encodeFields(append(fs, field{19, mustCBOR(tb, mustCBOR(tb, rec))}))
			}),
		}))
	}
	add("gate-on-executing", "decode", 3, trustA(), gateOn(3, allowedAsked),
		"the executing entry of step 2 carries the gate record again (shape rule 8)")
	add("gate-on-end", "decode", 7, trustA(), gateOn(7, allowed),
		"the end entry carries a gate record (shape rule 8)")
	add("gate-on-effect-outcome", "decode", 4, trustA(), gateOn(4, allowedAsked),
		"the completed entry that closes the effect of step 2 carries a gate record, which belongs to",
		"its intent alone (section 6, rule 3.2); the entry's phase alone allows it, the entries before do not")

	// Budget records (field 20): a reserve on an effect's intent, its
	// settle on the outcome; a call the budget refused carries none.
	budgeted := func(e *journal.Entry, ops ...map[string]any) *journal.Entry {
		e.Budget = mustCBOR(tb, ops)
		return e
	}
	refusedBudget := mustCBOR(tb, abi.Error{Code: abi.StatusBudget, Message: "budget exceeded: http_requests: asked 1, 0 left of 1 (1 spent, 0 reserved)"})
	budgetPlan := func() []item {
		return []item{
			{startEntry(tb), true},
			{budgeted(intentEntry(1, "http.request", httpReq), map[string]any{"op": "reserve", "id": 1, "step": 1, "amounts": map[string]any{"http_requests": 1}}), false},
			{executingEntry(runX, 1, "http.request", httpReq), true},
			{budgeted(outcomeEntry(1, "http.request", httpReq, nil, abi.StatusOK), map[string]any{"op": "settle", "id": 1, "amounts": map[string]any{"http_requests": 1}}), false},
			{pureEntry(2, "http.request", httpReq, refusedBudget, abi.StatusBudget), false},
			{endEntry(2, nil), true},
		}
	}
	add("valid-budget-records", "valid", 0, trustA(), enc(writeJournal(tb, runX, cellA, budgetPlan(), nil)),
		"budget records (field 20) where the host writes them: the reserve of an HTTP request on its",
		"intent, its settle on its completed entry; the next request, refused with status budget, carries none")
	add("budget-on-start", "decode", 0, trustA(), enc(writeJournal(tb, runX, cellA, budgetPlan(), map[uint64]func([]byte) []byte{
		0: withFields(tb, func(fs []field) []byte {
			return encodeFields(append(fs, field{20, mustCBOR(tb, mustCBOR(tb, []map[string]any{{"op": "release", "id": 1}}))}))
		}),
	})), "the start entry carries a budget record (shape rule 9)")

	// Sequence failures.
	del := enc(base(nil))
	add("deleted-entry", "sequence", 2, trustA(), slices.Delete(del, 2, 3), "entry 2 was removed")

	missingStart := enc(base(nil))
	add("deleted-start", "sequence", 0, trustA(), missingStart[1:], "entry 0 (the start) was removed")

	dup := enc(base(nil))
	add("duplicated-entry", "sequence", 3, trustA(), slices.Insert(dup, 3, dup[2]), "entry 2 appears twice")

	reord := enc(base(nil))
	reord[5], reord[6] = reord[6], reord[5]
	add("reordered-entries", "sequence", 5, trustA(), reord, "entries 5 and 6 swapped places")

	splice := enc(base(nil))
	other := enc(writeJournal(tb, runY, cellA, effectPlan(tb, runY), nil))
	splice[2] = other[2]
	add("spliced-other-run", "sequence", 2, trustA(), splice,
		"entry 2 is taken from another run written by the same trusted cell")

	add("executing-without-intent", "sequence", 1, trustA(), enc(writeJournal(tb, runX, cellA, []item{
		{startEntry(tb), true},
		{executingEntry(runX, 1, "kv.put", put), true},
		{outcomeEntry(1, "kv.put", put, nil, abi.StatusOK), false},
		{endEntry(1, nil), true},
	}, nil)), "step 1 starts with an executing entry")

	add("step-gap", "sequence", 2, trustA(), enc(writeJournal(tb, runX, cellA, []item{
		{startEntry(tb), true},
		{pureEntry(1, "run.input", nil, inputResponse(tb), abi.StatusOK), false},
		{pureEntry(3, "run.log", logRequest(tb, "hello"), nil, abi.StatusOK), false},
		{endEntry(3, nil), true},
	}, nil)), "step 3 follows step 1")

	add("executing-twice", "sequence", 3, trustA(), enc(writeJournal(tb, runX, cellA, []item{
		{startEntry(tb), true},
		{intentEntry(1, "kv.put", put), false},
		{executingEntry(runX, 1, "kv.put", put), false},
		{executingEntry(runX, 1, "kv.put", put), true},
		{outcomeEntry(1, "kv.put", put, nil, abi.StatusOK), false},
		{endEntry(1, nil), true},
	}, nil)), "step 1 has two executing entries")

	add("call-while-effect-open", "sequence", 3, trustA(), enc(writeJournal(tb, runX, cellA, []item{
		{startEntry(tb), true},
		{intentEntry(1, "kv.put", put), false},
		{executingEntry(runX, 1, "kv.put", put), true},
		{pureEntry(2, "run.log", logRequest(tb, "hello"), nil, abi.StatusOK), false},
		{endEntry(2, nil), true},
	}, nil)), "step 2 is recorded while step 1 is still executing")

	add("end-with-open-effect", "sequence", 3, trustA(), enc(writeJournal(tb, runX, cellA, []item{
		{startEntry(tb), true},
		{intentEntry(1, "kv.put", put), false},
		{executingEntry(runX, 1, "kv.put", put), true},
		{endEntry(1, nil), true},
	}, nil)), "the run ends while step 1 is executing")

	add("entry-after-end", "sequence", 2, trustA(), enc(writeJournal(tb, runX, cellA, []item{
		{startEntry(tb), true},
		{endEntry(0, nil), false},
		{pureEntry(1, "run.input", nil, inputResponse(tb), abi.StatusOK), true},
	}, nil)), "a call is recorded after the end entry")

	// Chain failures.
	add("broken-chain", "chain", 2, trustA(), enc(base(map[uint64]func([]byte) []byte{
		2: reencode(tb, func(e *journal.Entry) { e.Prev = journal.Sum([]byte("not the previous entry")) }),
	})), "entry 2's prev is altered, re-encoded canonically, and the rest of the chain and its",
		"seals are recomputed by the right key: only the chain check can catch it")

	midGroup := base(nil)
	midGroup[2].Entry = reencode(tb, func(e *journal.Entry) { e.Time++ })(midGroup[2].Entry)
	add("altered-unsealed-entry", "chain", 3, trustA(), enc(midGroup),
		"the time of entry 2, inside the group sealed at entry 4, is changed by one nanosecond:",
		"entry 3's prev no longer matches, so the verifier names entry 3")

	// Hash failures.
	add("altered-response", "hash", 1, trustA(), enc(base(map[uint64]func([]byte) []byte{
		1: reencode(tb, func(e *journal.Entry) {
			e.Response = mustCBOR(tb, abi.InputResponse{Input: []byte("goodbye")})
		}),
	})), "entry 1's response is swapped for another valid response, its output hash kept;",
		"chain and seals recomputed")

	add("altered-request", "hash", 2, trustA(), enc(base(map[uint64]func([]byte) []byte{
		2: reencode(tb, func(e *journal.Entry) { e.Request = logRequest(tb, "goodbye") }),
	})), "entry 2's request is swapped for another valid request, its input hash kept;",
		"chain and seals recomputed")

	// Signature failures.
	flipped := base(nil)
	flipped[4].Seal.Sig[10] ^= 0x01
	add("bad-signature", "signature", 4, trustA(), enc(flipped), "one bit of the seal on entry 4 is flipped")

	sealedAltered := base(nil)
	sealedAltered[4].Entry = reencode(tb, func(e *journal.Entry) { e.Time++ })(sealedAltered[4].Entry)
	add("altered-sealed-entry", "signature", 4, trustA(), enc(sealedAltered),
		"the time of entry 4, which carries a seal, is changed by one nanosecond")

	wrongCell := base(nil)
	head := journal.Sum(wrongCell[4].Entry)
	wrongCell[4].Seal = &journal.Seal{Cell: pub(cellB), Sig: ed25519.Sign(cellB, journal.SealMessage(runX, 4, head))}
	add("seal-key-not-entry-cell", "signature", 4, trustAB(), enc(wrongCell),
		"entry 4 was written by cell A but is sealed by cell B; both are trusted and B's signature verifies")

	swapped := base(nil)
	swapped[4].Seal.Cell = pub(cellB)
	add("seal-key-substituted", "signature", 4, trustAB(), enc(swapped),
		"the seal on entry 4 names trusted cell B, but the signature is cell A's")

	replayed := base(nil)
	replayed[7].Seal = replayed[4].Seal
	add("seal-replayed", "signature", 7, trustA(), enc(replayed), "the seal of entry 4 is copied onto entry 7")

	foreign := base(nil)
	foreign[7].Seal = writeJournal(tb, runY, cellA, effectPlan(tb, runY), nil)[7].Seal
	add("seal-from-other-run", "signature", 7, trustA(), enc(foreign),
		"the seal on entry 7 is taken from the same entry of another run by the same cell")

	// Leases: a run that stopped with an effect in doubt, resumed under a
	// new lease, whose holder tells the guest the effect is in doubt.
	leased := func(resumeEpoch uint64, tailEpoch uint64) []item {
		put := putRequest(tb)
		inDoubt := mustCBOR(tb, abi.Error{Code: abi.StatusInDoubt, Message: "kv.put of step 2 was in flight when the run stopped"})
		lease := func(epoch uint64) *journal.Entry { return &journal.Entry{Phase: journal.PhaseLease, Epoch: epoch} }
		under := func(e *journal.Entry, epoch uint64) *journal.Entry { e.Epoch = epoch; return e }
		return []item{
			{startEntry(tb), false},
			{lease(1), true},
			{under(pureEntry(1, "run.input", nil, inputResponse(tb), abi.StatusOK), 1), false},
			{under(intentEntry(2, "kv.put", put), 1), false},
			{under(executingEntry(runX, 2, "kv.put", put), 1), true},
			{lease(resumeEpoch), false},
			{under(outcomeEntry(2, "kv.put", put, inDoubt, abi.StatusInDoubt), tailEpoch), false},
			{under(endEntry(2, nil), tailEpoch), true},
		}
	}
	add("valid-lease-resume", "valid", 0, trustA(), enc(writeJournal(tb, runX, cellA, leased(2, 2), nil)),
		"lease epoch 1 taken after the start; the run stops with step 2 in doubt; a resume takes epoch 2",
		"(a lease entry may come while a step is open) and records the step as in_doubt")
	add("lease-epoch-not-increasing", "sequence", 5, trustA(), enc(writeJournal(tb, runX, cellA, leased(1, 1), nil)),
		"the resume's lease entry repeats epoch 1: epochs only grow")
	add("entry-under-old-epoch", "sequence", 6, trustA(), enc(writeJournal(tb, runX, cellA, leased(2, 1), nil)),
		"after the lease of epoch 2, entry 6 is written under epoch 1 (a deposed holder's write)")
	late := leased(2, 2)
	stale := pureEntry(3, "run.log", logRequest(tb, "hello"), nil, abi.StatusOK)
	stale.Epoch, stale.Request = 1, logRequest(tb, "goodbye")
	late = slices.Insert(late, 7, item{stale, false})
	add("old-epoch-before-hash", "sequence", 7, trustA(), enc(writeJournal(tb, runX, cellA, late, nil)),
		"after the lease of epoch 2, entry 7 is written under epoch 1 and its request does not match",
		"its input hash: the epoch rule is checked before the call rules, so the class is sequence, not hash")

	// A takeover's lease entry carries the placement decision that picked
	// its cell, under its hash (shape rule 7).
	takeover := func(hash []byte) []item {
		plan := leased(2, 2)
		decision := []byte("a placement decision (its bytes are opaque to the journal)")
		if hash == nil {
			hash = journal.Sum(decision)
		}
		plan[5].e.Request, plan[5].e.InputHash = decision, hash
		return plan
	}
	add("valid-lease-takeover", "valid", 0, trustA(), enc(writeJournal(tb, runX, cellA, takeover(nil), nil)),
		"the resume's lease entry (epoch 2) carries a placement decision in its request, under its input hash")
	add("lease-decision-hash-mismatch", "hash", 5, trustA(), enc(writeJournal(tb, runX, cellA, takeover(journal.Sum([]byte("another decision"))), nil)),
		"the resume's lease entry carries a placement decision whose SHA-256 is not its input hash")

	// A handoff: cell A writes under epoch 1 up to its step boundary
	// (entries 0..4), hands the run to cell B, whose lease entry (epoch 2)
	// carries A's signed envelope under its hash (shape rule 7), and B
	// finishes the run.
	handedOff := func() []journal.Record {
		plan := leased(2, 2)
		recs := writeJournal(tb, runX, cellA, plan[:5], nil)
		head := journal.Sum(recs[4].Entry)
		env := handoffEnvelope(tb, head)
		plan[5].e.Request, plan[5].e.InputHash = env, journal.Sum(env)
		cb := journal.ResumeChain(runX, cellB, 4, head)
		for i, it := range plan[5:] {
			it.e.Time = t0.Add(time.Duration(5+i) * time.Millisecond).UnixNano()
			r, err := cb.Link(it.e)
			if err != nil {
				tb.Fatal(err)
			}
			if it.seal {
				r.Seal = cb.Seal()
			}
			recs = append(recs, r)
		}
		return recs
	}
	add("valid-lease-handoff", "valid", 0, trustAB(), enc(handedOff()),
		"cell A writes entries 0..4 under epoch 1 and hands the run to cell B; B's lease entry (epoch 2)",
		"carries A's handoff envelope (a COSE_Sign1 naming epoch 1 and entry 4's hash) under its input hash")

	// Round seals: entry 7's commit sealed in one store round with two
	// commits of run Y, by one signature over the round's Merkle root.
	roundSealed := func() []journal.Record {
		recs := base(nil)
		other := writeJournal(tb, runY, cellA, effectPlan(tb, runY), nil)
		mk := func(run journal.RunID, seq uint64, r journal.Record) *journal.Batch {
			r.Seal = nil
			return &journal.Batch{Run: run, Next: seq, Records: []journal.Record{r}, SealWith: cellA, Head: journal.Sum(r.Entry)}
		}
		round := []*journal.Batch{mk(runY, 4, other[4]), mk(runX, 7, recs[7]), mk(runY, 7, other[7])}
		journal.SealBatches(round)
		recs[7].Seal = round[1].Records[0].Seal
		return recs
	}
	add("valid-round-seal", "valid", 0, trustA(), enc(roundSealed()),
		"entry 7 is sealed by a round seal: one signature over the Merkle root of three commit heads",
		"(two of another run), with the inclusion proof of entry 7's head (index 1 of 3)")

	badProof := roundSealed()
	badProof[7].Seal.Path[0] = append([]byte(nil), badProof[7].Seal.Path[0]...)
	badProof[7].Seal.Path[0][5] ^= 0x01
	add("round-seal-bad-proof", "signature", 7, trustA(), enc(badProof),
		"a round seal whose inclusion proof has one bit flipped")

	otherLeaf := roundSealed()
	otherLeaf[7].Seal.Index = 2
	add("round-seal-other-leaf", "signature", 7, trustA(), enc(otherLeaf),
		"a round seal that claims entry 7's head is leaf 2 of the round, not leaf 1")

	// Untrusted keys.
	add("untrusted-cell", "untrusted", 0, trustAB(), enc(writeJournal(tb, runX, cellC, effectPlan(tb, runX), nil)),
		"a well-formed journal written and sealed by a cell that is not trusted")

	add("untrusted-handoff", "untrusted", 7, trustA(), enc(handoffTail(cellC)),
		"cell A seals entries 0..4; an untrusted cell continues the chain and seals 5..7")

	// Coverage failures.
	open := base(nil)
	open[7].Seal = nil
	add("uncovered-tail", "uncovered", 5, trustA(), enc(open),
		"the last seal is on entry 4; entries 5..7 are not covered by any seal")

	none := base(nil)
	for i := range none {
		none[i].Seal = nil
	}
	add("no-seals", "uncovered", 0, trustA(), enc(none), "no record carries a seal")

	vs = append(vs, blobVectors(tb)...)
	return vs
}

// blobVectors are the vectors of payloads in blob form (SPEC.md section
// 15): a journal whose run.input response, run.log request and a
// conversation's request (a chain of message blobs) are stored by hash,
// with its blob area, and the ways that area or the forms go wrong.
func blobVectors(tb testing.TB) []*vector {
	var vs []*vector
	add := func(name, expect string, bad uint64, blobs []vblob, records [][]byte, comment ...string) {
		vs = append(vs, &vector{name: name + ".txt", expect: expect, badEntry: bad, trust: trustA(), blobs: blobs, comment: comment, records: records})
	}
	const threshold = 64
	input := mustCBOR(tb, abi.InputResponse{Input: bytes.Repeat([]byte("input "), 20)})
	logReq := logRequest(tb, strings.Repeat("a long log line ", 8))
	chat := mustCBOR(tb, map[string]any{"model": "m", "messages": []any{
		map[string]any{"role": "system", "content": strings.Repeat("be brief. ", 10)},
		map[string]any{"role": "user", "content": "hello"},
		map[string]any{"role": "assistant", "content": strings.Repeat("hi there. ", 10)},
	}})
	in, lg := journal.Externalize(input, threshold), journal.Externalize(logReq, threshold)
	conv, err := journal.EncodeConversation(chat, "messages", threshold)
	if err != nil {
		tb.Fatal(err)
	}
	var area []vblob
	seen := map[string]bool{}
	for _, bs := range [][]journal.Blob{in.Blobs, lg.Blobs, conv.Blobs} {
		for _, b := range bs {
			if !seen[string(b.Sum)] {
				seen[string(b.Sum)] = true
				area = append(area, vblob{b.Sum, b.Data})
			}
		}
	}
	slices.SortFunc(area, func(a, b vblob) int { return bytes.Compare(a.sum, b.sum) })
	stored := func(e *journal.Entry, req, resp []byte) *journal.Entry {
		if req != nil {
			e.Request = req
		}
		if resp != nil {
			e.Response = resp
		}
		return e
	}
	plan := func(logStored []byte) []item {
		return []item{
			{startEntry(tb), true},
			{stored(pureEntry(1, "run.input", nil, input, abi.StatusOK), nil, in.Stored), false},
			{stored(pureEntry(2, "run.log", logReq, nil, abi.StatusOK), logStored, nil), false},
			{stored(intentEntry(3, "test.chat", chat), conv.Stored, nil), false},
			{executingEntry(runX, 3, "test.chat", chat), true},
			{outcomeEntry(3, "test.chat", chat, mustCBOR(tb, map[string]any{"content": "ok"}), abi.StatusOK), false},
			{endEntry(3, nil), true},
		}
	}
	records := encodeRecords(tb, writeJournal(tb, runX, cellA, plan(lg.Stored), nil))
	without := func(sum []byte) []vblob {
		return slices.DeleteFunc(slices.Clone(area), func(b vblob) bool { return bytes.Equal(b.sum, sum) })
	}
	changed := func(sum []byte) []vblob {
		out := slices.Clone(area)
		for i := range out {
			if bytes.Equal(out[i].sum, sum) {
				d := bytes.Clone(out[i].data)
				d[len(d)/2] ^= 0x01
				out[i].data = d
			}
		}
		return out
	}
	add("valid-blob-forms", "valid", 0, area, records,
		"payloads stored by hash (section 15): the response of step 1 and the request of step 2 with their",
		"long strings as blobs; the request of step 3, a message list, as a chain of one nested blob per",
		"message; every entry's hashes are those of the payloads themselves")
	logBlob := lg.Blobs[0].Sum
	add("blob-missing", "blob", 2, without(logBlob), records,
		"the blob the request of step 2 references is not in the blob area")
	add("blob-changed", "blob", 2, changed(logBlob), records,
		"one byte of the blob the request of step 2 references is changed: its bytes no longer hash to its name")
	node := conv.Blobs[len(conv.Blobs)-1].Sum // the chain's last node, which the request names
	add("nested-blob-changed", "blob", 3, changed(node), records,
		"one byte of the last message node of step 3's chain is changed")
	bad := append(slices.Clone(lg.Stored[:6]), 0x40) // the tag, an array of n parts, then an empty literal
	add("blob-form-malformed", "decode", 2, area, encodeRecords(tb, writeJournal(tb, runX, cellA, plan(bad), nil)),
		"the request of step 2 begins with the blob form's tag, does not hash to its input hash, and is",
		"no well-formed blob form (an empty literal)")
	other := journal.Externalize(logRequest(tb, strings.Repeat("another long line ", 8)), threshold)
	area2 := append(slices.Clone(area), vblob{other.Blobs[0].Sum, other.Blobs[0].Data})
	slices.SortFunc(area2, func(a, b vblob) int { return bytes.Compare(a.sum, b.sum) })
	add("blob-form-other-payload", "hash", 2, area2, encodeRecords(tb, writeJournal(tb, runX, cellA, plan(other.Stored), nil)),
		"the request of step 2 is a well-formed blob form whose blobs are all there, and it resolves to",
		"another request than the one its input hash names")
	fb := &journal.FormBuilder{}
	fb.Blob([]byte("a blob nobody stored"))
	forged, err := fb.Form()
	if err != nil {
		tb.Fatal(err)
	}
	add("valid-request-looks-like-blob-form", "valid", 0, nil, encodeRecords(tb, writeJournal(tb, runX, cellA, []item{
		{startEntry(tb), true},
		{pureEntry(1, "run.log", forged, mustCBOR(tb, abi.Error{Code: abi.StatusBadRequest, Message: "malformed request"}), abi.StatusBadRequest), false},
		{endEntry(1, nil), true},
	}, nil)), "a guest sent a request that is a well-formed blob form naming a blob nobody stored; it hashes to",
		"its input hash, so it is taken as it is (section 15.3): no blob is read")
	return vs
}

// handoffEnvelope is the envelope cell A seals to hand runX to cell B at
// the journal head given (host/cell/API.md, Handoff envelopes), with a
// fixed nonce and expiry so that the vector is reproducible (EdDSA
// signatures are deterministic).
func handoffEnvelope(tb testing.TB, head []byte) []byte {
	tb.Helper()
	p := handoff.Payload{Run: runX, From: pub(cellA), To: pub(cellB),
		Audience: handoff.AudiencePrefix + hex.EncodeToString(pub(cellB)),
		Expires:  t0.Add(10 * time.Second).UnixNano(), Nonce: bytes.Repeat([]byte{0x4e}, handoff.NonceSize),
		Epoch: 1, Head: head, Token: []byte("the run's capability token (opaque here)")}
	payload, err := abi.Marshal(&p)
	if err != nil {
		tb.Fatal(err)
	}
	signer, err := cose.NewSigner(cose.AlgorithmEdDSA, cellA)
	if err != nil {
		tb.Fatal(err)
	}
	msg := cose.Sign1Message{Headers: cose.Headers{Protected: cose.ProtectedHeader{
		cose.HeaderLabelAlgorithm: cose.AlgorithmEdDSA,
		cose.HeaderLabelType:      handoff.ContentType,
		cose.HeaderLabelKeyID:     []byte(pub(cellA)),
	}}, Payload: payload}
	if err := msg.Sign(nil, nil, signer); err != nil {
		tb.Fatal(err)
	}
	raw, err := msg.MarshalCBOR()
	if err != nil {
		tb.Fatal(err)
	}
	return raw
}
