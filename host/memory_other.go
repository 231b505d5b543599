//go:build !linux && !darwin

package host

import "context"

// withMemoryAllocator leaves guest memories to wazero on this platform: a
// Go slice that grows by copying (memory_mmap.go has the allocator that
// does not copy, for Linux and macOS).
func withMemoryAllocator(ctx context.Context, _ *memoryPool) (context.Context, func()) {
	return ctx, func() {}
}

// memoryPool keeps no memory on this platform (see memory_mmap.go).
type memoryPool struct{}

func newMemoryPool(int64) *memoryPool { return nil }

func (*memoryPool) close() {}

func (*memoryPool) stats() (MemoryStats, bool) { return MemoryStats{}, false }
