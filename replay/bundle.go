package replay

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/journal"
	"github.com/fxamacker/cbor/v2"
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

// Limits DecodeBundle applies before it allocates: counts and sizes are
// capped, so hostile input costs at most memory linear in its length.
const (
	// MaxBundleSize is the largest bundle accepted, in bytes.
	MaxBundleSize = 1 << 30
	// MaxBundleRecords is the most journal records a bundle may hold.
	MaxBundleRecords = 1 << 24
	// maxBundleKeys is the most cell keys a bundle may list.
	maxBundleKeys = 1 << 10
	// maxMaxRequest bounds the recorded request size limit.
	maxMaxRequest = 1 << 30
)

// Engines names the engines whose settings a bundle may carry. A run
// recorded under one replays under the other (engine neutrality); the
// name is what the recording host used.
var Engines = []string{"wazero", "wasmtime"}

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
	// "wasmtime").
	Engine string `cbor:"1,keyasint" json:"engine"`
	// ABI is the ABI version; it equals the run header's.
	ABI uint32 `cbor:"2,keyasint" json:"abi"`
	// MaxRequest is the largest request the recording host accepted; a
	// larger one was recorded as too_large, and replay must refuse it the
	// same way.
	MaxRequest uint64 `cbor:"3,keyasint" json:"max_request"`
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
		MaxArrayElements:  MaxBundleRecords,
		MaxMapPairs:       16,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
		UTF8:              cbor.UTF8RejectInvalid,
	}.DecMode()
	if err != nil {
		panic(err)
	}
	return m
}()

// DecodeBundle decodes a bundle and checks its shape (BUNDLE.md section
// 3); every failure is of class ErrBundleFormat. It does not verify
// anything the bundle says: VerifyBundle does.
func DecodeBundle(data []byte) (*Bundle, error) {
	bad := func(format string, args ...any) (*Bundle, error) {
		return nil, fmt.Errorf("%w: %s", ErrBundleFormat, fmt.Sprintf(format, args...))
	}
	switch {
	case len(data) == 0:
		return bad("empty file")
	case len(data) > MaxBundleSize:
		return bad("%d bytes, more than the %d a bundle may have", len(data), MaxBundleSize)
	}
	b := new(Bundle)
	if err := bundleDecMode.Unmarshal(data, b); err != nil {
		return bad("%v", err)
	}
	again, err := abi.Marshal(b)
	if err != nil || !bytes.Equal(again, data) {
		return bad("not the canonical CBOR of a bundle (a field missing, out of order, or not in shortest form)")
	}
	if b.Format != BundleFormat {
		return bad("format %q, want %q", b.Format, BundleFormat)
	}
	switch {
	case len(b.Module) == 0:
		return bad("no module")
	case len(b.Records) == 0:
		return bad("no journal records")
	case len(b.Checkpoint) == 0:
		return bad("no checkpoint")
	case len(b.Keys) == 0 || len(b.Keys) > maxBundleKeys:
		return bad("%d keys (1 to %d)", len(b.Keys), maxBundleKeys)
	case !slices.Contains(Engines, b.Engine.Engine):
		return bad("engine %q (known: %v)", b.Engine.Engine, Engines)
	case b.Engine.MaxRequest == 0 || b.Engine.MaxRequest > maxMaxRequest:
		return bad("max request %d (1 to %d)", b.Engine.MaxRequest, maxMaxRequest)
	case len(b.Signature.Cell) != ed25519.PublicKeySize || len(b.Signature.Sig) != ed25519.SignatureSize:
		return bad("signature has a %d-byte key and %d-byte signature", len(b.Signature.Cell), len(b.Signature.Sig))
	}
	for i, k := range b.Keys {
		if len(k) != ed25519.PublicKeySize {
			return bad("key %d is %d bytes", i, len(k))
		}
		if i > 0 && bytes.Compare(b.Keys[i-1], k) >= 0 {
			return bad("keys are not sorted and unique (key %d)", i)
		}
	}
	for i, r := range b.Records {
		if len(r) == 0 {
			return bad("record %d is empty", i)
		}
	}
	return b, nil
}

// Export builds the bundle of run from store: the records as stored, the
// module the header names, a checkpoint over the entries and the bundle
// signature, both by key (the exporting cell). It only reads the store.
// settings' zero fields default to the run header's ABI, wazero and
// abi.MaxRequest.
func Export(ctx context.Context, store journal.Store, run journal.RunID, key ed25519.PrivateKey, settings EngineSettings) (*Bundle, error) {
	b := &Bundle{Format: BundleFormat, Engine: settings}
	tree := journal.NewTree()
	signers := map[string]bool{string(key.Public().(ed25519.PublicKey)): true}
	var hdr *journal.Header
	err := store.Records(ctx, run, 0, func(seq uint64, raw []byte) error {
		rec, err := journal.DecodeRecord(raw)
		if err != nil {
			return fmt.Errorf("export: record %d: %w", seq, err)
		}
		if seq == 0 {
			e, err := journal.DecodeEntry(rec.Entry)
			if err != nil {
				return fmt.Errorf("export: entry 0: %w", err)
			}
			hdr = e.Header
		}
		if rec.Seal != nil {
			signers[string(rec.Seal.Cell)] = true
		}
		tree.Append(journal.LeafHash(rec.Entry))
		b.Records = append(b.Records, bytes.Clone(raw))
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(b.Records) == 0 {
		return nil, fmt.Errorf("export: run %s: %w", run, journal.ErrNotFound)
	}
	if hdr == nil {
		return nil, fmt.Errorf("export: run %s: entry 0 is not a start entry", run)
	}
	if b.Module, err = store.Module(ctx, hdr.ModuleSHA256); err != nil {
		return nil, fmt.Errorf("export: module %x: %w", hdr.ModuleSHA256, err)
	}
	for k := range signers {
		b.Keys = append(b.Keys, []byte(k))
	}
	slices.SortFunc(b.Keys, bytes.Compare)
	root, err := tree.Root(tree.Size())
	if err != nil {
		return nil, err
	}
	cp := &journal.Checkpoint{Origin: journal.CheckpointOrigin(run), Size: tree.Size(), Root: root}
	if b.Checkpoint, err = journal.SignCheckpoint(cp, key); err != nil {
		return nil, err
	}
	if b.Engine.ABI == 0 {
		b.Engine.ABI = hdr.ABI
	}
	if b.Engine.Engine == "" {
		b.Engine.Engine = "wazero"
	}
	if b.Engine.MaxRequest == 0 {
		b.Engine.MaxRequest = abi.MaxRequest
	}
	return b, b.Sign(key)
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
