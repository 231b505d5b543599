package journal

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// TestHeadRoundTripsAndRefusesOtherLengths: a head record decodes to what
// was encoded, with or without the last hash, and any other length is
// ErrIncomplete.
func TestHeadRoundTripsAndRefusesOtherLengths(t *testing.T) {
	run := NewRunID(time.Now())
	last := Sum([]byte("entry"))
	for _, want := range []Head{{Len: 7, Last: last}, {Len: 1 << 40}} {
		got, err := DecodeHead(run, EncodeHead(want.Len, want.Last))
		if err != nil || got.Len != want.Len || !bytes.Equal(got.Last, want.Last) {
			t.Fatalf("%+v decoded to %+v, %v", want, got, err)
		}
	}
	for _, n := range []int{0, 7, 9, 8 + HashSize + 1} {
		if _, err := DecodeHead(run, make([]byte, n)); !errors.Is(err, ErrIncomplete) {
			t.Fatalf("a head record of %d bytes: %v", n, err)
		}
	}
}

// TestHeadReaches: a read must end exactly at the head, on the entry it
// names.
func TestHeadReaches(t *testing.T) {
	run := NewRunID(time.Now())
	rec := AppendRecord(nil, &Record{Entry: []byte("the last entry")})
	h := Head{Len: 3, Last: Sum([]byte("the last entry"))}
	if err := h.Reaches(run, true, 3, rec, "stored"); err != nil {
		t.Fatalf("a whole read: %v", err)
	}
	var gap *GapError
	if err := h.Reaches(run, true, 2, rec, "stored"); !errors.As(err, &gap) || gap.From != 2 || gap.To != 3 {
		t.Fatalf("a short read: %v", err)
	}
	for name, err := range map[string]error{
		"past the head":       h.Reaches(run, true, 4, rec, "stored"),
		"another last entry":  h.Reaches(run, true, 3, AppendRecord(nil, &Record{Entry: []byte("other")}), "stored"),
		"without head record": Head{}.Reaches(run, false, 1, rec, "stored"),
	} {
		if !errors.Is(err, ErrIncomplete) || errors.As(err, &gap) {
			t.Errorf("%s: %v, want ErrIncomplete", name, err)
		}
	}
}
