package journal

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/agentrt/agentrt/abi"
)

// Failure classes of verification. Each is a sentinel that a *VerifyError
// unwraps to, so a decoding bug never hides as a signature failure.
var (
	// ErrDecode: the record or entry is not valid canonical CBOR of the
	// format, or its fields have the wrong shape.
	ErrDecode = errors.New("decode")
	// ErrSequence: an entry has the wrong run or seq (deleted, duplicated,
	// reordered or foreign entries).
	ErrSequence = errors.New("sequence")
	// ErrChain: an entry's prev is not the hash of the entry before it.
	ErrChain = errors.New("chain")
	// ErrHash: an input or output hash does not match its payload.
	ErrHash = errors.New("hash")
	// ErrSignature: a seal does not verify, or was made by a key other
	// than the cell that wrote the entry.
	ErrSignature = errors.New("signature")
	// ErrUntrusted: a seal verifies but its key is not trusted.
	ErrUntrusted = errors.New("untrusted key")
	// ErrUncovered: entries after the last seal are not covered by any
	// signature.
	ErrUncovered = errors.New("uncovered")
)

// ErrBlob (blob.go) is the eighth class: a payload in blob form names a
// blob that is missing or changed.

// VerifyError reports the first bad entry found by a Verifier.
type VerifyError struct {
	Seq uint64
	// Step and Op name the import call the entry records, when the entry
	// decoded and records one.
	Step  uint64
	Op    string
	Class error
	// Err says what is wrong; for class ErrBlob it wraps the *BlobError
	// naming the blob (errors.As(ve.Err, &blobErr)).
	Err error
}

func (e *VerifyError) Error() string {
	if e.Step > 0 {
		return fmt.Sprintf("journal: entry %d (step %d, %s): %s: %v", e.Seq, e.Step, e.Op, e.Class, e.Err)
	}
	return fmt.Sprintf("journal: entry %d: %s: %v", e.Seq, e.Class, e.Err)
}

// Unwrap returns the failure class.
func (e *VerifyError) Unwrap() error { return e.Class }

// TrustFunc decides whether a cell public key is trusted.
type TrustFunc func(ed25519.PublicKey) bool

// TrustAny trusts every well-formed key: the signatures still have to
// verify, but against whichever key the journal names. Use it only to check
// integrity, never provenance.
func TrustAny(ed25519.PublicKey) bool { return true }

// TrustKeys trusts exactly the given keys.
func TrustKeys(keys ...ed25519.PublicKey) TrustFunc {
	return func(k ed25519.PublicKey) bool {
		for _, t := range keys {
			if t.Equal(k) {
				return true
			}
		}
		return false
	}
}

// Summary describes a verified journal.
type Summary struct {
	Run     RunID
	Entries uint64
	Seals   uint64
	// Cells counts the seals made by each cell key (hex).
	Cells map[string]uint64
	// BlobRefs counts the blob references resolved (SPEC.md section 15),
	// nested ones included, once per reference.
	BlobRefs uint64
	Header   *Header
	// End is nil for a run that has not finished.
	End  *End
	Head []byte
}

// Verifier checks a journal one record at a time: decoding, sequence, chain
// links, payload hashes and seals. It keeps the decoded entries' only what
// it needs, so it checks journals of any length in constant memory.
type Verifier struct {
	trust      TrustFunc
	sum        Summary
	prev       []byte
	lastSealed int64
	lastStep   uint64
	// epoch is the lease epoch of the last lease entry (0 before one).
	epoch uint64
	// open is the intent of the effect in progress, if any.
	open *Entry
	// cur is the entry being checked, once it decoded.
	cur *Entry
	// OnEntry, when set, is called with each entry that passed its checks.
	// The entry's Request and Response are as stored: a payload in blob
	// form is resolved by ResolvePayload.
	OnEntry func(*Entry, *Record) error
	// Blobs is where the blobs of payloads in blob form are read from
	// (SPEC.md section 15); nil: such a payload fails with class blob.
	Blobs Blobs
	// OnBlob, when set, sees every blob a payload references, checked, in
	// the order resolution reads it, once per reference.
	OnBlob func(ref BlobRef, data []byte) error
	// ctx is the context of the blob reads (VerifyStream's).
	ctx context.Context
	// anchored says the next entry starts a suffix (StartAt).
	anchored bool
}

// NewVerifier returns a verifier that accepts seals by keys trust approves.
func NewVerifier(trust TrustFunc) *Verifier {
	return &Verifier{trust: trust, prev: make([]byte, HashSize), lastSealed: -1, sum: Summary{Cells: map[string]uint64{}}}
}

// StartAt makes v check a suffix of a journal, from the entry with seq
// from, which must be a completed or failed call entry (a checkpoint): that
// entry's prev link, lease epoch and step are taken as given, and the
// seals after it authenticate it and what follows. The entries before it
// are not checked, and the summary has no Header: what binds the suffix to
// the run's start is the caller's to check (a checkpoint names the hash of
// the start entry).
func (v *Verifier) StartAt(from uint64) {
	v.sum.Entries, v.lastSealed, v.prev, v.anchored = from, int64(from)-1, nil, true
}

func (v *Verifier) fail(class error, format string, args ...any) error {
	e := &VerifyError{Seq: v.sum.Entries, Class: class, Err: fmt.Errorf(format, args...)}
	if v.cur != nil {
		e.Step, e.Op = v.cur.Step, v.cur.Op
	}
	return e
}

// prepared is a record with the checks that depend on it alone done: the
// decoding, its hashes and its seal's signature. Preparing records is the
// costly part of verification and needs no order, so it can run on many
// cores (VerifyStream); Add then checks them in order.
type prepared struct {
	rec *Record
	e   *Entry
	// r and en hold rec and e when the prepared record owns them.
	r  Record
	en Entry
	// decodeErr says what of rec (prefix "record") or e (prefix "entry")
	// did not decode.
	decodeErr error
	head      []byte
	// requestOK and responseOK say whether the request and response hash
	// to the input and output hashes (when the entry carries them).
	requestOK, responseOK bool
	// sealErr is why the seal's signature does not verify.
	sealErr error
}

// prepare prepares the record raw into p (zero); owned says the caller
// gives raw up.
func prepare(raw []byte, owned bool, p *prepared) {
	if err := decodeRecordInto(raw, owned, &p.r); err != nil {
		p.decodeErr = fmt.Errorf("record: %v", err)
		return
	}
	// The record owns its entry bytes: the entry may point into them.
	if err := decodeEntryInto(p.r.Entry, true, &p.en); err != nil {
		p.decodeErr = fmt.Errorf("entry: %v", err)
		return
	}
	rec, e := &p.r, &p.en
	p.rec, p.e, p.head = rec, e, Sum(rec.Entry)
	p.requestOK = e.Request == nil || hashOK(e.InputHash, e.Request)
	p.responseOK = e.OutputHash == nil || hashOK(e.OutputHash, e.Response)
	if rec.Seal != nil {
		p.sealErr = VerifySeal(rec.Seal, e.Run, e.Seq, p.head)
	}
}

// Add checks the next record, whose raw bytes are raw.
func (v *Verifier) Add(raw []byte) error {
	p := new(prepared)
	prepare(raw, false, p)
	return v.add(p)
}

func (v *Verifier) add(p *prepared) error {
	v.cur = nil
	if p.decodeErr != nil {
		return v.fail(ErrDecode, "%v", p.decodeErr)
	}
	rec, e := p.rec, p.e
	v.cur = e
	if v.sum.Entries == 0 || v.anchored {
		v.sum.Run = e.Run
	}
	if v.anchored {
		if e.Phase != PhaseCompleted && e.Phase != PhaseFailed || e.Step == 0 {
			return v.fail(ErrSequence, "a suffix must start at a call's outcome, not a %s entry", e.Phase)
		}
		v.anchored = false
		v.prev, v.epoch, v.lastStep = e.Prev, e.Epoch, e.Step-1
	}
	switch {
	case e.Run != v.sum.Run:
		return v.fail(ErrSequence, "entry belongs to run %s, not %s", e.Run, v.sum.Run)
	case e.Seq != v.sum.Entries:
		return v.fail(ErrSequence, "entry has seq %d (an entry is missing, duplicated or out of order)", e.Seq)
	case v.sum.End != nil:
		return v.fail(ErrSequence, "entry after the run's end entry")
	case !bytes.Equal(e.Prev, v.prev):
		return v.fail(ErrChain, "prev is %x, the previous entry hashes to %x", e.Prev, v.prev)
	}
	if err := v.checkCall(e, p.requestOK); err != nil {
		return err
	}
	if !p.responseOK {
		if err := v.checkForm("response", e.Response, e.OutputHash, &p.responseOK); err != nil {
			return err
		}
	}
	if !p.responseOK {
		return v.fail(ErrHash, "output hash %x does not match the response (%x)", e.OutputHash, Sum(e.Response))
	}
	if rec.Seal != nil {
		if !bytes.Equal(rec.Seal.Cell, e.Cell) {
			return v.fail(ErrSignature, "sealed by %x, but the entry was written by cell %x", rec.Seal.Cell, e.Cell)
		}
		if p.sealErr != nil {
			return v.fail(ErrSignature, "seal by cell %x: %v", rec.Seal.Cell, p.sealErr)
		}
		if !v.trust(rec.Seal.Cell) {
			return v.fail(ErrUntrusted, "sealed by cell %x, which is not trusted", rec.Seal.Cell)
		}
		v.lastSealed = int64(e.Seq)
		v.sum.Seals++
		v.sum.Cells[hex.EncodeToString(rec.Seal.Cell)]++
	}
	if e.Header != nil {
		v.sum.Header = e.Header
	}
	if e.End != nil {
		v.sum.End = e.End
	}
	if v.OnEntry != nil {
		if err := v.OnEntry(e, rec); err != nil {
			return err
		}
	}
	v.prev = p.head
	v.sum.Entries++
	return nil
}

// checkCall checks the call entries' order and request hashes. A call is
// either one completed or failed entry carrying its request (a pure call),
// or an intent carrying the request followed by executing and then
// completed or failed entries that repeat its step, op and input hash (an
// effect). Steps count up by one.
func (v *Verifier) checkCall(e *Entry, requestOK bool) error {
	if e.Phase == PhaseLease {
		// A new lease may be taken at any point, an effect in doubt
		// included: that is how a run resumes.
		if e.Epoch <= v.epoch {
			return v.fail(ErrSequence, "lease epoch %d does not follow epoch %d", e.Epoch, v.epoch)
		}
		// A takeover's lease entry carries the placement decision that
		// picked its cell, under its input hash.
		if e.Request != nil && !requestOK {
			return v.fail(ErrHash, "input hash %x does not match the lease entry's placement decision (%x)", e.InputHash, Sum(e.Request))
		}
		v.epoch = e.Epoch
		return nil
	}
	if e.Epoch != v.epoch {
		return v.fail(ErrSequence, "%s entry written under epoch %d while the lease is epoch %d", e.Phase, e.Epoch, v.epoch)
	}
	switch e.Phase {
	case PhaseStart:
		return nil
	case PhaseEnd:
		if v.open != nil {
			return v.fail(ErrSequence, "run ends with step %d still open", v.open.Step)
		}
		return nil
	}
	if v.open != nil {
		o := v.open
		if e.Phase == PhaseIntent || e.Step != o.Step || e.Op != o.Op || !bytes.Equal(e.InputHash, o.InputHash) {
			return v.fail(ErrSequence, "%s of step %d (%s) while step %d (%s) is open", e.Phase, e.Step, e.Op, o.Step, o.Op)
		}
		if e.Request != nil {
			return v.fail(ErrDecode, "%s entry repeats the request of its intent", e.Phase)
		}
		if len(e.Gate) > 0 {
			// The gate decided before the intent, and the intent
			// records it; a second record could contradict the first.
			return v.fail(ErrDecode, "%s entry carries a gate record, which belongs to the intent of step %d", e.Phase, o.Step)
		}
		if e.Phase == PhaseExecuting && o.Phase == PhaseExecuting {
			return v.fail(ErrSequence, "step %d is executing twice", e.Step)
		}
		if e.Phase == PhaseExecuting {
			v.open = e
		} else {
			v.open = nil
		}
		return nil
	}
	if e.Step != v.lastStep+1 {
		return v.fail(ErrSequence, "step %d follows step %d", e.Step, v.lastStep)
	}
	if e.Phase == PhaseExecuting {
		return v.fail(ErrSequence, "executing entry of step %d without an intent", e.Step)
	}
	v.lastStep = e.Step
	if e.Request == nil && e.Phase == PhaseFailed && abiStatusTooLarge(e.Status) {
		return nil // refused for its size; the request was not kept
	}
	if !requestOK && e.Request != nil {
		if err := v.checkForm("request", e.Request, e.InputHash, &requestOK); err != nil {
			return err
		}
	}
	if !requestOK || e.Request == nil && !hashOK(e.InputHash, nil) {
		return v.fail(ErrHash, "input hash %x does not match the request (%x)", e.InputHash, Sum(e.Request))
	}
	if e.Phase == PhaseIntent {
		v.open = e
	}
	return nil
}

// checkForm checks a payload that does not hash to sum as a blob form
// (SPEC.md 15.3): *ok becomes true when it resolves to bytes that do. A
// missing or changed blob fails with class blob, a malformed form with
// class decode; a payload that is no blob form is left to the hash check.
func (v *Verifier) checkForm(what string, stored, sum []byte, ok *bool) error {
	if !IsBlobForm(stored) {
		return nil
	}
	ctx := v.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	visit := func(ref BlobRef, data []byte) error {
		v.sum.BlobRefs++
		if v.OnBlob != nil {
			return v.OnBlob(ref, data)
		}
		return nil
	}
	good, err := checkStored(ctx, v.Blobs, stored, sum, visit)
	var be *BlobError
	switch {
	case errors.As(err, &be):
		return v.fail(ErrBlob, "%s: %w", what, be)
	case errors.Is(err, errBadForm):
		return v.fail(ErrDecode, "the %s's blob form: %v", what, err)
	case err != nil:
		return err
	}
	*ok = good
	return nil
}

// Finish checks that every entry is covered by a seal and returns the
// summary.
func (v *Verifier) Finish() (*Summary, error) {
	if v.sum.Entries == 0 {
		return nil, &VerifyError{Class: ErrDecode, Err: errors.New("empty journal")}
	}
	if uint64(v.lastSealed+1) != v.sum.Entries {
		return nil, &VerifyError{Seq: uint64(v.lastSealed + 1), Class: ErrUncovered,
			Err: fmt.Errorf("entries %d..%d are not covered by any seal", v.lastSealed+1, v.sum.Entries-1)}
	}
	v.sum.Head = v.prev
	s := v.sum
	return &s, nil
}

func abiStatusTooLarge(s uint32) bool { return abi.Status(s) == abi.StatusTooLarge }

// VerifyStore verifies the whole journal of run in store.
func VerifyStore(ctx context.Context, store Store, run RunID, trust TrustFunc) (*Summary, error) {
	return VerifyStoreWith(ctx, store, run, NewVerifier(trust))
}

// VerifyStoreWith verifies the whole journal of run in store with v (whose
// OnEntry sees each entry) and returns its summary.
func VerifyStoreWith(ctx context.Context, store Store, run RunID, v *Verifier) (*Summary, error) {
	return VerifyStoreFrom(ctx, store, run, 0, v)
}

// VerifyStoreFrom verifies the journal of run from the entry with seq from
// on, with v, which must have been started there (StartAt) when from > 0.
func VerifyStoreFrom(ctx context.Context, store Store, run RunID, from uint64, v *Verifier) (*Summary, error) {
	if b, ok := store.(Blobs); ok && v.Blobs == nil {
		v.Blobs = b
	}
	err := VerifyStream(ctx, v, func(fn func([]byte) error) error {
		return store.Records(ctx, run, from, func(_ uint64, raw []byte) error { return fn(raw) })
	})
	if err != nil {
		return nil, err
	}
	s, err := v.Finish()
	if err == nil && s.Run != run {
		return nil, &VerifyError{Class: ErrSequence, Err: fmt.Errorf("journal holds run %s, not %s", s.Run, run)}
	}
	return s, err
}
