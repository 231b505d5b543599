package testutil

import (
	"context"
	"crypto/ed25519"
	"testing"

	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/badgerstore"
)

// RouteThroughBlobs rewrites the recorded journal of run, test-only, as a
// host that stores large payloads by hash would have written it: the
// request or response of every entry pick selects is stored as
// journal.Externalize cuts it (strings of threshold bytes or more as
// blobs), the journal is re-chained and re-sealed from the first changed
// entry by key (the recording cell's), and the blobs are committed to the
// store. The ops' journal format is unchanged; only how their payloads are
// kept. It returns the seq of the first changed entry and the distinct
// blobs.
func RouteThroughBlobs(t testing.TB, st *badgerstore.Store, run journal.RunID, key ed25519.PrivateKey, threshold int, pick func(*journal.Entry) bool) (uint64, []journal.Blob) {
	t.Helper()
	var blobs []journal.Blob
	seen := map[string]bool{}
	keep := func(bs []journal.Blob) {
		for _, b := range bs {
			if !seen[string(b.Sum)] {
				seen[string(b.Sum)] = true
				blobs = append(blobs, b)
			}
		}
	}
	first := int64(-1)
	err := st.RewriteJournal(run, func(recs [][]byte) [][]byte {
		var prev []byte
		for i, raw := range recs {
			rec, err := journal.DecodeRecord(raw)
			if err != nil {
				t.Fatal(err)
			}
			e, err := journal.DecodeEntry(rec.Entry)
			if err != nil {
				t.Fatal(err)
			}
			if pick(e) {
				rq, rs := journal.Externalize(e.Request, threshold), journal.Externalize(e.Response, threshold)
				if len(rq.Blobs)+len(rs.Blobs) > 0 && first < 0 {
					first = int64(i)
				}
				e.Request, e.Response = rq.Stored, rs.Stored
				keep(rq.Blobs)
				keep(rs.Blobs)
			}
			if first < 0 {
				continue
			}
			if prev != nil {
				e.Prev = prev
			}
			rec.Entry, _ = journal.EncodeEntry(e)
			prev = journal.Sum(rec.Entry)
			if rec.Seal != nil {
				rec.Seal = &journal.Seal{Cell: key.Public().(ed25519.PublicKey), Sig: ed25519.Sign(key, journal.SealMessage(e.Run, e.Seq, prev))}
			}
			recs[i], _ = journal.EncodeRecord(rec)
		}
		return recs
	})
	if err != nil {
		t.Fatal(err)
	}
	if first < 0 {
		t.Fatal("no payload of the journal is large enough to store by hash")
	}
	ctx := context.Background()
	n, err := st.Head(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Commit(ctx, &journal.Batch{Run: run, Next: n, Blobs: blobs, Durable: true}); err != nil {
		t.Fatal(err)
	}
	return uint64(first), blobs
}
