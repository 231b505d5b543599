package host

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"path"
)

// preview1 serves wasi_snapshot_preview1 from a virtualWASI for engine
// adapters that have no WASI of their own to configure (wasmtime's WASI
// reads the real clock and real entropy). It is the behaviour of wazero
// v1.12's wasi_snapshot_preview1 as moduleConfig configures it, written
// out function by function, so that a guest sees the same thing, byte for
// byte and errno for errno, under every engine. abi/SPEC.md §10 specifies
// it step by step; TestWASIVectors holds this file and wazero to the
// vectors of abi/testdata/wasi, and TestPreview1MatchesWazero runs both side
// by side on generated calls to every function.
//
// What that configuration amounts to: the only open descriptors are 0
// (stdin, always at end of file), 1 and 2 (stdout and stderr, into the
// event log), which wazero marks as pre-opened and stats as devices; no
// directory is pre-opened, so every path function fails and nothing can
// ever be opened. A guest may close the three; nothing else changes the
// table.
type preview1 struct {
	*virtualWASI
	mem memory
	// closed[fd] is set once the guest closed standard descriptor fd.
	closed [3]bool
}

// wasiFunc is one function of wasi_snapshot_preview1: its parameter types
// ('i' for i32, 'I' for i64), and fn, which gets each argument as wazero
// passes it (an i32 zero-extended) and returns the errno. Every function
// returns an errno (i32) except proc_exit, which returns nothing and
// panics with an *exitError.
type wasiFunc struct {
	name   string
	params string
	fn     func(p *preview1, a []uint64) uint32
}

// The errno values of WASI preview1 that these functions return.
const (
	errnoSuccess     = 0
	errnoBadf        = 8
	errnoFault       = 21
	errnoInval       = 28
	errnoNametoolong = 37
	errnoNosys       = 52
	errnoNotdir      = 54
	errnoNotsup      = 58
	errnoPerm        = 63
)

// Rights and file types, as wazero reports them for a device.
const (
	wasiFiletypeBlockDevice = 1
	// wasiFileRights is wazero's fileRightsBase: fd_datasync, fd_read,
	// fd_seek, fd_fdstat_set_flags, fd_sync, fd_tell, fd_write, fd_advise,
	// fd_allocate, fd_filestat_get, fd_filestat_set_size,
	// fd_filestat_set_times and poll_fd_readwrite.
	wasiFileRights = 1<<0 | 1<<1 | 1<<2 | 1<<3 | 1<<4 | 1<<5 | 1<<6 | 1<<7 | 1<<8 | 1<<21 | 1<<22 | 1<<23 | 1<<27
)

var le = binary.LittleEndian

// errNilFS is what wazero's fd_filestat_set_times runs into on a standard
// descriptor (it falls back to the descriptor's file system, which stdio
// has none of): a nil dereference, recovered as a trap.
var errNilFS = errors.New("runtime error: invalid memory address or nil pointer dereference")

// open reports whether fd is an open descriptor.
func (p *preview1) open(fd int32) bool { return fd >= 0 && fd < 3 && !p.closed[fd] }

func (p *preview1) putU32(ptr, v uint32) bool {
	b, ok := p.mem.Read(ptr, 4)
	if ok {
		le.PutUint32(b, v)
	}
	return ok
}

func (p *preview1) putU64(ptr uint32, v uint64) bool {
	b, ok := p.mem.Read(ptr, 8)
	if ok {
		le.PutUint64(b, v)
	}
	return ok
}

// walltime is wazero's WalltimeNanos.
func (p *preview1) walltime() int64 {
	sec, nsec := p.clock.walltime()
	return sec*1e9 + int64(nsec)
}

// write and read are the standard descriptors' files: stdin reads end of
// file and cannot be written (ENOSYS, which readv and writev report as
// EBADF); stdout and stderr write to the event log and cannot be read.
func (p *preview1) write(fd int32, b []byte) (int, uint32) {
	switch fd {
	case 1:
		n, _ := p.stdout.Write(b)
		return n, 0
	case 2:
		n, _ := p.stderr.Write(b)
		return n, 0
	}
	return 0, errnoNosys
}

func (p *preview1) read(fd int32, b []byte) (int, uint32) {
	if fd == 0 {
		return 0, 0
	}
	return 0, errnoNosys
}

// writev is wazero's writev: every iovec is checked and written in turn,
// an empty one included.
func (p *preview1) writev(iovs, count uint32, w func([]byte) (int, uint32)) (uint32, uint32) {
	stop := count << 3
	buf, ok := p.mem.Read(iovs, stop)
	if !ok {
		return 0, errnoFault
	}
	var total uint32
	for pos := uint32(0); pos < stop; pos += 8 {
		b, ok := p.mem.Read(le.Uint32(buf[pos:]), le.Uint32(buf[pos+4:]))
		if !ok {
			return 0, errnoFault
		}
		n, errno := w(b)
		total += uint32(n)
		if errno == errnoNosys {
			return 0, errnoBadf
		} else if errno != 0 {
			return 0, errno
		}
	}
	return total, 0
}

// readv is wazero's readv: empty iovecs are skipped, and a short read
// ends it.
func (p *preview1) readv(iovs, count uint32, r func([]byte) (int, uint32)) (uint32, uint32) {
	stop := count << 3
	buf, ok := p.mem.Read(iovs, stop)
	if !ok {
		return 0, errnoFault
	}
	var total uint32
	for pos := uint32(0); pos < stop; pos += 8 {
		l := le.Uint32(buf[pos+4:])
		if l == 0 {
			continue
		}
		b, ok := p.mem.Read(le.Uint32(buf[pos:]), l)
		if !ok {
			return 0, errnoFault
		}
		n, errno := r(b)
		total += uint32(n)
		if errno == errnoNosys {
			return 0, errnoBadf
		} else if errno != 0 {
			return 0, errno
		} else if n < int(l) {
			break
		}
	}
	return total, 0
}

// atPath is wazero's atPath for a table without directories: it fails
// for every path, with the first error wazero finds.
func (p *preview1) atPath(fd int32, ptr, n uint32) uint32 {
	b, ok := p.mem.Read(ptr, n)
	if !ok {
		return errnoFault
	}
	if !fs.ValidPath(path.Clean(string(b))) {
		return errnoPerm
	}
	if !p.open(fd) {
		return errnoBadf
	}
	return errnoNotdir
}

// toTimes is the part of wazero's toTimes that a guest can observe: the
// flags it refuses and the clock reads it makes.
func (p *preview1) toTimes(flags uint16) uint32 {
	var now int64
	if set, isNow := flags&1 != 0, flags&2 != 0; set && isNow {
		return errnoInval
	} else if !set && isNow {
		now = p.walltime()
	}
	if set, isNow := flags&4 != 0, flags&8 != 0; set && isNow {
		return errnoInval
	} else if !set && isNow && now == 0 {
		p.walltime()
	}
	return 0
}

// argsLike is wazero's writeOffsetsAndNullTerminatedValues.
func (p *preview1) argsLike(values []string, offsets, bytes uint32) uint32 {
	size := uint32(0)
	for _, v := range values {
		size += uint32(len(v)) + 1
	}
	offs, ok := p.mem.Read(offsets, uint32(len(values)*4))
	if !ok {
		return errnoFault
	}
	buf, ok := p.mem.Read(bytes, size)
	if !ok {
		return errnoFault
	}
	var o, b uint32
	for _, v := range values {
		le.PutUint32(offs[o:], bytes+b)
		o += 4
		copy(buf[b:], v)
		b += uint32(len(v))
		buf[b] = 0
		b++
	}
	return 0
}

func (p *preview1) sizesLike(values []string, countPtr, sizePtr uint32) uint32 {
	size := uint32(0)
	for _, v := range values {
		size += uint32(len(v)) + 1
	}
	if !p.putU32(countPtr, uint32(len(values))) || !p.putU32(sizePtr, size) {
		return errnoFault
	}
	return 0
}

// ifOpen returns errno for an open fd, EBADF otherwise.
func (p *preview1) ifOpen(fd uint64, errno uint32) uint32 {
	if !p.open(int32(fd)) {
		return errnoBadf
	}
	return errno
}

func nosys(*preview1, []uint64) uint32 { return errnoNosys }

// preview1Funcs is every function of wasi_snapshot_preview1, in the order
// wazero exports them.
var preview1Funcs = []wasiFunc{
	{"args_get", "ii", func(p *preview1, a []uint64) uint32 {
		return p.argsLike(p.args, uint32(a[0]), uint32(a[1]))
	}},
	{"args_sizes_get", "ii", func(p *preview1, a []uint64) uint32 {
		return p.sizesLike(p.args, uint32(a[0]), uint32(a[1]))
	}},
	{"environ_get", "ii", func(p *preview1, a []uint64) uint32 {
		return p.argsLike(nil, uint32(a[0]), uint32(a[1]))
	}},
	{"environ_sizes_get", "ii", func(p *preview1, a []uint64) uint32 {
		return p.sizesLike(nil, uint32(a[0]), uint32(a[1]))
	}},
	{"clock_res_get", "ii", func(p *preview1, a []uint64) uint32 {
		if id := uint32(a[0]); id > 1 {
			return errnoInval
		}
		if !p.putU64(uint32(a[1]), 1) {
			return errnoFault
		}
		return 0
	}},
	{"clock_time_get", "iIi", func(p *preview1, a []uint64) uint32 {
		var t int64
		switch uint32(a[0]) {
		case 0:
			t = p.walltime()
		case 1:
			t = p.clock.nanotime()
		default:
			return errnoInval
		}
		if !p.putU64(uint32(a[2]), uint64(t)) {
			return errnoFault
		}
		return 0
	}},
	{"fd_advise", "iIIi", func(p *preview1, a []uint64) uint32 {
		if !p.open(int32(a[0])) {
			return errnoBadf
		}
		if byte(a[3]) > 5 {
			return errnoInval
		}
		return 0
	}},
	{"fd_allocate", "iII", func(p *preview1, a []uint64) uint32 {
		if !p.open(int32(a[0])) {
			return errnoBadf
		}
		tail := int64(a[1] + a[2])
		switch {
		case tail < 0:
			return errnoInval
		case tail == 0: // the size of a device: nothing to allocate
			return 0
		}
		return errnoNosys
	}},
	{"fd_close", "i", func(p *preview1, a []uint64) uint32 {
		fd := int32(a[0])
		if !p.open(fd) {
			return errnoBadf
		}
		p.closed[fd] = true
		return 0
	}},
	{"fd_datasync", "i", func(p *preview1, a []uint64) uint32 { return p.ifOpen(a[0], 0) }},
	{"fd_fdstat_get", "ii", func(p *preview1, a []uint64) uint32 {
		b, ok := p.mem.Read(uint32(a[1]), 24)
		if !ok {
			return errnoFault
		}
		if !p.open(int32(a[0])) {
			return errnoBadf
		}
		le.PutUint16(b[0:], wasiFiletypeBlockDevice)
		le.PutUint16(b[2:], 0)
		le.PutUint32(b[4:], 0)
		le.PutUint64(b[8:], wasiFileRights)
		le.PutUint64(b[16:], 0)
		return 0
	}},
	{"fd_fdstat_set_flags", "ii", func(p *preview1, a []uint64) uint32 {
		flags := uint16(a[1])
		if flags&(1<<1|1<<3|1<<4) != 0 { // dsync, rsync, sync
			return errnoInval
		}
		if !p.open(int32(a[0])) {
			return errnoBadf
		}
		if flags&(1<<2) != 0 { // nonblock
			return errnoNosys
		}
		return 0
	}},
	{"fd_fdstat_set_rights", "iII", nosys},
	{"fd_filestat_get", "ii", func(p *preview1, a []uint64) uint32 {
		b, ok := p.mem.Read(uint32(a[1]), 64)
		if !ok {
			return errnoFault
		}
		if !p.open(int32(a[0])) {
			return errnoBadf
		}
		clear(b)
		le.PutUint64(b[16:], wasiFiletypeBlockDevice)
		le.PutUint64(b[24:], 1) // nlink
		return 0
	}},
	{"fd_filestat_set_size", "iI", func(p *preview1, a []uint64) uint32 { return p.ifOpen(a[0], errnoNosys) }},
	{"fd_filestat_set_times", "iIIi", func(p *preview1, a []uint64) uint32 {
		if !p.open(int32(a[0])) {
			return errnoBadf
		}
		if errno := p.toTimes(uint16(a[3])); errno != 0 {
			return errno
		}
		panic(errNilFS)
	}},
	{"fd_pread", "iiiIi", func(p *preview1, a []uint64) uint32 {
		if !p.open(int32(a[0])) {
			return errnoBadf
		}
		n, errno := p.readv(uint32(a[1]), uint32(a[2]), func([]byte) (int, uint32) { return 0, errnoNosys })
		if errno != 0 {
			return errno
		}
		if !p.putU32(uint32(a[4]), n) {
			return errnoFault
		}
		return 0
	}},
	{"fd_prestat_get", "ii", func(p *preview1, a []uint64) uint32 {
		// wazero's stdio entries are pre-opens that are not directories:
		// they get a prestat of an empty directory name.
		if !p.open(int32(a[0])) {
			return errnoBadf
		}
		if !p.putU64(uint32(a[1]), 0) {
			return errnoFault
		}
		return 0
	}},
	{"fd_prestat_dir_name", "iii", func(p *preview1, a []uint64) uint32 {
		if !p.open(int32(a[0])) {
			return errnoBadf
		}
		if uint32(a[2]) > 0 {
			return errnoNametoolong
		}
		if !p.mem.Write(uint32(a[1]), nil) {
			return errnoFault
		}
		return 0
	}},
	{"fd_pwrite", "iiiIi", func(p *preview1, a []uint64) uint32 {
		if !p.open(int32(a[0])) {
			return errnoBadf
		}
		n, errno := p.writev(uint32(a[1]), uint32(a[2]), func(b []byte) (int, uint32) {
			if len(b) == 0 {
				return 0, 0
			}
			return 0, errnoNosys
		})
		if errno != 0 {
			return errno
		}
		if !p.putU32(uint32(a[4]), n) {
			return errnoFault
		}
		return 0
	}},
	{"fd_read", "iiii", func(p *preview1, a []uint64) uint32 {
		fd := int32(a[0])
		if !p.open(fd) {
			return errnoBadf
		}
		n, errno := p.readv(uint32(a[1]), uint32(a[2]), func(b []byte) (int, uint32) { return p.read(fd, b) })
		if errno != 0 {
			return errno
		}
		if !p.putU32(uint32(a[3]), n) {
			return errnoFault
		}
		return 0
	}},
	{"fd_readdir", "iiiIi", func(p *preview1, a []uint64) uint32 {
		if uint32(a[2]) < 24 {
			return errnoInval
		}
		return errnoBadf // closed, or not a directory
	}},
	{"fd_renumber", "ii", func(p *preview1, a []uint64) uint32 {
		if !p.open(int32(a[0])) || int32(a[1]) < 0 {
			return errnoBadf
		}
		return errnoNotsup // a pre-open
	}},
	{"fd_seek", "iIii", func(p *preview1, a []uint64) uint32 { return p.ifOpen(a[0], errnoNosys) }},
	{"fd_sync", "i", func(p *preview1, a []uint64) uint32 { return p.ifOpen(a[0], 0) }},
	{"fd_tell", "ii", func(p *preview1, a []uint64) uint32 { return p.ifOpen(a[0], errnoNosys) }},
	{"fd_write", "iiii", func(p *preview1, a []uint64) uint32 {
		fd := int32(a[0])
		if !p.open(fd) {
			return errnoBadf
		}
		n, errno := p.writev(uint32(a[1]), uint32(a[2]), func(b []byte) (int, uint32) { return p.write(fd, b) })
		if errno != 0 {
			return errno
		}
		if !p.putU32(uint32(a[3]), n) {
			return errnoFault
		}
		return 0
	}},
	{"path_create_directory", "iii", func(p *preview1, a []uint64) uint32 {
		return p.atPath(int32(a[0]), uint32(a[1]), uint32(a[2]))
	}},
	{"path_filestat_get", "iiiii", func(p *preview1, a []uint64) uint32 {
		return p.atPath(int32(a[0]), uint32(a[2]), uint32(a[3]))
	}},
	{"path_filestat_set_times", "iiiiIIi", func(p *preview1, a []uint64) uint32 {
		if errno := p.toTimes(uint16(a[6])); errno != 0 {
			return errno
		}
		return p.atPath(int32(a[0]), uint32(a[2]), uint32(a[3]))
	}},
	{"path_link", "iiiiiii", func(p *preview1, a []uint64) uint32 {
		return p.atPath(int32(a[0]), uint32(a[2]), uint32(a[3]))
	}},
	{"path_open", "iiiiiIIii", func(p *preview1, a []uint64) uint32 {
		return p.atPath(int32(a[0]), uint32(a[2]), uint32(a[3]))
	}},
	{"path_readlink", "iiiiii", func(p *preview1, a []uint64) uint32 {
		if uint32(a[2]) == 0 || uint32(a[4]) == 0 {
			return errnoInval
		}
		return p.atPath(int32(a[0]), uint32(a[1]), uint32(a[2]))
	}},
	{"path_remove_directory", "iii", func(p *preview1, a []uint64) uint32 {
		return p.atPath(int32(a[0]), uint32(a[1]), uint32(a[2]))
	}},
	{"path_rename", "iiiiii", func(p *preview1, a []uint64) uint32 {
		return p.atPath(int32(a[0]), uint32(a[1]), uint32(a[2]))
	}},
	{"path_symlink", "iiiii", func(p *preview1, a []uint64) uint32 {
		if !p.open(int32(a[2])) {
			return errnoBadf
		}
		return errnoNotdir
	}},
	{"path_unlink_file", "iii", func(p *preview1, a []uint64) uint32 {
		return p.atPath(int32(a[0]), uint32(a[1]), uint32(a[2]))
	}},
	{"poll_oneoff", "iiii", (*preview1).pollOneoff},
	{"proc_exit", "i", func(p *preview1, a []uint64) uint32 {
		panic(&exitError{code: uint32(a[0])})
	}},
	{"proc_raise", "i", nosys},
	{"sched_yield", "", func(*preview1, []uint64) uint32 { return 0 }},
	{"random_get", "ii", func(p *preview1, a []uint64) uint32 {
		b, ok := p.mem.Read(uint32(a[0]), uint32(a[1]))
		if !ok {
			return errnoFault
		}
		if len(b) > 0 {
			p.rand.Read(b)
		}
		return 0
	}},
	{"sock_accept", "iii", func(p *preview1, a []uint64) uint32 { return errnoBadf }},
	{"sock_recv", "iiiiii", func(p *preview1, a []uint64) uint32 { return errnoBadf }},
	{"sock_send", "iiiii", func(p *preview1, a []uint64) uint32 {
		if uint32(a[3]) != 0 {
			return errnoNotsup
		}
		return errnoBadf
	}},
	{"sock_shutdown", "ii", func(p *preview1, a []uint64) uint32 { return errnoBadf }},
}

// pollOneoff is wazero's poll_oneoff: a relative clock subscription
// sleeps on the virtual clock (the shortest of them, and only when every
// subscription is answered at once); an absolute one is ENOTSUP.
func (p *preview1) pollOneoff(a []uint64) uint32 {
	in, out, nsubs, resultN := uint32(a[0]), uint32(a[1]), uint32(a[2]), uint32(a[3])
	if nsubs == 0 {
		return errnoInval
	}
	inBuf, ok := p.mem.Read(in, nsubs*48)
	if !ok {
		return errnoFault
	}
	outBuf, ok := p.mem.Read(out, nsubs*32)
	clear(outBuf)
	if !ok {
		return errnoFault
	}
	if !p.putU32(resultN, nsubs) {
		return errnoFault
	}
	type event struct {
		typ      byte
		userdata []byte
	}
	put := func(b []byte, e event, errno byte) {
		copy(b, e.userdata)
		b[8], b[9] = errno, 0
		le.PutUint32(b[10:], uint32(e.typ))
	}
	var blocking []event
	timeout := int64(1<<63 - 1)
	n := uint32(0)
	for i := uint32(0); i < nsubs; i++ {
		off := i * 48
		e := event{typ: inBuf[off+8], userdata: inBuf[off : off+8]}
		arg := inBuf[off+16:]
		switch e.typ {
		case 0: // clock
			switch le.Uint16(arg[24:32]) {
			case 0:
			case 1:
				return errnoNotsup
			default:
				return errnoInval
			}
			if t := int64(le.Uint64(arg[8:16])); t < timeout {
				timeout = t
			}
			put(outBuf[n*32:], e, 0)
			n++
		case 1: // fd_read
			fd := int32(le.Uint32(arg))
			if fd < 0 {
				return errnoBadf
			}
			if !p.open(fd) {
				put(outBuf[n*32:], e, errnoBadf)
				n++
			} else {
				blocking = append(blocking, e)
			}
		case 2: // fd_write
			fd := int32(le.Uint32(arg))
			if fd < 0 {
				return errnoBadf
			}
			errno := byte(errnoBadf)
			if p.open(fd) {
				errno = errnoNotsup
			}
			put(outBuf[n*32:], e, errno)
			n++
		default:
			return errnoInval
		}
	}
	if n == nsubs {
		if timeout > 0 {
			p.clock.sleep(timeout)
		}
		return 0
	}
	if !p.open(0) {
		return errnoBadf
	}
	// stdin is always ready (to read nothing): every blocking
	// subscription is answered, without a sleep.
	for _, e := range blocking {
		put(outBuf[n*32:], e, 0)
		n++
	}
	return 0
}
