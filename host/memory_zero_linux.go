package host

import (
	"syscall"
	"unsafe"
)

// canZeroTouched says zeroTouched works here.
const canZeroTouched = true

// zeroTouched zeroes the pages of m that are in memory and drops the
// others (a page swapped out must not come back with the last
// instance's bytes), and returns the bytes it zeroed. mincore(2) tells
// which pages are in memory: a page never touched is not, and reads as
// zero when touched. ok is false when the system refused, and m is then
// not to be reused.
func zeroTouched(m *mmapMemory) (resident uint64, ok bool) {
	if m.committed == 0 {
		return 0, true
	}
	pages := m.committed / m.page
	vec := make([]byte, pages)
	if _, _, errno := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(&m.buf[0])), uintptr(m.committed), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		return 0, false
	}
	for i := uint64(0); i < pages; {
		j := i + 1
		in := vec[i]&1 != 0
		for j < pages && (vec[j]&1 != 0) == in {
			j++
		}
		run := m.buf[i*m.page : j*m.page]
		if in {
			clear(run)
			resident += uint64(len(run))
		} else if err := syscall.Madvise(run, syscall.MADV_DONTNEED); err != nil {
			return 0, false
		}
		i = j
	}
	return resident, true
}
