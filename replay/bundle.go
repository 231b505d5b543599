package replay

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/journal"
	"github.com/fxamacker/cbor/v2"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
)

// Audit bundles (BUNDLE.md beside this file is the normative text). A
// bundle is one canonical CBOR file that holds everything an auditor needs
// to check a run offline: the module, every journal record exactly as
// stored, the keys that signed, a signed Merkle checkpoint over the
// entries, the engine settings of the recording host, and the exporting
// cell's signature over all of it.

// BundleFormat is the format string of the bundles this package writes and
// reads.
const BundleFormat = "agentrt-bundle/1"

// Limits the reader applies before it allocates: counts and sizes are
// capped, and a length the rest of the file cannot hold is refused, so
// hostile input costs at most memory linear in its length. A bundle is
// read as a stream (stream.go): what a verification holds in memory is its
// module, its largest record and a few hashes, whatever its length.
const (
	// MaxBundleSize is the largest bundle accepted, in bytes (1 TiB).
	MaxBundleSize = 1 << 40
	// MaxBundleRecords is the most journal records a bundle may hold.
	MaxBundleRecords = 1<<31 - 1
	// maxModuleSize is the largest module a bundle may hold.
	maxModuleSize = 1 << 30
	// maxBundleKeys is the most cell keys a bundle may list.
	maxBundleKeys = 1 << 10
	// maxMaxRequest bounds the recorded request size limit.
	maxMaxRequest = 1 << 30
)

// Engines names the engines whose settings a bundle may carry. A run
// recorded under one replays under the other (engine neutrality); the
// name is what the recording host used.
var Engines = []string{"wazero", "wasmtime"}

// EngineUnrecorded is the engine of a run whose index does not say which
// engine recorded it (runs recorded before hosts wrote it there).
const EngineUnrecorded = "unrecorded"

// ErrBundleFormat is the failure class of a file that is not a bundle of
// this format: not canonical CBOR of the structure, an unknown format
// string, a missing or empty field, keys unsorted or repeated, engine
// settings that contradict the run header, or a key list that is not
// exactly the keys that signed.
var ErrBundleFormat = errors.New("bundle-format")

// EngineSettings are the recording host's settings that re-execution
// depends on.
type EngineSettings struct {
	// Engine is the wasm engine that recorded the run ("wazero",
	// "wasmtime"), its first segment when more than one ran it, or
	// EngineUnrecorded.
	Engine string `cbor:"1,keyasint" json:"engine"`
	// ABI is the ABI version; it equals the run header's.
	ABI uint32 `cbor:"2,keyasint" json:"abi"`
	// MaxRequest is the largest request the recording host accepted; a
	// larger one was recorded as too_large, and replay must refuse it the
	// same way.
	MaxRequest uint64 `cbor:"3,keyasint" json:"max_request"`
	// Also are the other engines that ran segments of the run (it was
	// resumed on them), in the order each was first used.
	Also []string `cbor:"4,keyasint,omitempty" json:"also,omitempty"`
}

// check applies the shape rules of engine settings (BUNDLE.md section 3).
func (es *EngineSettings) check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBundleFormat, fmt.Sprintf(format, args...))
	}
	switch {
	case !slices.Contains(Engines, es.Engine) && es.Engine != EngineUnrecorded:
		return bad("engine %q (known: %v, or %q)", es.Engine, Engines, EngineUnrecorded)
	case es.MaxRequest == 0 || es.MaxRequest > maxMaxRequest:
		return bad("max request %d (1 to %d)", es.MaxRequest, maxMaxRequest)
	case es.Engine == EngineUnrecorded && len(es.Also) > 0:
		return bad("other engines listed beside an unrecorded one")
	}
	seen := map[string]bool{es.Engine: true}
	for _, e := range es.Also {
		if !slices.Contains(Engines, e) || seen[e] {
			return bad("engine %q in the list of other engines (known: %v, each once, not the first)", e, Engines)
		}
		seen[e] = true
	}
	return nil
}

// BundleSignature is the exporting cell's signature over the bundle.
type BundleSignature struct {
	Cell []byte `cbor:"1,keyasint"`
	Sig  []byte `cbor:"2,keyasint"`
}

// Bundle is an audit bundle. Field numbers are the CBOR map keys.
type Bundle struct {
	Format string `cbor:"1,keyasint"`
	// Module is the module's bytes; the run header names its SHA-256.
	Module []byte `cbor:"2,keyasint"`
	// Records are the journal's records in seq order, each exactly as
	// the store keeps it (the canonical CBOR record, seal included).
	Records [][]byte `cbor:"3,keyasint"`
	// Keys are the cell public keys that sealed an entry, signed the
	// checkpoint or signed the bundle, sorted bytewise, each once.
	Keys [][]byte `cbor:"4,keyasint"`
	// Checkpoint is a signed note (C2SP signed-note, tlog-checkpoint
	// body) over all the bundle's entries.
	Checkpoint []byte         `cbor:"5,keyasint"`
	Engine     EngineSettings `cbor:"6,keyasint"`
	// Signature is the exporting cell's signature over fields 1 to 6.
	Signature BundleSignature `cbor:"7,keyasint"`
	// Blobs are the blobs the journal's payloads reference (journal/SPEC.md
	// section 15), each once, sorted by hash; none for a journal whose
	// payloads are all inline. No signature covers them but the entries'
	// own seals, through the hashes the entries name.
	Blobs []BundleBlob `cbor:"8,keyasint,omitempty"`
}

// bundleBody is what the bundle signature covers: the bundle without its
// signature.
type bundleBody struct {
	Format     string         `cbor:"1,keyasint"`
	Module     []byte         `cbor:"2,keyasint"`
	Records    [][]byte       `cbor:"3,keyasint"`
	Keys       [][]byte       `cbor:"4,keyasint"`
	Checkpoint []byte         `cbor:"5,keyasint"`
	Engine     EngineSettings `cbor:"6,keyasint"`
}

// bundleContext separates bundle signatures from every other use of a
// cell key (journal seals, round seals, checkpoints).
const bundleContext = "agentrt/bundle/v1\x00"

// SignatureMessage returns the bytes the exporting cell signs: the
// context string and the SHA-256 of the canonical encoding of fields 1..6.
func (b *Bundle) SignatureMessage() ([]byte, error) {
	body, err := abi.Marshal(&bundleBody{b.Format, b.Module, b.Records, b.Keys, b.Checkpoint, b.Engine})
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	return append([]byte(bundleContext), sum[:]...), nil
}

// Sign sets the bundle's signature, by key.
func (b *Bundle) Sign(key ed25519.PrivateKey) error {
	msg, err := b.SignatureMessage()
	if err != nil {
		return err
	}
	b.Signature = BundleSignature{Cell: key.Public().(ed25519.PublicKey), Sig: ed25519.Sign(key, msg)}
	return nil
}

// Marshal returns the bundle's canonical CBOR.
func (b *Bundle) Marshal() ([]byte, error) { return abi.Marshal(b) }

var bundleDecMode = func() cbor.DecMode {
	m, err := cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		IndefLength:       cbor.IndefLengthForbidden,
		TagsMd:            cbor.TagsForbidden,
		MaxNestedLevels:   4,
		MaxArrayElements:  16,
		MaxMapPairs:       16,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
		UTF8:              cbor.UTF8RejectInvalid,
	}.DecMode()
	if err != nil {
		panic(err)
	}
	return m
}()

// DecodeBundle decodes a bundle held in memory and checks its shape
// (BUNDLE.md section 3); every failure is of class ErrBundleFormat. It
// does not verify anything the bundle says: VerifyBundle does. It reads
// with the stream reader of VerifyBundleReader, so both accept exactly the
// same files.
func DecodeBundle(data []byte) (*Bundle, error) {
	var records [][]byte
	l, err := scanBundle(bytes.NewReader(data), int64(len(data)), func(raw []byte) error {
		records = append(records, bytes.Clone(raw))
		return nil
	})
	if err != nil {
		return nil, err
	}
	var blobs []BundleBlob
	for _, b := range l.blobs {
		blobs = append(blobs, BundleBlob{Sum: b.sum, Data: bytes.Clone(data[b.off : b.off+int64(b.n)])})
	}
	return &Bundle{Format: l.format, Module: l.module, Records: records, Keys: l.keys, Checkpoint: l.checkpoint,
		Engine: l.engine, Signature: l.signature, Blobs: blobs}, nil
}

// ExportReport says what ExportTo wrote.
type ExportReport struct {
	Run     journal.RunID
	Entries uint64
	// ModuleBytes, Keys and Bytes are the module's size, the number of
	// keys listed and the bundle's size.
	ModuleBytes int
	Keys        int
	Bytes       int64
	Engine      EngineSettings
	// Blobs is the number of blobs the bundle carries, BlobBytes their
	// bytes.
	Blobs     int
	BlobBytes int64
}

// ErrExport is the class of a journal Export refuses to sign: one that
// does not verify (journal/SPEC.md section 9, seals by any key), whose
// store cannot give it back whole (journal.ErrIncomplete), or whose module
// is missing.
var ErrExport = errors.New("replay: export refused")

// ExportTo writes the bundle of run from store to w as a stream: the
// records as stored, the module the header names, the keys of every seal
// and key's own, a checkpoint over all the entries and the bundle
// signature, both by key (the exporting cell). The journal is verified
// (decoding, chain, hashes, seals, coverage; any key) as it is written,
// and must reach the head the store records: a journal that does not is
// refused, and what was written to w must be discarded. Memory is bounded
// by the module and the largest record. settings' zero fields come from
// the run's index record (the engines and the request limit of the host
// that recorded it) and its header (the ABI).
func ExportTo(ctx context.Context, store journal.Store, run journal.RunID, key ed25519.PrivateKey, settings EngineSettings, w io.Writer) (*ExportReport, error) {
	return ExportWith(ctx, store, run, key, ExportOptions{Settings: settings}, w)
}

// ExportOptions tune ExportWith.
type ExportOptions struct {
	// Settings are ExportTo's settings.
	Settings EngineSettings
	// Progress, when set, is told of the journal records written so far
	// and their number, after each.
	Progress func(done, total int)
}

// ExportWith is ExportTo with opts.
func ExportWith(ctx context.Context, store journal.Store, run journal.RunID, key ed25519.PrivateKey, opts ExportOptions, w io.Writer) (*ExportReport, error) {
	settings := opts.Settings
	refuse := func(err error) (*ExportReport, error) {
		return nil, fmt.Errorf("%w: run %s: %w", ErrExport, run, err)
	}
	meta, err := store.Meta(ctx, run)
	if err != nil {
		return nil, err
	}
	hdr, n, err := startAndLength(ctx, store, run)
	if err != nil {
		return refuse(err)
	}
	module, err := store.Module(ctx, hdr.ModuleSHA256)
	if err != nil {
		return refuse(fmt.Errorf("module %x: %w", hdr.ModuleSHA256, err))
	}
	es := settingsOf(settings, &meta, hdr)
	if err := es.check(); err != nil {
		return nil, err
	}

	withBlobs, err := refsBlobs(ctx, store, run)
	if err != nil {
		return refuse(err)
	}
	fields := uint64(7)
	if withBlobs {
		fields = 8
	}
	bw := newBundleWriter(w, fields)
	bw.key(1)
	bw.textItem(BundleFormat)
	bw.key(2)
	bw.bytesItem(module)
	bw.key(3)
	bw.head(majorArray, n)
	v := journal.NewVerifier(journal.TrustAny)
	blobs, _ := store.(journal.Blobs)
	v.Blobs = blobs
	referenced := blobSet{}
	v.OnBlob = referenced.add
	tree := (&compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}).NewEmptyRange(0)
	signers := map[string]bool{string(key.Public().(ed25519.PublicKey)): true}
	v.OnEntry = func(_ *journal.Entry, rec *journal.Record) error {
		if rec.Seal != nil {
			signers[string(rec.Seal.Cell)] = true
		}
		return tree.Append(journal.LeafHash(rec.Entry), nil)
	}
	var written uint64
	err = journal.VerifyStream(ctx, v, func(fn func([]byte) error) error {
		return store.Records(ctx, run, 0, func(_ uint64, raw []byte) error {
			if written == n {
				return fmt.Errorf("the journal holds more than the %d entries its head names", n)
			}
			bw.bytesItem(raw)
			written++
			if bw.err != nil {
				return bw.err
			}
			if opts.Progress != nil {
				opts.Progress(int(written), int(n))
			}
			return fn(raw)
		})
	})
	if err != nil {
		return refuse(err)
	}
	if _, err := v.Finish(); err != nil {
		return refuse(err)
	}
	if written != n {
		return refuse(fmt.Errorf("%d entries read, and the journal's head names %d", written, n))
	}
	keys := make([][]byte, 0, len(signers))
	for k := range signers {
		keys = append(keys, []byte(k))
	}
	slices.SortFunc(keys, bytes.Compare)
	bw.key(4)
	bw.head(majorArray, uint64(len(keys)))
	for _, k := range keys {
		bw.bytesItem(k)
	}
	root, err := tree.GetRootHash(nil)
	if err != nil {
		return nil, err
	}
	note, err := journal.SignCheckpoint(&journal.Checkpoint{Origin: journal.CheckpointOrigin(run), Size: n, Root: root}, key)
	if err != nil {
		return nil, err
	}
	bw.key(5)
	bw.bytesItem(note)
	bw.key(6)
	bw.encoded(&es, true)
	sig := BundleSignature{Cell: key.Public().(ed25519.PublicKey), Sig: ed25519.Sign(key, bw.message())}
	bw.key(7)
	bw.encoded(&sig, false)
	rep := &ExportReport{Run: run, Entries: n, ModuleBytes: len(module), Keys: len(keys), Engine: es}
	if withBlobs != (len(referenced) > 0) {
		return refuse(fmt.Errorf("the journal references %d blobs, and its records said otherwise when first read (it changed)", len(referenced)))
	}
	if withBlobs {
		// The blobs, each once, by hash: read again one at a time, and
		// checked again as they are.
		bw.key(8)
		bw.raw(appendHead(nil, majorArray, uint64(len(referenced))), false)
		for _, sum := range referenced.sorted() {
			data, err := blobs.Blob(ctx, sum)
			if err != nil {
				return refuse(err)
			}
			bw.raw(appendHead(nil, majorArray, 2), false)
			bw.raw(appendHead(nil, majorBytes, uint64(len(sum))), false)
			bw.raw(sum, false)
			bw.raw(appendHead(nil, majorBytes, uint64(len(data))), false)
			bw.raw(data, false)
			rep.Blobs, rep.BlobBytes = rep.Blobs+1, rep.BlobBytes+int64(len(data))
		}
	}
	if err := bw.flush(); err != nil {
		return nil, err
	}
	rep.Bytes = bw.n
	return rep, nil
}

// Export builds the bundle of run from store in memory (ExportTo, decoded
// back): for tests and tools that edit bundles. It only reads the store.
func Export(ctx context.Context, store journal.Store, run journal.RunID, key ed25519.PrivateKey, settings EngineSettings) (*Bundle, error) {
	var buf bytes.Buffer
	if _, err := ExportTo(ctx, store, run, key, settings, &buf); err != nil {
		return nil, err
	}
	return DecodeBundle(buf.Bytes())
}

// startAndLength returns the header of run's start entry and the number of
// entries its journal holds: the head the store records, when it records
// one (journal.Heads), or else a count of the records.
func startAndLength(ctx context.Context, store journal.Store, run journal.RunID) (*journal.Header, uint64, error) {
	var hdr *journal.Header
	errStop := errors.New("stop")
	err := store.Records(ctx, run, 0, func(seq uint64, raw []byte) error {
		rec, err := journal.DecodeRecord(raw)
		if err != nil {
			return fmt.Errorf("record %d: %w", seq, err)
		}
		e, err := journal.DecodeEntry(rec.Entry)
		if err != nil {
			return fmt.Errorf("entry %d: %w", seq, err)
		}
		if e.Header == nil {
			return errors.New("entry 0 is not a start entry")
		}
		hdr = e.Header
		return errStop
	})
	if err != errStop {
		if err == nil {
			err = fmt.Errorf("its journal has no entries: %w", journal.ErrNotFound)
		}
		return nil, 0, err
	}
	if h, ok := store.(journal.Heads); ok {
		n, err := h.Head(ctx, run)
		return hdr, n, err
	}
	var n uint64
	err = store.Records(ctx, run, 0, func(uint64, []byte) error { n++; return nil })
	return hdr, n, err
}

// settingsOf fills the zero fields of settings from the run's index record
// and header.
func settingsOf(settings EngineSettings, meta *journal.RunMeta, hdr *journal.Header) EngineSettings {
	es := settings
	if es.ABI == 0 {
		es.ABI = hdr.ABI
	}
	if es.Engine == "" {
		es.Engine = EngineUnrecorded
		if len(meta.Engines) > 0 {
			es.Engine, es.Also = meta.Engines[0], slices.Clone(meta.Engines[1:])
		}
	}
	if es.MaxRequest == 0 {
		// Hosts that did not record their limit all used the default.
		es.MaxRequest = meta.MaxRequest
		if es.MaxRequest == 0 {
			es.MaxRequest = abi.MaxRequest
		}
	}
	return es
}

// Run returns the run of the bundle's first entry (the zero id when it
// does not decode).
func (b *Bundle) Run() journal.RunID {
	if len(b.Records) > 0 {
		if rec, err := journal.DecodeRecord(b.Records[0]); err == nil {
			if e, err := journal.DecodeEntry(rec.Entry); err == nil {
				return e.Run
			}
		}
	}
	return journal.RunID{}
}

// Tree returns the Merkle tree over the bundle's entries. A record that
// does not decode is an error of class journal.ErrDecode.
func (b *Bundle) Tree() (*journal.Tree, error) {
	t := journal.NewTree()
	for i, raw := range b.Records {
		rec, err := journal.DecodeRecord(raw)
		if err != nil {
			return nil, &journal.VerifyError{Seq: uint64(i), Class: journal.ErrDecode, Err: err}
		}
		t.Append(journal.LeafHash(rec.Entry))
	}
	return t, nil
}

// BundleTree reads the bundle of size bytes in r as a stream and returns
// the Merkle tree over its entries and the run of its first entry. It
// checks the bundle's format (DecodeBundle's rules) and that every record
// decodes, nothing else: VerifyBundleReader verifies. The tree keeps every
// node hash (about 64 bytes an entry); the records are not kept.
func BundleTree(r io.ReaderAt, size int64) (*journal.Tree, journal.RunID, error) {
	t := journal.NewTree()
	var run journal.RunID
	_, err := scanBundle(r, size, func(raw []byte) error {
		rec, err := journal.DecodeRecord(raw)
		if err != nil {
			return &journal.VerifyError{Seq: t.Size(), Class: journal.ErrDecode, Err: err}
		}
		if t.Size() == 0 {
			if e, err := journal.DecodeEntry(rec.Entry); err == nil {
				run = e.Run
			}
		}
		t.Append(journal.LeafHash(rec.Entry))
		return nil
	})
	return t, run, err
}

// ErrReadOnly is returned by the writing methods of a bundle's Store.
var ErrReadOnly = errors.New("replay: a bundle's store is read-only")

// Store returns a read-only journal.Store that holds the bundle's one run
// and its module, so that everything written against a Store (Load,
// host.LoadRecording, journal.VerifyStore) reads a bundle unchanged.
func (b *Bundle) Store() journal.Store { return &bundleStore{b: b, run: b.Run()} }

type bundleStore struct {
	b   *Bundle
	run journal.RunID
}

func (s *bundleStore) PutModule(context.Context, []byte, []byte) error { return ErrReadOnly }
func (s *bundleStore) Commit(context.Context, *journal.Batch) error    { return ErrReadOnly }
func (s *bundleStore) Close() error                                    { return nil }

// Blob implements journal.Blobs with the blobs the bundle carries.
func (s *bundleStore) Blob(ctx context.Context, sum []byte) ([]byte, error) {
	return memBlobs(s.b.Blobs).Blob(ctx, sum)
}

func (s *bundleStore) Module(_ context.Context, sum []byte) ([]byte, error) {
	if !bytes.Equal(journal.Sum(s.b.Module), sum) {
		return nil, fmt.Errorf("module %x: %w", sum, journal.ErrNotFound)
	}
	return bytes.Clone(s.b.Module), nil
}

func (s *bundleStore) Records(ctx context.Context, run journal.RunID, from uint64, fn func(uint64, []byte) error) error {
	if run != s.run {
		return nil // as a store with no such run: no records
	}
	for seq := from; seq < uint64(len(s.b.Records)); seq++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(seq, s.b.Records[seq]); err != nil {
			return err
		}
	}
	return nil
}

func (s *bundleStore) Meta(ctx context.Context, run journal.RunID) (journal.RunMeta, error) {
	if run != s.run {
		return journal.RunMeta{}, fmt.Errorf("run %s: %w", run, journal.ErrNotFound)
	}
	m := journal.RunMeta{ID: run, Status: journal.StatusRunning}
	_ = journal.ReadEntries(ctx, s, run, func(e *journal.Entry, rec *journal.Record) error {
		switch {
		case e.Header != nil:
			m.ModuleSHA256, m.ModuleName, m.Started, m.Cell = e.Header.ModuleSHA256, e.Header.ModuleName, e.Time, e.Cell
		case e.End != nil:
			m.Status, m.Output, m.Error, m.Steps, m.Ended = e.End.Status, e.End.Output, e.End.Error, e.End.Steps, e.Time
		}
		return nil
	})
	return m, nil
}

func (s *bundleStore) Runs(ctx context.Context) ([]journal.RunMeta, error) {
	m, err := s.Meta(ctx, s.run)
	if err != nil {
		return nil, err
	}
	return []journal.RunMeta{m}, nil
}

func keyHex(k []byte) string { return hex.EncodeToString(k) }
