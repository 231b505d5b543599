package replay

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"unicode/utf8"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/journal"
)

// A bundle is one canonical CBOR map whose every item's length is written
// before the item (BUNDLE.md section 2): so it is written and read as a
// stream, and a run of any length is exported and verified in memory
// bounded by its module and its largest record. This file holds the
// writer and the reader of that stream; the in-memory Bundle is decoded
// by the same reader.

// CBOR major types used by the bundle.
const (
	majorUint  = 0
	majorBytes = 2
	majorText  = 3
	majorArray = 4
	majorMap   = 5
)

// appendHead appends the shortest CBOR head of major type m and argument n.
func appendHead(dst []byte, m byte, n uint64) []byte {
	m <<= 5
	switch {
	case n < 24:
		return append(dst, m|byte(n))
	case n <= 0xff:
		return append(dst, m|24, byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(dst, m|25), uint16(n))
	case n <= 0xffffffff:
		return binary.BigEndian.AppendUint32(append(dst, m|26), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(dst, m|27), n)
}

// bundleWriter writes a bundle as a stream, hashing the signed part as it
// goes: the signature message is the SHA-256 of the map of fields 1 to 6,
// which are the very bytes the bundle holds after its own 7-pair head.
type bundleWriter struct {
	w   *bufio.Writer
	sum hash.Hash
	n   int64
	err error
}

// newBundleWriter starts a bundle of fields fields: 7, or 8 with blobs.
func newBundleWriter(w io.Writer, fields uint64) *bundleWriter {
	bw := &bundleWriter{w: bufio.NewWriterSize(w, 1<<20), sum: sha256.New()}
	bw.sum.Write(appendHead(nil, majorMap, 6))
	bw.raw(appendHead(nil, majorMap, fields), false)
	return bw
}

// raw writes b, and hashes it when signed.
func (bw *bundleWriter) raw(b []byte, signed bool) {
	if bw.err != nil {
		return
	}
	if signed {
		bw.sum.Write(b)
	}
	n, err := bw.w.Write(b)
	bw.n += int64(n)
	bw.err = err
}

func (bw *bundleWriter) key(k uint64)          { bw.raw(appendHead(nil, majorUint, k), k < 7) }
func (bw *bundleWriter) head(m byte, n uint64) { bw.raw(appendHead(nil, m, n), true) }
func (bw *bundleWriter) bytesItem(b []byte)    { bw.head(majorBytes, uint64(len(b))); bw.raw(b, true) }
func (bw *bundleWriter) textItem(s string) {
	bw.head(majorText, uint64(len(s)))
	bw.raw([]byte(s), true)
}
func (bw *bundleWriter) encoded(v any, signed bool) {
	b, err := abi.Marshal(v)
	if err != nil && bw.err == nil {
		bw.err = err
	}
	bw.raw(b, signed)
}

// message returns the signature message of what was written so far
// (fields 1 to 6).
func (bw *bundleWriter) message() []byte {
	return append([]byte(bundleContext), bw.sum.Sum(nil)...)
}

func (bw *bundleWriter) flush() error {
	if bw.err != nil {
		return bw.err
	}
	return bw.w.Flush()
}

// Limits of the stream reader beyond those of DecodeBundle.
const (
	// maxRecordSize is the largest record a bundle may hold: above the
	// largest entry a host writes (a tool's output, 16 MiB a stream, or a
	// run's input, which the cell API takes up to 64 MiB).
	maxRecordSize = 256 << 20
	// maxCheckpointField bounds the checkpoint note's bytes; the note
	// itself is refused above 4096 (journal/SPEC.md 14.3) when it is
	// opened.
	maxCheckpointField = 1 << 20
	// maxSmallItem bounds the engine settings and the signature maps.
	maxSmallItem = 4096
)

// bundleLayout is what the format pass (step 1) read of a bundle: every
// field but the records, which it only counts and hashes, and where they
// start.
type bundleLayout struct {
	format     string
	module     []byte
	records    uint64
	recordsAt  int64 // offset of the first record's head
	keys       [][]byte
	checkpoint []byte
	engine     EngineSettings
	signature  BundleSignature
	// message is the signature message (BUNDLE.md 2.1) of the bytes read.
	message []byte
	// blobs are where the blobs of key 8 lie, in the file's (hash) order.
	blobs []blobLoc
}

// streamReader reads canonical CBOR from a bundle, counting the offset and
// hashing what it reads while hashing is on.
type streamReader struct {
	r       *bufio.Reader
	off     int64
	size    int64
	sum     hash.Hash
	hashing bool
}

func (s *streamReader) bad(format string, args ...any) error {
	return fmt.Errorf("%w: at byte %d: %s", ErrBundleFormat, s.off, fmt.Sprintf(format, args...))
}

func (s *streamReader) readFull(b []byte) error {
	n, err := io.ReadFull(s.r, b)
	if s.hashing {
		s.sum.Write(b[:n])
	}
	s.off += int64(n)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return s.bad("the file ends inside an item (it is cut)")
		}
		return err
	}
	return nil
}

// head reads a CBOR head and requires major type want and its shortest form.
func (s *streamReader) head(want byte, what string) (uint64, error) {
	var b [9]byte
	if err := s.readFull(b[:1]); err != nil {
		return 0, err
	}
	major, info := b[0]>>5, b[0]&0x1f
	if major != want {
		return 0, s.bad("%s is CBOR major type %d, want %d", what, major, want)
	}
	var n uint64
	switch {
	case info < 24:
		return uint64(info), nil
	case info == 24:
		if err := s.readFull(b[1:2]); err != nil {
			return 0, err
		}
		n = uint64(b[1])
		if n < 24 {
			return 0, s.bad("%s has a head that is not in shortest form", what)
		}
	case info == 25:
		if err := s.readFull(b[1:3]); err != nil {
			return 0, err
		}
		n = uint64(binary.BigEndian.Uint16(b[1:3]))
		if n <= 0xff {
			return 0, s.bad("%s has a head that is not in shortest form", what)
		}
	case info == 26:
		if err := s.readFull(b[1:5]); err != nil {
			return 0, err
		}
		n = uint64(binary.BigEndian.Uint32(b[1:5]))
		if n <= 0xffff {
			return 0, s.bad("%s has a head that is not in shortest form", what)
		}
	case info == 27:
		if err := s.readFull(b[1:9]); err != nil {
			return 0, err
		}
		n = binary.BigEndian.Uint64(b[1:9])
		if n <= 0xffffffff {
			return 0, s.bad("%s has a head that is not in shortest form", what)
		}
	case info == 31:
		return 0, s.bad("%s has an indefinite length", what)
	default:
		return 0, s.bad("%s has a reserved head (%#x)", what, b[0])
	}
	return n, nil
}

// length reads the head of a byte or text string of min to max bytes, and
// refuses a length the rest of the file cannot hold before allocating.
func (s *streamReader) length(major byte, what string, min, max uint64) (int, error) {
	n, err := s.head(major, what)
	if err != nil {
		return 0, err
	}
	if n < min || n > max {
		return 0, s.bad("%s is %d bytes (%d to %d)", what, n, min, max)
	}
	if int64(n) > s.size-s.off {
		return 0, s.bad("%s claims %d bytes, and the file has %d left", what, n, s.size-s.off)
	}
	return int(n), nil
}

func (s *streamReader) bytesItem(what string, min, max uint64) ([]byte, error) {
	n, err := s.length(majorBytes, what, min, max)
	if err != nil {
		return nil, err
	}
	b := make([]byte, n)
	return b, s.readFull(b)
}

func (s *streamReader) key(want uint64) error {
	k, err := s.head(majorUint, "a map key")
	if err != nil {
		return err
	}
	if k != want {
		return s.bad("map key %d, want %d (a field missing, out of order, or unknown)", k, want)
	}
	return nil
}

// small reads one small item (a map of the engine settings or of the
// signature) whole, and decodes it strictly into v: canonical, no unknown
// or duplicate fields, nothing missing.
func (s *streamReader) small(what string, v any) error {
	// The items are tiny: read them byte by byte through a canonical
	// re-encoding check, which is what the whole-file decoder did.
	start := s.off
	var buf bytes.Buffer
	if err := s.skip(&buf, 0); err != nil {
		return err
	}
	if err := bundleDecMode.Unmarshal(buf.Bytes(), v); err != nil {
		return fmt.Errorf("%w: at byte %d: %s: %v", ErrBundleFormat, start, what, err)
	}
	again, err := abi.Marshal(v)
	if err != nil || !bytes.Equal(again, buf.Bytes()) {
		return fmt.Errorf("%w: at byte %d: %s is not canonical CBOR of its structure (a field missing, out of order, or not in shortest form)", ErrBundleFormat, start, what)
	}
	return nil
}

// skip copies one CBOR item into buf, at most maxSmallItem bytes and 4
// levels deep.
func (s *streamReader) skip(buf *bytes.Buffer, depth int) error {
	if depth > 4 {
		return s.bad("nesting deeper than 4 levels")
	}
	var b [1]byte
	if err := s.readFull(b[:]); err != nil {
		return err
	}
	buf.WriteByte(b[0])
	major, info := b[0]>>5, b[0]&0x1f
	var n uint64
	switch {
	case info < 24:
		n = uint64(info)
	case info <= 27:
		ext := make([]byte, 1<<(info-24))
		if err := s.readFull(ext); err != nil {
			return err
		}
		buf.Write(ext)
		for _, c := range ext {
			n = n<<8 | uint64(c)
		}
	default:
		return s.bad("an indefinite length or reserved head (%#x)", b[0])
	}
	if buf.Len() > maxSmallItem {
		return s.bad("an item over %d bytes", maxSmallItem)
	}
	switch major {
	case 2, 3:
		if n > maxSmallItem || int64(n) > s.size-s.off {
			return s.bad("a string of %d bytes", n)
		}
		p := make([]byte, n)
		if err := s.readFull(p); err != nil {
			return err
		}
		buf.Write(p)
	case 4, 5:
		if n > 16 {
			return s.bad("an array or map of %d items (at most 16)", n)
		}
		items := n
		if major == 5 {
			items *= 2
		}
		for range items {
			if err := s.skip(buf, depth+1); err != nil {
				return err
			}
		}
	case 6:
		return s.bad("a tag")
	}
	if buf.Len() > maxSmallItem {
		return s.bad("an item over %d bytes", maxSmallItem)
	}
	return nil
}

// scanBundle is step 1 of verification: it reads the whole bundle once,
// checking that it is the canonical CBOR of a bundle and its shape rules
// (BUNDLE.md sections 2 and 3), and returns its layout. The records are
// counted, framed and hashed, not decoded: the journal verifier decodes
// them (step 2). visit, when not nil, sees each record's bytes, valid
// during the call.
func scanBundle(r io.ReaderAt, size int64, visit func(raw []byte) error) (*bundleLayout, error) {
	switch {
	case size == 0:
		return nil, fmt.Errorf("%w: empty file", ErrBundleFormat)
	case size > MaxBundleSize:
		return nil, fmt.Errorf("%w: %d bytes, more than the %d a bundle may have", ErrBundleFormat, size, int64(MaxBundleSize))
	}
	s := &streamReader{r: bufio.NewReaderSize(io.NewSectionReader(r, 0, size), 1<<20), size: size, sum: sha256.New()}
	l := &bundleLayout{}
	fields, err := s.head(majorMap, "the bundle")
	if err != nil {
		return nil, err
	} else if fields != 7 && fields != 8 {
		return nil, s.bad("the bundle is a map of %d fields, want 7 (or 8, with blobs)", fields)
	}
	// The signed part: the map of fields 1 to 6, with its own head.
	s.sum.Write(appendHead(nil, majorMap, 6))
	s.hashing = true

	if err := s.key(1); err != nil {
		return nil, err
	}
	n, err := s.length(majorText, "the format", 1, 64)
	if err != nil {
		return nil, err
	}
	format := make([]byte, n)
	if err := s.readFull(format); err != nil {
		return nil, err
	}
	if !utf8.Valid(format) {
		return nil, s.bad("the format is not UTF-8")
	}
	if l.format = string(format); l.format != BundleFormat {
		return nil, fmt.Errorf("%w: format %q, want %q", ErrBundleFormat, l.format, BundleFormat)
	}

	if err := s.key(2); err != nil {
		return nil, err
	}
	if l.module, err = s.bytesItem("the module", 1, maxModuleSize); err != nil {
		return nil, err
	}

	if err := s.key(3); err != nil {
		return nil, err
	}
	if l.records, err = s.head(majorArray, "the records"); err != nil {
		return nil, err
	}
	if l.records == 0 || l.records > MaxBundleRecords {
		return nil, s.bad("%d records (1 to %d)", l.records, MaxBundleRecords)
	}
	l.recordsAt = s.off
	buf := make([]byte, 0, 4096)
	for i := range l.records {
		n, err := s.length(majorBytes, fmt.Sprintf("record %d", i), 1, maxRecordSize)
		if err != nil {
			return nil, err
		}
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if err := s.readFull(buf); err != nil {
			return nil, err
		}
		if visit != nil {
			if err := visit(buf); err != nil {
				return nil, err
			}
		}
	}

	if err := s.key(4); err != nil {
		return nil, err
	}
	nkeys, err := s.head(majorArray, "the key list")
	if err != nil {
		return nil, err
	}
	if nkeys == 0 || nkeys > maxBundleKeys {
		return nil, s.bad("%d keys (1 to %d)", nkeys, maxBundleKeys)
	}
	for i := range nkeys {
		k, err := s.bytesItem(fmt.Sprintf("key %d", i), 32, 32)
		if err != nil {
			return nil, err
		}
		if i > 0 && bytes.Compare(l.keys[i-1], k) >= 0 {
			return nil, s.bad("keys are not sorted and unique (key %d)", i)
		}
		l.keys = append(l.keys, k)
	}

	if err := s.key(5); err != nil {
		return nil, err
	}
	if l.checkpoint, err = s.bytesItem("the checkpoint", 1, maxCheckpointField); err != nil {
		return nil, err
	}

	if err := s.key(6); err != nil {
		return nil, err
	}
	if err := s.small("the engine settings", &l.engine); err != nil {
		return nil, err
	}
	if err := l.engine.check(); err != nil {
		return nil, err
	}

	s.hashing = false
	l.message = append([]byte(bundleContext), s.sum.Sum(nil)...)
	if err := s.key(7); err != nil {
		return nil, err
	}
	if err := s.small("the bundle signature", &l.signature); err != nil {
		return nil, err
	}
	if len(l.signature.Cell) != 32 || len(l.signature.Sig) != 64 {
		return nil, fmt.Errorf("%w: signature has a %d-byte key and %d-byte signature", ErrBundleFormat, len(l.signature.Cell), len(l.signature.Sig))
	}
	if fields == 8 {
		if l.blobs, err = s.blobList(); err != nil {
			return nil, err
		}
	}
	if s.off != size {
		return nil, s.bad("%d bytes after the bundle", size-s.off)
	}
	return l, nil
}

// blobList reads key 8, the blobs: a non-empty array of [hash, bytes],
// strictly ascending by hash, and returns where each blob's bytes lie.
// The bytes are skipped, not hashed: a blob is checked against its hash
// where an entry references it (step 2), so that a changed one is named
// with that entry.
func (s *streamReader) blobList() ([]blobLoc, error) {
	if err := s.key(8); err != nil {
		return nil, err
	}
	n, err := s.head(majorArray, "the blob list")
	if err != nil {
		return nil, err
	}
	if n == 0 || n > maxBundleBlobs || n > uint64(s.size-s.off)/36 {
		return nil, s.bad("%d blobs (1 to %d, 36 bytes each at least)", n, maxBundleBlobs)
	}
	locs := make([]blobLoc, 0, n)
	for i := range n {
		if k, err := s.head(majorArray, fmt.Sprintf("blob %d", i)); err != nil {
			return nil, err
		} else if k != 2 {
			return nil, s.bad("blob %d is an array of %d items, want [hash, bytes]", i, k)
		}
		sum, err := s.bytesItem(fmt.Sprintf("the hash of blob %d", i), 32, 32)
		if err != nil {
			return nil, err
		}
		if i > 0 && bytes.Compare(locs[i-1].sum, sum) >= 0 {
			return nil, s.bad("blobs are not sorted by hash, each once (blob %d)", i)
		}
		ln, err := s.length(majorBytes, fmt.Sprintf("blob %d", i), 1, journal.MaxBlobSize)
		if err != nil {
			return nil, err
		}
		locs = append(locs, blobLoc{sum: sum, off: s.off, n: ln})
		if _, err := s.r.Discard(ln); err != nil {
			return nil, s.bad("the file ends inside blob %d (it is cut)", i)
		}
		s.off += int64(ln)
	}
	return locs, nil
}

// recordReader reads the records of a bundle again, from their offset.
type recordReader struct {
	s    *streamReader
	left uint64
	buf  []byte
}

func newRecordReader(r io.ReaderAt, size int64, l *bundleLayout) *recordReader {
	return &recordReader{
		s:    &streamReader{r: bufio.NewReaderSize(io.NewSectionReader(r, l.recordsAt, size-l.recordsAt), 1<<20), off: l.recordsAt, size: size},
		left: l.records,
	}
}

// next returns the next record's bytes, valid until the next call, or
// io.EOF after the last.
func (rr *recordReader) next() ([]byte, error) {
	if rr.left == 0 {
		return nil, io.EOF
	}
	n, err := rr.s.length(majorBytes, "a record", 1, maxRecordSize)
	if err != nil {
		return nil, err
	}
	if cap(rr.buf) < n {
		rr.buf = make([]byte, n)
	}
	rr.buf = rr.buf[:n]
	if err := rr.s.readFull(rr.buf); err != nil {
		return nil, err
	}
	rr.left--
	return rr.buf, nil
}
