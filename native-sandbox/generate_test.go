package sandbox

// Tests of what each platform's launcher generates (bwrap argv, seccomp
// program, Seatbelt profile, Windows settings). They are pure, so they run
// on every platform.

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"io/fs"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/bpf"
)

func testSpec() *Spec {
	return &Spec{
		ReadOnly:  []string{"/usr", "/work/ws/vendor"},
		ReadWrite: []string{"/work/ws"},
		Protected: []string{".git"},
		Path:      []string{"/usr/bin"},
		Env:       map[string]string{"LANG": "C", "TOKEN": "s3cret"},
		Limits:    Limits{Wall: time.Minute, CPU: 10 * time.Second, Memory: 1 << 30, FileSize: 1 << 20},
	}
}

func TestBwrapArgs(t *testing.T) {
	spec := testSpec()
	plan := &bwrapPlan{uid: 1000, gid: 1000, helperLibs: []string{"/lib64/ld-linux-x86-64.so.2", "/usr/lib/libc.so.6"}, rlimits: spec.rlimits(), absent: map[string]bool{}}
	opts, cmd, sources := bwrapArgs(spec, plan, "/usr/bin/git", []string{"git", "status"})
	if sources != nil {
		t.Errorf("an unstaged plan lists staged sources: %q", sources)
	}
	joined := " " + strings.Join(opts, " ") + " "
	for _, want := range []string{
		"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net", "--disable-userns",
		"--as-pid-1", "--die-with-parent", "--new-session", "--cap-drop ALL", "--clearenv",
		"--proc /proc", "--dev /dev", "--seccomp 4", "--json-status-fd 5", "--block-fd 6", "--chdir /work/ws",
		"--setenv GOMAXPROCS 1", "--setenv GOGC off",
		// /dev/shm a sized tmpfs, then /dev read-only; /tmp sized too.
		"--dev /dev --size 67108864 --tmpfs /dev/shm --remount-ro /dev --size 67108864 --tmpfs /tmp",
	} {
		if !strings.Contains(joined, " "+want+" ") {
			t.Errorf("bwrap options lack %q:\n%s", want, joined)
		}
	}
	// Never the host's network, devices or a writable bind of a read-only path.
	for _, bad := range []string{"--share-net", "--dev-bind", "--bind /usr", "--cap-add"} {
		if strings.Contains(joined, " "+bad) {
			t.Errorf("bwrap options contain %q", bad)
		}
	}
	// The environment is set only after it is cleared.
	if strings.Index(joined, "--clearenv") > strings.Index(joined, "--setenv") {
		t.Error("--setenv before --clearenv")
	}
	// Mounts go shallow to deep: the read-only vendor dir and the protected
	// .git land on top of the writable root. libc is covered by /usr.
	mounts := []string{}
	for i, o := range opts {
		if o == "--bind" || o == "--ro-bind" {
			mounts = append(mounts, o+" "+opts[i+1])
		}
	}
	want := []string{"--ro-bind /usr", "--ro-bind /lib64/ld-linux-x86-64.so.2", "--bind /work/ws", "--ro-bind /work/ws/vendor", "--ro-bind /work/ws/.git"}
	if !slices.Equal(mounts, want) {
		t.Errorf("mounts:\n%v\nwant:\n%v", mounts, want)
	}
	// A protected path that does not exist gets a read-only tmpfs.
	plan.absent["/work/ws/.git"] = true
	opts, _, _ = bwrapArgs(spec, plan, "/usr/bin/git", []string{"git", "status"})
	if j := strings.Join(opts, " "); !strings.Contains(j, "--tmpfs /work/ws/.git --remount-ro /work/ws/.git") {
		t.Errorf("absent protected path: %s", j)
	}
	// The command: the helper by descriptor, its configuration, the tool.
	if cmd[0] != "/proc/self/fd/7" || cmd[1] != helperArg || !slices.Equal(cmd[3:], []string{"/usr/bin/git", "git", "status"}) {
		t.Errorf("command: %q", cmd)
	}
	var cfg helperConfig
	if err := json.Unmarshal([]byte(cmd[2]), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.ReportFD != fdReport || cfg.EnvFD != fdEnv ||
		cfg.Landlock == nil || !slices.Equal(cfg.Landlock.ReadWrite, []string{"/work/ws"}) {
		t.Errorf("helper configuration: %+v", cfg)
	}
	// The tool's environment is neither the helper's (a dynamic loader
	// would honour LD_PRELOAD in it) nor on the command line (ps).
	if strings.Contains(cmd[2], "s3cret") || strings.Contains(joined, "s3cret") || strings.Contains(joined, "LANG") {
		t.Errorf("the tool's environment is on bwrap's command line: %s %s", joined, cmd[2])
	}
	names := map[string]uint64{}
	for _, r := range cfg.Rlimits {
		names[r.Name] = r.Cur
	}
	if names["cpu"] != 10 || names["as"] != 1<<30 || names["fsize"] != 1<<20 || names["core"] != 0 || len(names) != 4 {
		t.Errorf("rlimits: %+v", cfg.Rlimits)
	}
}

// seccompData lays out struct seccomp_data for x/net/bpf's VM, which loads
// words big-endian: each 32-bit field the filter reads is stored
// big-endian at the offset where the kernel's little-endian layout has it.
func seccompData(nr uint32, arch uint32, args ...uint64) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[0:], nr)
	binary.BigEndian.PutUint32(b[4:], arch)
	for i, a := range args {
		binary.BigEndian.PutUint32(b[16+8*i:], uint32(a))
		binary.BigEndian.PutUint32(b[20+8*i:], uint32(a>>32))
	}
	return b
}

func TestSeccompFilter(t *testing.T) {
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		t.Skip("syscall numbers below are for amd64 and arm64")
	}
	raw, names, err := seccompFilter()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(names, "io_uring_setup") || !slices.Contains(names, "ptrace") || !slices.Contains(names, "keyctl") {
		t.Errorf("blocked: %v", names)
	}
	var ins []bpf.RawInstruction
	for i := 0; i+8 <= len(raw); i += 8 {
		ins = append(ins, bpf.RawInstruction{Op: binary.LittleEndian.Uint16(raw[i:]), Jt: raw[i+2], Jf: raw[i+3], K: binary.LittleEndian.Uint32(raw[i+4:])})
	}
	prog, ok := bpf.Disassemble(ins)
	if !ok {
		t.Fatal("the filter does not disassemble")
	}
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatal(err)
	}
	const (
		allow = 0x7fff0000
		eperm = 0x00050001
		enosy = 0x00050026
	)
	type call struct {
		name string
		nr   uint32
		arch uint32
		args []uint64
		want int
	}
	native := uint32(0xc000003e) // AUDIT_ARCH_X86_64
	nrs := map[string]uint32{"read": 0, "ioctl": 16, "socket": 41, "clone": 56, "ptrace": 101, "io_uring_setup": 425, "clone3": 435, "keyctl": 250, "unshare": 272}
	if runtime.GOARCH == "arm64" {
		native = 0xc00000b7
		nrs = map[string]uint32{"read": 63, "ioctl": 29, "socket": 198, "clone": 220, "ptrace": 117, "io_uring_setup": 425, "clone3": 435, "keyctl": 219, "unshare": 97}
	}
	calls := []call{
		{"read", nrs["read"], native, nil, allow},
		{"ptrace", nrs["ptrace"], native, nil, eperm},
		{"io_uring_setup", nrs["io_uring_setup"], native, nil, eperm},
		{"keyctl", nrs["keyctl"], native, nil, eperm},
		{"unshare", nrs["unshare"], native, []uint64{0x10000000}, eperm},
		{"ioctl TCGETS", nrs["ioctl"], native, []uint64{0, 0x5401}, allow},
		{"ioctl TIOCSTI", nrs["ioctl"], native, []uint64{0, 0x5412}, eperm},
		{"ioctl TIOCSTI high bits", nrs["ioctl"], native, []uint64{0, 1<<32 | 0x5412}, eperm},
		{"ioctl TIOCLINUX", nrs["ioctl"], native, []uint64{0, 0x541C}, eperm},
		{"socket AF_INET", nrs["socket"], native, []uint64{2, 1}, allow},
		{"socket AF_UNIX", nrs["socket"], native, []uint64{1, 1}, allow},
		{"socket AF_VSOCK", nrs["socket"], native, []uint64{40, 1}, eperm},
		{"socket AF_PACKET", nrs["socket"], native, []uint64{17, 3}, eperm},
		{"clone thread", nrs["clone"], native, []uint64{0x3d0f00}, allow},
		{"clone CLONE_NEWUSER", nrs["clone"], native, []uint64{0x10000000 | 17}, eperm},
		{"clone CLONE_NEWNS", nrs["clone"], native, []uint64{0x00020000 | 17}, eperm},
		{"clone3", nrs["clone3"], native, nil, enosy},
		{"foreign ABI", 20, 0x40000003 /* AUDIT_ARCH_I386 */, nil, eperm},
	}
	if runtime.GOARCH == "amd64" {
		calls = append(calls, call{"x32 getpid", 0x40000000 | 39, native, nil, enosy})
	}
	for _, c := range calls {
		got, err := vm.Run(seccompData(c.nr, c.arch, c.args...))
		if err != nil || got != c.want {
			t.Errorf("%s: %#x, %v; want %#x", c.name, got, err, c.want)
		}
	}
}

func TestSeatbeltProfile(t *testing.T) {
	spec := testSpec()
	// A path built to break out of a string literal in SBPL.
	evil := `/work/x") (allow default) ("`
	spec.ReadOnly = append(spec.ReadOnly, evil)
	profile, params := seatbeltProfile(spec)
	if !strings.HasPrefix(profile, "(version 1)\n(deny default)\n") {
		t.Errorf("not deny-by-default:\n%s", profile)
	}
	for _, p := range append(spec.ReadOnly, spec.ReadWrite...) {
		if strings.Contains(profile, p) {
			t.Errorf("path %q pasted into the profile", p)
		}
	}
	for _, bad := range []string{"(allow default", "(allow network", "(allow file-write* (subpath \"/", "(allow mach", "(import"} {
		if strings.Contains(profile, bad) {
			t.Errorf("profile contains %q", bad)
		}
	}
	for _, want := range []string{
		`(subpath (param "RO2"))`,
		`(require-all (subpath (param "RW0")) (require-not (require-any (subpath (param "PR0")))))`,
	} {
		if !strings.Contains(profile, want) {
			t.Errorf("profile lacks %s:\n%s", want, profile)
		}
	}
	wantParams := []string{"-D", "RO0=/usr", "-D", "RO1=/work/ws/vendor", "-D", "RO2=" + evil, "-D", "RW0=/work/ws", "-D", "PR0=/work/ws/.git"}
	if !slices.Equal(params, wantParams) {
		t.Errorf("params %q\nwant %q", params, wantParams)
	}
	args := seatbeltArgs(spec, "/usr/bin/git", []string{"git", "log", "; rm -rf /"})
	if args[0] != sandboxExec || args[1] != "-p" || args[2] != profile || !slices.Equal(args[len(args)-4:], []string{"--", "/usr/bin/git", "log", "; rm -rf /"}) {
		t.Errorf("sandbox-exec argv: %q", args)
	}
}

func TestWindowsPlan(t *testing.T) {
	spec := &Spec{
		ReadOnly:  []string{`C:\tools`},
		ReadWrite: []string{`C:\Users\bob\work`},
		Protected: []string{".git"},
		Env:       map[string]string{"LANG": "C"},
		Limits:    Limits{Wall: time.Minute, Processes: 8, Memory: 256 << 20, CPU: 2 * time.Second},
	}
	s, err := windowsPlan(spec, `C:\tools\git.exe`, []string{"git", "commit", "-m", `say "hi" \ bye`})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Capabilities) != 0 || !s.KillOnClose || s.AllowBreakaway {
		t.Errorf("capabilities %v, kill on close %v, breakaway %v", s.Capabilities, s.KillOnClose, s.AllowBreakaway)
	}
	if s.ActiveProcesses != 8 || s.JobMemory != 256<<20 || s.ProcessCPU != 20_000_000 {
		t.Errorf("job limits: %+v", s)
	}
	wantGrants := []string{`allow read C:\tools`, `allow write C:\Users\bob\work`, `deny write C:\Users\bob\work\.git`}
	var grants []string
	for _, g := range s.Grants {
		grants = append(grants, g.String())
	}
	if !slices.Equal(grants, wantGrants) {
		t.Errorf("grants %q\nwant %q", grants, wantGrants)
	}
	if want := `C:\tools\git.exe commit -m "say \"hi\" \ bye"`; s.CommandLine != want {
		t.Errorf("command line %s\nwant %s", s.CommandLine, want)
	}
	if !slices.Equal(s.Env, []string{"LANG=C"}) || s.Dir != `C:\Users\bob\work` {
		t.Errorf("env %v dir %s", s.Env, s.Dir)
	}
	for _, p := range []string{`C:\Windows`, `C:\Windows\System32\config\SAM`, `C:\Program Files\Git`, `C:\ProgramData\x`, `C:\Users\bob`,
		`C:\Users\bob\Desktop`, `C:\Users\bob\NTUSER.DAT`, `D:\`, `/usr`} {
		bad := *spec
		bad.ReadWrite = []string{p}
		bad.Protected = nil
		if _, err := windowsPlan(&bad, `C:\tools\git.exe`, []string{"git"}); !errors.Is(err, ErrRefused) {
			t.Errorf("read_write %s: %v; want a refusal", p, err)
		}
	}
}

func TestComposeCommandLine(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{`a`, `b c`}, `a "b c"`},
		{[]string{`x`, ``}, `x ""`},
		{[]string{`x`, `a\b`}, `x a\b`},
		{[]string{`x`, `a\"b`}, `x "a\\\"b"`},
		{[]string{`x`, `tail\ `}, `x "tail\ "`},
		{[]string{`x`, `end\\`, `q"`}, `x end\\ "q\""`},
		{[]string{`x`, `sp ace\`}, `x "sp ace\\"`},
		{[]string{`x`, `& | ^ %PATH%`}, `x "& | ^ %PATH%"`},
	} {
		if got := composeCommandLine(tc.argv); got != tc.want {
			t.Errorf("%q: %s; want %s", tc.argv, got, tc.want)
		}
	}
}

type fakeFile struct {
	fakeExecutable
	mode fs.FileMode
}

func (f fakeFile) Mode() fs.FileMode { return f.mode }

func TestResolveExecutable(t *testing.T) {
	files := map[string]fs.FileMode{"/usr/bin/git": 0o755, "/opt/bin/git": 0o755, "/usr/bin/data": 0o644, `C:\tools\git.exe`: 0o644, `C:\tools\build.bat`: 0o644}
	stat := func(p string) (fs.FileInfo, error) {
		if m, ok := files[p]; ok {
			return fakeFile{mode: m}, nil
		}
		return nil, &fs.PathError{Op: "stat", Path: p, Err: fs.ErrNotExist}
	}
	spec := &Spec{ReadOnly: []string{"/usr", "/opt", `C:\tools`}, Path: []string{"/usr/bin", "/opt/bin"}, Limits: Limits{Wall: time.Second}}
	win := &Spec{ReadOnly: []string{`C:\tools`}, Path: []string{`C:\tools`}, Limits: Limits{Wall: time.Second}}
	for _, tc := range []struct {
		spec       *Spec
		argv0, os  string
		want, fail string
	}{
		{spec, "git", "linux", "/usr/bin/git", ""},
		{spec, "/opt/bin/git", "linux", "/opt/bin/git", ""},
		{spec, "./git", "linux", "", "relative path"},
		{spec, "bin/git", "linux", "", "relative path"},
		{spec, "/usr/bin/data", "linux", "", "not an executable"},
		{spec, "/bin/sh", "linux", "", "outside every read_only"},
		{spec, "nosuch", "linux", "", "not found in the spec's path"},
		{&Spec{ReadOnly: []string{"/usr"}}, "git", "linux", "", "has no path"},
		{win, "git", "windows", `C:\tools\git.exe`, ""},
		{win, `C:\tools\build.bat`, "windows", "", "batch file"},
		{win, `C:\tools\BUILD.CMD`, "windows", "", "batch file"},
		{win, "build.bat", "windows", "", "batch file"},
	} {
		got, err := resolveExecutable(tc.spec, tc.argv0, tc.os, stat)
		switch {
		case tc.fail == "" && (err != nil || got != tc.want):
			t.Errorf("%s on %s: %q, %v; want %q", tc.argv0, tc.os, got, err, tc.want)
		case tc.fail != "" && (!errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.fail)):
			t.Errorf("%s on %s: %q, %v; want a refusal with %q", tc.argv0, tc.os, got, err, tc.fail)
		}
	}
}

func TestCapture(t *testing.T) {
	c := &capture{max: 5}
	for _, s := range []string{"abc", "defg", "hij"} {
		if n, err := c.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("write %q: %d, %v", s, n, err)
		}
	}
	if c.buf.String() != "abcde" || !c.truncated {
		t.Errorf("kept %q, truncated %v", c.buf.String(), c.truncated)
	}
}

func TestExplainEveryPlatform(t *testing.T) {
	spec := testSpec()
	for goos, want := range map[string]string{"linux": "--unshare-net", "darwin": "(deny default)", "windows": "kill on job close: true"} {
		s := *spec
		if goos == "windows" {
			s = Spec{ReadOnly: []string{`C:\tools`}, ReadWrite: []string{`C:\work`}, Path: []string{`C:\tools`}, Limits: spec.Limits}
		}
		out, err := Explain(&s, goos, []string{"git", "status"})
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("%s: %v\n%s", goos, err, out)
		}
	}
	if _, err := Explain(spec, "plan9", nil); !errors.Is(err, ErrUnsupported) {
		t.Errorf("plan9: %v", err)
	}
	spec.Network.Allow = []string{"example.com:443"}
	if _, err := Explain(spec, "linux", nil); !errors.Is(err, ErrRefused) {
		t.Errorf("allowlist: %v", err)
	}
}
