package badgerstore

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/journal"
	badger "github.com/dgraph-io/badger/v4"
)

// The lineage index (journal/SPEC.md section 10.1). It is derived from the
// journals and built lazily: Commit never touches it, so the commit path
// costs what it did. Every query first catches up, per run, on the records
// written since the run's marker, then answers from prefix scans.
//
// Key layout; "tail" is time (8, Unix ns with the sign bit flipped, so that
// keys sort by time) ‖ run id (16) ‖ step (8), and text is escaped (0x00 as
// 0x00 0xff) and ended by 0x00 0x01, so that a prefix of a text is a prefix
// of its key:
const (
	prefixLineage = "x/"
	xRun          = "x/run/"  // x/run/<run>: the run's marker (trace state, skipped records)
	xCall         = "x/call/" // x/call/<run><step>: the call's row, canonical CBOR journal.Call
	xTime         = "x/time/" // x/time/<tail>
	xOp           = "x/op/"   // x/op/<op text><tail>
	xRes          = "x/res/"  // x/res/<resource text><tail>, for calls with a resource
	xCell         = "x/cell/" // x/cell/<cell key><tail>
	xIn           = "x/in/"   // x/in/<input hash><tail>
	xOut          = "x/out/"  // x/out/<output hash><tail>, for calls with an outcome
	xRin          = "x/rin/"  // x/rin/<header input hash><run>, for runs with an input
	xKid          = "x/kid/"  // x/kid/<parent><child>, for runs with a parent
	xFork         = "x/fork/" // x/fork/<parent><fork>, for forks
)

const tailSize = 8 + 16 + 8

var _ journal.Lineage = (*Store)(nil)

// marker is the value of x/run/<run>.
type marker struct {
	State   journal.TraceState `cbor:"1,keyasint"`
	Skipped []journal.Skip     `cbor:"2,keyasint,omitempty"`
}

func timeKey(t int64) uint64 { return uint64(t) ^ 1<<63 }

func appendTail(dst []byte, t int64, run journal.RunID, step uint64) []byte {
	dst = binary.BigEndian.AppendUint64(dst, timeKey(t))
	dst = append(dst, run[:]...)
	return binary.BigEndian.AppendUint64(dst, step)
}

func parseTail(k []byte) (t int64, run journal.RunID, step uint64) {
	tail := k[len(k)-tailSize:]
	t = int64(binary.BigEndian.Uint64(tail) ^ 1<<63)
	copy(run[:], tail[8:24])
	return t, run, binary.BigEndian.Uint64(tail[24:])
}

// appendText appends s escaped, without its end mark.
func appendText(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		dst = append(dst, s[i])
		if s[i] == 0 {
			dst = append(dst, 0xff)
		}
	}
	return dst
}

func textKey(prefix, s string) []byte {
	return append(appendText([]byte(prefix), s), 0x00, 0x01)
}

func cat(parts ...[]byte) []byte {
	var k []byte
	for _, p := range parts {
		k = append(k, p...)
	}
	return k
}

func callKey(run journal.RunID, step uint64) []byte { return seqKey(xCall, run, step) }

// callKeys returns the secondary keys of c.
func callKeys(c *journal.Call) [][]byte {
	tail := appendTail(nil, c.Time, c.Run, c.Step)
	keys := [][]byte{
		cat([]byte(xTime), tail),
		cat(textKey(xOp, c.Op), tail),
		cat([]byte(xCell), c.Cell, tail),
		cat([]byte(xIn), c.InputHash, tail),
	}
	if c.Resource != "" {
		keys = append(keys, cat(textKey(xRes, c.Resource), tail))
	}
	if c.OutputHash != nil {
		keys = append(keys, cat([]byte(xOut), c.OutputHash, tail))
	}
	return keys
}

// runKeys returns the keys a run's header gives it beside its marker.
func runKeys(run journal.RunID, st *journal.TraceState) [][]byte {
	var keys [][]byte
	if st.InputHash != nil {
		keys = append(keys, cat([]byte(xRin), st.InputHash, run[:]))
	}
	if !st.Parent.IsZero() {
		keys = append(keys, cat([]byte(xKid), st.Parent[:], run[:]))
	}
	if !st.ForkOf.IsZero() {
		keys = append(keys, cat([]byte(xFork), st.ForkOf[:], run[:]))
	}
	return keys
}

func decodeCall(v []byte) (*journal.Call, error) {
	c := new(journal.Call)
	if err := abi.Unmarshal(v, c); err != nil {
		return nil, fmt.Errorf("badgerstore: corrupt lineage row (rebuild the index): %w", err)
	}
	return c, nil
}

func decodeMarker(v []byte) (*marker, error) {
	m := new(marker)
	if err := abi.Unmarshal(v, m); err != nil {
		return nil, fmt.Errorf("badgerstore: corrupt lineage marker (rebuild the index): %w", err)
	}
	return m, nil
}

// Index implements journal.Lineage.
func (s *Store) Index(ctx context.Context) (journal.IndexReport, error) {
	s.lineageMu.Lock()
	defer s.lineageMu.Unlock()
	return s.catchUp(ctx)
}

// Reindex deletes the lineage index and builds it again from every
// journal: the remedy for an index that disagrees with its journals (a
// journal rewritten behind the store's back, a damaged index).
func (s *Store) Reindex(ctx context.Context) (journal.IndexReport, error) {
	s.lineageMu.Lock()
	defer s.lineageMu.Unlock()
	if _, err := s.deletePrefix([]byte(prefixLineage)); err != nil {
		return journal.IndexReport{}, err
	}
	return s.catchUp(ctx)
}

// catchUp indexes every run's records past its marker, drops the index of
// runs whose journal is gone, and reindexes a run whose journal got
// shorter than its marker says (it was rewritten).
func (s *Store) catchUp(ctx context.Context) (journal.IndexReport, error) {
	var rep journal.IndexReport
	lengths, markers, err := s.lineageRuns()
	if err != nil {
		return rep, err
	}
	for _, run := range sortedRuns(markers) {
		if _, ok := lengths[run]; !ok {
			if err := s.dropLineage(run); err != nil {
				return rep, err
			}
			delete(markers, run)
		}
	}
	for _, run := range sortedRuns(lengths) {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		m := markers[run]
		if m != nil && m.State.Seen == lengths[run] {
			continue
		}
		if m != nil && m.State.Seen > lengths[run] {
			if err := s.dropLineage(run); err != nil {
				return rep, err
			}
			m = nil
		}
		if m == nil {
			m = &marker{}
		}
		if err := s.indexRun(ctx, run, m, &rep); err != nil {
			return rep, err
		}
		markers[run] = m
	}
	for _, run := range sortedRuns(markers) {
		rep.Skipped = append(rep.Skipped, markers[run].Skipped...)
	}
	return rep, nil
}

// sortedRuns returns the keys of m in byte order, so that runs are indexed
// in the same order every time.
func sortedRuns[V any](m map[journal.RunID]V) []journal.RunID {
	return slices.SortedFunc(maps.Keys(m), func(a, b journal.RunID) int { return bytes.Compare(a[:], b[:]) })
}

// lineageRuns returns every journal's length and every run's marker.
func (s *Store) lineageRuns() (map[journal.RunID]uint64, map[journal.RunID]*marker, error) {
	lengths := map[journal.RunID]uint64{}
	markers := map[journal.RunID]*marker{}
	err := s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = []byte(prefixLength)
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			var run journal.RunID
			k := it.Item().Key()
			if len(k) != len(prefixLength)+len(run) {
				continue
			}
			copy(run[:], k[len(prefixLength):])
			err := it.Item().Value(func(v []byte) error {
				h, err := decodeHead(run, v)
				lengths[run] = h.Len
				return err
			})
			if err != nil {
				return err
			}
		}
		opts.Prefix = []byte(xRun)
		mit := txn.NewIterator(opts)
		defer mit.Close()
		for mit.Rewind(); mit.Valid(); mit.Next() {
			var run journal.RunID
			k := mit.Item().Key()
			if len(k) != len(xRun)+len(run) {
				continue
			}
			copy(run[:], k[len(xRun):])
			err := mit.Item().Value(func(v []byte) error {
				m, err := decodeMarker(v)
				markers[run] = m
				return err
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	return lengths, markers, err
}

// indexRun traces run's records from m's state on, writes the calls they
// settle and the new marker, and updates m.
func (s *Store) indexRun(ctx context.Context, run journal.RunID, m *marker, rep *journal.IndexReport) error {
	t := journal.ResumeTracer(run, m.State)
	t.Blobs = s
	var calls []journal.Call
	byStep := map[uint64]int{}
	keep := func(cs []journal.Call) {
		for _, c := range cs {
			if i, ok := byStep[c.Step]; ok {
				calls[i] = c
				continue
			}
			byStep[c.Step] = len(calls)
			calls = append(calls, c)
		}
	}
	skipped := map[uint64]bool{}
	for _, sk := range m.Skipped {
		skipped[sk.Seq] = true
	}
	err := s.Records(ctx, run, m.State.Next, func(seq uint64, raw []byte) error {
		rep.Entries++
		cs, err := t.Add(seq, raw)
		if err != nil && !skipped[seq] {
			skipped[seq] = true
			m.Skipped = append(m.Skipped, journal.Skip{Run: run, Seq: seq, Err: err.Error()})
		}
		keep(cs)
		return nil
	})
	if errors.Is(err, journal.ErrIncomplete) {
		// The store cannot give the journal back whole: what was read is
		// indexed, and the gap reported with every catch-up, as a record
		// that does not decode is.
		seq := m.State.Next
		var gap *journal.GapError
		if errors.As(err, &gap) {
			seq = gap.From
		}
		if !skipped[seq] {
			m.Skipped = append(m.Skipped, journal.Skip{Run: run, Seq: seq, Err: err.Error()})
		}
		err = nil
	}
	if err != nil {
		return err
	}
	keep(t.Flush())
	hadHeader := m.State.Header
	m.State = t.State()
	var extra [][]byte
	if !hadHeader && m.State.Header {
		extra = runKeys(run, &m.State)
	}
	mv, err := abi.Marshal(m)
	if err != nil {
		return err
	}
	if err := s.putCalls(calls, extra, runKey(xRun, run), mv); err != nil {
		return err
	}
	rep.Runs++
	rep.Calls += len(calls)
	return nil
}

// putCalls writes calls, replacing the secondary keys of the rows they
// update, then the keys extra and the marker mk = mv. The marker goes last:
// a write cut short leaves the old marker, and the next catch-up writes the
// same rows again.
func (s *Store) putCalls(calls []journal.Call, extra [][]byte, mk, mv []byte) error {
	old := make([]*journal.Call, len(calls))
	err := s.db.View(func(txn *badger.Txn) error {
		for i := range calls {
			item, err := txn.Get(callKey(calls[i].Run, calls[i].Step))
			if errors.Is(err, badger.ErrKeyNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if err := item.Value(func(v []byte) error {
				old[i], err = decodeCall(v)
				return err
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	for i := range calls {
		c := &calls[i]
		keys := callKeys(c)
		if old[i] != nil {
			for _, k := range callKeys(old[i]) {
				if !slices.ContainsFunc(keys, func(n []byte) bool { return bytes.Equal(n, k) }) {
					if err := wb.Delete(k); err != nil {
						return err
					}
				}
			}
		}
		v, err := abi.Marshal(c)
		if err != nil {
			return err
		}
		if err := wb.Set(callKey(c.Run, c.Step), v); err != nil {
			return err
		}
		for _, k := range append(keys, extra...) {
			if err := wb.Set(k, []byte{}); err != nil {
				return err
			}
		}
		extra = nil
	}
	for _, k := range extra {
		if err := wb.Set(k, []byte{}); err != nil {
			return err
		}
	}
	if err := wb.Flush(); err != nil {
		return err
	}
	return s.db.Update(func(txn *badger.Txn) error { return txn.Set(mk, mv) })
}

// dropLineage deletes every index key of run: its rows and their secondary
// keys, its header's keys and its marker. The x/kid/<run> keys of its
// sub-runs are theirs, and stay. Purge calls it for a purged run.
func (s *Store) dropLineage(run journal.RunID) error {
	var keys [][]byte
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(runKey(xRun, run))
		switch {
		case errors.Is(err, badger.ErrKeyNotFound):
		case err != nil:
			return err
		default:
			keys = append(keys, item.KeyCopy(nil))
			err := item.Value(func(v []byte) error {
				m, err := decodeMarker(v)
				if err == nil {
					keys = append(keys, runKeys(run, &m.State)...)
				}
				return err
			})
			if err != nil {
				return err
			}
		}
		opts := badger.DefaultIteratorOptions
		opts.Prefix = runKey(xCall, run)
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			keys = append(keys, it.Item().KeyCopy(nil))
			err := it.Item().Value(func(v []byte) error {
				c, err := decodeCall(v)
				if err == nil {
					keys = append(keys, callKeys(c)...)
				}
				return err
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	for _, k := range keys {
		if err := wb.Delete(k); err != nil {
			return err
		}
	}
	return wb.Flush()
}

// purgeLineage is dropLineage under the index's lock, for Purge.
func (s *Store) purgeLineage(run journal.RunID) error {
	s.lineageMu.Lock()
	defer s.lineageMu.Unlock()
	return s.dropLineage(run)
}

// Query implements journal.Lineage. It catches up first, then scans the
// most selective key the filter allows: the runs' rows, else the output
// hash, the input hash, the resource, the op, the cell and last the time.
// Every candidate row is checked against the whole filter.
func (s *Store) Query(ctx context.Context, f journal.Filter) ([]journal.Call, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	s.lineageMu.Lock()
	defer s.lineageMu.Unlock()
	if _, err := s.catchUp(ctx); err != nil {
		return nil, err
	}
	var out []journal.Call
	err := s.db.View(func(txn *badger.Txn) error {
		if f.Run != nil {
			return s.queryRuns(ctx, txn, &f, &out)
		}
		return s.queryKeys(ctx, txn, &f, &out)
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b journal.Call) int { return journal.CallLess(&a, &b) })
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
}

// queryRuns scans the rows of f.Run and, with f.SubRuns, of its sub-runs,
// with f.Forks, of its forks, transitively.
func (s *Store) queryRuns(ctx context.Context, txn *badger.Txn, f *journal.Filter, out *[]journal.Call) error {
	runs := []journal.RunID{*f.Run}
	seen := map[journal.RunID]bool{*f.Run: true}
	opts := badger.DefaultIteratorOptions
	opts.PrefetchValues = false
	var follow []string
	if f.SubRuns {
		follow = append(follow, xKid)
	}
	if f.Forks {
		follow = append(follow, xFork)
	}
	for i := 0; len(follow) > 0 && i < len(runs); i++ {
		for _, rel := range follow {
			opts.Prefix = runKey(rel, runs[i])
			it := txn.NewIterator(opts)
			for it.Rewind(); it.Valid(); it.Next() {
				var kid journal.RunID
				copy(kid[:], it.Item().Key()[len(opts.Prefix):])
				if !seen[kid] {
					seen[kid] = true
					runs = append(runs, kid)
				}
			}
			it.Close()
		}
	}
	opts = badger.DefaultIteratorOptions
	for _, run := range runs {
		opts.Prefix = runKey(xCall, run)
		it := txn.NewIterator(opts)
		for it.Rewind(); it.Valid(); it.Next() {
			if err := ctx.Err(); err != nil {
				it.Close()
				return err
			}
			var c *journal.Call
			err := it.Item().Value(func(v []byte) (err error) {
				c, err = decodeCall(v)
				return err
			})
			if err != nil {
				it.Close()
				return err
			}
			if f.Match(c) {
				*out = append(*out, *c)
			}
		}
		it.Close()
	}
	return nil
}

// plan returns the key prefix to scan for f and whether it names one value
// exactly, so that its keys go in time order right after it.
func plan(f *journal.Filter) (prefix []byte, exact bool) {
	switch {
	case f.OutputHash != nil:
		return cat([]byte(xOut), f.OutputHash), true
	case f.InputHash != nil:
		return cat([]byte(xIn), f.InputHash), true
	case f.Resource != "":
		p, isPrefix := f.ResourcePrefix()
		if isPrefix {
			return appendText([]byte(xRes), p), false
		}
		return textKey(xRes, p), true
	case f.Op != "":
		p, isPrefix := f.OpPrefix()
		if isPrefix {
			return appendText([]byte(xOp), p), false
		}
		return textKey(xOp, p), true
	case f.Cell != "":
		b, _ := hex.DecodeString(f.Cell[:len(f.Cell)/2*2]) // checked by Filter.Check
		return cat([]byte(xCell), b), len(b) == journal.HashSize
	}
	return []byte(xTime), true
}

// queryKeys scans the secondary keys plan chooses and checks the rows they
// name.
func (s *Store) queryKeys(ctx context.Context, txn *badger.Txn, f *journal.Filter, out *[]journal.Call) error {
	prefix, exact := plan(f)
	var since, until int64
	if !f.Since.IsZero() {
		since = f.Since.UnixNano()
	}
	if !f.Until.IsZero() {
		until = f.Until.UnixNano()
	}
	opts := badger.DefaultIteratorOptions
	opts.Prefix, opts.PrefetchValues = prefix, false
	it := txn.NewIterator(opts)
	defer it.Close()
	start := prefix
	if exact && !f.Since.IsZero() {
		start = binary.BigEndian.AppendUint64(bytes.Clone(prefix), timeKey(since))
	}
	for it.Seek(start); it.Valid(); it.Next() {
		if err := ctx.Err(); err != nil {
			return err
		}
		k := it.Item().Key()
		if len(k) < len(prefix)+tailSize {
			return fmt.Errorf("badgerstore: malformed lineage key %x (rebuild the index)", k)
		}
		t, run, step := parseTail(k)
		if !f.Until.IsZero() && t >= until {
			if exact {
				break
			}
			continue
		}
		if !f.Since.IsZero() && t < since {
			continue
		}
		item, err := txn.Get(callKey(run, step))
		if err != nil {
			return fmt.Errorf("badgerstore: lineage key %x names no row (rebuild the index): %w", k, err)
		}
		var c *journal.Call
		if err := item.Value(func(v []byte) (err error) {
			c, err = decodeCall(v)
			return err
		}); err != nil {
			return err
		}
		if !f.Match(c) {
			continue
		}
		*out = append(*out, *c)
		if exact && f.Limit > 0 && len(*out) == f.Limit {
			break
		}
	}
	return nil
}

// Consumers implements journal.Lineage: the runs with a call whose response
// hashes to h (x/out/h) and the runs whose header input does (x/rin/h).
func (s *Store) Consumers(ctx context.Context, h []byte, limit int) ([]journal.Consumer, error) {
	if len(h) != journal.HashSize {
		return nil, fmt.Errorf("%w: hash is %d bytes, want %d", journal.ErrBadFilter, len(h), journal.HashSize)
	}
	if limit < 0 {
		return nil, fmt.Errorf("%w: negative limit %d", journal.ErrBadFilter, limit)
	}
	s.lineageMu.Lock()
	defer s.lineageMu.Unlock()
	if _, err := s.catchUp(ctx); err != nil {
		return nil, err
	}
	if bytes.Equal(h, journal.Sum(nil)) {
		return nil, nil // the empty payload names no data (SPEC.md 10.1)
	}
	byRun := map[journal.RunID]*journal.Consumer{}
	get := func(run journal.RunID) *journal.Consumer {
		c := byRun[run]
		if c == nil {
			c = &journal.Consumer{Run: run}
			byRun[run] = c
		}
		return c
	}
	err := s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false
		opts.Prefix = cat([]byte(xOut), h)
		it := txn.NewIterator(opts)
		for it.Rewind(); it.Valid(); it.Next() {
			t, run, step := parseTail(it.Item().Key())
			c := get(run)
			if len(c.Steps) == 0 || t < c.Time {
				c.Time = t
			}
			c.Steps = append(c.Steps, step)
		}
		it.Close()
		opts.Prefix = cat([]byte(xRin), h)
		it = txn.NewIterator(opts)
		for it.Rewind(); it.Valid(); it.Next() {
			var run journal.RunID
			copy(run[:], it.Item().Key()[len(opts.Prefix):])
			get(run).Input = true
		}
		it.Close()
		for run, c := range byRun {
			if err := ctx.Err(); err != nil {
				return err
			}
			item, err := txn.Get(runKey(xRun, run))
			if err != nil {
				return fmt.Errorf("badgerstore: lineage of run %s has no marker (rebuild the index): %w", run, err)
			}
			if err := item.Value(func(v []byte) error {
				m, err := decodeMarker(v)
				if err == nil {
					c.Parent = m.State.Parent
					if c.Input {
						c.Time = m.State.Started
					}
				}
				return err
			}); err != nil {
				return err
			}
			slices.Sort(c.Steps)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]journal.Consumer, 0, len(byRun))
	for _, c := range byRun {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b journal.Consumer) int {
		return cmp.Or(cmp.Compare(a.Time, b.Time), bytes.Compare(a.Run[:], b.Run[:]))
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}
