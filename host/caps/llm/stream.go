package llm

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/host/caps/llm/provider"
)

// stream is a streamed call in flight: the provider's client fills it from
// a goroutine of its own, and each llm.next takes what has arrived.
type stream struct {
	step  uint64
	price provider.ModelPrice
	// cl is the provider's client: where the call went, as its answer
	// names it, and the key of its cursor's seal.
	cl *provider.Client
	// cursor is where the stream stands, for a provider that can resume
	// it (nil otherwise): its response id is set when the stream names
	// it, and Delivered counts the chunks taken.
	cursor *abi.LLMCursor

	mu     sync.Mutex
	chunks []abi.LLMChunk
	bytes  int
	// more is closed (and replaced) when a chunk arrives or the stream
	// ends.
	more chan struct{}
	done bool
	res  abi.LLMResponse
	err  error
	// taken is when the last batch was taken (zero: none yet).
	taken time.Time
}

func newStream(step uint64, p provider.ModelPrice, cursor *abi.LLMCursor, cl *provider.Client) *stream {
	return &stream{step: step, price: p, cursor: cursor, cl: cl, more: make(chan struct{})}
}

// add is the stream's onChunk: it keeps ch for the next take.
func (s *stream) add(ch abi.LLMChunk) error {
	s.mu.Lock()
	s.chunks = append(s.chunks, ch)
	s.bytes += len(ch.Text) + len(ch.Arguments) + len(ch.ID) + len(ch.Name)
	s.signal()
	s.mu.Unlock()
	return nil
}

// started records the response id the stream named.
func (s *stream) started(id string) {
	s.mu.Lock()
	if s.cursor != nil {
		s.cursor.ResponseID = id
	}
	s.mu.Unlock()
}

// run makes the call, until it ends or ctx does (the run closed).
func (s *stream) run(ctx context.Context, req *abi.LLMRequest) {
	var onStart func(string)
	if s.cursor != nil {
		onStart = s.started
	}
	res, err := s.cl.CompleteResumable(ctx, req, s.add, onStart)
	s.end(res.Response, err)
}

// resume reads the stream again from the provider, past the chunks the
// cursor says were delivered.
func (s *stream) resume(ctx context.Context) {
	res, err := s.cl.Resume(ctx, s.cursor.ResponseID, s.cursor.Delivered, s.add)
	if err != nil {
		var e *provider.Error
		if errors.As(err, &e) {
			err = &provider.Error{Kind: abi.LLMStreamInterrupted, Msg: "resuming the stream: " + e.Error()}
		}
	}
	s.end(res.Response, err)
}

func (s *stream) end(res abi.LLMResponse, err error) {
	s.mu.Lock()
	s.done, s.res, s.err = true, res, err
	s.signal()
	s.mu.Unlock()
}

// signal wakes a waiting take; s.mu is held.
func (s *stream) signal() {
	close(s.more)
	s.more = make(chan struct{})
}

// take waits until a chunk has arrived or the stream has ended, and
// returns the chunks that have arrived: at once for the stream's first
// batch (the time to the first token is the provider's), and for a later
// one no sooner than BatchWait after the batch before it was taken, unless
// its chunks hold BatchBytes, so that a stream is journaled about every
// 50 ms whatever its rate. When the stream has ended and every chunk is
// taken, done is true with the whole answer (res) or the stream's error
// (err, and no chunks: the chunks before an error are delivered in a
// batch of their own first). A stop (ctx, halt) while it waits ends the
// stream as interrupted.
func (s *stream) take(ctx context.Context, halt <-chan struct{}) (chunks []abi.LLMChunk, res *abi.LLMResponse, err error, done bool) {
	var deadline <-chan time.Time
	s.mu.Lock()
	for !s.done && s.bytes < BatchBytes {
		more, have := s.more, len(s.chunks) > 0
		if have && deadline == nil {
			wait := time.Until(s.taken.Add(BatchWait))
			if s.taken.IsZero() || wait <= 0 {
				break
			}
			t := time.NewTimer(wait)
			defer t.Stop()
			deadline = t.C
		}
		s.mu.Unlock()
		expired := false
		select {
		case <-more:
		case <-deadline:
			expired = true
		case <-ctx.Done():
			return nil, nil, &provider.Error{Kind: abi.LLMStreamInterrupted, Msg: "the run stopped during the stream"}, true
		case <-halt:
			return nil, nil, &provider.Error{Kind: abi.LLMStreamInterrupted, Msg: "the run was asked to stop during the stream"}, true
		}
		s.mu.Lock()
		if expired {
			break
		}
	}
	s.taken = time.Now()
	defer s.mu.Unlock()
	chunks, s.chunks, s.bytes = s.chunks, nil, 0
	if s.cursor != nil {
		s.cursor.Delivered += uint64(len(chunks))
	}
	if !s.done {
		return chunks, nil, nil, false
	}
	if s.err != nil {
		if len(chunks) > 0 {
			return chunks, nil, nil, false
		}
		return nil, nil, s.err, true
	}
	r := s.res
	return chunks, &r, nil, true
}

// snapshot returns a copy of the stream's cursor, nil when it has none.
func (s *stream) snapshot() *abi.LLMCursor {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cursor == nil {
		return nil
	}
	c := *s.cursor
	return &c
}
