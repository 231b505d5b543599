package host

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentrt/agentrt/internal/abivectors"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// specWASI is abi/SPEC.md §10 transcribed step by step, and nothing else:
// it reads no code of preview1 or of wazero. It is a target of
// TestWASIVectors, so the vectors check that the text is enough to
// implement the virtual WASI, as a second implementation would from it.
type specWASI struct {
	mem            api.Memory
	c, w           int64 // the virtual clock C and the wall base W (§10.3)
	r              *rand.ChaCha8
	closed         [3]bool
	arg            string
	stdout, stderr io.Writer
}

// errFail ends a call with an errno; a *specExit or a *specTrap ends the
// instance (wazero wraps what a host function panics with).
type errFail uint32

type specExit struct{ code uint32 }

func (e *specExit) Error() string { return fmt.Sprintf("exit %d", e.code) }

type specTrap struct{}

func (*specTrap) Error() string { return "trap" }

const (
	eBADF, eFAULT, eINVAL, eNAMETOOLONG, eNOSYS, eNOTDIR, eNOTSUP, ePERM = 8, 21, 28, 37, 52, 54, 58, 63
)

func newSpecWASI(seed []byte, segment uint32, clock, wall int64, name string, stdout, stderr io.Writer) *specWASI {
	var key [32]byte
	if segment == 0 {
		copy(key[:], seed)
	} else {
		h := sha256.New()
		h.Write([]byte("agentrt segment seed\x00"))
		h.Write(seed)
		h.Write(binary.BigEndian.AppendUint32(nil, segment))
		copy(key[:], h.Sum(nil))
	}
	if name == "" {
		name = "agent"
	}
	return &specWASI{c: clock, w: wall, r: rand.NewChaCha8(key), arg: name, stdout: stdout, stderr: stderr}
}

// §10.2
func (m *specWASI) check(p, n uint32) {
	if uint64(p)+uint64(n) > uint64(m.mem.Size()) {
		panic(errFail(eFAULT))
	}
}

func (m *specWASI) put32(p, v uint32) { m.check(p, 4); m.mem.WriteUint32Le(p, v) }
func (m *specWASI) put64(p uint32, v uint64) {
	m.check(p, 8)
	m.mem.WriteUint64Le(p, v)
}
func (m *specWASI) open(fd int32) bool { return fd >= 0 && fd <= 2 && !m.closed[fd] }
func (m *specWASI) need(fd int32) {
	if !m.open(fd) {
		panic(errFail(eBADF))
	}
}
func fail(e uint32) { panic(errFail(e)) }

// §10.3
func (m *specWASI) tick() int64 { m.c += 1000; return m.c }
func (m *specWASI) wall() int64 { return m.w + m.tick() }
func (m *specWASI) sleep(d int64) {
	if d > 0 {
		m.c += d
	}
}

func (m *specWASI) bytes(p, n uint32) []byte { b, _ := m.mem.Read(p, n); return b }

// writev and readv, with w one of "stream", "empty", "none" and r one of
// "eof", "fail" (§10.5).
func (m *specWASI) writev(iovs, count uint32, w string, out io.Writer) uint32 {
	k := count * 8
	m.check(iovs, k)
	var n uint32
	for i := uint32(0); i < k/8; i++ {
		p, _ := m.mem.ReadUint32Le(iovs + 8*i)
		ln, _ := m.mem.ReadUint32Le(iovs + 8*i + 4)
		m.check(p, ln)
		switch {
		case w == "stream":
			out.Write(m.bytes(p, ln))
			n += ln
		case w == "none", w == "empty" && ln > 0:
			fail(eBADF)
		}
	}
	return n
}

func (m *specWASI) readv(iovs, count uint32, r string) {
	k := count * 8
	m.check(iovs, k)
	for i := uint32(0); i < k/8; i++ {
		p, _ := m.mem.ReadUint32Le(iovs + 8*i)
		l, _ := m.mem.ReadUint32Le(iovs + 8*i + 4)
		if l == 0 {
			continue
		}
		m.check(p, l)
		if r == "eof" {
			return
		}
		fail(eBADF)
	}
}

func validPath(b []byte) bool {
	s := string(b)
	if !utf8.ValidString(s) || strings.HasPrefix(s, "/") {
		return false
	}
	depth := 0
	for _, e := range strings.Split(s, "/") {
		switch e {
		case "", ".":
		case "..":
			if depth--; depth < 0 {
				return false
			}
		default:
			depth++
		}
	}
	return true
}

func (m *specWASI) path(fd int32, p, l uint32) {
	m.check(p, l)
	if !validPath(m.bytes(p, l)) {
		fail(ePERM)
	}
	m.need(fd)
	fail(eNOTDIR)
}

func (m *specWASI) times(flags uint32) {
	f := flags & 0xffff
	if f&1 != 0 && f&2 != 0 {
		fail(eINVAL)
	}
	now := int64(0)
	if f&2 != 0 && f&1 == 0 {
		now = m.wall()
	}
	if f&4 != 0 && f&8 != 0 {
		fail(eINVAL)
	}
	if f&8 != 0 && f&4 == 0 && now == 0 {
		m.wall()
	}
}

// call serves function name with args (i32 as u32, i64 as u64) and
// returns its errno; it panics with specExit or specTrap to end the
// instance.
func (m *specWASI) call(name string, a []uint64) (errno uint32) {
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(errFail); ok {
				errno = uint32(e)
				return
			}
			panic(r)
		}
	}()
	u := func(i int) uint32 { return uint32(a[i]) }
	var fd int32 // the first parameter, for the fd_* and path_* functions
	if len(a) > 0 {
		fd = int32(u(0))
	}
	L := uint32(len(m.arg))
	switch name {
	case "args_sizes_get":
		m.put32(u(0), 1)
		m.put32(u(1), L+1)
	case "args_get":
		m.check(u(0), 4)
		m.check(u(1), L+1)
		m.mem.WriteUint32Le(u(0), u(1))
		m.mem.Write(u(1), append([]byte(m.arg), 0))
	case "environ_sizes_get":
		m.put32(u(0), 0)
		m.put32(u(1), 0)
	case "environ_get":
		m.check(u(0), 0)
		m.check(u(1), 0)
	case "clock_res_get":
		if u(0) > 1 {
			fail(eINVAL)
		}
		m.put64(u(1), 1)
	case "clock_time_get":
		var t int64
		switch u(0) {
		case 0:
			t = m.wall()
		case 1:
			t = m.tick()
		default:
			fail(eINVAL)
		}
		m.put64(u(2), uint64(t))
	case "fd_advise":
		m.need(fd)
		if u(3)&0xff > 5 {
			fail(eINVAL)
		}
	case "fd_allocate":
		m.need(fd)
		switch t := int64(a[1] + a[2]); {
		case t < 0:
			fail(eINVAL)
		case t > 0:
			fail(eNOSYS)
		}
	case "fd_close":
		m.need(fd)
		m.closed[fd] = true
	case "fd_datasync", "fd_sync":
		m.need(fd)
	case "fd_fdstat_get":
		m.check(u(1), 24)
		m.need(fd)
		b := make([]byte, 24)
		b[0] = 1
		binary.LittleEndian.PutUint64(b[8:], 0x8e001ff)
		m.mem.Write(u(1), b)
	case "fd_fdstat_set_flags":
		f := u(1) & 0xffff
		if f&(1<<1|1<<3|1<<4) != 0 {
			fail(eINVAL)
		}
		m.need(fd)
		if f&(1<<2) != 0 {
			fail(eNOSYS)
		}
	case "fd_fdstat_set_rights":
		fail(eNOSYS)
	case "fd_filestat_get":
		m.check(u(1), 64)
		m.need(fd)
		b := make([]byte, 64)
		b[16] = 1
		binary.LittleEndian.PutUint64(b[24:], 1)
		m.mem.Write(u(1), b)
	case "fd_filestat_set_size", "fd_seek", "fd_tell":
		m.need(fd)
		fail(eNOSYS)
	case "fd_filestat_set_times":
		m.need(fd)
		m.times(u(3))
		panic(&specTrap{})
	case "fd_pread":
		m.need(fd)
		m.readv(u(1), u(2), "fail")
		m.put32(u(4), 0)
	case "fd_prestat_get":
		m.need(fd)
		m.put64(u(1), 0)
	case "fd_prestat_dir_name":
		m.need(fd)
		if u(2) > 0 {
			fail(eNAMETOOLONG)
		}
		m.check(u(1), 0)
	case "fd_pwrite":
		m.need(fd)
		m.writev(u(1), u(2), "empty", nil)
		m.put32(u(4), 0)
	case "fd_read":
		m.need(fd)
		if fd == 0 {
			m.readv(u(1), u(2), "eof")
		} else {
			m.readv(u(1), u(2), "fail")
		}
		m.put32(u(3), 0)
	case "fd_readdir":
		if u(2) < 24 {
			fail(eINVAL)
		}
		fail(eBADF)
	case "fd_renumber":
		if !m.open(fd) || int32(u(1)) < 0 {
			fail(eBADF)
		}
		fail(eNOTSUP)
	case "fd_write":
		m.need(fd)
		var n uint32
		switch fd {
		case 0:
			m.writev(u(1), u(2), "none", nil)
		case 1:
			n = m.writev(u(1), u(2), "stream", m.stdout)
		case 2:
			n = m.writev(u(1), u(2), "stream", m.stderr)
		}
		m.put32(u(3), n)
	case "path_create_directory", "path_remove_directory", "path_unlink_file", "path_rename":
		m.path(fd, u(1), u(2))
	case "path_filestat_get", "path_link", "path_open":
		m.path(fd, u(2), u(3))
	case "path_filestat_set_times":
		m.times(u(6))
		m.path(fd, u(2), u(3))
	case "path_readlink":
		if u(2) == 0 || u(4) == 0 {
			fail(eINVAL)
		}
		m.path(fd, u(1), u(2))
	case "path_symlink":
		m.need(int32(u(2)))
		fail(eNOTDIR)
	case "poll_oneoff":
		m.poll(u(0), u(1), u(2), u(3))
	case "proc_exit":
		panic(&specExit{u(0)})
	case "proc_raise":
		fail(eNOSYS)
	case "sched_yield":
	case "random_get":
		m.check(u(0), u(1))
		m.r.Read(m.bytes(u(0), u(1)))
	case "sock_accept", "sock_recv", "sock_shutdown":
		fail(eBADF)
	case "sock_send":
		if u(3) != 0 {
			fail(eNOTSUP)
		}
		fail(eBADF)
	default:
		panic("not in §10.5: " + name)
	}
	return 0
}

// poll is poll_oneoff, §10.5 steps 1 to 5 and the wrapped sizes.
func (m *specWASI) poll(in, out, n, nevents uint32) {
	if n == 0 {
		fail(eINVAL)
	}
	lin, lout := n*48, n*32
	m.check(in, lin)
	m.check(out, lout)
	m.mem.Write(out, make([]byte, lout))
	m.put32(nevents, n)
	T, k := int64(math.MaxInt64), uint32(0)
	var deferred []uint64
	event := func(userdata uint64, errno uint16, typ byte) {
		if 32*uint64(k)+14 > uint64(lout) {
			panic(&specTrap{})
		}
		m.mem.WriteUint64Le(out+32*k, userdata)
		m.mem.WriteUint16Le(out+32*k+8, errno)
		m.mem.WriteByte(out+32*k+10, typ)
		k++
	}
	for i := uint32(0); i < n; i++ {
		s := in + 48*i
		if 48*uint64(i)+16 > uint64(lin) {
			panic(&specTrap{})
		}
		userdata, _ := m.mem.ReadUint64Le(s)
		tag, _ := m.mem.ReadByte(s + 8)
		switch tag {
		case 0:
			if 48*uint64(i)+48 > uint64(lin) {
				panic(&specTrap{})
			}
			timeout, _ := m.mem.ReadUint64Le(s + 24)
			flags, _ := m.mem.ReadUint16Le(s + 40)
			switch flags {
			case 0:
				T = min(T, int64(timeout))
				event(userdata, 0, 0)
			case 1:
				fail(eNOTSUP)
			default:
				fail(eINVAL)
			}
		case 1, 2:
			if 48*uint64(i)+20 > uint64(lin) {
				panic(&specTrap{})
			}
			d, _ := m.mem.ReadUint32Le(s + 16)
			fd := int32(d)
			switch {
			case fd < 0:
				fail(eBADF)
			case tag == 1 && m.open(fd):
				deferred = append(deferred, userdata)
			case tag == 1:
				event(userdata, eBADF, 1)
			case m.open(fd):
				event(userdata, eNOTSUP, 2)
			default:
				event(userdata, eBADF, 2)
			}
		default:
			fail(eINVAL)
		}
	}
	if len(deferred) == 0 {
		m.sleep(T)
		return
	}
	if !m.open(0) {
		fail(eBADF)
	}
	for _, ud := range deferred {
		event(ud, 0, 1)
	}
}

// openOnSpec instantiates code on wazero with specWASI as its WASI.
func openOnSpec(t *testing.T, code []byte, s *session) wasiInstance {
	t.Helper()
	ctx := context.Background()
	h := s.header
	newVirtualWASI(s) // only for s.clock, which the runner reads; specWASI keeps its own
	m := newSpecWASI(h.Seed, s.seg.number, s.seg.clock, h.WallBase, h.ModuleName, s.events.writer(EventStdout), s.events.writer(EventStderr))
	rt := wazero.NewRuntime(ctx)
	b := rt.NewHostModuleBuilder(wasiModule)
	for _, f := range abivectors.WASIFuncs {
		var params, results []api.ValueType
		for _, c := range f.Params {
			params = append(params, map[rune]api.ValueType{'i': api.ValueTypeI32, 'I': api.ValueTypeI64}[c])
		}
		if f.Name != "proc_exit" {
			results = []api.ValueType{api.ValueTypeI32}
		}
		name, n := f.Name, len(f.Params)
		b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, mod api.Module, stack []uint64) {
			m.mem = mod.Memory()
			// The clock a trapping call moved is the instance's last.
			defer func() { s.clock.now = m.c }()
			errno := m.call(name, stack[:n])
			if len(results) > 0 {
				stack[0] = uint64(errno)
			}
		}), params, results).Export(name)
	}
	if _, err := b.Instantiate(ctx); err != nil {
		rt.Close(ctx)
		t.Fatal(err)
	}
	mod, err := rt.InstantiateWithConfig(ctx, code, wazero.NewModuleConfig().WithStartFunctions())
	if err != nil {
		rt.Close(ctx)
		t.Fatal(err)
	}
	s.mem = mod.Memory()
	return &funcWASIInstance{
		closeFn: func() { rt.Close(ctx) },
		callFn: func(name string) (uint32, string) {
			res, err := mod.ExportedFunction(name).Call(ctx)
			var exit *specExit
			switch {
			case errors.As(err, &exit):
				return 0, exit.Error()
			case err != nil:
				return 0, "trap"
			}
			return wazeroOutcome(res, nil)
		},
	}
}
