package replay_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/replay"
)

// A bundle of one crawler run, and everything the tamper tests need to
// check a verification outcome against.
type fixture struct {
	env     *testutil.Env
	run     journal.RunID
	bundle  *replay.Bundle
	data    []byte
	entries []*journal.Entry
	sealed  []bool
	trusted []ed25519.PublicKey
}

var (
	fixtureOnce sync.Once
	shared      *fixture
)

// bundleFixture records the crawler once per test binary (the run and the
// export are the expensive part) and returns a fresh copy of its bundle.
func bundleFixture(t *testing.T) *fixture {
	t.Helper()
	fixtureOnce.Do(func() {
		// The store and the site close with the first test; the fixture
		// keeps only the bundle, the key and the shared engine.
		env, run, _ := crawl(t)
		b, err := replay.Export(context.Background(), env.Store, run, env.Key, replay.EngineSettings{})
		if err != nil {
			t.Fatal(err)
		}
		f := &fixture{env: env, run: run, bundle: b, trusted: []ed25519.PublicKey{env.Key.Public().(ed25519.PublicKey)}}
		if f.data, err = b.Marshal(); err != nil {
			t.Fatal(err)
		}
		for _, raw := range b.Records {
			rec, err := journal.DecodeRecord(raw)
			if err != nil {
				t.Fatal(err)
			}
			e, err := journal.DecodeEntry(rec.Entry)
			if err != nil {
				t.Fatal(err)
			}
			f.entries = append(f.entries, e)
			f.sealed = append(f.sealed, rec.Seal != nil)
		}
		shared = f
	})
	if shared == nil {
		t.Fatal("the bundle fixture failed in an earlier test")
	}
	c := *shared
	c.data = bytes.Clone(shared.data)
	var err error
	if c.bundle, err = replay.DecodeBundle(c.data); err != nil {
		t.Fatal(err)
	}
	return &c
}

func (f *fixture) verify(t *testing.T, data []byte) (*replay.AuditReport, error) {
	t.Helper()
	return replay.VerifyBundle(context.Background(), data, replay.VerifyOptions{Trusted: f.trusted, Engine: f.env.Engine})
}

// outcome is a verification result: the class and the entry named (-1:
// none, a failure of the bundle as a whole).
type outcome struct {
	class string
	entry int
}

func (o outcome) String() string {
	if o.entry < 0 {
		return o.class + "@bundle"
	}
	return fmt.Sprintf("%s@%d", o.class, o.entry)
}

func outcomeOf(err error) outcome {
	var ae *replay.AuditError
	if !errors.As(err, &ae) {
		return outcome{"(none)", -1}
	}
	if !ae.HasSeq {
		return outcome{replay.Class(ae.Class), -1}
	}
	return outcome{replay.Class(ae.Class), int(ae.Seq)}
}

func wantOutcome(t *testing.T, err error, want outcome) {
	t.Helper()
	if got := outcomeOf(err); got != want {
		t.Fatalf("verification: %v (%v), want %v", got, err, want)
	}
}

func TestBundleVerifies(t *testing.T) {
	f := bundleFixture(t)
	rep, err := f.verify(t, f.data)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || !rep.ChainIntact || !rep.CheckpointValid || !rep.OutputsMatched || !rep.ReplayIdentical || !rep.BundleSignatureValid ||
		!rep.Finished || rep.EntriesChecked != uint64(len(f.entries)) || len(rep.Cells) != 1 || !rep.Cells[0].Trusted {
		t.Fatalf("report: %+v", rep)
	}
	var seals uint64
	for _, s := range f.sealed {
		if s {
			seals++
		}
	}
	if rep.Cells[0].Seals != seals || rep.Checkpoint.Size != uint64(len(f.entries)) || rep.Calls != int(f.entries[len(f.entries)-1].End.Steps) {
		t.Fatalf("report counts: %+v %+v, want %d seals", rep.Cells[0], rep.Checkpoint, seals)
	}
	// The bundle's store serves the journal to the ordinary replay path.
	j, err := replay.Load(context.Background(), f.bundle.Store(), f.run, journal.TrustKeys(f.trusted...))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Replay(context.Background(), f.env.Engine, f.bundle.Module, replay.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := f.bundle.Store().Commit(context.Background(), &journal.Batch{}); !errors.Is(err, replay.ErrReadOnly) {
		t.Fatalf("commit to a bundle's store: %v", err)
	}
	// Nothing but the listed keys is trusted: another cell's key fails.
	_, other, _ := ed25519.GenerateKey(nil)
	_, err = replay.VerifyBundle(context.Background(), f.data, replay.VerifyOptions{Trusted: []ed25519.PublicKey{other.Public().(ed25519.PublicKey)}, Engine: f.env.Engine})
	wantOutcome(t, err, outcome{"untrusted", 1}) // entry 1 carries the first seal
}

// span is a region of the bundle's bytes and what it encodes.
type span struct {
	start, end int
	// path names the item: top-level keys by number, array elements in
	// brackets, a record's entry and seal as [0] and [1], map fields by
	// key, e.g. "3[6][0].11" (the response of entry 6).
	path string
	// kind: "head" (a CBOR head that is not a value: lengths, map keys,
	// array and map sizes), "value" (an integer or simple value),
	// "content" (the bytes of a byte or text string).
	kind string
}

// walk parses the canonical CBOR item at b[off:] (base is b's offset in
// the bundle), appends its spans, and returns the offset after it. Byte
// strings whose path nest approves are parsed as CBOR too: records and
// their entries.
func walk(b []byte, off, base int, path string, spans *[]span, nest func(string) bool) int {
	major, ai := b[off]>>5, b[off]&31
	var arg uint64
	n := 1
	switch {
	case ai < 24:
		arg = uint64(ai)
	case ai <= 27:
		n += 1 << (ai - 24)
		for _, c := range b[off+1 : off+n] {
			arg = arg<<8 | uint64(c)
		}
	default:
		panic(fmt.Sprintf("walk: %s: additional info %d", path, ai))
	}
	add := func(s, e int, kind string) { *spans = append(*spans, span{base + s, base + e, path, kind}) }
	switch major {
	case 0, 1, 7:
		if ai < 24 {
			add(off, off+1, "value")
		} else {
			add(off, off+1, "head")
			add(off+1, off+n, "value")
		}
		return off + n
	case 2, 3:
		add(off, off+n, "head")
		end := off + n + int(arg)
		if major == 2 && nest(path) {
			walk(b[off+n:end], 0, base+off+n, path+">", spans, nest)
		} else {
			add(off+n, end, "content")
		}
		return end
	case 4:
		add(off, off+n, "head")
		off += n
		for i := range arg {
			off = walk(b, off, base, fmt.Sprintf("%s[%d]", path, i), spans, nest)
		}
		return off
	case 5:
		add(off, off+n, "head")
		off += n
		for range arg {
			key := int(b[off]) // every key of these structures is 0..23
			*spans = append(*spans, span{base + off, base + off + 1, path, "head"})
			p := fmt.Sprint(key)
			if path != "" {
				p = path + "." + p
			}
			off = walk(b, off+1, base, p, spans, nest)
		}
		return off
	}
	panic(fmt.Sprintf("walk: %s: major type %d", path, major))
}

func bundleSpans(data []byte) []span {
	var spans []span
	nest := func(p string) bool {
		// "3[i]" is a record, parsed as "3[i]>"; "3[i]>[0]" its entry,
		// parsed as "3[i]>[0]>".
		return strings.HasPrefix(p, "3[") && (!strings.Contains(p, ">") || strings.HasSuffix(p, ">[0]"))
	}
	walk(data, 0, 0, "", &spans, nest)
	sort.Slice(spans, func(i, j int) bool { return spans[i].start < spans[j].start })
	return spans
}

func spanAt(spans []span, pos int) span {
	i := sort.Search(len(spans), func(i int) bool { return spans[i].end > pos })
	return spans[i]
}

// expected returns the outcomes a change of the byte at pos may have, from
// what the byte encodes: the classes of BUNDLE.md section 4 and
// journal/SPEC.md section 9, in their order. A set has more than one
// member only where the changed value decides the class (a field's new
// value may be well-formed or not), and every member names the entry the
// byte belongs to, or the next one for a broken link.
func (f *fixture) expected(s span, pos int) []outcome {
	bundle := func(classes ...string) []outcome {
		out := make([]outcome, len(classes))
		for i, c := range classes {
			out[i] = outcome{c, -1}
		}
		return out
	}
	if !strings.Contains(s.path, ">") {
		switch {
		case s.kind == "head" && s.path != "6.3":
			return bundle("bundle-format") // the file no longer parses as a bundle
		case s.path == "1":
			return bundle("bundle-format") // unknown format string
		case s.path == "2":
			return []outcome{{"hash", 0}} // the module no longer hashes to the header's sum
		case strings.HasPrefix(s.path, "4["):
			return bundle("untrusted") // a listed key the auditor does not trust
		case s.path == "5":
			return f.checkpointOutcomes(pos - s.start)
		case s.path == "6.1", s.path == "6.2":
			return bundle("bundle-format") // unknown engine, ABI other than the header's
		case s.path == "6.3":
			// The request limit is checked by the bundle signature, or
			// refused outright when out of range.
			return bundle("signature", "bundle-format")
		case s.path == "7.1":
			return bundle("untrusted") // the bundle signed by another key
		case s.path == "7.2":
			return bundle("signature")
		}
		panic("no expectation for " + s.path)
	}
	var seq int
	fmt.Sscanf(s.path, "3[%d]", &seq)
	rest := s.path[strings.Index(s.path, ">")+1:]
	signed := outcome{"chain", seq + 1} // an unsealed entry's hash is checked by the next entry's link
	if f.sealed[seq] {
		signed = outcome{"signature", seq} // a sealed entry's hash by its seal
	}
	at := func(classes ...string) []outcome {
		out := make([]outcome, len(classes))
		for i, c := range classes {
			out[i] = outcome{c, seq}
		}
		return out
	}
	e := f.entries[seq]
	continuation := e.Phase == journal.PhaseExecuting ||
		(e.Phase == journal.PhaseCompleted || e.Phase == journal.PhaseFailed) && seq > 0 && f.entries[seq-1].Step == e.Step
	switch {
	case rest == "" || rest == "[0]":
		return at("decode") // the record's own structure, the entry's length
	case strings.HasPrefix(rest, "[1]"):
		if s.kind == "content" {
			return at("signature") // the seal's key or signature
		}
		return at("decode", "signature") // the seal's structure: malformed, or another well-formed seal
	case s.kind == "head":
		// The entry's structure: a length or key changed may still parse
		// as another well-formed entry, which then fails a later check.
		return append(at("decode", "sequence", "hash"), signed)
	}
	field := strings.TrimPrefix(rest, "[0]>.")
	switch {
	case field == "1":
		return at("decode")
	case field == "2":
		if seq == 0 {
			return []outcome{{"sequence", 1}} // the run is set by entry 0: entry 1 no longer belongs to it
		}
		return at("sequence")
	// An integer's new value may be out of its field's range, or of
	// another CBOR type, which is a decoding failure.
	case field == "3", field == "6", field == "15":
		return at("sequence", "decode") // another seq, step or epoch; seq or step 0 breaks a shape rule
	case field == "4":
		return at("chain")
	case field == "5":
		return append(at("decode", "sequence", "hash"), signed) // another phase: of any shape
	case field == "7":
		if continuation {
			return at("sequence", "decode")
		}
		return []outcome{signed, {"decode", seq}}
	case field == "8":
		if continuation {
			return at("sequence")
		}
		return at("hash")
	case field == "9", field == "10", field == "11":
		return at("hash")
	case field == "12", field == "14":
		return []outcome{signed, {"decode", seq}}
	case field == "13":
		return []outcome{signed}
	default:
		// The idempotency key, the header, the end record and any field a
		// later entry format adds: covered by the entry hash alone, or no
		// longer decoding (text that is not UTF-8, a value out of range).
		return []outcome{signed, {"decode", seq}}
	}
}

// checkpointOutcomes says what a change at offset off of the checkpoint
// note does: the body is signed (any change breaks the signature); in the
// signature line, the key name and the first 6 base64 characters (the
// 4-byte key hash) decide which key signed, so a change there leaves the
// note with no trusted signature, or malformed.
func (f *fixture) checkpointOutcomes(off int) []outcome {
	note := f.bundle.Checkpoint
	sigLine := bytes.LastIndex(note, []byte("\n\n")) + 2
	name := sigLine + len("— ")
	b64 := name + bytes.IndexByte(note[name:], ' ') + 1
	switch {
	case off >= name && off < b64+6:
		return []outcome{{"untrusted", -1}, {"checkpoint", -1}}
	default:
		return []outcome{{"checkpoint", -1}}
	}
}

// TestTamperEveryRegion changes one byte at a time, at 2 000 positions
// spread evenly over the whole bundle, at every byte of two entries (one
// sealed, one inside a group), at every byte of every part of the bundle
// that is not the module or a record, and at every 13th byte of the other
// records; each change must fail verification with an outcome the byte's
// region allows.
func TestTamperEveryRegion(t *testing.T) {
	f := bundleFixture(t)
	spans := bundleSpans(f.data)
	if last := spans[len(spans)-1]; last.end != len(f.data) {
		t.Fatalf("the walk covers %d of %d bytes", last.end, len(f.data))
	}
	positions := map[int]bool{}
	for i := range 2000 {
		positions[i*len(f.data)/2000] = true
	}
	wholeEntries := map[int]bool{}
	for seq := range f.entries {
		if !f.sealed[seq] && len(f.entries[seq].Response) > 0 && len(wholeEntries) == 0 {
			wholeEntries[seq] = true // an unsealed entry with a payload
		}
	}
	for seq := range f.entries {
		if f.sealed[seq] && f.entries[seq].Step > 0 {
			wholeEntries[seq] = true // and a sealed call entry
			break
		}
	}
	n := 0
	for _, s := range spans {
		rec := strings.Contains(s.path, ">")
		var seq int
		if rec {
			fmt.Sscanf(s.path, "3[%d]", &seq)
		}
		for p := s.start; p < s.end; p++ {
			switch {
			case s.path == "2" && s.kind == "content":
			case rec && wholeEntries[seq], !rec:
				positions[p] = true
			case n%13 == 0:
				positions[p] = true
			}
			if rec {
				n++
			}
		}
	}
	list := make([]int, 0, len(positions))
	for p := range positions {
		list = append(list, p)
	}
	slices.Sort(list)

	type result struct {
		pos  int
		got  outcome
		want []outcome
		err  error
	}
	var mu sync.Mutex
	var bad []result
	perRegion := map[string]int{}
	work := make(chan int)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			data := bytes.Clone(f.data)
			for p := range work {
				// A different bit for neighbouring bytes: every bit
				// position is exercised across a region.
				mask := byte(1) << (p % 8)
				data[p] ^= mask
				_, err := replay.VerifyBundle(context.Background(), data, replay.VerifyOptions{Trusted: f.trusted, Engine: f.env.Engine})
				data[p] ^= mask
				s := spanAt(spans, p)
				want := f.expected(s, p)
				got := outcomeOf(err)
				mu.Lock()
				perRegion[region(s.path)]++
				if err == nil || !slices.Contains(want, got) {
					bad = append(bad, result{p, got, want, err})
				}
				mu.Unlock()
			}
		}()
	}
	for _, p := range list {
		work <- p
	}
	close(work)
	wg.Wait()
	sort.Slice(bad, func(i, j int) bool { return bad[i].pos < bad[j].pos })
	for i, r := range bad {
		if i == 20 {
			t.Errorf("... and %d more", len(bad)-20)
			break
		}
		s := spanAt(spans, r.pos)
		t.Errorf("byte %d (%s %s, bit %d): got %v, want one of %v: %v", r.pos, s.path, s.kind, r.pos%8, r.got, r.want, r.err)
	}
	t.Logf("%d positions changed one at a time, by region: %v", len(list), perRegion)
	if len(list) < 2000+len(f.bundle.Checkpoint) {
		t.Fatalf("only %d positions", len(list))
	}
}

func region(path string) string {
	switch {
	case strings.Contains(path, ">"):
		return "records"
	case strings.HasPrefix(path, "3"):
		return "structure"
	case strings.HasPrefix(path, "4["):
		return "keys"
	case path == "":
		return "structure"
	}
	return map[string]string{"1": "format", "2": "module", "5": "checkpoint", "6.1": "engine", "6.2": "engine", "6.3": "engine",
		"7.1": "signature", "7.2": "signature"}[path]
}

// relink re-chains records from seq from on after a change, resealing the
// sealed ones with key, and re-signs checkpoint and bundle: what an insider
// holding the trusted key could do.
func relink(t *testing.T, b *replay.Bundle, from int, key ed25519.PrivateKey) {
	t.Helper()
	var prev []byte
	if from > 0 {
		rec, _ := journal.DecodeRecord(b.Records[from-1])
		prev = journal.Sum(rec.Entry)
	}
	for i := from; i < len(b.Records); i++ {
		rec, err := journal.DecodeRecord(b.Records[i])
		if err != nil {
			t.Fatal(err)
		}
		e, err := journal.DecodeEntry(rec.Entry)
		if err != nil {
			t.Fatal(err)
		}
		if prev != nil {
			e.Prev = prev
		}
		rec.Entry, _ = journal.EncodeEntry(e)
		prev = journal.Sum(rec.Entry)
		if rec.Seal != nil {
			rec.Seal = &journal.Seal{Cell: key.Public().(ed25519.PublicKey), Sig: ed25519.Sign(key, journal.SealMessage(e.Run, e.Seq, prev))}
		}
		b.Records[i], _ = journal.EncodeRecord(rec)
	}
	resign(t, b, key)
}

// resign signs a fresh checkpoint over the bundle's records and the
// bundle itself with key.
func resign(t *testing.T, b *replay.Bundle, key ed25519.PrivateKey) {
	t.Helper()
	tree, err := b.Tree()
	if err != nil {
		t.Fatal(err)
	}
	root, _ := tree.Root(tree.Size())
	if b.Checkpoint, err = journal.SignCheckpoint(&journal.Checkpoint{Origin: journal.CheckpointOrigin(b.Run()), Size: tree.Size(), Root: root}, key); err != nil {
		t.Fatal(err)
	}
	if err := b.Sign(key); err != nil {
		t.Fatal(err)
	}
}

func marshal(t *testing.T, b *replay.Bundle) []byte {
	t.Helper()
	data, err := b.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func editEntry(t *testing.T, b *replay.Bundle, seq int, edit func(*journal.Record, *journal.Entry)) {
	t.Helper()
	rec, _ := journal.DecodeRecord(b.Records[seq])
	e, _ := journal.DecodeEntry(rec.Entry)
	edit(rec, e)
	rec.Entry, _ = journal.EncodeEntry(e)
	b.Records[seq], _ = journal.EncodeRecord(rec)
}

func (f *fixture) first(match func(seq int, e *journal.Entry) bool) int {
	for i, e := range f.entries {
		if match(i, e) {
			return i
		}
	}
	panic("no entry matches")
}

// TestTamperJournalStructure deletes, duplicates, reorders and truncates
// entries of the bundle, swaps responses and keys, and re-signs.
func TestTamperJournalStructure(t *testing.T) {
	base := bundleFixture(t)
	fetch := base.first(func(_ int, e *journal.Entry) bool {
		return e.Op == "http.request" && e.Phase == journal.PhaseCompleted && len(e.Response) > 0
	})
	otherFetch := base.first(func(i int, e *journal.Entry) bool {
		return i > fetch && e.Op == "http.request" && e.Phase == journal.PhaseCompleted && len(e.Response) > 0
	})
	lastSealed := len(base.entries) - 2
	for !base.sealed[lastSealed] {
		lastSealed--
	}
	_, mallory, _ := ed25519.GenerateKey(nil)
	malloryPub := mallory.Public().(ed25519.PublicKey)

	for _, tc := range []struct {
		name   string
		tamper func(f *fixture, b *replay.Bundle)
		want   outcome
	}{
		{"delete an entry", func(f *fixture, b *replay.Bundle) { b.Records = slices.Delete(b.Records, fetch, fetch+1) }, outcome{"sequence", fetch}},
		{"delete the start entry", func(f *fixture, b *replay.Bundle) { b.Records = b.Records[1:] }, outcome{"sequence", 0}},
		{"duplicate an entry", func(f *fixture, b *replay.Bundle) { b.Records = slices.Insert(b.Records, fetch, b.Records[fetch]) }, outcome{"sequence", fetch + 1}},
		{"swap two entries", func(f *fixture, b *replay.Bundle) {
			b.Records[fetch], b.Records[fetch+1] = b.Records[fetch+1], b.Records[fetch]
		}, outcome{"sequence", fetch}},
		// Cut after a seal, the journal alone is a valid unfinished one;
		// the signed checkpoint still counts every entry.
		{"truncate at a commit", func(f *fixture, b *replay.Bundle) { b.Records = b.Records[:lastSealed+1] }, outcome{"checkpoint", -1}},
		{"truncate inside a commit", func(f *fixture, b *replay.Bundle) { b.Records = b.Records[:lastSealed+2] }, outcome{"uncovered", lastSealed + 1}},
		{"swap a response for another valid one", func(f *fixture, b *replay.Bundle) {
			editEntry(t, b, fetch, func(_ *journal.Record, e *journal.Entry) { e.Response = f.entries[otherFetch].Response })
		}, outcome{"hash", fetch}},
		{"re-sign an entry with an untrusted key", func(f *fixture, b *replay.Bundle) {
			s := f.first(func(i int, e *journal.Entry) bool { return f.sealed[i] && e.Step > 0 })
			editEntry(t, b, s, func(r *journal.Record, e *journal.Entry) {
				e.Cell = malloryPub
				h, _ := journal.EncodeEntry(e)
				r.Seal = &journal.Seal{Cell: malloryPub, Sig: ed25519.Sign(mallory, journal.SealMessage(e.Run, e.Seq, journal.Sum(h)))}
			})
		}, outcome{"untrusted", base.first(func(i int, e *journal.Entry) bool { return base.sealed[i] && e.Step > 0 })}},
		{"seal an entry with an untrusted key that keeps the entry's cell", func(f *fixture, b *replay.Bundle) {
			editEntry(t, b, lastSealed, func(r *journal.Record, e *journal.Entry) {
				r.Seal = &journal.Seal{Cell: malloryPub, Sig: ed25519.Sign(mallory, journal.SealMessage(e.Run, e.Seq, journal.Sum(r.Entry)))}
			})
		}, outcome{"signature", lastSealed}},
		{"replace the public key in the bundle", func(f *fixture, b *replay.Bundle) { b.Keys[0] = malloryPub }, outcome{"untrusted", -1}},
		{"re-sign the whole bundle with an untrusted key", func(f *fixture, b *replay.Bundle) {
			for i := range b.Records {
				editEntry(t, b, i, func(_ *journal.Record, e *journal.Entry) { e.Cell = malloryPub })
			}
			relink(t, b, 0, mallory)
			b.Keys = [][]byte{malloryPub}
			resign(t, b, mallory)
		}, outcome{"untrusted", 1}},
		{"sign checkpoint and bundle with an untrusted key", func(f *fixture, b *replay.Bundle) {
			resign(t, b, mallory)
		}, outcome{"untrusted", -1}},
		{"drop the checkpoint's signature line", func(f *fixture, b *replay.Bundle) {
			b.Checkpoint = b.Checkpoint[:bytes.LastIndex(b.Checkpoint, []byte("\n\n"))+1]
		}, outcome{"checkpoint", -1}},
		{"a list of keys with one that signed nothing", func(f *fixture, b *replay.Bundle) {
			b.Keys = append(b.Keys, malloryPub)
			slices.SortFunc(b.Keys, bytes.Compare)
			b.Sign(f.env.Key)
		}, outcome{"untrusted", -1}},
		{"an unknown format", func(f *fixture, b *replay.Bundle) { b.Format = "agentrt-bundle/2" }, outcome{"bundle-format", -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := bundleFixture(t)
			tc.tamper(f, f.bundle)
			_, err := f.verify(t, marshal(t, f.bundle))
			wantOutcome(t, err, tc.want)
		})
	}
	// A trusted key over a key list with a trusted key that signed nothing.
	t.Run("a trusted key listed that signed nothing", func(t *testing.T) {
		f := bundleFixture(t)
		f.bundle.Keys = append(f.bundle.Keys, malloryPub)
		slices.SortFunc(f.bundle.Keys, bytes.Compare)
		f.bundle.Sign(f.env.Key)
		_, err := replay.VerifyBundle(context.Background(), marshal(t, f.bundle), replay.VerifyOptions{Trusted: append(f.trusted, malloryPub), Engine: f.env.Engine})
		wantOutcome(t, err, outcome{"bundle-format", -1})
	})
}

// TestTamperInsiderSwapIsCaughtByReplay: a holder of the trusted key swaps
// one recorded response for another valid one and re-signs everything.
// Every hash, link and signature checks out; re-execution does not: the
// crawler stores the page it was given, so its next kv.put request
// differs, and the report shows the field that changed.
func TestTamperInsiderSwapIsCaughtByReplay(t *testing.T) {
	f := bundleFixture(t)
	fetch := f.first(func(_ int, e *journal.Entry) bool {
		return e.Op == "http.request" && e.Phase == journal.PhaseCompleted && len(e.Response) > 0
	})
	other := f.first(func(i int, e *journal.Entry) bool {
		return i > fetch && e.Op == "http.request" && e.Phase == journal.PhaseCompleted && len(e.Response) > 0
	})
	editEntry(t, f.bundle, fetch, func(_ *journal.Record, e *journal.Entry) {
		e.Response = f.entries[other].Response
		e.OutputHash = journal.Sum(e.Response)
	})
	relink(t, f.bundle, fetch+1, f.env.Key)
	rep, err := f.verify(t, marshal(t, f.bundle))
	put := f.first(func(i int, e *journal.Entry) bool { return i > fetch && e.Op == "kv.put" })
	wantOutcome(t, err, outcome{"divergence", put})
	d := rep.Failure.Divergence
	if d == nil || d.Step != f.entries[put].Step || d.Op != "kv.put" || len(d.Changes) == 0 || !rep.CheckpointValid || !rep.ChainIntact {
		t.Fatalf("report: %+v %+v", rep, d)
	}
	if !strings.Contains(err.Error(), "→") || !strings.Contains(fmt.Sprint(d.Changes), "value") {
		t.Fatalf("the divergence does not show the field that changed: %v %+v", err, d.Changes)
	}
}

// TestForkDetectedByOldCheckpoint: an auditor kept the checkpoint of the
// run. A journal of the same length with one response rewritten (and
// everything re-signed by the trusted key) verifies on its own, but is not
// consistent with the old checkpoint.
func TestForkDetectedByOldCheckpoint(t *testing.T) {
	f := bundleFixture(t)
	old, _, err := journal.OpenCheckpoint(f.bundle.Checkpoint, f.trusted)
	if err != nil {
		t.Fatal(err)
	}
	fetch := f.first(func(_ int, e *journal.Entry) bool { return e.Op == "http.request" && e.Phase == journal.PhaseCompleted })
	forked := bundleFixture(t).bundle
	editEntry(t, forked, fetch, func(_ *journal.Record, e *journal.Entry) {
		e.Time++ // a different record of the same call: same length, same calls
	})
	relink(t, forked, fetch+1, f.env.Key)
	if _, err := f.verify(t, marshal(t, forked)); err != nil {
		t.Fatalf("the forked bundle should verify on its own: %v", err)
	}
	fresh, _, err := journal.OpenCheckpoint(forked.Checkpoint, f.trusted)
	if err != nil || fresh.Size != old.Size {
		t.Fatalf("forked checkpoint: %+v %v", fresh, err)
	}
	tree, _ := forked.Tree()
	p, _ := tree.ConsistencyProof(old.Size, fresh.Size)
	if err := journal.VerifyConsistency(old.Size, fresh.Size, p, old.Root, fresh.Root); !errors.Is(err, journal.ErrCheckpoint) {
		t.Fatalf("fork at the same length: %v, want ErrCheckpoint", err)
	}
	// Against every earlier size that covered the rewritten entry, too.
	origTree, _ := f.bundle.Tree()
	for size := uint64(fetch + 1); size <= old.Size; size++ {
		r1, _ := origTree.Root(size)
		p, _ := tree.ConsistencyProof(size, fresh.Size)
		if err := journal.VerifyConsistency(size, fresh.Size, p, r1, fresh.Root); err == nil {
			t.Fatalf("old checkpoint of %d entries accepted a rewritten entry %d", size, fetch)
		}
	}
}

// TestMerkleOverRealRun: every entry of the run has an inclusion proof
// against the bundle's checkpoint, and the checkpoints of the run as it
// grew (one per prefix) are pairwise consistent.
func TestMerkleOverRealRun(t *testing.T) {
	f := bundleFixture(t)
	cp, _, err := journal.OpenCheckpoint(f.bundle.Checkpoint, f.trusted)
	if err != nil {
		t.Fatal(err)
	}
	tree, _ := f.bundle.Tree()
	for i, raw := range f.bundle.Records {
		rec, _ := journal.DecodeRecord(raw)
		p, err := tree.InclusionProof(uint64(i), cp.Size)
		if err != nil {
			t.Fatal(err)
		}
		if err := journal.VerifyInclusion(uint64(i), cp.Size, journal.LeafHash(rec.Entry), p, cp.Root); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if err := journal.VerifyInclusion(uint64(i), cp.Size, journal.LeafHash(append(bytes.Clone(rec.Entry), 0)), p, cp.Root); err == nil {
			t.Fatalf("entry %d with a byte appended is included", i)
		}
	}
	roots := make([][]byte, cp.Size+1)
	for n := range roots {
		roots[n], _ = tree.Root(uint64(n))
	}
	for m := uint64(1); m <= cp.Size; m++ {
		for n := m; n <= cp.Size; n++ {
			p, _ := tree.ConsistencyProof(m, n)
			if err := journal.VerifyConsistency(m, n, p, roots[m], roots[n]); err != nil {
				t.Fatalf("%d -> %d: %v", m, n, err)
			}
		}
	}
}

// TestDivergenceShowsFieldDiff: a new build that changes one kv key is
// reported with the field that changed, both values, the step and the
// guest function.
func TestDivergenceShowsFieldDiff(t *testing.T) {
	f := bundleFixture(t)
	newCode := testutil.BuildVariant(t, "examples/crawler", `key := "page/" + u`, `key := "pages/" + u`)
	j, err := replay.Load(context.Background(), f.bundle.Store(), f.run, journal.TrustKeys(f.trusted...))
	if err != nil {
		t.Fatal(err)
	}
	_, err = j.Replay(context.Background(), f.env.Engine, f.bundle.Module, replay.Options{Code: newCode})
	var div *replay.DivergenceError
	if !errors.As(err, &div) {
		t.Fatalf("got %v", err)
	}
	if !strings.Contains(div.Reason, `key: "page/http://`) || !strings.Contains(div.Reason, `→ "pages/http://`) || div.Func != "main.visit" {
		t.Fatalf("divergence: %v (func %s)", err, div.Func)
	}
}

func TestDiffRequests(t *testing.T) {
	enc := func(v any) []byte {
		b, err := abi.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	rec := enc(map[string]any{"key": "k2", "value": []byte("v"), "tags": []any{"a", "b"}, "n": 1})
	act := enc(map[string]any{"key": "k3", "value": []byte{0xff, 0}, "tags": []any{"a"}, "extra": true, "n": 1})
	got := fmt.Sprint(replay.DiffRequests(rec, act))
	want := `[extra: (absent) → true key: "k2" → "k3" tags[1]: "b" → (absent) value: b"v" → h'ff00']`
	if got != want {
		t.Fatalf("diff:\n got %s\nwant %s", got, want)
	}
	if d := replay.DiffRequests(rec, rec); d != nil {
		t.Fatalf("identical requests differ: %v", d)
	}
	if d := replay.DiffRequests(rec, []byte{0xff}); d != nil {
		t.Fatalf("undecodable request: %v", d)
	}
}
