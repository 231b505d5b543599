package jetstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/journal"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// head is a run's head record; ok is false when it has none.
type head struct {
	journal.Head
	// ok says the stream holds a head record for the run.
	ok bool
}

func (s *Store) readHead(ctx context.Context, run journal.RunID) (head, error) {
	m, err := s.last(ctx, s.subj.head(run))
	if err != nil || m == nil {
		return head{}, err
	}
	h, err := journal.DecodeHead(run, m.Data)
	if err == nil && h.Last == nil {
		// This store writes the last entry's hash in every head record.
		err = fmt.Errorf("%w: the head record of %s is 8 bytes, not %d", journal.ErrIncomplete, run, 8+journal.HashSize)
	}
	return head{Head: h, ok: true}, err
}

// Head implements journal.Heads: the number of entries the head record of
// run names (0 for a run with none).
func (s *Store) Head(ctx context.Context, run journal.RunID) (uint64, error) {
	h, err := s.readHead(ctx, run)
	return h.Len, err
}

// Records implements journal.Store. It reads the run's head record first
// and then the run's records subject from its start, one message per
// record, up to the entries that head names: a run another store is
// writing meanwhile is read as it stood at that head (a consistent
// prefix), and a record past the head is taken for a later commit once a
// head read again names it. It returns a *journal.GapError (after the
// records it could read) when the records skip entries or end before the
// head, or when the last entry is not the one the head names; records
// past a head that stays behind them are journal.ErrIncomplete (a stale
// head); a message that is not a record of the run at its place is a
// *RecordError.
func (s *Store) Records(ctx context.Context, run journal.RunID, from uint64, fn func(uint64, []byte) error) error {
	h, err := s.readHead(ctx, run)
	if err != nil {
		return err
	}
	next, stopped, past := uint64(0), false, false
	var last []byte
	err = s.scan(ctx, s.subj.records(run), func(m *jetstream.RawStreamMsg) error {
		seq, err := recordSeq(run, m, next)
		if err != nil {
			return err
		}
		if seq == h.Len && next == h.Len {
			// A commit after the head was read: the prefix is whole.
			past = true
			return errPastHead
		}
		switch {
		case seq > next:
			return &journal.GapError{Run: run, From: next, To: seq, Length: h.Len,
				Reason: fmt.Sprintf("the stream's records go from entry %d to entry %d", int64(next)-1, seq)}
		case seq < next:
			return &RecordError{Run: run, Seq: seq, StreamSeq: m.Sequence, Reason: fmt.Sprintf("comes after entry %d (the stream holds it twice)", next-1)}
		}
		next, last = seq+1, m.Data
		if seq < from {
			return nil
		}
		if err := fn(seq, m.Data); err != nil {
			stopped = true
			return err
		}
		return nil
	})
	if past && errors.Is(err, errPastHead) {
		err = nil
		now, herr := s.readHead(ctx, run)
		switch {
		case herr != nil:
			return herr
		case now.Len <= h.Len:
			// No commit names the record past the head: the head is
			// stale, which Reaches names.
			next++
		}
	}
	if err != nil || stopped {
		return err
	}
	return h.Reaches(run, h.ok, next, last, "on the stream")
}

// errPastHead stops a scan of a run's records at the first one past the
// head read before it.
var errPastHead = errors.New("jetstore: a record past the head")

// Meta implements journal.Store.
func (s *Store) Meta(ctx context.Context, run journal.RunID) (journal.RunMeta, error) {
	var m journal.RunMeta
	msg, err := s.last(ctx, s.subj.meta(run))
	if err != nil {
		return m, err
	}
	if msg == nil {
		return m, fmt.Errorf("run %s: %w", run, journal.ErrNotFound)
	}
	return m, decodeMeta(msg, &m)
}

func decodeMeta(msg *jetstream.RawStreamMsg, m *journal.RunMeta) error {
	if err := abi.Unmarshal(msg.Data, m); err != nil {
		return fmt.Errorf("jetstore: the run index record on %s (stream sequence %d) does not decode: %w", msg.Subject, msg.Sequence, err)
	}
	return nil
}

// Runs implements journal.Store: newest first, since run ids sort by
// start.
func (s *Store) Runs(ctx context.Context) ([]journal.RunMeta, error) {
	byRun := map[journal.RunID]journal.RunMeta{}
	err := s.scan(ctx, s.subj.allMeta(), func(msg *jetstream.RawStreamMsg) error {
		var m journal.RunMeta
		if err := decodeMeta(msg, &m); err != nil {
			return err
		}
		byRun[m.ID] = m // the latest of a subject comes last
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]journal.RunMeta, 0, len(byRun))
	for _, m := range byRun {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b journal.RunMeta) int { return bytes.Compare(b.ID[:], a.ID[:]) })
	return out, nil
}

// KVGet returns the value of key in namespace ns, and false if it is
// absent.
func (s *Store) KVGet(ns, key string) ([]byte, bool, error) {
	m, err := s.last(context.Background(), s.subj.kv(ns, key))
	if err != nil || m == nil || m.Header.Get(hdrKV) == "del" {
		return nil, false, err
	}
	if m.Data == nil {
		return []byte{}, true, nil
	}
	return m.Data, true, nil
}

// KVList returns up to limit keys of namespace ns that start with prefix
// and sort after after, in byte order, and whether more remain. It reads
// every key of the namespace.
func (s *Store) KVList(ns, prefix, after string, limit int) ([]string, bool, error) {
	present := map[string]bool{}
	err := s.scan(context.Background(), s.subj.kvNamespace(ns)+".*", func(m *jetstream.RawStreamMsg) error {
		k, err := s.subj.kvKey(ns, m.Subject)
		if err != nil {
			return err
		}
		present[k] = m.Header.Get(hdrKV) != "del"
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	var keys []string
	for k, ok := range present {
		if ok && strings.HasPrefix(k, prefix) && (after == "" || k > after) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	if len(keys) > limit {
		return keys[:limit], true, nil
	}
	return keys, false, nil
}

// Events calls fn with each event-log record of run, in the order they
// were committed.
func (s *Store) Events(ctx context.Context, run journal.RunID, fn func([]byte) error) error {
	return s.scan(ctx, s.subj.events(run), func(m *jetstream.RawStreamMsg) error { return fn(m.Data) })
}

// readParts reads the parts of a blob or module whose part i is on
// subj(i); ok is false when part 0 is not there.
func (s *Store) readParts(ctx context.Context, subj func(int) string) (data []byte, ok bool, err error) {
	m, err := s.last(ctx, subj(0))
	if err != nil || m == nil {
		return nil, false, err
	}
	k, size, err := partOf(m, 0)
	if err != nil {
		return nil, true, err
	}
	data = make([]byte, 0, size)
	data = append(data, m.Data...)
	for i := 1; i < k; i++ {
		if m, err = s.last(ctx, subj(i)); err != nil {
			return nil, true, err
		}
		if m == nil {
			return nil, true, fmt.Errorf("jetstore: part %d of %d of %s is missing from the stream", i, k, subj(0))
		}
		if _, _, err := partOf(m, i); err != nil {
			return nil, true, err
		}
		data = append(data, m.Data...)
	}
	if len(data) != size {
		return nil, true, fmt.Errorf("jetstore: the parts of %s hold %d bytes, their header says %d", subj(0), len(data), size)
	}
	return data, true, nil
}

// partOf checks that m is part i and returns the count of parts and the
// whole size.
func partOf(m *jetstream.RawStreamMsg, i int) (k, size int, err error) {
	var at int
	if _, err := fmt.Sscanf(m.Header.Get(hdrPart), "%d/%d", &at, &k); err != nil || at != i || k < 1 || k > journal.MaxBlobSize {
		return 0, 0, fmt.Errorf("jetstore: %s (stream sequence %d) has no valid %s header for part %d (%q)", m.Subject, m.Sequence, hdrPart, i, m.Header.Get(hdrPart))
	}
	size, err = strconv.Atoi(m.Header.Get(hdrSize))
	if err != nil || size < 0 || size > journal.MaxBlobSize {
		return 0, 0, fmt.Errorf("jetstore: %s (stream sequence %d) has no valid %s header (%q)", m.Subject, m.Sequence, hdrSize, m.Header.Get(hdrSize))
	}
	return k, size, nil
}

// Blob implements journal.Blobs: the bytes stored under sum, checked
// against it; a *journal.BlobError when the blob is missing or its bytes
// hash to something else.
func (s *Store) Blob(ctx context.Context, sum []byte) ([]byte, error) {
	if len(sum) != journal.HashSize {
		return nil, fmt.Errorf("jetstore: a blob is named by a %d-byte SHA-256, not %d bytes", journal.HashSize, len(sum))
	}
	data, ok, err := s.readParts(ctx, func(i int) string { return s.subj.blob(sum, i) })
	if err != nil {
		return nil, fmt.Errorf("jetstore: read blob %x: %w", sum, err)
	}
	if !ok {
		return nil, &journal.BlobError{Sum: bytes.Clone(sum), Missing: true, Where: "the journal stream"}
	}
	if err := journal.CheckBlobIn("the journal stream", sum, data); err != nil {
		return nil, err
	}
	return data, nil
}

// PutModule stores code under sum, in one atomic batch of parts that each
// fit a message. A module stored before is not written again.
func (s *Store) PutModule(ctx context.Context, sum, code []byte) error {
	if len(sum) != journal.HashSize {
		return fmt.Errorf("jetstore: a module is named by a %d-byte SHA-256, not %d bytes", journal.HashSize, len(sum))
	}
	held, err := s.last(ctx, s.subj.module(sum, 0))
	if err != nil || held != nil {
		return err
	}
	parts := s.parts(code)
	if len(parts) > s.opts.MaxBatch {
		return fmt.Errorf("jetstore: module %x of %d bytes needs %d messages; the servers take %d in one atomic batch (raise max_payload or max_batch_size on the servers)", sum, len(code), len(parts), s.opts.MaxBatch)
	}
	msgs := make([]*nats.Msg, len(parts))
	for i, p := range parts {
		msgs[i] = &nats.Msg{Subject: s.subj.module(sum, i), Data: p, Header: nats.Header{
			jetstream.MsgRollup: []string{jetstream.MsgRollupSubject},
			hdrPart:             []string{fmt.Sprintf("%d/%d", i, len(parts))},
			hdrSize:             []string{strconv.Itoa(len(code))},
		}}
	}
	if _, err := s.publish(ctx, msgs); err != nil {
		return fmt.Errorf("jetstore: store module %x: %w", sum, err)
	}
	return nil
}

// Module returns the module with the given SHA-256, checking the digest.
func (s *Store) Module(ctx context.Context, sum []byte) ([]byte, error) {
	code, ok, err := s.readParts(ctx, func(i int) string { return s.subj.module(sum, i) })
	if err != nil {
		return nil, fmt.Errorf("jetstore: read module %x: %w", sum, err)
	}
	if !ok {
		return nil, fmt.Errorf("module %x: %w", sum, journal.ErrNotFound)
	}
	if got := journal.Sum(code); !bytes.Equal(got, sum) {
		return nil, fmt.Errorf("jetstore: stored module %x is corrupt (its bytes hash to %x)", sum, got)
	}
	return code, nil
}
