package journal

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
)

// Content-addressed payloads (SPEC.md section 15). A request or response
// whose large parts are stored once, by SHA-256, in the store's blob area
// is kept in an entry in blob form: a tagged CBOR array of parts, each a
// literal byte string or a reference to a blob by hash and size, whose
// concatenation is the payload. The entry's input and output hashes stay
// the hashes of the payload itself (the bytes the guest sent and got), so
// everything that compares or indexes them (replay, the lineage index) is
// unchanged; only the stored bytes are smaller.

// BlobFormTag is the CBOR tag number of a payload in blob form. Its 5-byte
// head (0xda 0x61 0x67 0x72 0x74, "\xdaagrt") begins every blob form. No
// ABI body holds a tag (abi/SPEC.md section 6.1), so no payload a host
// writes as it is begins with it; a guest's malformed request may, and is
// told apart by its hash (SPEC.md section 15.3).
const BlobFormTag = 0x61677274

// blobFormPrefix is the head of the tag every blob form begins with.
var blobFormPrefix = []byte{0xda, 0x61, 0x67, 0x72, 0x74}

// Limits of blob forms and their resolution.
const (
	// MaxBlobSize is the largest blob a store keeps (256 MiB, the largest
	// record a bundle holds).
	MaxBlobSize = 256 << 20
	// maxFormParts is the most parts one blob form holds (the CBOR array
	// limit of the format).
	maxFormParts = 65536
	// maxBlobReads is the most blobs one resolution reads: a hostile
	// store or bundle cannot make a payload cost more.
	maxBlobReads = 1 << 20
	// MaxResolved is the largest payload a blob form resolves to (1 GiB,
	// the largest request limit a bundle may record).
	MaxResolved = 1 << 30
)

// ErrBlob is the failure class of a blob that an entry references and the
// store or bundle does not hold, or holds with other bytes: the
// *BlobError names it.
var ErrBlob = errors.New("blob")

// BlobError names a blob that is missing or changed. It unwraps to
// ErrBlob, and a missing blob to ErrNotFound too.
type BlobError struct {
	// Sum is the SHA-256 the reference names.
	Sum []byte
	// Missing says the blob is not there at all; otherwise Got is the
	// SHA-256 of the bytes found under Sum (changed).
	Missing bool
	Got     []byte
	// Where says which store or bundle was read, when known.
	Where string
}

func (e *BlobError) Error() string {
	where := ""
	if e.Where != "" {
		where = " in " + e.Where
	}
	if e.Missing {
		return fmt.Sprintf("blob %x is missing%s", e.Sum, where)
	}
	return fmt.Sprintf("blob %x is changed%s: its bytes hash to %x", e.Sum, where, e.Got)
}

// Unwrap returns ErrBlob, and ErrNotFound for a missing blob.
func (e *BlobError) Unwrap() []error {
	if e.Missing {
		return []error{ErrBlob, ErrNotFound}
	}
	return []error{ErrBlob}
}

// CheckBlob returns a *BlobError unless data hashes to sum.
func CheckBlob(sum, data []byte) error { return CheckBlobIn("", sum, data) }

// CheckBlobIn is CheckBlob for a blob read from where (a store, a
// bundle), which its error names.
func CheckBlobIn(where string, sum, data []byte) error {
	if h := sha256.Sum256(data); !bytes.Equal(h[:], sum) {
		return &BlobError{Sum: bytes.Clone(sum), Got: h[:], Where: where}
	}
	return nil
}

// Blob is a payload part stored once, under the SHA-256 of its bytes.
type Blob struct {
	Sum  []byte
	Data []byte
}

// NewBlob returns the blob of data.
func NewBlob(data []byte) Blob { return Blob{Sum: Sum(data), Data: data} }

// Blobs is implemented by stores that keep a blob area (badgerstore) and by
// bundles that carry one. It is separate from Store so that stores without
// one (a read-only view, a test store) stay Stores; a Batch with blobs
// must be refused by a store that does not implement it.
type Blobs interface {
	// Blob returns the bytes of the blob with SHA-256 sum, checked against
	// it: a *BlobError when the blob is missing or its bytes hash to
	// something else.
	Blob(ctx context.Context, sum []byte) ([]byte, error)
}

// BlobRef is one reference of a blob form: the blob's SHA-256 and size,
// and, for a nested reference (a blob that is itself a blob form), the
// length of the payload part it resolves to.
type BlobRef struct {
	Sum    []byte
	Size   uint64
	Nested bool
	Length uint64
}

// IsBlobForm reports whether p begins with the blob form's tag. Whether a
// stored payload is in blob form is decided by its hash (SPEC.md 15.3):
// see ResolvePayload.
func IsBlobForm(p []byte) bool { return bytes.HasPrefix(p, blobFormPrefix) }

// StoredInBlobForm reports whether stored, a payload an entry records
// under the hash sum, is in blob form by the rule of SPEC.md 15.3: it does
// not hash to sum and begins with the form's tag.
func StoredInBlobForm(stored, sum []byte) bool {
	return stored != nil && IsBlobForm(stored) && !hashOK(sum, stored)
}

// errBadForm is the error of a blob form that does not parse.
var errBadForm = errors.New("malformed blob form")

// formPart is one parsed part: lit for a literal, else ref.
type formPart struct {
	lit []byte
	ref BlobRef
}

// parseForm parses a blob form strictly (SPEC.md 15.1): the tag, a
// definite array of 1 to 65536 parts in shortest form, literals non-empty
// and never two in a row, references with a 32-byte hash and non-zero
// sizes, nothing after the array. The parts point into form.
func parseForm(form []byte) ([]formPart, error) {
	if !IsBlobForm(form) {
		return nil, fmt.Errorf("%w: it does not begin with tag %d", errBadForm, BlobFormTag)
	}
	p := &parser{b: form, off: len(blobFormPrefix)}
	n := p.head(majorArray)
	if p.bad || n == 0 || n > maxFormParts {
		return nil, fmt.Errorf("%w: want an array of 1 to %d parts", errBadForm, maxFormParts)
	}
	parts := make([]formPart, 0, n)
	lastLit := false
	for i := range n {
		if p.off >= len(p.b) {
			return nil, fmt.Errorf("%w: part %d is cut", errBadForm, i)
		}
		switch p.b[p.off] & 0xe0 {
		case majorBytes:
			s, e := p.span(majorBytes)
			if p.bad || s == e || lastLit {
				return nil, fmt.Errorf("%w: part %d is an empty literal or follows a literal", errBadForm, i)
			}
			parts, lastLit = append(parts, formPart{lit: form[s:e:e]}), true
		case majorArray:
			k := p.head(majorArray)
			s, e := p.span(majorBytes)
			ref := BlobRef{Sum: form[s:e:e], Size: p.uint(MaxBlobSize)}
			if k == 3 {
				ref.Nested, ref.Length = true, p.uint(MaxResolved)
			}
			if p.bad || (k != 2 && k != 3) || e-s != HashSize || ref.Size == 0 || (ref.Nested && ref.Length == 0) {
				return nil, fmt.Errorf("%w: part %d is not a reference [hash, size] or [hash, size, length]", errBadForm, i)
			}
			parts, lastLit = append(parts, formPart{ref: ref}), false
		default:
			return nil, fmt.Errorf("%w: part %d is neither a byte string nor a reference", errBadForm, i)
		}
	}
	if p.bad || p.off != len(form) {
		return nil, fmt.Errorf("%w: %d bytes after its parts", errBadForm, len(form)-p.off)
	}
	return parts, nil
}

// FormRefs returns the references a blob form holds itself (not those of
// the nested forms it names), in order.
func FormRefs(form []byte) ([]BlobRef, error) {
	parts, err := parseForm(form)
	if err != nil {
		return nil, err
	}
	var refs []BlobRef
	for _, pt := range parts {
		if pt.lit == nil {
			refs = append(refs, pt.ref)
		}
	}
	return refs, nil
}

// resolver reads the blobs of blob forms, checking each against its hash
// whatever the Blobs implementation does.
type resolver struct {
	ctx   context.Context
	blobs Blobs
	reads int
	// visit, when set, sees every blob read, once per reference.
	visit func(ref BlobRef, data []byte) error
}

func (r *resolver) read(ref BlobRef) ([]byte, error) {
	if r.reads++; r.reads > maxBlobReads {
		return nil, fmt.Errorf("%w: it reads more than %d blobs", errBadForm, maxBlobReads)
	}
	if r.blobs == nil {
		return nil, &BlobError{Sum: bytes.Clone(ref.Sum), Missing: true, Where: "(no blob area given)"}
	}
	data, err := r.blobs.Blob(r.ctx, ref.Sum)
	if err != nil {
		return nil, err
	}
	if err := CheckBlob(ref.Sum, data); err != nil {
		return nil, err
	}
	if uint64(len(data)) != ref.Size {
		return nil, fmt.Errorf("%w: blob %x is %d bytes, and its reference says %d", errBadForm, ref.Sum, len(data), ref.Size)
	}
	if r.visit != nil {
		if err := r.visit(ref, data); err != nil {
			return nil, err
		}
	}
	return data, nil
}

// resolve emits the payload form stands for, part by part, and returns its
// length. It walks nested forms with a stack of its own, so a deep chain
// of them (a long conversation) costs no recursion.
func (r *resolver) resolve(form []byte, limit uint64, emit func([]byte)) (uint64, error) {
	type frame struct {
		parts       []formPart
		i           int
		nested      BlobRef
		start, want uint64
	}
	parts, err := parseForm(form)
	if err != nil {
		return 0, err
	}
	stack := []frame{{parts: parts}}
	var n uint64
	for len(stack) > 0 {
		f := &stack[len(stack)-1]
		if f.i == len(f.parts) {
			if f.nested.Nested && n-f.start != f.want {
				return 0, fmt.Errorf("%w: nested blob %x resolves to %d bytes, and its reference says %d", errBadForm, f.nested.Sum, n-f.start, f.want)
			}
			stack = stack[:len(stack)-1]
			continue
		}
		pt := f.parts[f.i]
		f.i++
		if pt.lit != nil {
			if n += uint64(len(pt.lit)); n > limit {
				return 0, fmt.Errorf("%w: it resolves to more than %d bytes", errBadForm, limit)
			}
			emit(pt.lit)
			continue
		}
		if !pt.ref.Nested && n+pt.ref.Size > limit || pt.ref.Nested && n+pt.ref.Length > limit {
			return 0, fmt.Errorf("%w: it resolves to more than %d bytes", errBadForm, limit)
		}
		data, err := r.read(pt.ref)
		if err != nil {
			return 0, err
		}
		if !pt.ref.Nested {
			n += uint64(len(data))
			emit(data)
			continue
		}
		sub, err := parseForm(data)
		if err != nil {
			return 0, fmt.Errorf("nested blob %x: %w", pt.ref.Sum, err)
		}
		stack = append(stack, frame{parts: sub, nested: pt.ref, start: n, want: pt.ref.Length})
	}
	return n, nil
}

// ErrPayloadHash is returned by ResolvePayload for a stored payload that is
// neither the payload its hash names nor a blob form of it.
var ErrPayloadHash = errors.New("journal: the stored payload does not match its hash")

// ResolvePayload returns the payload that stored stands for, given the hash
// the entry records for it (its input or output hash): stored itself when
// it hashes to sum, else the resolution of stored as a blob form, whose
// blobs are read from blobs and checked against their hashes, and which
// must hash to sum (SPEC.md 15.3). It fails with a *BlobError for a blob
// that is missing or changed, an error wrapping ErrPayloadHash when the
// resolution does not hash to sum, and another error for a malformed form
// or one that resolves to more than limit bytes.
func ResolvePayload(ctx context.Context, blobs Blobs, stored, sum []byte, limit int) ([]byte, error) {
	if hashOK(sum, stored) {
		return stored, nil
	}
	if !IsBlobForm(stored) {
		return nil, fmt.Errorf("%w (%x, recorded %x)", ErrPayloadHash, Sum(stored), sum)
	}
	r := &resolver{ctx: ctx, blobs: blobs}
	var out []byte
	if _, err := r.resolve(stored, uint64(limit), func(b []byte) { out = append(out, b...) }); err != nil {
		return nil, err
	}
	if !hashOK(sum, out) {
		return nil, fmt.Errorf("%w: the blob form resolves to bytes hashing to %x, recorded %x", ErrPayloadHash, Sum(out), sum)
	}
	return out, nil
}

// ForGuest returns e as a consumer that serves recorded calls to a guest
// needs it (a replay or a resume): e itself when no payload of it is in
// blob form; otherwise a copy whose response is resolved, the bytes the
// guest got, and whose request in blob form is nil, so that it is
// compared by its input hash (which verification checked against its
// resolution) rather than kept resolved: a conversation's requests resend
// its history. It fails as ResolvePayload does.
func ForGuest(ctx context.Context, blobs Blobs, e *Entry) (*Entry, error) {
	reqForm, respForm := StoredInBlobForm(e.Request, e.InputHash), StoredInBlobForm(e.Response, e.OutputHash)
	if !reqForm && !respForm {
		return e, nil
	}
	if ctx == nil {
		ctx = context.Background()
	}
	c := *e
	if reqForm {
		c.Request = nil
	}
	if respForm {
		resp, err := ResolvePayload(ctx, blobs, e.Response, e.OutputHash, MaxResolved)
		if err != nil {
			return nil, fmt.Errorf("journal: the response of entry %d: %w", e.Seq, err)
		}
		c.Response = resp
	}
	return &c, nil
}

// checkStored checks a stored payload against the hash its entry records,
// reading nothing into memory beyond one blob at a time: ok when stored
// hashes to sum, or when it is a blob form whose resolution does (a
// *BlobError or a malformed-form error otherwise; ok false and no error
// when the payload simply does not match).
func checkStored(ctx context.Context, blobs Blobs, stored, sum []byte, visit func(BlobRef, []byte) error) (bool, error) {
	if !IsBlobForm(stored) {
		return false, nil
	}
	r := &resolver{ctx: ctx, blobs: blobs, visit: visit}
	h := sha256.New()
	if _, err := r.resolve(stored, MaxResolved, func(b []byte) { h.Write(b) }); err != nil {
		return false, err
	}
	return bytes.Equal(h.Sum(nil), sum), nil
}

// PayloadBlobs calls fn with every blob stored (a payload stored under the
// hash sum, as in an entry) references, nested ones included, in the order
// a resolution reads them, once per reference; it checks each blob against
// its hash. A payload that hashes to sum references nothing.
func PayloadBlobs(ctx context.Context, blobs Blobs, stored, sum []byte, fn func(ref BlobRef, data []byte) error) error {
	if stored == nil || hashOK(sum, stored) {
		return nil
	}
	ok, err := checkStored(ctx, blobs, stored, sum, fn)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: its blob form resolves to other bytes", ErrPayloadHash)
	}
	return nil
}

// SumHex is the hex form of a hash, as error messages and reports print it.
func SumHex(sum []byte) string { return hex.EncodeToString(sum) }
