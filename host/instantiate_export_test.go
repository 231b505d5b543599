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

// KeptMemory returns the number of guest memories e keeps for its next
// instances and their touched bytes (0, 0 on an engine that keeps none).
func KeptMemory(e *Engine) (int, uint64) {
	st, _ := e.MemoryStats()
	return st.Kept, st.Resident
}

// DataImage returns the memory image a module's active data segments
// make (each applied in order, from offset 0 up to the end of the last),
// their number, and the same of its data section as the rewrite emits it
// (mergeData, unless the module has a data count section).
func DataImage(code []byte) (image []byte, segments int, merged []byte, mergedSegments int, err error) {
	m, err := readModule(code, DefaultCompileLimits())
	if err != nil {
		return nil, 0, nil, 0, err
	}
	hasCount := false
	for _, s := range m.sections {
		hasCount = hasCount || s.id == secDataCount
	}
	for _, s := range m.sections {
		if s.id != secData {
			continue
		}
		p := s.payload(code)
		image, segments = applyData(p)
		if !hasCount {
			p = mergeData(p)
		}
		merged, mergedSegments = applyData(p)
	}
	return image, segments, merged, mergedSegments, nil
}

// applyData applies the active segments at i32.const offsets of a data
// section's payload; a passive one, or one at a global's offset, is
// counted and not applied.
func applyData(p []byte) ([]byte, int) {
	var image []byte
	r := &reader{b: p}
	n := int(r.u32())
	for k := 0; k < n; k++ {
		off := int32(-1)
		if r.u32() == 0 {
			if r.byte() == 0x41 { // i32.const
				off = int32(r.sleb(32))
			} else { // global.get: not applied
				r.u32()
			}
			r.byte() // end
		}
		data := r.bytes(r.u32())
		if off < 0 {
			continue
		}
		if end := int(off) + len(data); end > len(image) {
			image = append(image, make([]byte, end-len(image))...)
		}
		copy(image[off:], data)
	}
	return image, n
}
