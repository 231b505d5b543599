package badgerstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/agentrt/agentrt/journal"
	badger "github.com/dgraph-io/badger/v4"
)

// prefixBlob keys the blob area (journal/SPEC.md sections 10 and 15):
// b/<sha256> holds the bytes of a payload part stored once by hash.
const prefixBlob = "b/"

var _ journal.Blobs = (*Store)(nil)

func blobKey(sum []byte) []byte { return append([]byte(prefixBlob), sum...) }

// Blob implements journal.Blobs: the bytes stored under sum, checked
// against it. A blob that is not there, or whose bytes hash to something
// else (the store was changed or damaged), is a *journal.BlobError naming
// it.
func (s *Store) Blob(_ context.Context, sum []byte) ([]byte, error) {
	if len(sum) != journal.HashSize {
		return nil, fmt.Errorf("badgerstore: a blob is named by a %d-byte SHA-256, not %d bytes", journal.HashSize, len(sum))
	}
	data, ok, err := s.value(blobKey(sum))
	if err != nil {
		return nil, fmt.Errorf("badgerstore: read blob %x: %w", sum, err)
	}
	if !ok {
		return nil, &journal.BlobError{Sum: bytes.Clone(sum), Missing: true, Where: "the store"}
	}
	if err := journal.CheckBlobIn("the store", sum, data); err != nil {
		return nil, err
	}
	return data, nil
}

// checkBlobs refuses the blobs of a batch that are not what they claim: a
// store keeps a blob under the hash of its bytes, computed here, so that a
// caller's mistake is never stored as an unreadable blob.
func checkBlobs(b *journal.Batch) error {
	for i, bl := range b.Blobs {
		if len(bl.Data) == 0 || len(bl.Data) > journal.MaxBlobSize {
			return fmt.Errorf("badgerstore: blob %d of the batch is %d bytes (1 to %d)", i, len(bl.Data), journal.MaxBlobSize)
		}
		if err := journal.CheckBlob(bl.Sum, bl.Data); err != nil {
			return fmt.Errorf("badgerstore: blob %d of the batch is not named by its hash: %w", i, err)
		}
	}
	return nil
}

// writeBlobs sets the batch's blobs the store does not hold yet: a blob is
// kept once, whichever run wrote it first (a blob staged earlier in the
// same transaction counts as held).
func writeBlobs(txn *badger.Txn, blobs []journal.Blob, set func(k, v []byte) error) error {
	for _, bl := range blobs {
		k := blobKey(bl.Sum)
		_, err := txn.Get(k)
		if err == nil {
			continue
		}
		if !errors.Is(err, badger.ErrKeyNotFound) {
			return err
		}
		if err := set(k, bl.Data); err != nil {
			return err
		}
	}
	return nil
}

// HasBlobs reports whether the blob area holds any blob: an exporter that
// finds none knows, without reading a journal, that no run references one.
func (s *Store) HasBlobs(context.Context) (bool, error) {
	found := false
	err := s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix, opts.PrefetchValues = []byte(prefixBlob), false
		it := txn.NewIterator(opts)
		defer it.Close()
		it.Rewind()
		found = it.Valid()
		return nil
	})
	return found, err
}
