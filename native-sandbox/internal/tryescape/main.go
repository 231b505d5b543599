//go:build linux

// Command tryescape is the escape suite's probe: run inside the sandbox, it
// attempts one attack with raw system calls, where a shell tool cannot, and
// prints the outcome as one line: "ok ..." when the attempt succeeded, or
// "errno NAME" with the error it got. The tests assert that line.
//
// Like flatpak's try-syscall, the calls use arguments that are invalid
// for the kernel (a bad descriptor, a null pointer), so an allowed call
// fails with EBADF, EFAULT or EINVAL while a blocked one fails with EPERM.
package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: tryescape MODE [ARGS]")
		os.Exit(2)
	}
	mode, args := os.Args[1], os.Args[2:]
	switch mode {
	case "write":
		report(os.WriteFile(args[0], []byte("escaped\n"), 0o644))
	case "read":
		b, err := os.ReadFile(args[0])
		if err == nil {
			fmt.Printf("ok %s", b)
			return
		}
		report(err)
	case "link":
		report(os.Link(args[0], args[1]))
	case "rename":
		report(os.Rename(args[0], args[1]))
	case "mknod":
		report(unix.Mknod(args[0], unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
	case "mkdir":
		report(os.Mkdir(args[0], 0o755))
	case "syscall":
		trySyscall(args[0])
	case "unix":
		c, err := net.Dial("unix", args[0])
		closeReport(c, err)
	case "tcp":
		c, err := net.DialTimeout("tcp", args[0], 2*time.Second)
		closeReport(c, err)
	case "udp":
		// A UDP "connection" succeeds without a route only if one exists;
		// the write shows whether a datagram could leave.
		c, err := net.Dial("udp", args[0])
		if err == nil {
			_, err = c.Write([]byte("x"))
		}
		closeReport(c, err)
	case "dns":
		addrs, err := net.LookupHost(args[0])
		if err == nil {
			fmt.Println("ok", addrs)
			return
		}
		fmt.Println("error", err)
	case "status":
		b, _ := os.ReadFile("/proc/self/status")
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "CapEff:") || strings.HasPrefix(l, "NoNewPrivs:") {
				fmt.Println(strings.Join(strings.Fields(l), " "))
			}
		}
	case "pids":
		ents, _ := os.ReadDir("/proc")
		var pids []string
		for _, e := range ents {
			if _, err := strconv.Atoi(e.Name()); err == nil {
				pids = append(pids, e.Name())
			}
		}
		fmt.Println("pids", strings.Join(pids, " "))
	case "procmem":
		f, err := os.OpenFile("/proc/1/mem", os.O_RDWR, 0)
		if err == nil {
			_, err = f.WriteAt([]byte{0}, 0x400000)
		}
		closeReport(f, err)
	case "umount":
		report(unix.Unmount(args[0], unix.MNT_DETACH))
	case "tty":
		f, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
		closeReport(f, err)
	case "ids":
		groups, _ := unix.Getgroups()
		ruid, euid, suid := unix.Getresuid()
		rgid, egid, sgid := unix.Getresgid()
		fmt.Printf("uid %d %d %d gid %d %d %d groups %v\n", ruid, euid, suid, rgid, egid, sgid, groups)
	case "env":
		for _, kv := range os.Environ() {
			fmt.Println(kv)
		}
	case "args":
		for _, a := range args {
			fmt.Printf("[%s]\n", a)
		}
	case "cat":
		b, err := os.ReadFile(args[0])
		if err != nil {
			report(err)
			return
		}
		os.Stdout.Write(b)
	case "spew":
		n, _ := strconv.Atoi(args[0])
		buf := make([]byte, 64<<10)
		for i := range buf {
			buf[i] = 'x'
		}
		for n > 0 {
			k := min(n, len(buf))
			os.Stdout.Write(buf[:k])
			os.Stderr.Write(buf[:min(k, 100)])
			n -= k
		}
	case "sleep":
		// The marker argument (args[0]) lets the host find this process.
		time.Sleep(time.Hour)
	case "grandchild":
		// Start a child in a new session that sleeps, say so, then either
		// sleep too (and be killed by the timeout) or exit at once.
		cmd := exec.Command("/proc/self/exe", "sleep", args[0])
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			report(err)
			return
		}
		fmt.Println("started", cmd.Process.Pid)
		if len(args) > 1 && args[1] == "exit" {
			return
		}
		time.Sleep(time.Hour)
	case "forkbomb":
		n := 0
		for {
			cmd := exec.Command("/proc/self/exe", "sleep", "bomb")
			if err := cmd.Start(); err != nil {
				fmt.Printf("forks %d then %s\n", n, errnoName(err))
				return
			}
			n++
			if n > 100000 {
				fmt.Println("ok unbounded")
				return
			}
		}
	case "alloc":
		var total int
		for {
			b, err := unix.Mmap(-1, 0, 16<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
			if err != nil {
				fmt.Printf("allocated %d MiB then %s\n", total, errnoName(err))
				return
			}
			b[0] = 1
			total += 16
			if total > 64<<10 {
				fmt.Println("ok unbounded")
				return
			}
		}
	case "spin":
		for {
		}
	default:
		fmt.Fprintln(os.Stderr, "tryescape: unknown mode", mode)
		os.Exit(2)
	}
}

func trySyscall(name string) {
	var e syscall.Errno
	switch name {
	case "io_uring_setup":
		_, _, e = unix.Syscall(unix.SYS_IO_URING_SETUP, 1, 0, 0) // NULL params: EFAULT if allowed
	case "ptrace":
		_, _, e = unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_PEEKDATA, 1, 0, 0, 0, 0)
	case "process_vm_writev":
		_, _, e = unix.Syscall6(unix.SYS_PROCESS_VM_WRITEV, 1, 0, 1, 0, 1, 0) // NULL iovecs: EFAULT if allowed
	case "process_vm_readv":
		_, _, e = unix.Syscall6(unix.SYS_PROCESS_VM_READV, 1, 0, 1, 0, 1, 0)
	case "bpf":
		_, _, e = unix.Syscall(unix.SYS_BPF, 0, 0, 0)
	case "perf_event_open":
		_, _, e = unix.Syscall6(unix.SYS_PERF_EVENT_OPEN, 0, 0, ^uintptr(0), ^uintptr(0), 0, 0)
	case "userfaultfd":
		_, _, e = unix.Syscall(unix.SYS_USERFAULTFD, ^uintptr(0), 0, 0) // bad flags: EINVAL if allowed
	case "keyctl":
		_, _, e = unix.Syscall(unix.SYS_KEYCTL, 0xffff, 0, 0)
	case "add_key":
		_, _, e = unix.Syscall6(unix.SYS_ADD_KEY, 0, 0, 0, 0, 0, 0)
	case "unshare":
		_, _, e = unix.Syscall(unix.SYS_UNSHARE, unix.CLONE_NEWUSER, 0, 0)
	case "setns":
		_, _, e = unix.Syscall(unix.SYS_SETNS, ^uintptr(0), 0, 0) // bad fd: EBADF if allowed
	case "mount":
		_, _, e = unix.Syscall6(unix.SYS_MOUNT, 0, 0, 0, 0, 0, 0)
	case "clone_newuser":
		// A raw clone that would create a user namespace: with no stack
		// and SIGCHLD it behaves like fork if allowed.
		r, _, err := unix.RawSyscall6(unix.SYS_CLONE, uintptr(unix.CLONE_NEWUSER|unix.SIGCHLD), 0, 0, 0, 0, 0)
		if err == 0 && r == 0 {
			os.Exit(0) // the child
		}
		e = err
	case "socket_vsock":
		_, _, e = unix.Syscall(unix.SYS_SOCKET, unix.AF_VSOCK, unix.SOCK_STREAM, 0)
	case "socket_packet":
		_, _, e = unix.Syscall(unix.SYS_SOCKET, unix.AF_PACKET, unix.SOCK_RAW, 0)
	case "socket_inet":
		fd, _, err := unix.Syscall(unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM, 0)
		if err == 0 {
			unix.Close(int(fd))
		}
		e = err
	case "tiocsti":
		c := byte('x')
		_, _, e = unix.Syscall(unix.SYS_IOCTL, 0, unix.TIOCSTI, uintptr(unsafe.Pointer(&c)))
	case "tiocsti_high":
		// The kernel truncates the request to 32 bits; the filter must too.
		c := byte('x')
		_, _, e = unix.Syscall(unix.SYS_IOCTL, 0, unix.TIOCSTI|1<<32, uintptr(unsafe.Pointer(&c)))
	case "tioclinux":
		c := byte(0)
		_, _, e = unix.Syscall(unix.SYS_IOCTL, 0, unix.TIOCLINUX, uintptr(unsafe.Pointer(&c)))
	case "personality":
		// ADDR_NO_RANDOMIZE: would turn off ASLR for what the tool execs.
		_, _, e = unix.Syscall(unix.SYS_PERSONALITY, 0x0040000, 0, 0)
	case "personality_query":
		// 0xffffffff only reads the persona; it is refused all the same.
		_, _, e = unix.Syscall(unix.SYS_PERSONALITY, 0xffffffff, 0, 0)
	case "mbind":
		// A zero-length range with MPOL_DEFAULT: 0 (or ENOSYS without NUMA)
		// if allowed.
		_, _, e = unix.Syscall6(unix.SYS_MBIND, 0, 0, 0, 0, 0, 0)
	case "modify_ldt":
		e = modifyLDT()
	case "x32":
		// getpid in the x32 ABI (__X32_SYSCALL_BIT | 39).
		_, _, e = unix.Syscall(0x40000000|39, 0, 0, 0)
	case "i386":
		// A kernel without the i386 ABI (CONFIG_IA32_EMULATION off, or
		// ia32_emulation=0) answers int 0x80 with a general protection
		// fault: reported as "fault", not a crash.
		debug.SetPanicOnFault(true)
		defer func() {
			if recover() != nil {
				fmt.Println("fault")
			}
		}()
		r := int80(20) // getpid in the i386 ABI
		if int64(r) < 0 {
			e = syscall.Errno(-int64(r))
		}
	default:
		fmt.Fprintln(os.Stderr, "tryescape: unknown syscall", name)
		os.Exit(2)
	}
	if e == 0 {
		fmt.Println("ok")
		return
	}
	fmt.Println("errno", errnoName(e))
}

func closeReport(c interface{ Close() error }, err error) {
	if err == nil {
		c.Close()
	}
	report(err)
}

func report(err error) {
	if err == nil {
		fmt.Println("ok")
		return
	}
	fmt.Println("errno", errnoName(err))
}

// errnoName returns the symbolic errno inside err, or the error text.
func errnoName(err error) string {
	var e syscall.Errno
	if errors.As(err, &e) {
		return unix.ErrnoName(e)
	}
	return err.Error()
}
