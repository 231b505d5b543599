//go:build linux || darwin

package host

import (
	"context"
	"sync"
	"syscall"

	"github.com/tetratelabs/wazero/experimental"
)

// A guest's linear memory on Linux and macOS is one reservation of address
// space for its maximum, made readable and writable as it grows: growing
// never copies, and the host's memory holds only the pages the guest has
// touched. (wazero's own memory is a Go slice that grows by reallocating
// and copying: growing page by page to 1 GiB held 3.8 GB of the host's
// memory.) The maximum is the run's memory limit, which the host writes
// into every module (wasmModule.rewrite).
//
// When an instance ends, its memory goes to the engine's memoryPool: the
// pages it touched are zeroed where they lie and the next instance of the
// same maximum gets them. A page the process maps afresh costs far more
// than zeroing one it holds (here, instantiating the 3.6 MB Go agent of
// make bench-peers and running its runtime's start took 16 ms on fresh
// memory and 8 ms on kept memory), as wasmtime's pooling allocator keeps
// its memories resident for the same reason.

// withMemoryAllocator returns ctx with an allocator of guest memories for
// InstantiateModule, taking them from pool when it holds one, and the
// function that gives back what it allocated. A memory stays the
// instance's until then, even after wazero frees it (as it does when the
// guest calls proc_exit): reading the memory of an instance that ended
// must not fault the process, nor read another instance's memory.
func withMemoryAllocator(ctx context.Context, pool *memoryPool) (context.Context, func()) {
	var mems []*mmapMemory
	alloc := func(cap, max uint64) experimental.LinearMemory {
		lm := pool.allocate(max)
		if m, ok := lm.(*mmapMemory); ok {
			mems = append(mems, m)
		}
		return lm
	}
	release := func() {
		for _, m := range mems {
			pool.put(m)
		}
		mems = nil
	}
	return experimental.WithMemoryAllocator(ctx, experimental.MemoryAllocatorFunc(alloc)), release
}

// memoryPool keeps the zeroed memories of ended instances, up to limit
// bytes of touched pages in all; a nil pool keeps none.
type memoryPool struct {
	mu       sync.Mutex
	free     []*mmapMemory
	resident uint64 // the touched pages of the memories in free
	limit    uint64
	closed   bool // the engine is closed: nothing more is kept
	// What the pool did, for MemoryStats: memories handed out again,
	// mapped afresh, and unmapped at their instance's end.
	reused, fresh, dropped uint64
}

// newMemoryPool returns a pool of limit bytes, or nil for none (limit <=
// 0, or a platform that cannot tell which pages a memory touched).
func newMemoryPool(limit int64) *memoryPool {
	if limit <= 0 || !canZeroTouched {
		return nil
	}
	return &memoryPool{limit: uint64(limit)}
}

// allocate returns a kept memory reserved for max, or a new one.
func (p *memoryPool) allocate(max uint64) experimental.LinearMemory {
	page := uint64(syscall.Getpagesize())
	size := (max + page - 1) &^ (page - 1)
	if size == 0 {
		size = page
	}
	if p != nil {
		p.mu.Lock()
		for i := len(p.free) - 1; i >= 0; i-- {
			if m := p.free[i]; uint64(len(m.buf)) == size {
				p.free = append(p.free[:i], p.free[i+1:]...)
				p.resident -= m.resident
				p.reused++
				p.mu.Unlock()
				m.resident = 0
				return m
			}
		}
		p.fresh++
		p.mu.Unlock()
	}
	return allocateMemory(size, page)
}

// put keeps m, zeroed, or unmaps it when it cannot be zeroed or the pool
// has no room for its touched pages. The room is taken before the pages
// are zeroed, so a memory that will not be kept is not zeroed.
func (p *memoryPool) put(m *mmapMemory) {
	if p == nil || m.buf == nil {
		m.unmap()
		return
	}
	vec, resident, ok := touchedPages(m)
	if !ok {
		p.drop(m)
		return
	}
	p.mu.Lock()
	if p.closed || p.resident+resident > p.limit {
		p.dropped++
		p.mu.Unlock()
		m.unmap()
		return
	}
	p.resident += resident
	p.mu.Unlock()
	ok = zeroTouched(m, vec)
	p.mu.Lock()
	if !ok || p.closed {
		if !p.closed { // close forgot every reservation
			p.resident -= resident
		}
		p.dropped++
		p.mu.Unlock()
		m.unmap()
		return
	}
	m.resident = resident
	p.free = append(p.free, m)
	p.mu.Unlock()
}

// drop unmaps m, counted.
func (p *memoryPool) drop(m *mmapMemory) {
	p.mu.Lock()
	p.dropped++
	p.mu.Unlock()
	m.unmap()
}

// close unmaps the kept memories.
func (p *memoryPool) close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	free := p.free
	p.free, p.resident, p.closed = nil, 0, true
	p.mu.Unlock()
	for _, m := range free {
		m.unmap()
	}
}

// stats returns what the pool holds and did; ok is false for a nil pool
// (none kept).
func (p *memoryPool) stats() (st MemoryStats, ok bool) {
	if p == nil {
		return st, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return MemoryStats{Kept: len(p.free), Resident: p.resident, Limit: p.limit, Reused: p.reused, Fresh: p.fresh, Dropped: p.dropped}, true
}

// allocateMemory reserves size bytes (a multiple of page).
func allocateMemory(size, page uint64) experimental.LinearMemory {
	buf, err := syscall.Mmap(-1, 0, int(size), syscall.PROT_NONE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		// Out of address space: a plain slice, which grows by copying.
		return &sliceMemory{max: size}
	}
	return &mmapMemory{buf: buf, page: page}
}

// mmapMemory is a reserved range of which the first committed bytes are
// readable and writable.
type mmapMemory struct {
	buf       []byte
	committed uint64
	page      uint64
	// resident is the bytes of its pages that were touched, while the
	// memory is kept in a memoryPool.
	resident uint64
}

// Reallocate makes the first size bytes usable; nil when size is over the
// reservation or the system refuses (the guest's memory.grow fails).
func (m *mmapMemory) Reallocate(size uint64) []byte {
	if size > uint64(len(m.buf)) {
		return nil
	}
	if size > m.committed {
		end := min((size+m.page-1)&^(m.page-1), uint64(len(m.buf)))
		if err := syscall.Mprotect(m.buf[m.committed:end], syscall.PROT_READ|syscall.PROT_WRITE); err != nil {
			return nil
		}
		m.committed = end
	}
	return m.buf[:size:size]
}

// Free is wazero's: the memory is given back by the release function of
// withMemoryAllocator, once the host is done with the instance.
func (m *mmapMemory) Free() {}

func (m *mmapMemory) unmap() {
	if m.buf != nil {
		_ = syscall.Munmap(m.buf)
		m.buf = nil
	}
}

// sliceMemory is a guest memory on the Go heap, for when no address space
// can be reserved.
type sliceMemory struct {
	buf []byte
	max uint64
}

func (m *sliceMemory) Reallocate(size uint64) []byte {
	if size > m.max {
		return nil
	}
	if size > uint64(cap(m.buf)) {
		b := make([]byte, size, min(max(size, 2*uint64(cap(m.buf))), m.max))
		copy(b, m.buf)
		m.buf = b
	}
	m.buf = m.buf[:size]
	return m.buf
}

func (m *sliceMemory) Free() { m.buf = nil }
