package journal

import (
	"context"
	"runtime"
)

// streamChunk is the number of records prepared together.
const streamChunk = 256

type chunk struct {
	// buf holds the raw records back to back, ends[i] being where record
	// i ends: one copy per chunk, not one per record.
	buf   []byte
	ends  []int
	preps []prepared
	done  chan struct{}
}

func newChunk(size int) *chunk {
	return &chunk{buf: make([]byte, 0, size), ends: make([]int, 0, streamChunk), done: make(chan struct{})}
}

// VerifyStream verifies the records that records yields, in order, into v:
// the same checks and the same first error as calling v.Add on each, with
// the decoding, hashing and signature checks of records spread over the
// machine's cores while v checks their order. records must call fn with
// each record's raw bytes (valid only during the call) and stop when fn
// returns an error.
func VerifyStream(ctx context.Context, v *Verifier, records func(fn func(raw []byte) error) error) error {
	workers := max(runtime.GOMAXPROCS(0), 1)
	if v.ctx == nil {
		v.ctx = ctx
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan *chunk, workers)
	order := make(chan *chunk, 2*workers)
	for range workers {
		go func() {
			for c := range work {
				c.preps = make([]prepared, len(c.ends))
				start := 0
				for i, end := range c.ends {
					prepare(c.buf[start:end:end], true, &c.preps[i])
					start = end
				}
				close(c.done)
			}
		}()
	}
	readErr := make(chan error, 1)
	go func() {
		defer close(order)
		defer close(work)
		c := newChunk(0)
		send := func() bool {
			select {
			case order <- c:
			case <-ctx.Done():
				return false
			}
			work <- c
			// The next chunk's records are likely as large as these:
			// room for them, and a quarter more, spares the copies of
			// growing the buffer from nothing.
			c = newChunk(len(c.buf) + len(c.buf)/4)
			return true
		}
		err := records(func(raw []byte) error {
			c.buf = append(c.buf, raw...)
			c.ends = append(c.ends, len(c.buf))
			if len(c.ends) == streamChunk && !send() {
				return ctx.Err()
			}
			return nil
		})
		if err == nil && len(c.ends) > 0 {
			send()
		}
		readErr <- err
	}()
	for c := range order {
		<-c.done
		for i := range c.preps {
			if err := v.add(&c.preps[i]); err != nil {
				cancel()
				for range order { // let the reader and workers finish
				}
				return err
			}
		}
	}
	return <-readErr
}
