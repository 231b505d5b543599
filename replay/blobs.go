package replay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"

	"github.com/agentrt/agentrt/journal"
)

// Blobs in bundles (BUNDLE.md section 2, key 8): the bundle of a run whose
// payloads are in blob form (journal/SPEC.md section 15) carries, after its
// signature, every blob the journal references, each once, as [hash,
// bytes], sorted by hash. The hash is the one the references name, not
// one the reader computes, so a changed byte of a blob is found where an
// entry reads it and reported with that entry and that blob.

// maxBundleBlobs is the most blobs a bundle may carry.
const maxBundleBlobs = 1<<31 - 1

// BundleBlob is one blob a bundle carries.
type BundleBlob struct {
	_    struct{} `cbor:",toarray"`
	Sum  []byte
	Data []byte
}

// blobLoc is where the bytes of a blob lie in a bundle file.
type blobLoc struct {
	sum []byte
	off int64
	n   int
}

// fileBlobs serves the blobs of a bundle file from their offsets, checked
// against their hashes as they are read (journal.Blobs).
type fileBlobs struct {
	r    io.ReaderAt
	locs []blobLoc
}

func (f *fileBlobs) Blob(_ context.Context, sum []byte) ([]byte, error) {
	i := sort.Search(len(f.locs), func(i int) bool { return bytes.Compare(f.locs[i].sum, sum) >= 0 })
	if i == len(f.locs) || !bytes.Equal(f.locs[i].sum, sum) {
		return nil, &journal.BlobError{Sum: bytes.Clone(sum), Missing: true, Where: "the bundle"}
	}
	data := make([]byte, f.locs[i].n)
	if _, err := f.r.ReadAt(data, f.locs[i].off); err != nil {
		return nil, fmt.Errorf("replay: read blob %x of the bundle: %w", sum, err)
	}
	if err := journal.CheckBlobIn("the bundle", sum, data); err != nil {
		return nil, err
	}
	return data, nil
}

// memBlobs serves the blobs of a decoded Bundle.
type memBlobs []BundleBlob

func (m memBlobs) Blob(_ context.Context, sum []byte) ([]byte, error) {
	i := sort.Search(len(m), func(i int) bool { return bytes.Compare(m[i].Sum, sum) >= 0 })
	if i == len(m) || !bytes.Equal(m[i].Sum, sum) {
		return nil, &journal.BlobError{Sum: bytes.Clone(sum), Missing: true, Where: "the bundle"}
	}
	if err := journal.CheckBlobIn("the bundle", sum, m[i].Data); err != nil {
		return nil, err
	}
	return bytes.Clone(m[i].Data), nil
}

// refsBlobs reports whether any payload of run's journal in store is in
// blob form with at least one reference: whether its bundle carries
// blobs. A store whose blob area is empty answers at once; otherwise the
// records are scanned, and only those holding the form's tag decoded.
func refsBlobs(ctx context.Context, store journal.Store, run journal.RunID) (bool, error) {
	if _, ok := store.(journal.Blobs); !ok {
		return false, nil
	}
	if h, ok := store.(interface {
		HasBlobs(context.Context) (bool, error)
	}); ok {
		if any, err := h.HasBlobs(ctx); err != nil || !any {
			return false, err
		}
	}
	tag := []byte{0xda, 0x61, 0x67, 0x72, 0x74}
	found := false
	errFound := errors.New("found")
	err := store.Records(ctx, run, 0, func(_ uint64, raw []byte) error {
		if !bytes.Contains(raw, tag) {
			return nil
		}
		rec, err := journal.DecodeRecord(raw)
		if err != nil {
			return nil // the export's verification names it
		}
		e, err := journal.DecodeEntry(rec.Entry)
		if err != nil {
			return nil
		}
		for _, p := range [][2][]byte{{e.Request, e.InputHash}, {e.Response, e.OutputHash}} {
			if journal.StoredInBlobForm(p[0], p[1]) {
				if refs, err := journal.FormRefs(p[0]); err == nil && len(refs) > 0 {
					found = true
					return errFound
				}
			}
		}
		return nil
	})
	if err != nil && err != errFound {
		return false, err
	}
	return found, nil
}

// blobSet collects the sums of the blobs a journal references, each once.
type blobSet map[string]struct{}

func (s blobSet) add(ref journal.BlobRef, _ []byte) error {
	s[string(ref.Sum)] = struct{}{}
	return nil
}

func (s blobSet) sorted() [][]byte {
	out := make([][]byte, 0, len(s))
	for k := range s {
		out = append(out, []byte(k))
	}
	slices.SortFunc(out, bytes.Compare)
	return out
}

// resolved returns the payload a stored request or response stands for
// (journal.ResolvePayload), for a recorded call that is served or diffed.
func resolved(ctx context.Context, blobs journal.Blobs, stored, sum []byte) ([]byte, error) {
	if !journal.StoredInBlobForm(stored, sum) {
		return stored, nil
	}
	return journal.ResolvePayload(ctx, blobs, stored, sum, journal.MaxResolved)
}
