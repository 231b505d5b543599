package host

import (
	"context"
	"sync"
	"time"
)

// peakRuntime counts the instantiations under way on its runtime and
// keeps their peak; each lasts at least a millisecond, so that runs
// started together overlap.
type peakRuntime struct {
	wasmRuntime
	mu        sync.Mutex
	now, peak int
}

func (p *peakRuntime) instantiate(ctx context.Context, m *Module, s *session) (instance, error) {
	p.mu.Lock()
	p.now++
	p.peak = max(p.peak, p.now)
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.now--
		p.mu.Unlock()
	}()
	time.Sleep(time.Millisecond)
	return p.wasmRuntime.instantiate(ctx, m, s)
}

// CountInstantiations makes e's runtime count the instantiations under
// way at once; the returned func gives their peak.
func CountInstantiations(e *Engine) func() int {
	p := &peakRuntime{wasmRuntime: e.rt}
	e.rt = p
	return func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.peak
	}
}
