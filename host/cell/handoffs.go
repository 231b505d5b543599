package cell

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/cell/handoff"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/jetstore"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A signed handoff (issue 14, part 5) moves a live run from this cell, its
// source, to a destination cell of the cluster, in this order:
//
//  1. The source stops the run at a step boundary (host.Yield): nothing is
//     in flight, the run stays running in its journal, and its lease stays
//     the source's, no longer renewed.
//  2. It seals the envelope (package handoff) with its cell key: the lease
//     epoch, the journal's head, the run's capability token, a fresh nonce,
//     an expiry ClusterOptions.HandoffExpiry away and the hash of the run's
//     previous envelope, and appends it to the run's envelope chain in the
//     cluster's KV bucket HandoffBucket.
//  3. It hands the lease to the destination (journal.LeaseHandover: same
//     epoch, the destination as owner, the envelope's expiry).
//  4. It sends the envelope to the destination as a NATS request on the
//     destination's HandoffSubject, and waits for the answer.
//  5. The destination verifies everything before it acquires the lease
//     (receiveHandoff): the envelope (handoff.Verify), the lease (handed to
//     it, at the envelope's epoch), the journal (verified, its head the
//     envelope's, its header's token the envelope's); it spends the nonce,
//     acquires the lease with the next epoch, journals the envelope in its
//     lease entry and resumes the run.
//  6. A refusal, or no answer, leaves the run where it was: the source hands
//     the lease back to itself (a compare-and-swap that fails if the
//     destination acquired it meanwhile) and resumes the run; both cells
//     log the refusal with its reason.

// HandoffBucket is the KV bucket of the runs' envelope chains and of the
// nonces accepted: keys "env.<run>.<n>" (envelope n of the run, from 0)
// and "nonce.<hex>", both written create-only, never deleted.
const HandoffBucket = "AGENTRT_HANDOFFS"

// HandoffSubject is the NATS subject a cell receives handoff envelopes on.
func HandoffSubject(cell ed25519.PublicKey) string {
	return "agentrt.handoff." + hex.EncodeToString(cell)
}

// Errors of a handoff, as the API and the CLI report them.
var (
	// ErrNoCluster is returned by Handoff on a cell that is not in a
	// cluster.
	ErrNoCluster = errors.New("this cell is not in a cluster")
	// ErrNoCell is returned by Handoff for a destination that is no live
	// cell of the cluster's registry.
	ErrNoCell = errors.New("no such live cell in the cluster")
	// ErrHandoffRefused is returned by Handoff when the destination
	// refused the envelope; the error also wraps the handoff package's
	// error for the reason (handoff.Reasons).
	ErrHandoffRefused = errors.New("handoff refused")
)

// kvHandoffs is handoff.Store on a JetStream KV bucket.
type kvHandoffs struct{ kv jetstream.KeyValue }

// OpenHandoffs opens (creating) the handoff bucket on nc's servers: a
// cell does so as it joins its cluster. An R3 bucket forms a raft group of
// its own; a deployment (or a test) on slow machines may create it first.
func OpenHandoffs(ctx context.Context, nc *nats.Conn, replicas int) (handoff.Store, error) {
	return openHandoffs(ctx, nc, replicas)
}

func openHandoffs(ctx context.Context, nc *nats.Conn, replicas int) (*kvHandoffs, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("cell: handoffs: %w", err)
	}
	kv, err := jetstore.OpenBucket(ctx, js, jetstream.KeyValueConfig{
		Bucket:      HandoffBucket,
		Description: "agentrt handoff envelopes (per run, a chain) and the nonces accepted",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("cell: open the handoff bucket %s: %w", HandoffBucket, err)
	}
	return &kvHandoffs{kv: kv}, nil
}

func envKey(run journal.RunID, n int) string { return "env." + run.String() + "." + strconv.Itoa(n) }

// Envelopes implements handoff.Store: envelope 0, 1, ... until one is
// missing.
func (k *kvHandoffs) Envelopes(ctx context.Context, run journal.RunID) ([][]byte, error) {
	var out [][]byte
	for n := 0; ; n++ {
		e, err := k.kv.Get(ctx, envKey(run, n))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("cell: read envelope %d of run %s: %w", n, run, err)
		}
		out = append(out, e.Value())
	}
}

// Put implements handoff.Store.
func (k *kvHandoffs) Put(ctx context.Context, run journal.RunID, n int, raw []byte) error {
	_, err := k.kv.Create(ctx, envKey(run, n), raw)
	if errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("%w: run %s has an envelope %d already", handoff.ErrChainMoved, run, n)
	}
	if err != nil {
		return fmt.Errorf("cell: store envelope %d of run %s: %w", n, run, err)
	}
	return nil
}

func nonceKey(nonce []byte) string { return "nonce." + hex.EncodeToString(nonce) }

// Seen implements handoff.Store.
func (k *kvHandoffs) Seen(ctx context.Context, nonce []byte) (bool, error) {
	_, err := k.kv.Get(ctx, nonceKey(nonce))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("cell: read handoff nonce %x: %w", nonce, err)
	}
	return true, nil
}

// See implements handoff.Store.
func (k *kvHandoffs) See(ctx context.Context, nonce []byte) error {
	_, err := k.kv.Create(ctx, nonceKey(nonce), []byte{1})
	if errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("%w: nonce %x was accepted before", handoff.ErrReplayed, nonce)
	}
	if err != nil {
		return fmt.Errorf("cell: record handoff nonce %x: %w", nonce, err)
	}
	return nil
}

// HandoffInfo answers POST /v1/runs/{run}/handoff: the run now runs on
// the destination, under Epoch.
type HandoffInfo struct {
	Run  string `json:"run"`
	From string `json:"from"`
	To   string `json:"to"`
	// Epoch is the lease epoch the source handed over; the destination
	// holds the next.
	Epoch uint64 `json:"epoch"`
	// Envelope is the SHA-256 of the envelope, hex: the destination's
	// lease entry carries the envelope.
	Envelope string `json:"envelope"`
}

// handoffReply is the destination's answer to an envelope.
type handoffReply struct {
	Run      string `json:"run,omitempty"`
	Accepted bool   `json:"accepted"`
	// Reason names the refusal (handoff.Reasons), "" when it is none of
	// those (an error of the destination's).
	Reason string `json:"reason,omitempty"`
	Error  string `json:"error,omitempty"`
}

// findCell returns the key of the live cell of the registry whose id
// (hex key) or name is to.
func (s *Server) findCell(ctx context.Context, to string) (ed25519.PublicKey, error) {
	hbs, err := s.cell.Cluster.Registry.Cells(ctx)
	if err != nil {
		return nil, err
	}
	var live []string
	var found []string
	for _, c := range Live(hbs, s.cell.Clock.Now()) {
		if c.Name != "" {
			live = append(live, c.ID+" ("+c.Name+")")
		} else {
			live = append(live, c.ID)
		}
		if c.ID == strings.ToLower(to) || (c.Name != "" && c.Name == to) {
			found = append(found, c.ID)
		}
	}
	switch len(found) {
	case 1:
		return hex.DecodeString(found[0])
	case 0:
		return nil, fmt.Errorf("%w: %q is neither the id nor the name of a live cell (live: %s)", ErrNoCell, to, strings.Join(live, ", "))
	default:
		return nil, fmt.Errorf("%w: %q names %d live cells (%s): give the cell's id", ErrNoCell, to, len(found), strings.Join(found, ", "))
	}
}

// Handoff moves run, which this cell executes, to the live cell to (its
// id or registry name), as the comment at the top of this file describes.
// It returns once the destination accepted the run, or refused it (an
// error wrapping ErrHandoffRefused and the reason's error) and this cell
// resumed it.
func (s *Server) Handoff(ctx context.Context, run journal.RunID, to string) (HandoffInfo, error) {
	cl := s.cell.Cluster
	if cl == nil {
		return HandoffInfo{}, ErrNoCluster
	}
	m, err := s.cell.Journal.Meta(ctx, run)
	if err != nil {
		return HandoffInfo{}, err
	}
	dest, err := s.findCell(ctx, to)
	if err != nil {
		return HandoffInfo{}, err
	}
	if m.Status.Finished() {
		return HandoffInfo{}, fmt.Errorf("%w: run %s ended %s: there is nothing to hand over", host.ErrFinished, run, m.Status)
	}
	self := s.cell.Public()
	if bytes.Equal(dest, self) {
		return HandoffInfo{}, fmt.Errorf("%w: %s is this cell, where run %s runs already", ErrNoCell, to, run)
	}
	if !s.cell.Host.Live(run) {
		return HandoffInfo{}, fmt.Errorf("%w: run %s", host.ErrNotLive, run)
	}
	y, err := s.cell.Host.Yield(ctx, run)
	if err != nil {
		return HandoffInfo{}, err
	}
	info := HandoffInfo{Run: run.String(), From: hex.EncodeToString(self), To: hex.EncodeToString(dest), Epoch: y.Lease.Epoch}
	raw, handed, err := s.sendHandoff(ctx, run, y, dest)
	if err == nil {
		info.Envelope = hex.EncodeToString(handoff.Sum(raw))
		s.logf("handoff: run %s handed to cell %x (epoch %d)", run, dest, y.Lease.Epoch)
		s.sched.cell.release(run) // it runs elsewhere now
		return info, nil
	}
	s.logf("handoff: run %s to cell %x: %v", run, dest, err)
	// The run stays here: take the lease back, if it was handed, and go
	// on with it.
	if handed != nil {
		back, herr := cl.Store.Hand(context.WithoutCancel(ctx), *handed, self, s.cell.Clock.Now().Add(time.Minute).UnixNano())
		if errors.Is(herr, journal.ErrLeaseLost) {
			if l, ok, lerr := cl.Store.Lease(ctx, run); lerr == nil && ok && bytes.Equal(l.Owner, dest) && l.Epoch > y.Lease.Epoch {
				// The destination took the run although its answer did
				// not reach us.
				info.Envelope = hex.EncodeToString(handoff.Sum(raw))
				s.logf("handoff: run %s taken by cell %x (epoch %d) without an answer", run, dest, l.Epoch)
				s.sched.cell.release(run)
				return info, nil
			}
		}
		if herr != nil {
			return info, fmt.Errorf("%w; taking the lease back failed too (%v): the run continues once the lease lapses, on this cell or by a takeover", err, herr)
		}
		s.logf("handoff: run %s: the lease is this cell's again (epoch %d)", run, back.Epoch)
	}
	st, rerr := s.cell.Host.Reopen(context.WithoutCancel(ctx), run)
	if rerr == nil {
		rerr = s.execute(st, "handoff failed: resumed")
	}
	if rerr != nil {
		return info, fmt.Errorf("%w; resuming the run here failed too (%v): a resume or a takeover continues it", err, rerr)
	}
	return info, err
}

// sendHandoff seals the envelope of y for dest, appends it to the run's
// chain, hands dest the lease and sends the envelope. It returns the
// envelope, and the lease as handed once it was.
func (s *Server) sendHandoff(ctx context.Context, run journal.RunID, y *host.Yielded, dest ed25519.PublicKey) ([]byte, *journal.Lease, error) {
	cl := s.cell.Cluster
	chain := handoff.ChainOn(cl.handoffs)
	prev, err := chain.Head(ctx, run)
	if err != nil {
		return nil, nil, err
	}
	expires := s.cell.Clock.Now().Add(cl.opts.HandoffExpiry).UnixNano()
	p := handoff.Payload{Run: run, To: dest, Expires: expires, Epoch: y.Lease.Epoch, Head: y.Head, Prev: prev, Token: y.Token}
	seal := handoff.Seal
	if fn := s.sealHandoff.Load(); fn != nil {
		seal = *fn
	}
	raw, err := seal(s.cell.Key, p)
	if err != nil {
		return nil, nil, fmt.Errorf("cell: seal the handoff envelope: %w", err)
	}
	if err := chain.Append(ctx, run, prev, raw); err != nil {
		return nil, nil, err
	}
	handed, err := cl.Store.Hand(ctx, y.Lease, dest, expires)
	if err != nil {
		return raw, nil, fmt.Errorf("cell: hand the lease of %s (epoch %d) to cell %x: %w", run, y.Lease.Epoch, dest, err)
	}
	rctx, cancel := context.WithTimeout(ctx, cl.opts.HandoffExpiry+30*time.Second)
	defer cancel()
	msg, err := cl.nc.RequestWithContext(rctx, HandoffSubject(dest), raw)
	if err != nil {
		return raw, &handed, fmt.Errorf("cell: send the envelope to cell %x: %w", dest, err)
	}
	var rep handoffReply
	if err := json.Unmarshal(msg.Data, &rep); err != nil {
		return raw, &handed, fmt.Errorf("cell: cell %x answered the envelope with %q: %w", dest, msg.Data, err)
	}
	if rep.Accepted {
		return raw, &handed, nil
	}
	return raw, &handed, refusal(dest, run, rep)
}

// refusal is the error of a destination's refusal, wrapping
// ErrHandoffRefused and the reason's error.
func refusal(dest ed25519.PublicKey, run journal.RunID, rep handoffReply) error {
	for _, r := range handoff.Reasons {
		if r.Name == rep.Reason {
			return fmt.Errorf("%w by cell %x (%s): %w: %s", ErrHandoffRefused, dest, r.Name, r.Err, rep.Error)
		}
	}
	return fmt.Errorf("%w by cell %x: %s", ErrHandoffRefused, dest, rep.Error)
}

// serveHandoffs answers the envelopes sent to this cell until ctx ends.
func (s *Server) serveHandoffs(ctx context.Context) error {
	cl := s.cell.Cluster
	sub, err := cl.nc.Subscribe(HandoffSubject(s.cell.Public()), func(m *nats.Msg) {
		rep := handoffReply{Accepted: true}
		run, err := s.receiveHandoff(ctx, m.Data)
		if err != nil {
			rep = handoffReply{Reason: handoff.Reason(err), Error: err.Error()}
			of := ""
			if !run.IsZero() {
				of = " for run " + run.String()
			}
			s.logf("handoff: refused an envelope%s (%s): %v", of, rep.Reason, err)
		}
		if !run.IsZero() {
			rep.Run = run.String()
		}
		b, _ := json.Marshal(rep)
		_ = m.Respond(b)
	})
	if err != nil {
		return fmt.Errorf("cell: subscribe to %s: %w", HandoffSubject(s.cell.Public()), err)
	}
	go func() {
		<-ctx.Done()
		_ = sub.Unsubscribe()
	}()
	return nil
}

// receiveHandoff verifies the envelope raw, sent to this cell, and every
// claim it makes against the run's lease and journal, before it takes the
// lease; then it resumes the run. The run id is returned once the
// envelope's payload was read.
func (s *Server) receiveHandoff(ctx context.Context, raw []byte) (journal.RunID, error) {
	cl := s.cell.Cluster
	self := s.cell.Public()
	chain := handoff.ChainOn(cl.handoffs)
	p, err := handoff.Verify(ctx, raw, handoff.Options{Self: self, Trusted: cl.trusted, Now: s.cell.Clock.Now(), Chain: chain})
	if err != nil {
		if p != nil { // signed by a trusted cell: its run may be named
			return p.Run, err
		}
		return journal.RunID{}, err
	}
	l, ok, err := cl.Store.Lease(ctx, p.Run)
	switch {
	case err != nil:
		return p.Run, err
	case !ok:
		return p.Run, fmt.Errorf("%w: run %s has no lease", handoff.ErrEpoch, p.Run)
	case l.Epoch != p.Epoch:
		return p.Run, fmt.Errorf("%w: the envelope hands over epoch %d, the run's lease is at epoch %d (cell %x's)", handoff.ErrEpoch, p.Epoch, l.Epoch, l.Owner)
	case !bytes.Equal(l.Owner, self):
		return p.Run, fmt.Errorf("%w: the run's lease (epoch %d) is cell %x's, not handed to this cell", handoff.ErrEpoch, l.Epoch, l.Owner)
	}
	admitted := false
	st, err := s.cell.Host.Receive(ctx, p.Run, raw, func(t host.Tail) error {
		if !bytes.Equal(t.Head, p.Head) {
			return fmt.Errorf("%w: the journal's verified head is %x after %d entries, the envelope names %x", handoff.ErrHead, t.Head, t.Entries, p.Head)
		}
		if !bytes.Equal(t.Token, p.Token) {
			return fmt.Errorf("%w: the envelope carries a token of %d bytes (SHA-256 %x), the run's header one of %d (%x)",
				handoff.ErrToken, len(p.Token), handoff.Sum(p.Token), len(t.Token), handoff.Sum(t.Token))
		}
		// The run arrives as a submission does: this cell's admission
		// decides, before the lease is taken, so that a refused run
		// stays with its source.
		if err := s.sched.admitTail(ctx, p.Run, t, false); err != nil {
			return fmt.Errorf("%w: %w", handoff.ErrAdmission, err)
		}
		admitted = true
		return chain.Accept(ctx, p)
	})
	if err != nil {
		if admitted {
			s.sched.cell.release(p.Run) // the run stays with its source
		}
		return p.Run, err
	}
	return p.Run, s.execute(st, fmt.Sprintf("handoff from cell %x (epoch %d): resumed", p.From, p.Epoch))
}

// HandoffRequest is the body of POST /v1/runs/{run}/handoff.
type HandoffRequest struct {
	// To is the destination cell: its id (hex key) or its name in the
	// registry.
	To string `json:"to"`
}

func (s *Server) handoffRun(w http.ResponseWriter, r *http.Request) {
	run, ok := s.findRun(w, r)
	if !ok {
		return
	}
	var body HandoffRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || body.To == "" {
		if err == nil {
			err = errors.New(`no destination cell ("to")`)
		}
		writeError(w, http.StatusBadRequest, fmt.Errorf("handoff: %w", err), `send {"to": "CELL"}, CELL the destination's id or registry name`)
		return
	}
	info, err := s.Handoff(r.Context(), run, body.To)
	if err != nil {
		code := http.StatusInternalServerError
		switch {
		case errors.Is(err, ErrNoCluster), errors.Is(err, host.ErrNotLive), errors.Is(err, ErrHandoffRefused), errors.Is(err, host.ErrFinished):
			code = http.StatusConflict
		case errors.Is(err, ErrNoCell), errors.Is(err, journal.ErrNotFound):
			code = http.StatusNotFound
		}
		writeError(w, code, err, "")
		return
	}
	writeJSON(w, http.StatusOK, info)
}
