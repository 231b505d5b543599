//go:build !linux && !darwin

package host

import "context"

// withMemoryAllocator leaves guest memories to wazero on this platform: a
// Go slice that grows by copying (memory_mmap.go has the allocator that
// does not copy, for Linux and macOS).
func withMemoryAllocator(ctx context.Context) (context.Context, func()) { return ctx, func() {} }
