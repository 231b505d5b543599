package journal_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/internal/synthconv"
	"github.com/agentrt/agentrt/journal"
)

// memBlobs is a blob area in memory that checks nothing, so that the
// resolver's own checks are what the tests see.
type memBlobs map[string][]byte

func (m memBlobs) Blob(_ context.Context, sum []byte) ([]byte, error) {
	b, ok := m[string(sum)]
	if !ok {
		return nil, &journal.BlobError{Sum: sum, Missing: true}
	}
	return b, nil
}

// add stores blobs and returns the bytes of those it did not hold.
func (m memBlobs) add(blobs []journal.Blob) (added int) {
	for _, b := range blobs {
		if _, ok := m[string(b.Sum)]; !ok {
			m[string(b.Sum)] = bytes.Clone(b.Data)
			added += len(b.Data)
		}
	}
	return added
}

const threshold = 1024

// TestConversationStoresOnlyTheNewMessages: over a 100-call conversation
// that grows to 200k tokens, each call's request, encoded as a chain of
// message blobs, adds to a store that keeps each blob once only what is
// new since the call before (its two new messages and a node each), and
// its stored form stays the same small size; every stored request and
// response resolves to its bytes exactly.
func TestConversationStoresOnlyTheNewMessages(t *testing.T) {
	ctx := context.Background()
	conv := synthconv.New(100, 200_000, 1)
	store := memBlobs{}
	total, naive := 0, 0
	var perCall []int
	for i := range conv.Calls() {
		req := conv.Request(i)
		naive += len(req)
		p, err := journal.EncodeConversation(req, "messages", threshold)
		if err != nil {
			t.Fatal(err)
		}
		added := store.add(p.Blobs)
		// New this call: user message i and assistant message i-1 (whose
		// text the previous response stored already).
		newText := len(conv.Users[i])
		if i == 0 {
			newText += len(conv.System)
		}
		if added > newText+2*256 {
			t.Errorf("call %d added %d blob bytes for %d bytes of new text", i, added, newText)
		}
		if len(p.Stored) > 256 {
			t.Errorf("call %d: the stored request is %d bytes, want a few refs", i, len(p.Stored))
		}
		got, err := journal.ResolvePayload(ctx, store, p.Stored, journal.Sum(req), len(req))
		if err != nil || !bytes.Equal(got, req) {
			t.Fatalf("call %d: the request does not resolve to its bytes: %v", i, err)
		}
		resp := conv.Response(i)
		rp := journal.Externalize(resp, threshold)
		added += store.add(rp.Blobs)
		if got, err := journal.ResolvePayload(ctx, store, rp.Stored, journal.Sum(resp), len(resp)); err != nil || !bytes.Equal(got, resp) {
			t.Fatalf("call %d: the response does not resolve to its bytes: %v", i, err)
		}
		total += added + len(p.Stored) + len(rp.Stored)
		perCall = append(perCall, added+len(p.Stored)+len(rp.Stored))
	}
	last := conv.Request(conv.Calls() - 1)
	if tokens := len(last) / synthconv.BytesPerToken; tokens < 190_000 {
		t.Fatalf("the last request holds %d tokens, want about 200k", tokens)
	}
	// Linear: the last quarter of the calls costs what the first did.
	first, fourth := 0, 0
	for i := range 25 {
		first += perCall[i+1] // call 0 also stores the system message
		fourth += perCall[75+i]
	}
	if fourth > first*11/10 {
		t.Errorf("calls 75..99 stored %d bytes, calls 1..25 %d: not linear", fourth, first)
	}
	if total > len(last)*11/10 {
		t.Errorf("the conversation stored %d bytes, more than its last request (%d) and a tenth", total, len(last))
	}
	t.Logf("stored %d bytes for requests summing to %d (last request %d)", total, naive, len(last))
}

// TestExternalizeCutsStringsWhole: strings at the threshold or above
// become blobs of their whole encoding (head included), smaller ones stay
// literal, and the form resolves to the payload.
func TestExternalizeCutsStringsWhole(t *testing.T) {
	big := strings.Repeat("x", 2000)
	payload, err := abi.Marshal(map[string]any{"a": "small", "b": big, "c": []any{big, []byte(strings.Repeat("y", 1500))}})
	if err != nil {
		t.Fatal(err)
	}
	p := journal.Externalize(payload, threshold)
	if len(p.Blobs) != 2 {
		t.Fatalf("%d blobs, want 2 (the repeated string once, the byte string)", len(p.Blobs))
	}
	want, _ := abi.Marshal(big)
	if !bytes.Equal(p.Blobs[0].Data, want) {
		t.Errorf("the first blob is not the string's whole encoding")
	}
	store := memBlobs{}
	store.add(p.Blobs)
	got, err := journal.ResolvePayload(context.Background(), store, p.Stored, journal.Sum(payload), len(payload))
	if err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("resolve: %v", err)
	}
	if small := journal.Externalize([]byte("plain bytes"), threshold); !bytes.Equal(small.Stored, []byte("plain bytes")) || small.Blobs != nil {
		t.Errorf("a small payload was changed")
	}
}

// conversationJournal records conv as a journal of effects whose requests
// and responses are stored in blob form, sealed at the end.
func conversationJournal(t *testing.T, conv *synthconv.Conversation, key ed25519.PrivateKey, store memBlobs) [][]byte {
	t.Helper()
	c := journal.NewChain(journal.NewRunID(time.Unix(1767323045, 0)), key)
	var raws [][]byte
	link := func(e *journal.Entry) {
		r, err := c.Link(e)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := journal.EncodeRecord(&r)
		raws = append(raws, b)
	}
	link(&journal.Entry{Phase: journal.PhaseStart, Header: &journal.Header{ModuleSHA256: make([]byte, 32), ABI: 1, Seed: make([]byte, 32)}})
	for i := range conv.Calls() {
		req, resp := conv.Request(i), conv.Response(i)
		p, err := journal.EncodeConversation(req, "messages", threshold)
		if err != nil {
			t.Fatal(err)
		}
		rp := journal.Externalize(resp, threshold)
		store.add(p.Blobs)
		store.add(rp.Blobs)
		step, in := uint64(i+1), journal.Sum(req)
		link(&journal.Entry{Phase: journal.PhaseIntent, Step: step, Op: "test.chat", InputHash: in, Request: p.Stored})
		link(&journal.Entry{Phase: journal.PhaseExecuting, Step: step, Op: "test.chat", InputHash: in, Key: "k"})
		link(&journal.Entry{Phase: journal.PhaseCompleted, Step: step, Op: "test.chat", InputHash: in, OutputHash: journal.Sum(resp), Response: rp.Stored})
	}
	link(&journal.Entry{Phase: journal.PhaseEnd, End: &journal.End{Status: journal.StatusCompleted, Steps: uint64(conv.Calls())}})
	rec, _ := journal.DecodeRecord(raws[len(raws)-1])
	rec.Seal = c.Seal()
	raws[len(raws)-1], _ = journal.EncodeRecord(rec)
	return raws
}

func verify(raws [][]byte, key ed25519.PrivateKey, blobs journal.Blobs) (*journal.Summary, error) {
	v := journal.NewVerifier(journal.TrustKeys(key.Public().(ed25519.PublicKey)))
	v.Blobs = blobs
	for _, r := range raws {
		if err := v.Add(r); err != nil {
			return nil, err
		}
	}
	return v.Finish()
}

// TestVerifierResolvesBlobForms: a journal whose payloads are in blob form
// verifies against its blobs, and a blob missing or changed (one byte) is
// a failure of class blob that names the blob and the entry that
// references it; without a blob area every such entry fails so too.
func TestVerifierResolvesBlobForms(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(nil)
	conv := synthconv.New(6, 12000, 2)
	store := memBlobs{}
	raws := conversationJournal(t, conv, key, store)
	sum, err := verify(raws, key, store)
	if err != nil {
		t.Fatal(err)
	}
	if sum.BlobRefs == 0 {
		t.Fatal("no blob reference was resolved")
	}
	// The text of user message 3 is a blob of its own; call 4's request
	// (step 4, entry 10) is the first to reference it, through its chain.
	text, _ := abi.Marshal(conv.Users[3])
	s := journal.Sum(text)
	if _, ok := store[string(s)]; !ok {
		t.Fatal("the user message is not a blob")
	}
	for _, tc := range []struct {
		name    string
		edit    func(memBlobs)
		missing bool
	}{
		{"missing", func(m memBlobs) { delete(m, string(s)) }, true},
		{"changed", func(m memBlobs) { b := bytes.Clone(m[string(s)]); b[len(b)/2] ^= 0x20; m[string(s)] = b }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := memBlobs{}
			for k, v := range store {
				m[k] = v
			}
			tc.edit(m)
			_, err := verify(raws, key, m)
			var ve *journal.VerifyError
			var be *journal.BlobError
			if !errors.As(err, &ve) || !errors.Is(err, journal.ErrBlob) || !errors.As(ve.Err, &be) {
				t.Fatalf("got %v, want a blob failure", err)
			}
			if ve.Seq != 10 || ve.Step != 4 || !bytes.Equal(be.Sum, s) || be.Missing != tc.missing {
				t.Errorf("failure names entry %d step %d blob %x (missing %v); want entry 10 step 4 blob %x", ve.Seq, ve.Step, be.Sum, be.Missing, s)
			}
			if !strings.Contains(err.Error(), journal.SumHex(s)) {
				t.Errorf("the message does not name the blob: %v", err)
			}
		})
	}
	if _, err := verify(raws, key, nil); !errors.Is(err, journal.ErrBlob) {
		t.Errorf("without a blob area: %v, want class blob", err)
	}
}

// TestRequestThatLooksLikeABlobForm: a guest's request may be any bytes,
// those of a blob form included; it is journaled as it is, hashes to its
// input hash, and is taken as it is: no blob is read for it.
func TestRequestThatLooksLikeABlobForm(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(nil)
	fb := &journal.FormBuilder{}
	fb.Blob([]byte("a blob nobody stored"))
	forged, _ := fb.Form()
	c := journal.NewChain(journal.NewRunID(time.Now()), key)
	var raws [][]byte
	for _, e := range []*journal.Entry{
		{Phase: journal.PhaseStart, Header: &journal.Header{ModuleSHA256: make([]byte, 32), ABI: 1, Seed: make([]byte, 32)}},
		{Phase: journal.PhaseFailed, Step: 1, Op: "kv.get", Request: forged, InputHash: journal.Sum(forged), OutputHash: journal.Sum(nil), Status: 4},
	} {
		r, _ := c.Link(e)
		raws = append(raws, nil)
		if e.Phase == journal.PhaseFailed {
			r.Seal = c.Seal()
		}
		raws[len(raws)-1], _ = journal.EncodeRecord(&r)
	}
	sum, err := verify(raws, key, nil)
	if err != nil || sum.BlobRefs != 0 {
		t.Fatalf("got %v (%d blob refs), want a valid journal that reads no blob", err, sum.BlobRefs)
	}
}

// TestMalformedBlobForms: a stored payload that begins with the form's tag
// and does not hash to its entry's hash must parse strictly; each defect is
// refused, as class decode by the verifier, before any blob is read.
func TestMalformedBlobForms(t *testing.T) {
	tag := []byte{0xda, 0x61, 0x67, 0x72, 0x74}
	sum := bytes.Repeat([]byte{7}, 32)
	ref := append(append([]byte{0x82, 0x58, 0x20}, sum...), 0x05)
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	for name, form := range map[string][]byte{
		"no parts":            cat(tag, []byte{0x80}),
		"not an array":        cat(tag, []byte{0x41, 'x'}),
		"empty literal":       cat(tag, []byte{0x81, 0x40}),
		"two literals":        cat(tag, []byte{0x82, 0x41, 'a', 0x41, 'b'}),
		"short hash":          cat(tag, []byte{0x81, 0x82, 0x41, 0x01, 0x05}),
		"zero size":           cat(tag, []byte{0x81}, ref[:len(ref)-1], []byte{0x00}),
		"four-item ref":       cat(tag, []byte{0x81, 0x84}, ref[1:], []byte{1, 1}),
		"long head":           cat(tag, []byte{0x98, 0x01}, ref),
		"trailing":            cat(tag, []byte{0x81}, ref, []byte{0x00}),
		"cut":                 cat(tag, []byte{0x82}, ref),
		"text part":           cat(tag, []byte{0x81, 0x61, 'x'}),
		"indefinite array":    cat(tag, []byte{0x9f}, ref, []byte{0xff}),
		"nested, zero length": cat(tag, []byte{0x81, 0x83}, ref[1:], []byte{0x00}),
	} {
		_, err := journal.ResolvePayload(context.Background(), nil, form, make([]byte, 32), 1<<20)
		var be *journal.BlobError
		if err == nil || errors.As(err, &be) || !strings.Contains(err.Error(), "malformed blob form") {
			t.Errorf("%s: %v, want a malformed form", name, err)
		}
	}
}

// FuzzResolvePayload: whatever a stored payload holds, resolving it never
// panics, reads nothing for a payload that hashes to its sum, and returns
// bytes only when they hash to it; and Externalize of any input resolves
// back to that input.
func FuzzResolvePayload(f *testing.F) {
	big, _ := abi.Marshal(map[string]any{"a": strings.Repeat("z", 300), "b": []any{"q", strings.Repeat("w", 400)}})
	f.Add(big)
	f.Add(journal.Externalize(big, 64).Stored)
	f.Add([]byte{0xda, 0x61, 0x67, 0x72, 0x74, 0x81, 0x41, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		p := journal.Externalize(data, 64)
		store := memBlobs{}
		store.add(p.Blobs)
		got, err := journal.ResolvePayload(context.Background(), store, p.Stored, journal.Sum(data), len(data)+1)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("Externalize does not resolve back: %v", err)
		}
		out, err := journal.ResolvePayload(context.Background(), store, data, make([]byte, 32), 1<<20)
		if err == nil && !bytes.Equal(journal.Sum(out), make([]byte, 32)) {
			t.Fatalf("resolved to bytes that do not hash to the sum")
		}
	})
}
