package host

import (
	"bytes"
	"encoding/binary"

	"github.com/agentrt/agentrt/internal/abivectors"
)

// wasiCases are the calls of the generated WASI vectors (calls.*.txt): at
// least one per function of wasi_snapshot_preview1 and one per rule of
// abi/SPEC.md §10.5 (closed and negative descriptors, buffers straddling
// the end of memory, the order of the checks, malformed subscriptions, the
// quirks), with the memory each call finds. Their outcomes are the
// reference's (fillOutcomes). Output buffers are filled with 0xa5 first,
// so that every byte a call writes shows in the vector, zeros included.
func wasiCases() []*abivectors.WASIVector {
	var vs []*abivectors.WASIVector
	add := func(file string, comment ...string) *wasiCaseBuilder {
		v := &abivectors.WASIVector{File: "calls." + file + ".txt", Comment: comment, Pages: 1,
			Seed: bytes.Repeat([]byte{3}, 32), WallBase: 1_700_000_000_123_456_789, ModuleName: "wasi-probe"}
		vs = append(vs, v)
		return &wasiCaseBuilder{v}
	}
	const end = 65536 // the end of one page of memory
	noise := func(n int) []byte { return bytes.Repeat([]byte{0xa5}, n) }
	hello := []byte("hello world")

	b := add("args", "args_get, args_sizes_get, environ_get, environ_sizes_get: argv is the module name,",
		"the environment is empty; sizes are written count first, then size")
	b.call("one argument, 11 bytes with its NUL", "args_sizes_get", 100, 104).mem(100, noise(8))
	b.call("the offset of argv[0], then its bytes and NUL", "args_get", 200, 300).mem(200, noise(4)).mem(300, noise(12))
	b.call("count pointer straddles the end: EFAULT, nothing written", "args_sizes_get", end-3, 104)
	b.call("size pointer straddles the end: the count is written, then EFAULT", "args_sizes_get", 108, end-1).mem(108, noise(4))
	b.call("argv straddles the end: EFAULT, nothing written", "args_get", end-3, 300).mem(300, noise(12))
	b.call("argv_buf straddles the end (11 bytes at 65530): EFAULT, argv not written either", "args_get", 200, end-6).mem(200, noise(4))
	b.call("no variables: both sizes are 0", "environ_sizes_get", 400, 404).mem(400, noise(8))
	b.call("nothing to write: pointers at the end of memory are in it", "environ_get", end, end)
	b.call("a pointer past the end: EFAULT", "environ_get", end+1, 0)
	b.call("count pointer past the end: EFAULT", "environ_sizes_get", end, 404)

	b = add("args-default", "a run header without a module name: argv[0] is \"agent\"")
	b.v.ModuleName = ""
	b.call("", "args_sizes_get", 100, 104).mem(100, noise(8))
	b.call("", "args_get", 200, 300).mem(200, noise(4)).mem(300, noise(6))

	b = add("clock", "clock_res_get and clock_time_get: one virtual clock, 1000 ns a read, from the",
		"instance's start (here 0); realtime is the wall base plus the virtual time")
	b.call("realtime resolution: 1 ns", "clock_res_get", 0, 16).mem(16, noise(8))
	b.call("monotonic resolution: 1 ns", "clock_res_get", 1, 24).mem(24, noise(8))
	b.call("process CPU time: EINVAL", "clock_res_get", 2, 32)
	b.call("thread CPU time: EINVAL", "clock_res_get", 3, 32)
	b.call("result straddles the end: EFAULT", "clock_res_get", 1, end-7)
	b.call("monotonic: the first read is 1000", "clock_time_get", 1, 0, 40).mem(40, noise(8))
	b.call("realtime: wall base + 2000; the precision is ignored", "clock_time_get", 0, 1_000_000, 48).mem(48, noise(8))
	b.call("an unknown clock: EINVAL, and the clock does not move", "clock_time_get", 2, 0, 56)
	b.call("an unknown clock, id 2^32-1", "clock_time_get", -1, 0, 56)
	b.call("result straddles the end: EFAULT, but the clock was read (3000)", "clock_time_get", 1, 0, end-4)
	b.call("so the next read is 4000", "clock_time_get", 1, 0, 40).mem(40, noise(8))

	b = add("clock-before-1970", "a wall base before 1970: realtime is negative, written as its two's complement")
	b.v.WallBase = -5_000_000_000
	b.call("", "clock_time_get", 0, 0, 40).mem(40, noise(8))

	b = add("random", "random_get: the run's ChaCha8 stream, little-endian 64-bit words, read as one",
		"byte stream across calls")
	b.call("32 bytes: the first four words", "random_get", 1024, 32).mem(1024, noise(32))
	b.call("5 bytes: the next word's first 5", "random_get", 1100, 5).mem(1100, noise(5))
	b.call("11 bytes: that word's last 3, then the next word", "random_get", 1110, 11).mem(1110, noise(11))
	b.call("0 bytes at the end of memory: success, nothing drawn", "random_get", end, 0)
	b.call("buffer straddles the end: EFAULT, nothing drawn", "random_get", end-6, 8)
	b.call("1 byte: the stream goes on after the 11", "random_get", 1130, 1).mem(1130, noise(1))

	b = add("segment", "the instance of segment 3 of a run: the virtual clock goes on from the",
		"checkpoint's (123456000), the random stream is seeded with SHA-256(\"agentrt segment seed\" || 0 ||",
		"seed || 3 as 4 big-endian bytes)")
	b.v.Segment, b.v.Clock = 3, 123_456_000
	b.call("", "clock_time_get", 1, 0, 40).mem(40, noise(8))
	b.call("", "random_get", 1024, 16).mem(1024, noise(16))

	iovecs := cat(iov(2048, 6), iov(2054, 0), iov(2054, 5), iov(70000, 3), iov(end, 0), iov(end+1, 0))
	b = add("fd-write", "fd_write and fd_pwrite on the standard descriptors; iovecs at 1024:",
		"(2048,6) (2054,0) (2054,5) (70000,3) (65536,0) (65537,0) over \"hello world\" at 2048")
	b.call("stdout: every iovec in turn, the empty one too; nwritten 11", "fd_write", 1, 1024, 3, 512).
		mem(1024, iovecs).mem(2048, hello).mem(512, noise(4))
	b.call("stderr", "fd_write", 2, 1024, 1, 512).mem(512, noise(4))
	b.call("the fourth iovec is outside memory: EFAULT after the first three were written; nwritten is not",
		"fd_write", 1, 1024, 4, 512).mem(512, noise(4))
	b.call("stdin cannot be written: EBADF, once an iovec was found in memory", "fd_write", 0, 1024, 1, 512)
	b.call("stdin, with no iovec: success, nwritten 0", "fd_write", 0, 1024, 0, 512).mem(512, noise(4))
	b.call("stdin, an empty iovec: EBADF all the same", "fd_write", 0, 1032, 1, 512).mem(512, noise(4))
	b.call("stdin, an iovec outside memory: EFAULT comes first", "fd_write", 0, 1048, 1, 512)
	b.call("the iovec array straddles the end: EFAULT", "fd_write", 1, end-4, 1, 512)
	b.call("nwritten straddles the end: the bytes are written, then EFAULT", "fd_write", 1, 1024, 1, end-2)
	b.call("iovs_len 2^29+1: the array is iovs_len*8 bytes modulo 2^32, one iovec", "fd_write", 1, 1024, 1<<29+1, 512).mem(512, noise(4))
	b.call("iovs_len 2^29: no iovec at all", "fd_write", 1, 1024, 1<<29, 512).mem(512, noise(4))
	b.call("an empty iovec at the end of memory is in it", "fd_write", 1, 1056, 1, 512).mem(512, noise(4))
	b.call("an empty iovec past the end is not: EFAULT", "fd_write", 1, 1064, 1, 512)
	b.call("not open", "fd_write", 3, 1024, 1, 512)
	b.call("negative", "fd_write", -1, 1024, 1, 512)
	b.call("fd_pwrite writes nothing: EBADF at the first non-empty iovec", "fd_pwrite", 1, 1024, 1, 0, 512)
	b.call("fd_pwrite checks every iovec, empty ones too: EFAULT", "fd_pwrite", 2, 1064, 1, 0, 512)
	b.call("fd_pwrite with only an empty iovec: success, nwritten 0", "fd_pwrite", 2, 1032, 1, 7, 512).mem(512, noise(4))
	b.call("fd_pwrite, not open", "fd_pwrite", 5, 1024, 1, 0, 512)

	readIovecs := cat(iov(3000, 4), iov(3004, 0), iov(70000, 3), iov(70000, 0))
	b = add("fd-read", "fd_read and fd_pread; iovecs at 1024: (3000,4) (3004,0) (70000,3) (70000,0)")
	b.call("stdin is at end of file: nread 0; the read of 0 bytes ends it, so the third iovec is not examined",
		"fd_read", 0, 1024, 3, 512).mem(1024, readIovecs).mem(3000, noise(4)).mem(512, noise(4))
	b.call("the first non-empty iovec is outside memory: EFAULT", "fd_read", 0, 1040, 1, 512)
	b.call("empty iovecs are skipped, wherever they point", "fd_read", 0, 1048, 1, 512).mem(512, noise(4))
	b.call("stdout cannot be read: EBADF", "fd_read", 1, 1024, 1, 512)
	b.call("stderr with only an empty iovec: nothing to read, success", "fd_read", 2, 1048, 1, 512).mem(512, noise(4))
	b.call("not open", "fd_read", 3, 1024, 1, 512)
	b.call("negative", "fd_read", -2, 1024, 1, 512)
	b.call("nread straddles the end: EFAULT", "fd_read", 0, 1024, 1, end-3)
	b.call("fd_pread reads nothing: EBADF at the first non-empty iovec in memory", "fd_pread", 0, 1024, 1, 0, 512)
	b.call("fd_pread: EFAULT for a non-empty iovec outside memory", "fd_pread", 0, 1040, 1, 0, 512)
	b.call("fd_pread with only empty iovecs: success; the offset is ignored", "fd_pread", 1, 1048, 1, 5, 512).mem(512, noise(4))
	b.call("fd_pread, not open", "fd_pread", 4, 1024, 1, 0, 512)

	b = add("fd-stat", "the standard descriptors stat as block devices, are pre-opens with an empty",
		"name, and refuse what a device refuses; descriptor 3 and up are never open")
	b.call("fdstat of stdin: filetype 1, flags 0, rights base 0x8e001ff, inheriting 0", "fd_fdstat_get", 0, 100).mem(100, noise(24))
	b.call("fdstat of stdout", "fd_fdstat_get", 1, 200).mem(200, noise(24))
	b.call("not open: EBADF", "fd_fdstat_get", 3, 300).mem(300, noise(24))
	b.call("the buffer is checked first: EFAULT, not EBADF", "fd_fdstat_get", 3, end-20)
	b.call("negative", "fd_fdstat_get", -1, 300)
	b.call("filestat of stderr: filetype 1, nlink 1, the rest 0", "fd_filestat_get", 2, 400).mem(400, noise(64))
	b.call("filestat: the buffer is checked first", "fd_filestat_get", 7, end-60)
	b.call("filestat, not open", "fd_filestat_get", 7, 400)
	b.call("set_flags 0", "fd_fdstat_set_flags", 1, 0)
	b.call("append is accepted", "fd_fdstat_set_flags", 1, 1)
	b.call("nonblock: ENOSYS", "fd_fdstat_set_flags", 1, 4)
	b.call("dsync: EINVAL", "fd_fdstat_set_flags", 1, 2)
	b.call("sync on a descriptor that is not open: EINVAL comes first", "fd_fdstat_set_flags", 9, 16)
	b.call("not open", "fd_fdstat_set_flags", 9, 0)
	b.call("only the low 16 bits count", "fd_fdstat_set_flags", 1, 0x10000)
	b.call("append and nonblock: ENOSYS", "fd_fdstat_set_flags", 0, 5)
	b.call("rights: ENOSYS, open or not", "fd_fdstat_set_rights", 0, 0, 0)
	b.call("", "fd_fdstat_set_rights", 9, 1, 1)
	b.call("set_size: ENOSYS", "fd_filestat_set_size", 1, 0)
	b.call("set_size, not open", "fd_filestat_set_size", 3, 0)
	b.call("advice 5 (noreuse)", "fd_advise", 0, 0, 0, 5)
	b.call("advice 6: EINVAL", "fd_advise", 0, 0, 0, 6)
	b.call("only the low 8 bits of advice count: 256 is 0", "fd_advise", 2, 1, 1, 256)
	b.call("advise, not open", "fd_advise", 4, 0, 0, 0)
	b.call("allocate 0 bytes at 0: success", "fd_allocate", 1, 0, 0)
	b.call("allocate 1 byte: a device cannot grow, ENOSYS", "fd_allocate", 1, 0, 1)
	b.call("offset+len is negative as a signed 64-bit sum: EINVAL", "fd_allocate", 1, -1, 0)
	b.call("the sum wraps: 2^63-1 + 1 is negative, EINVAL", "fd_allocate", 1, 1<<63-1, 1)
	b.call("the sum wraps to 0: success", "fd_allocate", 1, -1, 1)
	b.call("allocate, not open", "fd_allocate", 3, 0, 0)
	b.call("", "fd_datasync", 0)
	b.call("", "fd_sync", 2)
	b.call("", "fd_datasync", 3)
	b.call("", "fd_sync", -1)
	b.call("seek: ENOSYS, whatever the whence", "fd_seek", 1, 0, 0, 600)
	b.call("", "fd_seek", 1, 0, 7, 600)
	b.call("", "fd_seek", 3, 0, 0, 600)
	b.call("tell: ENOSYS", "fd_tell", 0, 600)
	b.call("", "fd_tell", 5, 600)
	b.call("prestat of a standard descriptor: tag 0 (a directory), name length 0", "fd_prestat_get", 0, 700).mem(700, noise(8))
	b.call("prestat: EFAULT", "fd_prestat_get", 2, end-4)
	b.call("descriptor 3 is not open: a scan of pre-opens from 3 ends at once", "fd_prestat_get", 3, 700)
	b.call("dir_name of length 0", "fd_prestat_dir_name", 1, 800, 0)
	b.call("dir_name of length 1: ENAMETOOLONG", "fd_prestat_dir_name", 1, 800, 1)
	b.call("dir_name at the end of memory: in it", "fd_prestat_dir_name", 1, end, 0)
	b.call("dir_name past the end: EFAULT", "fd_prestat_dir_name", 1, end+1, 0)
	b.call("dir_name, not open", "fd_prestat_dir_name", 3, 800, 0)
	b.call("readdir with a buffer under 24 bytes: EINVAL, before the descriptor is looked at", "fd_readdir", 9, 900, 23, 0, 950)
	b.call("readdir: no descriptor is a directory, EBADF", "fd_readdir", 0, 900, 24, 0, 950)
	b.call("renumber a pre-open: ENOTSUP", "fd_renumber", 0, 5)
	b.call("", "fd_renumber", 2, 1)
	b.call("renumber to a negative descriptor: EBADF", "fd_renumber", 1, -1)
	b.call("renumber from a descriptor that is not open: EBADF", "fd_renumber", 3, 1)

	subs := func(s ...[]byte) []byte { return cat(s...) }
	b = add("fd-close", "closing the standard descriptors: each may be closed once, and is then not open",
		"for any function; descriptors are never reopened or renumbered")
	b.call("", "fd_close", 1)
	b.call("stdout is closed: EBADF", "fd_write", 1, 1024, 1, 512).mem(1024, iov(2048, 6)).mem(2048, hello)
	b.call("twice: EBADF", "fd_close", 1)
	b.call("", "fd_fdstat_get", 1, 100).mem(100, noise(24))
	b.call("", "fd_prestat_get", 1, 700).mem(700, noise(8))
	b.call("", "fd_close", 3)
	b.call("", "fd_close", -1)
	b.call("stderr is still open", "fd_write", 2, 1024, 1, 512).mem(512, noise(4))
	b.call("", "fd_renumber", 1, 5)
	b.call("a valid path, a closed descriptor: EBADF", "path_open", 1, 0, 2048, 5, 0, 0, 0, 0, 600)
	b.call("", "fd_close", 0)
	b.call("an fd_read subscription on an open descriptor (2) is answered once stdin is checked; stdin is closed: EBADF",
		"poll_oneoff", 4096, 8192, 1, 600).mem(4096, subFD(0x2222, 1, 2)).mem(8192, noise(32)).mem(600, noise(4))
	b.call("subscriptions on closed descriptors are answered with EBADF events; the clock one sleeps 700",
		"poll_oneoff", 4096, 8192, 3, 600).mem(4096, subs(subFD(0x1111, 1, 0), subFD(0x3333, 2, 1), subClock(0x4444, 1, 700, 0))).mem(8192, noise(96)).mem(600, noise(4))
	b.call("", "fd_close", 2)
	b.call("", "fd_write", 2, 1024, 1, 512)

	b = add("fd-filestat-set-times", "fd_filestat_set_times: the descriptor, then the flags (a time both set",
		"and now is EINVAL; \"now\" reads the realtime clock), then a trap: the reference host dereferences a",
		"file system the standard descriptors do not have, and this version of the ABI keeps that")
	b.call("not open", "fd_filestat_set_times", 3, 0, 0, 0)
	b.call("negative, with atim_now: EBADF, the clock is not read", "fd_filestat_set_times", -1, 0, 0, 2)
	b.call("atim and atim_now: EINVAL", "fd_filestat_set_times", 1, 0, 0, 3)
	b.call("atim_now reads the clock (1000), then mtim and mtim_now: EINVAL", "fd_filestat_set_times", 1, 0, 0, 14)
	b.call("mtim and mtim_now: EINVAL, no read", "fd_filestat_set_times", 1, 0, 0, 12)
	b.call("valid flags: the call traps", "fd_filestat_set_times", 2, 5, 5, 0)

	paths := map[uint32]string{2000: "/etc/passwd", 2100: "../x", 2200: "a/../..", 2300: "a/..", 2500: "\xff", 2600: "a/./b/", 2700: "x\x00y"}
	b = add("path", "the path functions: no descriptor is a directory, so every one fails; the path is",
		"checked first (EFAULT, then EPERM for a path that is not valid UTF-8, is absolute or climbs",
		"above its start), then the descriptor (EBADF), then ENOTDIR. Paths: 2000 \"/etc/passwd\",",
		"2100 \"../x\", 2200 \"a/../..\", 2300 \"a/..\", 2500 0xff, 2600 \"a/./b/\", 2700 \"x\\0y\"")
	first := b.call("absolute: EPERM", "path_open", 0, 0, 2000, 11, 0, 0, 0, 0, 3000)
	for _, a := range []uint32{2000, 2100, 2200, 2300, 2500, 2600, 2700} {
		first.mem(a, []byte(paths[a]))
	}
	first.mem(3000, noise(4))
	b.call("the path before the descriptor: EPERM", "path_open", 3, 0, 2000, 11, 0, 0, 0, 0, 3000)
	b.call("a/.. is the start itself, valid: descriptor 3 is not open, EBADF", "path_open", 3, 0, 2300, 4, 0, 0, 0, 0, 3000)
	b.call("stdin is not a directory: ENOTDIR", "path_open", 0, 0, 2300, 4, 0, 0, 0, 0, 3000)
	b.call("the path straddles the end: EFAULT", "path_open", 0, 0, end-5, 8, 0, 0, 0, 0, 3000)
	b.call("the empty path is valid", "path_open", -1, 0, end, 0, 0, 0, 0, 0, 3000)
	b.call("", "path_create_directory", 1, 2100, 4)
	b.call("", "path_create_directory", 1, 2200, 7)
	b.call("not UTF-8: EPERM", "path_create_directory", 1, 2500, 1)
	b.call("a trailing slash and . elements are fine", "path_create_directory", 2, 2600, 6)
	b.call("a NUL byte is a byte like another", "path_create_directory", 2, 2700, 3)
	b.call("the result pointer is never looked at", "path_filestat_get", 0, 0, 2300, 4, end)
	b.call("the time flags come first: EINVAL", "path_filestat_set_times", 0, 0, 2300, 4, 0, 0, 3)
	b.call("atim_now reads the clock, then ENOTDIR", "path_filestat_set_times", 0, 0, 2300, 4, 0, 0, 2)
	b.call("", "path_filestat_set_times", 5, 0, 2000, 11, 0, 0, 0)
	b.call("only the old path and descriptor are checked", "path_link", 0, 0, 2300, 4, 5, end+1, 1)
	b.call("", "path_link", 3, 0, 2300, 4, 0, 2300, 4)
	b.call("an empty path: EINVAL first", "path_readlink", 0, 2300, 0, 3000, 10, 3100)
	b.call("an empty buffer: EINVAL first", "path_readlink", 0, 2300, 4, 3000, 0, 3100)
	b.call("", "path_readlink", 0, 2300, 4, 3000, 10, 3100)
	b.call("", "path_readlink", 0, end+1, 4, 3000, 10, 3100)
	b.call("", "path_remove_directory", 0, 2000, 11)
	b.call("only the old path", "path_rename", 1, 2300, 4, 9, end+1, 5)
	b.call("", "path_unlink_file", 7, 2300, 4)
	b.call("path_symlink looks at its descriptor only: ENOTDIR whatever its paths", "path_symlink", end+1, 5, 1, end+1, 5)
	b.call("", "path_symlink", 2000, 11, 3, 2000, 11)

	b = add("poll", "poll_oneoff: subscriptions of 48 bytes at 4096, events of 32 bytes at 8192,",
		"nevents at 600; relative clock subscriptions sleep on the virtual clock, the shortest timeout")
	b.call("one clock, 1500 ns: one event, and the clock moves by 1500", "poll_oneoff", 4096, 8192, 1, 600).
		mem(4096, subClock(0x1111, 1, 1500, 0)).mem(8192, noise(32)).mem(600, noise(4))
	b.call("two clocks and an fd_write on stdout (ENOTSUP): the shortest timeout, 700", "poll_oneoff", 4096, 8192, 3, 600).
		mem(4096, subs(subClock(0x1111, 1, 1500, 0), subClock(0x2222, 0, 700, 0), subFD(0x3333, 2, 1))).mem(8192, noise(96)).mem(600, noise(4))
	b.call("fd_read on stdin is answered after the others, and then nothing sleeps", "poll_oneoff", 4096, 8192, 2, 600).
		mem(4096, subs(subFD(0x1111, 1, 0), subClock(0x2222, 1, 1500, 0))).mem(8192, noise(64)).mem(600, noise(4))
	b.call("fd_read on stdout is ready too (errno 0)", "poll_oneoff", 4096, 8192, 1, 600).
		mem(4096, subFD(0x4444, 1, 1)).mem(8192, noise(32)).mem(600, noise(4))
	b.call("fd_read on a descriptor that is not open: an EBADF event; the clock sleeps 10", "poll_oneoff", 4096, 8192, 2, 600).
		mem(4096, subs(subFD(0x5555, 1, 9), subClock(0x6666, 1, 10, 0))).mem(8192, noise(64)).mem(600, noise(4))
	b.call("fd_write on a descriptor that is not open: an EBADF event; a timeout of 0 sleeps nothing", "poll_oneoff", 4096, 8192, 2, 600).
		mem(4096, subs(subFD(0x7777, 2, 9), subClock(0x8888, 1, 0, 0))).mem(8192, noise(64)).mem(600, noise(4))
	b.call("an absolute clock: ENOTSUP; nevents was written and the events zeroed first", "poll_oneoff", 4096, 8192, 1, 600).
		mem(4096, subClock(0x1111, 1, 1500, 1)).mem(8192, noise(32)).mem(600, noise(4))
	b.call("clock flags 2: EINVAL after the first subscription's event was written", "poll_oneoff", 4096, 8192, 2, 600).
		mem(4096, subs(subClock(0x1111, 1, 100, 0), subClock(0x2222, 1, 100, 2))).mem(8192, noise(64)).mem(600, noise(4))
	b.call("an unknown tag: EINVAL", "poll_oneoff", 4096, 8192, 1, 600).mem(4096, subFD(0x1111, 3, 0)).mem(8192, noise(32)).mem(600, noise(4))
	b.call("fd_read on a negative descriptor: EBADF returned", "poll_oneoff", 4096, 8192, 1, 600).mem(4096, subFD(0x1111, 1, -1))
	b.call("fd_write on a negative descriptor: EBADF returned", "poll_oneoff", 4096, 8192, 1, 600).mem(4096, subFD(0x1111, 2, -1))
	b.call("no subscription: EINVAL", "poll_oneoff", 4096, 8192, 0, 600)
	b.call("the subscriptions straddle the end: EFAULT", "poll_oneoff", end-40, 8192, 1, 600)
	b.call("the events straddle the end: EFAULT, nothing written", "poll_oneoff", 4096, end-16, 1, 600).mem(4096, subClock(0x1111, 1, 1500, 0))
	b.call("nevents straddles the end: EFAULT, after the events were zeroed", "poll_oneoff", 4096, 8192, 1, end-2).mem(8192, noise(32))
	b.call("a negative timeout (as int64) sleeps nothing", "poll_oneoff", 4096, 8192, 1, 600).mem(4096, subClock(0x1111, 1, -5, 0)).mem(8192, noise(32))
	b.call("the clock id is not looked at", "poll_oneoff", 4096, 8192, 1, 600).mem(4096, subClock(0x1111, 7, 30, 0)).mem(8192, noise(32))
	b.call("no clock subscription and nothing deferred: it sleeps 2^63-1 ns, and the clock wraps", "poll_oneoff", 4096, 8192, 1, 600).
		mem(4096, subFD(0x9999, 2, 2)).mem(8192, noise(32))
	b.call("the wrapped clock, read", "clock_time_get", 1, 0, 40).mem(40, noise(8))

	b = add("poll-overflow", "poll_oneoff with nsubscriptions whose sizes (x48, x32) wrap modulo 2^32")
	b.call("2^28+1 subscriptions: 48 and 32 bytes; the first has an unknown tag: EINVAL, nevents says 2^28+1",
		"poll_oneoff", 4096, 8192, 1<<28+1, 600).mem(4096, subFD(0x1111, 3, 0)).mem(8192, noise(32)).mem(600, noise(4))
	b.call("0x5555556 subscriptions: 32 bytes of them, but 0xaaaaaac0 bytes of events: EFAULT",
		"poll_oneoff", 4096, 8192, 0x5555556, 600).mem(600, noise(4))
	b.call("2^28 subscriptions: 0 bytes each way, so the first subscription is outside them: trap",
		"poll_oneoff", 4096, 8192, 1<<28, 600)

	b = add("poll-overflow-second", "poll_oneoff: the second subscription lies outside the wrapped size")
	b.call("2^28+1 subscriptions: the first (fd_write on stdout) is answered, the second traps",
		"poll_oneoff", 4096, 8192, 1<<28+1, 600).mem(4096, subFD(0x1111, 2, 1)).mem(8192, noise(32))

	b = add("proc", "sched_yield, proc_raise, the sockets (no descriptor is one), proc_exit")
	b.call("", "sched_yield")
	b.call("", "proc_raise", 9)
	b.call("", "sock_accept", 3, 0, 500)
	b.call("", "sock_accept", 1, 0, 500)
	b.call("", "sock_recv", 0, 1024, 1, 0, 500, 504)
	b.call("", "sock_send", 1, 1024, 1, 0, 500)
	b.call("any send flag: ENOTSUP, before the descriptor", "sock_send", 9, 0, 0, 2, 0)
	b.call("", "sock_shutdown", 1, 1)
	b.call("", "sock_shutdown", -1, 3)
	b.call("exit 3 ends the instance; the run fails", "proc_exit", 3)

	b = add("proc-exit-0", "proc_exit(0) ends the instance; the run completes")
	b.call("", "fd_write", 1, 1024, 1, 512).mem(1024, iov(2048, 5)).mem(2048, hello).mem(512, noise(4))
	b.call("", "proc_exit", 0)
	return vs
}

type wasiCaseBuilder struct{ v *abivectors.WASIVector }

// call adds a call; the returned reference adds the memory it finds.
func (b *wasiCaseBuilder) call(comment, fn string, args ...int64) wasiCallRef {
	c := abivectors.WASICall{Func: fn, Args: args}
	if comment != "" {
		c.Comment = []string{comment}
	}
	b.v.Calls = append(b.v.Calls, c)
	return wasiCallRef{b.v, len(b.v.Calls) - 1}
}

type wasiCallRef struct {
	v *abivectors.WASIVector
	i int
}

func (r wasiCallRef) mem(addr uint32, data []byte) wasiCallRef {
	c := &r.v.Calls[r.i]
	c.Mem = append(c.Mem, abivectors.Span{Addr: addr, Data: data})
	return r
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// iov is an iovec (ciovec): buf u32, buf_len u32.
func iov(ptr, n uint32) []byte {
	return binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, ptr), n)
}

// subClock is a clock subscription: userdata, tag 0, and at 16 the clock
// id, at 24 the timeout, at 32 the precision (0), at 40 the flags.
func subClock(userdata uint64, id uint32, timeout int64, flags uint16) []byte {
	b := make([]byte, 48)
	binary.LittleEndian.PutUint64(b, userdata)
	binary.LittleEndian.PutUint32(b[16:], id)
	binary.LittleEndian.PutUint64(b[24:], uint64(timeout))
	binary.LittleEndian.PutUint16(b[40:], flags)
	return b
}

// subFD is a subscription of tag tag (1 fd_read, 2 fd_write) with the
// descriptor at 16.
func subFD(userdata uint64, tag byte, fd int32) []byte {
	b := make([]byte, 48)
	binary.LittleEndian.PutUint64(b, userdata)
	b[8] = tag
	binary.LittleEndian.PutUint32(b[16:], uint32(fd))
	return b
}
