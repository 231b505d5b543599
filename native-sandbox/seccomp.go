package sandbox

import (
	"encoding/binary"
	"fmt"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
)

// blockedSyscalls are refused with EPERM inside the Linux sandbox: the
// attack surface that namespaces and dropped capabilities leave reachable,
// or that a tool never needs. A name missing from an architecture's table
// (e.g. legacy calls on arm64) is skipped for it.
var blockedSyscalls = []string{
	// io_uring performs file and network operations that seccomp cannot see.
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	// Debugging and cross-process memory access.
	"ptrace", "process_vm_readv", "process_vm_writev", "kcmp",
	// Kernel-wide state and large kernel attack surface.
	"kexec_load", "kexec_file_load", "bpf", "perf_event_open", "userfaultfd",
	"init_module", "finit_module", "delete_module", "reboot", "swapon", "swapoff",
	"acct", "syslog", "quotactl", "quotactl_fd", "settimeofday", "clock_settime",
	"clock_adjtime", "iopl", "ioperm", "uselib", "vhangup", "lookup_dcookie",
	"open_by_handle_at", "name_to_handle_at", "fanotify_init",
	// The kernel keyring is not namespaced.
	"keyctl", "add_key", "request_key",
	// Mount topology and namespaces: the sandbox's own are final.
	"mount", "umount2", "umount", "pivot_root", "chroot", "unshare", "setns",
	"fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr",
	// personality flags (READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE, MMAP_PAGE_ZERO)
	// weaken the tool's own hardening and have served kernel exploits; the
	// LDT is a classic x86 attack surface; mbind steers memory placement on
	// NUMA nodes. No tool we run needs them (flatpak and Docker's default
	// profile refuse them too), so there is no spec option to allow them.
	"personality", "modify_ldt", "mbind",
}

// allowedSocketFamilies are the socket families a tool may create; any other
// (AF_VSOCK, AF_PACKET, AF_BLUETOOTH, AF_ALG, ...) is refused with EPERM.
var allowedSocketFamilies = []uint32{
	1,  // AF_UNIX
	2,  // AF_INET
	10, // AF_INET6
	16, // AF_NETLINK (getaddrinfo asks the kernel for local addresses)
}

// Terminal ioctls that inject input into, or control, the terminal.
const (
	ioctlTIOCSTI   = 0x5412
	ioctlTIOCLINUX = 0x541C
)

// cloneNamespaceFlags are the clone(2) flags that create namespaces.
const cloneNamespaceFlags = 0x00020000 | // CLONE_NEWNS
	0x02000000 | // CLONE_NEWCGROUP
	0x04000000 | // CLONE_NEWUTS
	0x08000000 | // CLONE_NEWIPC
	0x10000000 | // CLONE_NEWUSER
	0x20000000 | // CLONE_NEWPID
	0x40000000 // CLONE_NEWNET

const (
	retErrnoEPERM  = uint32(seccomp.ActionErrno) | 1  // EPERM
	retErrnoENOSYS = uint32(seccomp.ActionErrno) | 38 // ENOSYS
)

// seccompFilter builds the sandbox's seccomp program for the running
// architecture, as the raw struct sock_filter array that bwrap --seccomp
// reads. It returns the blocked syscall names present on this architecture.
//
// Its shape, in order:
//
//  1. Any ABI other than the native one (i386 through int 0x80 on x86-64)
//     gets EPERM: a denylist keyed on native numbers says nothing about
//     another table.
//  2. Argument checks, comparing only the low 32 bits where the kernel
//     truncates the argument to an int (so TIOCSTI|1<<32 is still caught):
//     ioctl TIOCSTI/TIOCLINUX, socket families, clone with namespace flags;
//     clone3 gets ENOSYS (its flags sit in memory seccomp cannot read, and
//     libc falls back to clone on ENOSYS).
//  3. go-seccomp-bpf's program for the denylist, which also answers x32
//     calls (__X32_SYSCALL_BIT) with ENOSYS; everything else is allowed.
func seccompFilter() ([]byte, []string, error) {
	info, err := arch.GetInfo("")
	if err != nil {
		return nil, nil, fmt.Errorf("seccomp: %w", err)
	}
	var names []string
	for _, n := range blockedSyscalls {
		if _, ok := info.SyscallNames[n]; ok {
			names = append(names, n)
		}
	}
	policy := seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls:      []seccomp.SyscallGroup{{Action: seccomp.ActionErrno | 1, Names: names}},
	}
	tail, err := policy.Assemble()
	if err != nil {
		return nil, nil, fmt.Errorf("seccomp: %w", err)
	}

	nr := func(name string) uint32 { return uint32(info.SyscallNames[name]) }
	var p []bpf.Instruction
	// 1. native ABI only.
	p = append(p,
		bpf.LoadAbsolute{Off: 4, Size: 4}, // seccomp_data.arch
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.ID), SkipTrue: 1},
		bpf.RetConstant{Val: retErrnoEPERM},
		bpf.LoadAbsolute{Off: 0, Size: 4}, // seccomp_data.nr
	)
	// 2. ioctl(fd, TIOCSTI|TIOCLINUX): args[1] low word at offset 24
	// (little endian) or 28 (big endian); all targets we build are little.
	p = append(p,
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: nr("ioctl"), SkipTrue: 5},
		bpf.LoadAbsolute{Off: 24, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: ioctlTIOCSTI, SkipTrue: 2},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: ioctlTIOCLINUX, SkipTrue: 1},
		bpf.Jump{Skip: 1},
		bpf.RetConstant{Val: retErrnoEPERM},
	)
	// Reload nr for the next check (the ioctl path leaves an argument in A
	// but only falls through when nr was not ioctl, or returns).
	p = append(p, bpf.LoadAbsolute{Off: 0, Size: 4})
	// socket(family, ...): args[0] low word at offset 16.
	fam := allowedSocketFamilies
	p = append(p,
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: nr("socket"), SkipTrue: uint8(len(fam) + 2)},
		bpf.LoadAbsolute{Off: 16, Size: 4},
	)
	for i, f := range fam {
		p = append(p, bpf.JumpIf{Cond: bpf.JumpEqual, Val: f, SkipTrue: uint8(len(fam) - i)})
	}
	p = append(p, bpf.RetConstant{Val: retErrnoEPERM})
	p = append(p, bpf.LoadAbsolute{Off: 0, Size: 4})
	// clone(flags, ...): flags in args[0] low word.
	p = append(p,
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: nr("clone"), SkipTrue: 3},
		bpf.LoadAbsolute{Off: 16, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: cloneNamespaceFlags, SkipFalse: 1},
		bpf.RetConstant{Val: retErrnoEPERM},
		bpf.LoadAbsolute{Off: 0, Size: 4},
	)
	if n, ok := info.SyscallNames["clone3"]; ok {
		p = append(p,
			bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: uint32(n), SkipTrue: 1},
			bpf.RetConstant{Val: retErrnoENOSYS},
		)
	}
	// 3. the denylist; it reloads arch and nr itself.
	p = append(p, tail...)

	raw, err := bpf.Assemble(p)
	if err != nil {
		return nil, nil, fmt.Errorf("seccomp: %w", err)
	}
	out := make([]byte, 0, 8*len(raw))
	for _, ins := range raw {
		out = binary.LittleEndian.AppendUint16(out, ins.Op)
		out = append(out, ins.Jt, ins.Jf)
		out = binary.LittleEndian.AppendUint32(out, ins.K)
	}
	return out, names, nil
}
