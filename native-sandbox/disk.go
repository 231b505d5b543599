package sandbox

import (
	"io/fs"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// The disk watchdog. No quota mechanism is available to the launcher on an
// ordinary file system (ext4 project quotas need the file system made with
// them, and root), so limits.disk is enforced by measuring: the launcher
// walks the read-write roots before the tool starts, again every
// diskInterval while it runs (less often for a large tree), and kills the
// whole sandbox when the roots have grown by more than the limit; a last
// walk after the end reports a growth the samples missed. The overshoot is
// what the tool writes between two samples (RATIONALE.md records the
// measured figures), each file bounded by limits.file_size.

const (
	// diskInterval is the shortest time between two samples. A tool
	// writing at the page cache's speed (~1.5 GB/s here) adds ~15 MiB in
	// that time; a walk of a small tree costs tens of microseconds.
	diskInterval = 10 * time.Millisecond
	// diskIdle is how many walks' worth of time passes between two: a
	// large tree is sampled less often, so that the watchdog takes at most
	// a fifth of one core.
	diskIdle = 4
	// maxScanEntries is the most entries a walk of the read-write roots
	// looks at. A tree larger than that at the start refuses the launch
	// (its growth could not be measured); a tool that makes it larger is
	// stopped as if it had passed limits.disk.
	maxScanEntries = 200_000
)

// areaScan is one walk of the read-write roots.
type areaScan struct {
	// used is the space allocated to the entries beneath the roots, each
	// inode counted once (st_blocks: holes cost nothing, directories do).
	used int64
	// big are the regular files at or over the file size limit, by path,
	// when one was asked for.
	big map[string]fileStamp
	// more says the walk stopped at maxScanEntries.
	more bool
}

// fileStamp tells a file's content changed.
type fileStamp struct{ size, mtime int64 }

// scanRoots walks roots without following symbolic links. fileSize > 0
// also collects the regular files of at least that size.
func scanRoots(roots []string, fileSize int64) *areaScan {
	s := &areaScan{}
	if fileSize > 0 {
		s.big = map[string]fileStamp{}
	}
	seen := map[inodeKey]bool{}
	n := 0
	for _, root := range roots {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil // gone, or unreadable: the rest still counts
			}
			if n++; n > maxScanEntries {
				s.more = true
				return filepath.SkipAll
			}
			fi, err := d.Info()
			if err != nil {
				return nil
			}
			key, blocks, links := allocated(fi)
			if links > 1 {
				if seen[key] {
					return nil
				}
				seen[key] = true
			}
			s.used += blocks
			if s.big != nil && fi.Mode().IsRegular() && fi.Size() >= fileSize {
				s.big[p] = fileStamp{fi.Size(), fi.ModTime().UnixNano()}
			}
			return nil
		})
	}
	return s
}

// grewFile reports whether a file reached the file size limit during the
// launch: it is at the limit now and was not (or was otherwise) before.
func grewFile(before, after *areaScan) bool {
	for p, st := range after.big {
		if old, ok := before.big[p]; !ok || old != st {
			return true
		}
	}
	return false
}

// diskWatch samples the growth of the read-write roots while a tool runs.
type diskWatch struct {
	roots    []string
	limit    int64
	base     *areaScan
	kill     func()
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once
	exceeded atomic.Bool
}

// startDiskWatch starts sampling against base, calling kill once when the
// roots grew by more than limit (or past maxScanEntries entries).
func startDiskWatch(roots []string, limit int64, base *areaScan, kill func()) *diskWatch {
	w := &diskWatch{roots: roots, limit: limit, base: base, kill: kill, stop: make(chan struct{}), done: make(chan struct{})}
	go w.loop()
	return w
}

func (w *diskWatch) loop() {
	defer close(w.done)
	wait := diskInterval
	for {
		select {
		case <-w.stop:
			return
		case <-time.After(wait):
		}
		start := time.Now()
		if w.over(scanRoots(w.roots, 0)) {
			w.exceeded.Store(true)
			w.kill()
			return
		}
		// A walk that takes long is not repeated back to back: the
		// watchdog must not become the host's main load.
		wait = max(diskInterval, diskIdle*time.Since(start))
	}
}

func (w *diskWatch) over(now *areaScan) bool {
	return now.more || now.used-w.base.used > w.limit
}

// finish stops the sampling once the tool is gone and says whether the
// limit was passed, by a sample or by final, the walk after the end.
func (w *diskWatch) finish(final *areaScan) bool {
	w.once.Do(func() { close(w.stop) })
	<-w.done
	return w.exceeded.Load() || w.over(final)
}

// diskLimits is the watchdog and the file size check of one launch, when
// its spec asks for them.
type diskLimits struct {
	spec  *Spec
	base  *areaScan
	watch *diskWatch
}

// measureDisk walks the read-write roots before the tool starts, when the
// spec limits its disk or file size. A tree too large to measure refuses
// a disk limit.
func measureDisk(spec *Spec) (*diskLimits, error) {
	l := spec.Limits
	if l.Disk <= 0 && l.FileSize <= 0 {
		return nil, nil
	}
	d := &diskLimits{spec: spec, base: scanRoots(spec.ReadWrite, l.FileSize)}
	if l.Disk > 0 && d.base.more {
		return nil, refused("list a smaller read_write area, or drop limits.disk",
			"limits.disk cannot be enforced: the read_write paths hold more than %d entries, more than the watchdog measures", maxScanEntries)
	}
	return d, nil
}

// start starts the watchdog, which calls kill when the tool passes the
// disk limit.
func (d *diskLimits) start(kill func()) {
	if d != nil && d.spec.Limits.Disk > 0 {
		d.watch = startDiskWatch(d.spec.ReadWrite, d.spec.Limits.Disk, d.base, kill)
	}
}

// finish, once every process of the tool is gone, stops the watchdog and
// reports the limits passed.
func (d *diskLimits) finish(res *Result) {
	if d == nil {
		return
	}
	final := scanRoots(d.spec.ReadWrite, d.spec.Limits.FileSize)
	if d.watch != nil && d.watch.finish(final) {
		res.exceeded(LimitDisk)
	}
	if d.spec.Limits.FileSize > 0 && grewFile(d.base, final) {
		res.exceeded(LimitFileSize)
	}
}
