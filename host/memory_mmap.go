//go:build linux || darwin

package host

import (
	"context"
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

// withMemoryAllocator returns ctx with an allocator of guest memories for
// InstantiateModule, and the function that unmaps what it allocated. A
// memory stays mapped until then, even after wazero frees it (as it does
// when the guest calls proc_exit): reading the memory of an instance that
// ended must not fault the process.
func withMemoryAllocator(ctx context.Context) (context.Context, func()) {
	var mems []*mmapMemory
	alloc := func(cap, max uint64) experimental.LinearMemory {
		lm := allocateMemory(cap, max)
		if m, ok := lm.(*mmapMemory); ok {
			mems = append(mems, m)
		}
		return lm
	}
	release := func() {
		for _, m := range mems {
			m.unmap()
		}
		mems = nil
	}
	return experimental.WithMemoryAllocator(ctx, experimental.MemoryAllocatorFunc(alloc)), release
}

func allocateMemory(_, max uint64) experimental.LinearMemory {
	page := uint64(syscall.Getpagesize())
	size := (max + page - 1) &^ (page - 1)
	if size == 0 {
		size = page
	}
	buf, err := syscall.Mmap(-1, 0, int(size), syscall.PROT_NONE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		// Out of address space: a plain slice, which grows by copying.
		return &sliceMemory{max: max}
	}
	return &mmapMemory{buf: buf, page: page}
}

// mmapMemory is a reserved range of which the first committed bytes are
// readable and writable.
type mmapMemory struct {
	buf       []byte
	committed uint64
	page      uint64
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

// Free is wazero's: the memory is unmapped by the release function of
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
