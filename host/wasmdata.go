package host

import (
	"cmp"
	"encoding/binary"
	"slices"
)

// dataGapMax is the widest run of zeros between two data segments that
// mergeData fills to make one segment of them.
const dataGapMax = 64

// mergeData returns a data section's payload p with its active segments
// merged where at most dataGapMax bytes lie between them, the bytes
// between filled with zeros; p as it is when it cannot (see below) or
// nothing merges. Go's linker splits a program's data at every run of
// zeros: the 3.6 MB agent of make bench-peers has 38 470 segments, which
// wazero walks one by one at every instantiation (some 1.5 ms of the
// 2 ms it took), against 11 once merged.
//
// The memory an instance starts with is the same: segments are merged
// only when every one is active on memory 0 at an i32.const offset and
// none overlaps another, so that the order they are applied in does not
// matter and no segment writes where a gap was filled. The caller merges
// only a module without a data count section: without it no instruction
// can name a segment by its index (memory.init, data.drop), so their
// number and order may change.
func mergeData(p []byte) []byte {
	return appendMergedData(nil, p)
}

// appendMergedData appends to o what mergeData returns.
func appendMergedData(o, p []byte) []byte {
	type segment struct {
		off  uint64
		data []byte
	}
	r := &reader{b: p}
	n := r.u32()
	segs := make([]segment, 0, n)
	for ; n > 0 && r.err == nil; n-- {
		if r.u32() != 0 || r.byte() != 0x41 { // active on memory 0, i32.const
			return append(o, p...)
		}
		off := int32(r.sleb(32))              // readModule checked it is one
		if r.err != nil || r.byte() != 0x0b { // end
			return append(o, p...)
		}
		segs = append(segs, segment{off: uint64(uint32(off)), data: r.bytes(r.u32())})
	}
	if r.err != nil || !r.done() || len(segs) < 2 {
		return append(o, p...)
	}
	slices.SortStableFunc(segs, func(a, b segment) int { return cmp.Compare(a.off, b.off) })
	merged := 1
	for i := 1; i < len(segs); i++ {
		end := segs[i-1].off + uint64(len(segs[i-1].data))
		if segs[i].off < end {
			return append(o, p...) // overlapping: the order would matter
		}
		if segs[i].off-end > dataGapMax {
			merged++
		}
	}
	if merged == len(segs) {
		return append(o, p...)
	}
	o = binary.AppendUvarint(o, uint64(merged))
	for i := 0; i < len(segs); {
		j, end := i+1, segs[i].off+uint64(len(segs[i].data))
		for j < len(segs) && segs[j].off-end <= dataGapMax {
			end = segs[j].off + uint64(len(segs[j].data))
			j++
		}
		o = append(o, 0, 0x41)
		o = appendSLEB(o, int64(int32(uint32(segs[i].off))))
		o = append(o, 0x0b)
		o = binary.AppendUvarint(o, end-segs[i].off)
		at := segs[i].off
		for _, s := range segs[i:j] {
			o = append(o, make([]byte, s.off-at)...)
			o = append(o, s.data...)
			at = s.off + uint64(len(s.data))
		}
		i = j
	}
	return o
}
