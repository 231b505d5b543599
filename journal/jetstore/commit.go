package jetstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/journal"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"
)

// ErrOutcomeUnknown is returned by Commit when the servers did not answer
// a commit (a timeout, a lost connection) and the journal, read again,
// does not hold its records: the batch may still be applied by the
// servers. The caller must not act on the commit, nor assume it failed:
// it stops writing the run, and whoever resumes it reads the journal.
var ErrOutcomeUnknown = errors.New("jetstore: the outcome of the commit is unknown")

// RecordError is a message on a run's records subject that is not a
// record of that run's journal at the place it stands: it does not
// decode, or it holds another entry. Nothing is written after it.
type RecordError struct {
	Run journal.RunID
	// Seq is the entry seq the message claims (its header), or the one
	// expected at its place when it claims none.
	Seq uint64
	// StreamSeq is the message's sequence in the stream.
	StreamSeq uint64
	Reason    string
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("jetstore: run %s: entry %d (stream sequence %d) %s; the journal on the stream is damaged or was written by something other than a journal store (nothing is written after it; read it with journal verify)",
		e.Run, e.Seq, e.StreamSeq, e.Reason)
}

// Unwrap returns journal.ErrIncomplete: the journal cannot be read whole.
func (e *RecordError) Unwrap() error { return journal.ErrIncomplete }

// recordSeq returns the entry seq of a message on run's records subject,
// checking that it decodes and holds that entry of that run.
func recordSeq(run journal.RunID, m *jetstream.RawStreamMsg, expect uint64) (uint64, error) {
	h := m.Header.Get(hdrSeq)
	seq, err := strconv.ParseUint(h, 10, 64)
	if err != nil {
		return 0, &RecordError{Run: run, Seq: expect, StreamSeq: m.Sequence, Reason: fmt.Sprintf("has no valid %s header (%q)", hdrSeq, h)}
	}
	rec, err := journal.DecodeRecord(m.Data)
	if err != nil {
		return 0, &RecordError{Run: run, Seq: seq, StreamSeq: m.Sequence, Reason: "does not decode: " + err.Error()}
	}
	e, err := journal.DecodeEntry(rec.Entry)
	if err != nil {
		return 0, &RecordError{Run: run, Seq: seq, StreamSeq: m.Sequence, Reason: "holds an entry that does not decode: " + err.Error()}
	}
	if e.Run != run || e.Seq != seq {
		return 0, &RecordError{Run: run, Seq: seq, StreamSeq: m.Sequence, Reason: fmt.Sprintf("holds entry %d of run %s", e.Seq, e.Run)}
	}
	return seq, nil
}

// msgID is the Nats-Msg-Id of a record: run, seq and the first 8 bytes of
// its entry hash, so that a writer recognizes its own record after an
// unanswered commit and the servers refuse the same record twice.
func msgID(run journal.RunID, seq uint64, entry []byte) string {
	return fmt.Sprintf("%s-%d-%x", run, seq, journal.Sum(entry)[:8])
}

// tailOf returns the fence of run's next commit: cached, or read from the
// stream.
func (s *Store) tailOf(ctx context.Context, run journal.RunID) (t tail, cached bool, err error) {
	s.mu.Lock()
	t, cached = s.tails[run]
	s.mu.Unlock()
	if cached {
		return t, true, nil
	}
	t, err = s.readTail(ctx, run)
	return t, false, err
}

func (s *Store) readTail(ctx context.Context, run journal.RunID) (tail, error) {
	m, err := s.last(ctx, s.subj.records(run))
	if err != nil || m == nil {
		return tail{}, err
	}
	seq, err := recordSeq(run, m, 0)
	if err != nil {
		return tail{}, err
	}
	return tail{n: seq + 1, seq: m.Sequence}, nil
}

func (s *Store) setTail(run journal.RunID, t tail) {
	s.mu.Lock()
	if cur, ok := s.tails[run]; !ok || t.n > cur.n {
		s.tails[run] = t
	}
	s.mu.Unlock()
}

func (s *Store) dropTail(run journal.RunID) {
	s.mu.Lock()
	delete(s.tails, run)
	s.mu.Unlock()
}

// Commit implements journal.Store: the batch is one atomic batch on the
// stream, fenced on the last sequence of the run's records subject
// (journal/SPEC.md section 16.2).
func (s *Store) Commit(ctx context.Context, b *journal.Batch) error {
	if err := checkBlobs(b); err != nil {
		return err
	}
	t, cached, err := s.tailOf(ctx, b.Run)
	if err != nil {
		return err
	}
	if b.Next != t.n && cached {
		// Another store may have appended since: look again before
		// refusing.
		if t, err = s.readTail(ctx, b.Run); err != nil {
			return err
		}
	}
	if b.Next != t.n {
		s.dropTail(b.Run)
		return fmt.Errorf("%w: the journal of %s holds %d entries, the writer expected %d", journal.ErrConflict, b.Run, t.n, b.Next)
	}
	journal.SealBatches([]*journal.Batch{b})
	msgs, err := s.encode(ctx, b, t)
	if err != nil || len(msgs) == 0 {
		return err
	}
	k := uint64(len(b.Records))
	last, err := s.send(ctx, b.Run, msgs, k)
	switch {
	case err == nil:
		if k > 0 {
			s.setTail(b.Run, tail{n: b.Next + k, seq: last})
		}
		if b.Meta != nil && b.Meta.Status != journal.StatusRunning {
			s.dropTail(b.Run) // a finished run is not written again; a resume reads its tail afresh
		}
		return nil
	case isConflict(err):
		s.dropTail(b.Run)
		return fmt.Errorf("%w: the journal of %s moved past entry %d (%v)", journal.ErrConflict, b.Run, b.Next, err)
	case isDefinite(err):
		return fmt.Errorf("jetstore: commit to %s at entry %d refused by the servers (nothing was written): %w", b.Run, b.Next, err)
	}
	return s.resolve(b, msgs, err)
}

// resolve decides the outcome of a commit the servers did not answer:
// the journal is read again, and a tail that is the batch's last record
// (by its message id) is adopted as written.
func (s *Store) resolve(b *journal.Batch, msgs []*nats.Msg, cause error) error {
	s.dropTail(b.Run)
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
	defer cancel()
	k := uint64(len(b.Records))
	if k > 0 {
		m, err := s.last(ctx, s.subj.records(b.Run))
		if err == nil && m != nil && m.Header.Get(jetstream.MsgIDHeader) == msgs[k-1].Header.Get(jetstream.MsgIDHeader) {
			if _, err := recordSeq(b.Run, m, b.Next+k-1); err == nil {
				s.setTail(b.Run, tail{n: b.Next + k, seq: m.Sequence})
				return nil
			}
		}
	}
	return fmt.Errorf("%w: commit of %d entries to %s at entry %d: %v, and the journal read again does not hold them (stop writing the run; a resume reads the journal)",
		ErrOutcomeUnknown, k, b.Run, b.Next, cause)
}

func apiCode(err error) jetstream.ErrorCode {
	var api *jetstream.APIError
	if errors.As(err, &api) {
		return api.ErrorCode
	}
	return 0
}

// Error codes of the servers that mean another writer was first: a wrong
// last sequence (10071; 10164 on replicated streams, and for a subject
// another batch is committing), a record id already stored (10201) or in
// process (10158).
func isConflict(err error) bool {
	switch apiCode(err) {
	case jetstream.JSErrCodeStreamWrongLastSequence, jetstream.JSErrCodeStreamWrongLastSequenceConstant, 10201, 10158:
		return true
	}
	return false
}

// isDefinite reports an answer of the servers that refused the batch:
// an atomic batch refused is not stored.
func isDefinite(err error) bool {
	return apiCode(err) != 0 || errors.Is(err, jetstreamext.ErrEmptyBatch) || errors.Is(err, errNotWritten)
}

// tooBusy reports a batch refused because the stream has too many open.
func tooBusy(err error) bool {
	c := apiCode(err)
	return c == jetstreamext.JSErrCodeAtomicPublishTooManyInflight || c == jetstreamext.JSErrCodeBatchPublishTooManyInflight
}

// A commit waiting to be sent (group commit). On one server (R1) the
// servers stage each atomic batch in a file store of its own, created and
// deleted with a handful of fsyncs (journal/SPEC.md 16.2): a batch costs
// the same whatever it holds. So while one batch is in flight, the
// commits that arrive meanwhile wait, and go together in the next: each
// keeps its own fence (on its run's records subject), and the servers
// apply them all or none. Commits of one run never share a batch (the
// second's fence would be refused within the batch).
type pending struct {
	run  journal.RunID
	msgs []*nats.Msg
	k    uint64 // the commit's records, its first messages
	done chan sent
}

// sent is the outcome of a pending commit: the stream sequence of its
// last record (when it has records), or the error of its batch.
type sent struct {
	last uint64
	err  error
}

// send commits msgs, the batch of a commit to run whose first k messages
// are its records, in an atomic batch of their own or with others
// (pending), and returns the stream sequence of the last record.
func (s *Store) send(ctx context.Context, run journal.RunID, msgs []*nats.Msg, k uint64) (uint64, error) {
	p := &pending{run: run, msgs: msgs, k: k, done: make(chan sent, 1)}
	s.gmu.Lock()
	s.queue = append(s.queue, p)
	lead := !s.leading
	s.leading = true
	s.gmu.Unlock()
	if lead {
		s.lead(ctx)
	}
	// A commit handed to a batch is not abandoned: the batch may be
	// applied, and its outcome is the commit's (each request of it is
	// bounded by Options.Timeout).
	r := <-p.done
	return r.last, r.err
}

// lead sends the commits waiting, as many as fit one batch, and hands
// the lead on to a goroutine of its own while more wait: a caller does
// not stay to send the commits of others.
func (s *Store) lead(ctx context.Context) {
	s.gmu.Lock()
	var group, rest []*pending
	size := 0
	runs := map[journal.RunID]bool{}
	for _, p := range s.queue {
		if runs[p.run] || (len(group) > 0 && size+len(p.msgs) > s.opts.MaxBatch) {
			rest = append(rest, p)
			continue
		}
		runs[p.run] = true
		size += len(p.msgs)
		group = append(group, p)
	}
	s.queue = rest
	s.gmu.Unlock()

	s.flush(ctx, group)

	s.gmu.Lock()
	if len(s.queue) == 0 {
		s.leading = false
		s.gmu.Unlock()
		return
	}
	s.gmu.Unlock()
	go s.lead(context.WithoutCancel(ctx))
}

// flush sends group as one atomic batch and tells each commit its
// outcome. A batch the servers refuse is sent again commit by commit, so
// that a commit's conflict or refusal is its own, never its neighbours';
// one no server took within the timeout is every commit's refusal.
// A batch without an answer is each commit's unknown outcome: all or
// none of it is on the stream, which each commit resolves on its own
// run.
func (s *Store) flush(ctx context.Context, group []*pending) {
	one := func(p *pending) {
		ack, err := s.publish(ctx, p.msgs)
		if err != nil {
			p.done <- sent{err: err}
			return
		}
		p.done <- sent{last: ack.Sequence - ack.BatchSize + p.k}
	}
	if len(group) == 1 {
		one(group[0])
		return
	}
	// The batch carries other callers' commits: the leader's context
	// ending does not cut them (each request stays bounded).
	ctx = context.WithoutCancel(ctx)
	var msgs []*nats.Msg
	for _, p := range group {
		msgs = append(msgs, p.msgs...)
	}
	ack, err := s.publish(ctx, msgs)
	switch {
	case err == nil:
		first := ack.Sequence - ack.BatchSize + 1
		at := uint64(0)
		for _, p := range group {
			p.done <- sent{last: first + at + p.k - 1}
			at += uint64(len(p.msgs))
		}
	case isDefinite(err) && !errors.Is(err, errNotWritten):
		for _, p := range group {
			one(p)
		}
	default:
		// No answer (each commit resolves it on its own run), or no
		// server took the batch for a whole timeout (none of it is on the
		// stream, and each commit sent again alone would wait as long
		// once more, one after the other): the batch's outcome is each
		// commit's.
		for _, p := range group {
			p.done <- sent{err: err}
		}
	}
}

// publish sends msgs as one atomic batch. A batch refused because the
// stream has too many batches open (other stores' too) is sent again,
// a few times, after a pause. So is one that found no responders: the
// stream had no leader at that moment (an R3 stream between two, or
// one just created), no server took the batch's commit, and so none of
// it is applied; it is sent again until a leader answers, within the
// store's timeout, and is then refused as not written.
func (s *Store) publish(ctx context.Context, msgs []*nats.Msg) (*jetstreamext.BatchAck, error) {
	select {
	case s.inflight <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-s.inflight }()
	fc := jetstreamext.BatchFlowControl{AckFirst: false, AckEvery: 64, AckTimeout: s.opts.Timeout}
	deadline := time.Now().Add(s.opts.Timeout)
	for try := 0; ; try++ {
		cctx, cancel := s.ctx(ctx)
		ack, err := jetstreamext.PublishMsgBatch(cctx, s.js, msgs, fc)
		cancel()
		switch {
		case err == nil:
			return ack, nil
		case tooBusy(err) && try < 8:
			time.Sleep(time.Duration(5<<try) * time.Millisecond)
		case errors.Is(err, nats.ErrNoResponders):
			if ctx.Err() != nil || time.Until(deadline) < leaderWait {
				return nil, fmt.Errorf("%w: %w", errNotWritten, err)
			}
			time.Sleep(leaderWait)
		default:
			return ack, err
		}
	}
}

// leaderWait is the pause before a batch that found no responders is
// sent again.
const leaderWait = 50 * time.Millisecond

// errNotWritten marks a batch that no server took: nothing of it is on
// the stream.
var errNotWritten = errors.New("no server of the stream answered: nothing was written")

// encode returns the messages of b's atomic batch, in this order: the
// records (the first carrying the fence), the blobs the stream does not
// hold, the kv writes, the events, the index record, and the head record.
func (s *Store) encode(ctx context.Context, b *journal.Batch, t tail) ([]*nats.Msg, error) {
	var msgs []*nats.Msg
	add := func(subj string, data []byte, hdr nats.Header, what string) error {
		m := &nats.Msg{Subject: subj, Data: data, Header: hdr}
		if size := len(data) + headerSize(hdr) + 256; size > s.maxMsg {
			return fmt.Errorf("jetstore: run %s: %s of %d bytes does not fit one message of these servers (max_payload %d bytes): raise max_payload on the servers (the journal needs 2 MiB for the largest requests)",
				b.Run, what, len(data), s.maxMsg)
		}
		msgs = append(msgs, m)
		return nil
	}
	rollup := func() nats.Header { return nats.Header{jetstream.MsgRollup: []string{jetstream.MsgRollupSubject}} }
	for i := range b.Records {
		seq := b.Next + uint64(i)
		h := nats.Header{hdrSeq: []string{strconv.FormatUint(seq, 10)}, jetstream.MsgIDHeader: []string{msgID(b.Run, seq, b.Records[i].Entry)}}
		if err := add(s.subj.records(b.Run), journal.AppendRecord(nil, &b.Records[i]), h, fmt.Sprintf("entry %d", seq)); err != nil {
			return nil, err
		}
	}
	seen := map[string]bool{}
	for _, bl := range b.Blobs {
		if seen[string(bl.Sum)] {
			continue
		}
		seen[string(bl.Sum)] = true
		held, err := s.last(ctx, s.subj.blob(bl.Sum, 0))
		if err != nil {
			return nil, err
		}
		if held != nil {
			continue
		}
		for i, p := range s.parts(bl.Data) {
			h := rollup()
			h.Set(hdrPart, fmt.Sprintf("%d/%d", i, len(s.parts(bl.Data))))
			h.Set(hdrSize, strconv.Itoa(len(bl.Data)))
			if err := add(s.subj.blob(bl.Sum, i), p, h, "a blob part"); err != nil {
				return nil, err
			}
		}
	}
	for _, w := range b.KV {
		h := rollup()
		var v []byte
		if w.Delete {
			h.Set(hdrKV, "del")
		} else {
			v = w.Value
		}
		if err := add(s.subj.kv(w.Namespace, w.Key), v, h, fmt.Sprintf("the value of kv key %q", w.Key)); err != nil {
			return nil, err
		}
	}
	for i, e := range b.Events {
		if err := add(s.subj.events(b.Run), e, nil, fmt.Sprintf("event %d of the batch", i)); err != nil {
			return nil, err
		}
	}
	if b.Meta != nil {
		meta, err := abi.Marshal(b.Meta)
		if err != nil {
			return nil, fmt.Errorf("jetstore: encode the index record of %s: %w", b.Run, err)
		}
		if err := add(s.subj.meta(b.Run), meta, rollup(), "the index record"); err != nil {
			return nil, err
		}
	}
	if n := len(b.Records); n > 0 {
		last := journal.Sum(b.Records[n-1].Entry)
		if err := add(s.subj.head(b.Run), journal.EncodeHead(b.Next+uint64(n), last), rollup(), "the head record"); err != nil {
			return nil, err
		}
	}
	if len(msgs) == 0 {
		return nil, nil
	}
	if len(msgs) > s.opts.MaxBatch {
		return nil, fmt.Errorf("jetstore: the commit to %s at entry %d needs %d messages; the servers take %d in one atomic batch (raise max_batch_size on the servers and Options.MaxBatch, or commit fewer entries at once)",
			b.Run, b.Next, len(msgs), s.opts.MaxBatch)
	}
	// The fence, on the first message: the run's records subject must
	// still end where this writer saw it end.
	first := msgs[0]
	if first.Header == nil {
		first.Header = nats.Header{}
	}
	first.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(t.seq, 10))
	first.Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, s.subj.records(b.Run))
	return msgs, nil
}

func headerSize(h nats.Header) int {
	n := 12
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

// parts cuts data into the parts of a blob or module: each fits a
// message.
func (s *Store) parts(data []byte) [][]byte {
	size := s.maxMsg - 1024
	var out [][]byte
	for len(data) > size {
		out = append(out, data[:size])
		data = data[size:]
	}
	return append(out, data)
}

// checkBlobs refuses the blobs of a batch that are not what they claim.
func checkBlobs(b *journal.Batch) error {
	for i, bl := range b.Blobs {
		if len(bl.Data) == 0 || len(bl.Data) > journal.MaxBlobSize {
			return fmt.Errorf("jetstore: blob %d of the batch is %d bytes (1 to %d)", i, len(bl.Data), journal.MaxBlobSize)
		}
		if err := journal.CheckBlob(bl.Sum, bl.Data); err != nil {
			return fmt.Errorf("jetstore: blob %d of the batch is not named by its hash: %w", i, err)
		}
	}
	return nil
}
