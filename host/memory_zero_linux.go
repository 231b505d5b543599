package host

import (
	"syscall"
	"unsafe"
)

// canZeroTouched says touchedPages and zeroTouched work here.
const canZeroTouched = true

// touchedPages returns which pages of m's committed bytes are in memory
// (mincore(2): a page never touched is not), one byte a page, and their
// bytes; ok is false when the system refused.
func touchedPages(m *mmapMemory) (vec []byte, resident uint64, ok bool) {
	if m.committed == 0 {
		return nil, 0, true
	}
	vec = make([]byte, m.committed/m.page)
	if _, _, errno := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(&m.buf[0])), uintptr(m.committed), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		return nil, 0, false
	}
	for _, v := range vec {
		if v&1 != 0 {
			resident += m.page
		}
	}
	return vec, resident, true
}

// zeroTouched zeroes the pages of m that vec (touchedPages) says are in
// memory and drops the others: a page swapped out must not come back with
// the last instance's bytes, and one never touched reads as zero. ok is
// false when the system refused, and m is then not to be reused.
func zeroTouched(m *mmapMemory, vec []byte) bool {
	pages := uint64(len(vec))
	for i := uint64(0); i < pages; {
		j := i + 1
		in := vec[i]&1 != 0
		for j < pages && (vec[j]&1 != 0) == in {
			j++
		}
		run := m.buf[i*m.page : j*m.page]
		if in {
			clear(run)
		} else if err := syscall.Madvise(run, syscall.MADV_DONTNEED); err != nil {
			return false
		}
		i = j
	}
	return true
}
