package bench

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"time"

	"github.com/agentrt/agentrt/internal/synthconv"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/badgerstore"
	"github.com/agentrt/agentrt/replay"
)

// Figure 13: the journal of a model conversation, whose every call resends
// the whole history, with payloads stored by hash (journal/SPEC.md
// section 15).

const (
	convCalls     = 100
	convTokens    = 200_000
	convThreshold = 1024
)

// convSize is what a conversation's run takes in the store after some
// calls: its records as stored and the distinct blobs they reference.
type convSize struct {
	records, blobs int64
}

func (s convSize) total() int64 { return s.records + s.blobs }

// measureConv reads run's journal back from st, verifying it (every blob
// resolved and checked), and adds up its records and its distinct blobs.
func measureConv(ctx context.Context, st *badgerstore.Store, run journal.RunID) (convSize, error) {
	var size convSize
	seen := map[string]bool{}
	v := journal.NewVerifier(journal.TrustAny)
	v.OnBlob = func(ref journal.BlobRef, data []byte) error {
		if !seen[string(ref.Sum)] {
			seen[string(ref.Sum)] = true
			size.blobs += int64(len(data))
		}
		return nil
	}
	v.OnEntry = func(_ *journal.Entry, rec *journal.Record) error {
		size.records += int64(journal.RecordSize(rec))
		return nil
	}
	_, err := journal.VerifyStoreWith(ctx, st, run, v)
	return size, err
}

// conversationRun records the synthetic conversation in a real store, as
// a host would journal a model call (an effect: intent, executing made
// durable, completed), with each request encoded as a chain of message
// blobs and each response's large strings as blobs, and returns the sizes
// after every quarter of the calls, the naive sum of the requests and the
// inline size of every payload.
func conversationRun(ctx context.Context, st *badgerstore.Store) (run journal.RunID, quarters []convSize, naive, inline int64, encode time.Duration, err error) {
	conv := synthconv.New(convCalls, convTokens, 12)
	_, key, _ := ed25519.GenerateKey(nil)
	run = journal.NewRunID(time.Now())
	module := []byte("\x00asm\x01\x00\x00\x00") // the run is never executed; export needs its module
	if err = st.PutModule(ctx, journal.Sum(module), module); err != nil {
		return
	}
	w := journal.NewWriter(st, journal.NewChain(run, key))
	add := func(e *journal.Entry) {
		if err == nil {
			err = w.Add(e)
		}
	}
	add(&journal.Entry{Phase: journal.PhaseStart, Header: &journal.Header{ModuleSHA256: journal.Sum(module), ABI: 1, Seed: make([]byte, 32)}})
	for i := range conv.Calls() {
		req, resp := conv.Request(i), conv.Response(i)
		naive += int64(len(req))
		inline += int64(len(req) + len(resp))
		t0 := time.Now()
		p, perr := journal.EncodeConversation(req, "messages", convThreshold)
		rp := journal.Externalize(resp, convThreshold)
		encode += time.Since(t0)
		if perr != nil {
			return run, nil, 0, 0, 0, perr
		}
		step, in := uint64(i+1), journal.Sum(req)
		add(&journal.Entry{Phase: journal.PhaseIntent, Step: step, Op: "bench.chat", InputHash: in, Request: p.Stored})
		add(&journal.Entry{Phase: journal.PhaseExecuting, Step: step, Op: "bench.chat", InputHash: in, Key: fmt.Sprintf("%s-%d", run, step)})
		w.AddBlobs(p.Blobs...)
		if err == nil {
			err = w.Commit(ctx, nil, true)
		}
		add(&journal.Entry{Phase: journal.PhaseCompleted, Step: step, Op: "bench.chat", InputHash: in, OutputHash: journal.Sum(resp), Response: rp.Stored})
		w.AddBlobs(rp.Blobs...)
		if err != nil {
			return
		}
		if (i+1)%(convCalls/4) == 0 {
			if err = w.Commit(ctx, nil, false); err != nil {
				return
			}
			var s convSize
			if s, err = measureConv(ctx, st, run); err != nil {
				return
			}
			quarters = append(quarters, s)
		}
	}
	add(&journal.Entry{Phase: journal.PhaseEnd, End: &journal.End{Status: journal.StatusCompleted, Steps: convCalls}})
	if err == nil {
		err = w.Commit(ctx, &journal.RunMeta{ID: run, Status: journal.StatusCompleted, Cell: key.Public().(ed25519.PublicKey)}, true)
	}
	return
}

func (h *harness) conversation(ctx context.Context) ([]Figure, error) {
	st, err := badgerstore.Open(dir(h.root, "conversation"))
	if err != nil {
		return nil, err
	}
	defer st.Close()
	run, q, naive, inline, encode, err := conversationRun(ctx, st)
	if err != nil {
		return nil, err
	}
	final, err := measureConv(ctx, st, run)
	if err != nil {
		return nil, err
	}
	_, key, _ := ed25519.GenerateKey(nil)
	var cw countingWriter
	exp, err := replay.ExportTo(ctx, st, run, key, replay.EngineSettings{Engine: "wazero"}, &cw)
	if err != nil {
		return nil, err
	}
	mb := func(n int64) float64 { return float64(n) / 1e6 }
	// Linearity: what the last quarter of the calls added against the
	// second (the first also holds the system prompt and the run's start).
	inc := func(i int) int64 { return q[i].total() - q[i-1].total() }
	lin := float64(inc(3)) / float64(inc(1))
	h.logf("13 conversation of %d calls: %d bytes stored (%d records, %d blobs), naive sum %d, after 25/50/75/100 calls %d/%d/%d/%d",
		convCalls, final.total(), final.records, final.blobs, naive, q[0].total(), q[1].total(), q[2].total(), q[3].total())
	extra := map[string]float64{
		"records MB": mb(final.records), "blobs MB": mb(final.blobs), "blobs in the bundle": float64(exp.Blobs),
		"bundle MB": mb(exp.Bytes), "payloads inline MB": mb(inline),
		"MB after 25 calls": mb(q[0].total()), "MB after 50 calls": mb(q[1].total()),
		"MB after 75 calls": mb(q[2].total()), "MB after 100 calls": mb(q[3].total()),
		"encode us/call": float64(encode.Microseconds()) / convCalls,
	}
	return []Figure{{
		ID: "13a", Name: fmt.Sprintf("journal of a %d-call conversation growing to %dk tokens: size", convCalls, convTokens/1000), Unit: "MB", Better: "lower",
		Value: mb(final.total()), Samples: []float64{mb(final.total())}, Extra: extra,
		Goal: &Goal{Text: "at most 2.5 MB", MaxValue: ptr(2.5)},
		Floor: &Floor{Name: "naive sum of the requests", Unit: "MB", Value: mb(naive), Samples: []float64{mb(naive)},
			Measures: "the bytes of the 100 requests as the guest sends them, each resending the whole history: what a journal keeping payloads inline holds of requests alone"},
		Measures: fmt.Sprintf("a synthetic conversation (internal/synthconv: %d calls, each adding a user message of 500 tokens and an assistant answer "+
			"of 1500, about 4 bytes a token, so the last request holds %d bytes) journaled in a real badgerstore as a host journals a model call "+
			"(intent, executing committed durably, completed), requests encoded by journal.EncodeConversation (a chain of message blobs, strings "+
			"of %d bytes or more as blobs of their own) and responses by journal.Externalize; the figure is the run's records as stored plus its "+
			"distinct blobs, read back from the store and verified (every blob resolved and checked); sizes after each quarter and the exported "+
			"bundle's size in extra. Badger's own overhead (keys, table indexes, compression) is not counted.",
			convCalls, len(synthconvLast()), convThreshold),
	}, {
		ID: "13b", Name: "journal of the conversation: growth of calls 76-100 against calls 26-50", Unit: "x", Better: "lower",
		Value: lin, Samples: []float64{lin}, Goal: &Goal{Text: "at most 1.2x (linear: bytes per call roughly constant)", MaxValue: ptr(1.2)},
		Extra:    map[string]float64{"bytes per call, calls 26-50": float64(inc(1)) / 25, "bytes per call, calls 76-100": float64(inc(3)) / 25},
		Measures: "the store bytes (records and distinct blobs, as in 13a) the last quarter of the calls added, divided by what the second quarter added: 1 when every call costs the same, about 2.3 for a journal that stores every request whole (its history again)",
	}}, nil
}

func synthconvLast() []byte {
	c := synthconv.New(convCalls, convTokens, 12)
	return c.Request(convCalls - 1)
}

// countingWriter counts the bytes written to it and keeps none.
type countingWriter struct{ n int64 }

func (c *countingWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

var _ io.Writer = (*countingWriter)(nil)
