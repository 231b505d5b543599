// Package jetstore is a journal.Store on NATS JetStream, for cells that
// share their runs across machines: journals, their run index, the agents'
// kv state, event logs, blobs and modules in one stream, and the runs'
// leases in a KV bucket.
//
// Everything a commit changes travels in ONE atomic batch on the journal
// stream (journal/SPEC.md section 16): the records on the run's subject,
// fenced on that subject's last sequence, then the batch's blobs, kv
// writes, events, index record and the run's head record on subjects of the
// same stream. The server stores the batch whole or not at all, so no
// reader ever sees a state change, an index record or a head without the
// entries that record it. Reads go to the stream's leader (the stream does
// not allow direct gets, which replicas may answer stale).
//
// The store counts an acknowledged batch as durable (Batch.Durable): the
// servers MUST run with sync_interval: always, which is a server setting
// the store cannot see or change. With JetStream's default (a sync every
// two minutes) an acknowledged commit can be lost in a power failure.
//
// It must never hold a lease key's deletion as a release: leases are
// released by an update at a known revision, and a deleted key is an
// error (lease.go).
package jetstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/agentrt/agentrt/journal"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Options configure a Store. The zero value of a field takes its default.
type Options struct {
	// Stream is the journal stream's name; default "JOURNAL". Its
	// subjects are Prefix + ".>".
	Stream string
	// Prefix is the first token of every subject of the stream; default
	// "journal": records of run r are on journal.<r>.
	Prefix string
	// LeaseBucket is the KV bucket of the runs' leases; default
	// "AGENTRT_LEASES".
	LeaseBucket string
	// Replicas is the number of servers that keep the stream and the
	// lease bucket: 1 or 3 (default 1).
	Replicas int
	// MaxBatch is the most messages the servers take in one atomic batch
	// (their max_batch_size, 1000 unless configured): a commit that
	// needs more is refused with an error before anything is sent.
	MaxBatch int
	// Timeout bounds each request to the servers, and Open in all (it
	// retries while a cluster that has just started cannot answer yet);
	// default 10 s.
	Timeout time.Duration
}

func (o Options) withDefaults() (Options, error) {
	if o.Stream == "" {
		o.Stream = "JOURNAL"
	}
	if o.Prefix == "" {
		o.Prefix = "journal"
	}
	if o.LeaseBucket == "" {
		o.LeaseBucket = "AGENTRT_LEASES"
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = 1000
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	switch {
	case o.Replicas != 1 && o.Replicas != 3:
		return o, fmt.Errorf("jetstore: %d replicas: the journal stream is kept on 1 server or on 3 (set Replicas to 1 or 3)", o.Replicas)
	case strings.ContainsAny(o.Prefix, ".*> \t\r\n") || strings.ContainsAny(o.Stream, ".*> \t\r\n"):
		return o, fmt.Errorf("jetstore: stream %q, prefix %q: a stream name and a subject prefix are one token, without '.', '*', '>' or spaces", o.Stream, o.Prefix)
	case o.MaxBatch < 2:
		return o, fmt.Errorf("jetstore: MaxBatch %d: a commit needs at least 2 messages of a batch (its records and its head)", o.MaxBatch)
	case o.Timeout < 0:
		return o, fmt.Errorf("jetstore: a negative timeout (%s)", o.Timeout)
	}
	return o, nil
}

// Store is a journal.Store, journal.Heads, journal.Blobs and journal.Leases
// on JetStream.
type Store struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	stream jetstream.Stream
	leases jetstream.KeyValue
	opts   Options
	subj   subjects
	// maxMsg is the most bytes (headers and data) one message may hold:
	// the connection's max payload.
	maxMsg int

	mu sync.Mutex
	// tails caches what this store last saw of each run's journal, as
	// the fence of its next commit; a conflict or an unknown outcome
	// drops it, and the next commit reads the tail again.
	tails map[journal.RunID]tail
	// inflight bounds the atomic batches this store has open at once
	// (the server takes 50 a stream).
	inflight chan struct{}

	// gmu guards the group commit (commit.go, pending): the commits
	// waiting for the next batch, and whether a sender leads.
	gmu     sync.Mutex
	queue   []*pending
	leading bool
}

// tail is where a run's journal ends: n entries, the last of them the
// message at stream sequence seq (0 when the journal is empty).
type tail struct {
	n, seq uint64
}

var (
	_ journal.Store  = (*Store)(nil)
	_ journal.Heads  = (*Store)(nil)
	_ journal.Blobs  = (*Store)(nil)
	_ journal.Leases = (*Store)(nil)
)

// Open returns a store on the JetStream servers nc is connected to,
// creating the journal stream and the lease bucket if they do not exist
// and checking them if they do. A stream that exists with settings the
// store relies on missing (atomic batches, rollups, no direct gets) is
// updated; one with another replica count is refused.
func Open(ctx context.Context, nc *nats.Conn, o Options) (*Store, error) {
	opts, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(opts.Timeout))
	if err != nil {
		return nil, fmt.Errorf("jetstore: %w", err)
	}
	var s *Store
	err = Patiently(ctx, opts.Timeout, func(ctx context.Context) (err error) {
		s, err = open(ctx, js, opts)
		return err
	})
	return s, err
}

// Patiently calls attempt until it succeeds, fails for a reason other
// than servers that cannot answer yet, or limit has passed. A cluster that
// has just started answers no JetStream request until it has a meta
// leader, and a new R3 stream or bucket none until its raft group has
// one (seconds on a loaded machine): each attempt is bounded by a few
// seconds and retried, within limit in all. Open uses it; a caller opening
// buckets of its own next to a store (a cell's registry) does too.
func Patiently(ctx context.Context, limit time.Duration, attempt func(context.Context) error) error {
	deadline := time.Now().Add(limit)
	for {
		actx, cancel := context.WithTimeout(ctx, min(openAttempt, time.Until(deadline)))
		err := attempt(actx)
		cancel()
		if err == nil || !notReady(err) || ctx.Err() != nil || time.Until(deadline) < openRetry {
			return err
		}
		time.Sleep(openRetry)
	}
}

// openAttempt bounds one attempt of Open, and openRetry is the pause
// between two.
const (
	openAttempt = 3 * time.Second
	openRetry   = 100 * time.Millisecond
)

// errNoLeader is a replicated stream's state before its raft group has
// elected a leader: a write to it then finds no responders.
var errNoLeader = errors.New("jetstore: the stream has no leader yet")

// leads returns errNoLeader while the stream info describes has a cluster
// and no leader in it: Open waits for one, so that the first commit of a
// store just opened is not refused for want of it.
func leads(info *jetstream.StreamInfo) error {
	if info != nil && info.Cluster != nil && info.Cluster.Leader == "" {
		return fmt.Errorf("%w: stream %s", errNoLeader, info.Config.Name)
	}
	return nil
}

// notReady reports whether err says the servers could not answer yet: no
// answer in time, no responders, a stream without a leader yet, a
// JetStream API error of the 5xx kind (no meta leader, temporarily
// unavailable), or no peers to place a replicated stream on (10005: a
// cluster that has just formed may take a server that is slow to answer
// for offline for a moment; a cluster with too few servers for the
// replicas asked is refused so too, once the timeout has passed).
func notReady(err error) bool {
	var api *jetstream.APIError
	return errors.Is(err, errNoLeader) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		(errors.As(err, &api) && (api.Code >= 500 || api.ErrorCode == errCodeNoPeers))
}

// errCodeNoPeers is the servers' "no suitable peers for placement".
const errCodeNoPeers jetstream.ErrorCode = 10005

// open makes or checks the stream and the lease bucket: one attempt of
// Open.
func open(ctx context.Context, js jetstream.JetStream, opts Options) (*Store, error) {
	nc := js.Conn()
	cfg := jetstream.StreamConfig{
		Name:               opts.Stream,
		Description:        "agentrt journals, run index, kv state, events, blobs and modules",
		Subjects:           []string{opts.Prefix + ".>"},
		Storage:            jetstream.FileStorage,
		Retention:          jetstream.LimitsPolicy,
		Replicas:           opts.Replicas,
		Discard:            jetstream.DiscardNew,
		MaxMsgs:            -1,
		MaxBytes:           -1,
		MaxAge:             0,
		MaxMsgsPerSubject:  -1,
		MaxMsgSize:         -1,
		Duplicates:         2 * time.Minute,
		AllowRollup:        true,
		DenyDelete:         true,
		AllowDirect:        false,
		AllowAtomicPublish: true,
	}
	stream, err := js.Stream(ctx, opts.Stream)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		stream, err = js.CreateStream(ctx, cfg)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			stream, err = js.Stream(ctx, opts.Stream)
		}
	case err == nil:
		have := stream.CachedInfo().Config
		if have.Replicas != opts.Replicas {
			return nil, fmt.Errorf("jetstore: stream %s has %d replicas, the store was opened with %d (open it with Replicas: %d, or move the stream)",
				opts.Stream, have.Replicas, opts.Replicas, have.Replicas)
		}
		if !have.AllowAtomicPublish || !have.AllowRollup || have.AllowDirect || !have.DenyDelete || have.DenyPurge || have.MaxMsgsPerSubject > 0 {
			stream, err = js.UpdateStream(ctx, cfg)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("jetstore: open stream %s on %s: %w (the servers need JetStream enabled, version 2.12 or later for atomic batches)", opts.Stream, nc.ConnectedUrlRedacted(), err)
	}
	if err := leads(stream.CachedInfo()); err != nil {
		return nil, err
	}
	leases, err := openLeases(ctx, js, opts)
	if err != nil {
		return nil, err
	}
	return &Store{
		nc: nc, js: js, stream: stream, leases: leases, opts: opts,
		subj:     subjects{prefix: opts.Prefix},
		maxMsg:   int(nc.MaxPayload()),
		tails:    map[journal.RunID]tail{},
		inflight: make(chan struct{}, 32),
	}, nil
}

// Close releases the store. It does not close the connection, which the
// caller owns.
func (s *Store) Close() error { return nil }

// Headers of the messages on the stream.
const (
	// hdrSeq is a record's entry seq, decimal.
	hdrSeq = "Agentrt-Seq"
	// hdrPart is "i/k" on part i of a blob or module cut in k parts, and
	// hdrSize its whole size, decimal.
	hdrPart = "Agentrt-Part"
	hdrSize = "Agentrt-Size"
	// hdrKV is "del" on a kv write that deletes its key.
	hdrKV = "Agentrt-Kv"
)

// ctx bounds one request by Options.Timeout, within ctx: a caller's
// longer deadline must not let a request the servers lost (sent as a
// leader went away) wait for all of it.
func (s *Store) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.opts.Timeout)
}

// last returns the last message on subj, nil when there is none.
func (s *Store) last(ctx context.Context, subj string) (*jetstream.RawStreamMsg, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	m, err := s.stream.GetLastMsgForSubject(ctx, subj)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("jetstore: read %s from stream %s: %w", subj, s.opts.Stream, err)
	}
	return m, nil
}

// next returns the first message at or after stream sequence seq on subj
// (a filter, wildcards allowed), nil when there is none.
func (s *Store) next(ctx context.Context, seq uint64, subj string) (*jetstream.RawStreamMsg, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	m, err := s.stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subj))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("jetstore: read %s from stream %s at sequence %d: %w", subj, s.opts.Stream, seq, err)
	}
	return m, nil
}

// scan calls fn with every message on subj (a filter) in stream order.
func (s *Store) scan(ctx context.Context, subj string, fn func(*jetstream.RawStreamMsg) error) error {
	for seq := uint64(1); ; {
		if err := ctx.Err(); err != nil {
			return err
		}
		m, err := s.next(ctx, seq, subj)
		if err != nil || m == nil {
			return err
		}
		if err := fn(m); err != nil {
			return err
		}
		seq = m.Sequence + 1
	}
}

// openLeases binds the lease bucket, creating it when there is none, with
// direct gets off (leaderReads).
func openLeases(ctx context.Context, js jetstream.JetStream, opts Options) (jetstream.KeyValue, error) {
	_, err := OpenBucket(ctx, js, jetstream.KeyValueConfig{
		Bucket:      opts.LeaseBucket,
		Description: "agentrt run leases: compare-and-swap on revisions, never deleted",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    opts.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("jetstore: open lease bucket %s: %w", opts.LeaseBucket, err)
	}
	return leaderReads(ctx, js, opts.LeaseBucket)
}

// OpenBucket binds the KV bucket cfg names, and creates it as cfg says
// when there is none. A bucket that exists is bound as it is, never
// updated: the cells of a cluster open the same buckets as they start,
// often together, and an update by each would be a change of the bucket's
// stream for each (on R3, a raft proposal each), and would turn a lease
// bucket's direct gets back on under the other cells' handles. A bucket
// another opener created meanwhile is bound.
func OpenBucket(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return kv, err
	}
	kv, err = js.CreateKeyValue(ctx, cfg)
	if errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return js.KeyValue(ctx, cfg.Bucket)
	}
	return kv, err
}

// leaderReads turns off direct gets on the lease bucket's stream, which
// a KV bucket has by default, and binds the bucket: a direct get may be
// answered by a replica that is behind (one that just came back), and a
// holder reading its own lease from it would find an older one and take
// its lease for lost. Reads then go to the stream's leader. The handle is
// bound after direct gets are off, whoever turned them off.
func leaderReads(ctx context.Context, js jetstream.JetStream, bucket string) (jetstream.KeyValue, error) {
	st, err := js.Stream(ctx, "KV_"+bucket)
	if err != nil {
		return nil, fmt.Errorf("jetstore: lease bucket %s: %w", bucket, err)
	}
	if err := leads(st.CachedInfo()); err != nil {
		return nil, err
	}
	if cfg := st.CachedInfo().Config; cfg.AllowDirect || cfg.MirrorDirect {
		cfg.AllowDirect, cfg.MirrorDirect = false, false
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			return nil, fmt.Errorf("jetstore: lease bucket %s: turn direct gets off: %w", bucket, err)
		}
	}
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		return nil, fmt.Errorf("jetstore: lease bucket %s: %w", bucket, err)
	}
	return kv, nil
}
