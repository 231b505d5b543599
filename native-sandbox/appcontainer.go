package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// windowsSettings is what the Windows launcher applies: a Job Object and an
// AppContainer. It is computed by a pure function so that its
// deny-by-default shape is tested on every platform.
type windowsSettings struct {
	// Container is the AppContainer profile name, derived from the spec so
	// that the same grants reuse one profile.
	Container string
	// Capabilities are the AppContainer capability SIDs granted: none, so
	// no network (internetClient) and no loopback.
	Capabilities []string
	// Job limits. Kill-on-close: closing the launcher's handle kills every
	// process in the job; breakaway is never allowed.
	KillOnClose     bool
	AllowBreakaway  bool
	ActiveProcesses uint32
	// JobMemory bounds the committed memory of all the job's processes
	// together (limits.memory is the whole sandbox's, not each process's).
	JobMemory uint64
	// ProcessCPU is per-process user time, in 100 ns units.
	ProcessCPU int64
	// Grants are the ACL entries added for the AppContainer SID, in order;
	// Deny entries (protected paths) are written before allows by Windows.
	Grants []aclGrant
	// CommandLine is argv composed for CreateProcess (no shell).
	CommandLine string
	// Env is the whole environment block, sorted.
	Env []string
	// Dir is the working directory.
	Dir string
	// Flags describe the process creation: no console window, no
	// inherited handles but stdio.
	Flags []string
}

type aclGrant struct {
	Path   string
	Access string // "read" (read and execute) or "write" (modify)
	Deny   bool   // deny write: protected paths
}

func (g aclGrant) String() string {
	verb := "allow"
	if g.Deny {
		verb = "deny"
	}
	return fmt.Sprintf("%s %s %s", verb, g.Access, g.Path)
}

// systemRoots are folders whose ACLs the launcher refuses to change (an
// AppContainer already reads what it needs of them): the system, programs,
// machine-wide data, the registry hives, and user profiles' roots and
// desktops.
var systemRoots = []string{
	`C:\Windows`, `C:\Program Files`, `C:\Program Files (x86)`, `C:\ProgramData`,
	`C:\Windows\System32\config`, `C:\Users`, `C:\Recovery`, `C:\System Volume Information`,
}

// windowsRefusal returns why p may not be granted, or "".
func windowsRefusal(p string) string {
	lp := strings.ToLower(strings.ReplaceAll(p, "/", `\`))
	if !isWinAbs(p) {
		return "is not a Windows path (like C:\\work)"
	}
	if isRoot(p) {
		return "is a whole drive"
	}
	base := lp[strings.LastIndex(lp, `\`)+1:]
	if base == "ntuser.dat" || strings.HasPrefix(base, "ntuser.dat.") || base == "usrclass.dat" {
		return "is a registry hive"
	}
	if strings.Contains(lp, `\desktop`) && strings.HasPrefix(lp, `c:\users\`) {
		return "is a desktop folder"
	}
	for _, r := range systemRoots {
		lr := strings.ToLower(r)
		if lp == lr || (strings.HasPrefix(lp, lr+`\`) && lr != `c:\users`) {
			return "is a system folder (" + r + ")"
		}
	}
	// C:\Users\NAME itself (a profile root) is refused; folders inside a
	// profile (C:\Users\NAME\work) are fine.
	if strings.HasPrefix(lp, `c:\users\`) && !strings.Contains(lp[len(`c:\users\`):], `\`) {
		return "is a user profile's root"
	}
	return ""
}

// windowsPlan computes the Windows settings for a launch.
func windowsPlan(spec *Spec, exe string, argv []string) (*windowsSettings, error) {
	check := func(field string, paths []string) error {
		for i, p := range paths {
			if why := windowsRefusal(p); why != "" {
				return refused("list only your own folders; AppContainers already read what they need of the system",
					"%s[%d] %q %s, whose permissions agentrt will not change", field, i, p, why)
			}
		}
		return nil
	}
	if err := check("read_only", spec.ReadOnly); err != nil {
		return nil, err
	}
	if err := check("read_write", spec.ReadWrite); err != nil {
		return nil, err
	}
	h := sha256.New()
	for _, p := range append(append(append([]string{}, spec.ReadOnly...), "|"), spec.ReadWrite...) {
		h.Write([]byte(strings.ToLower(p) + "\x00"))
	}
	s := &windowsSettings{
		Container:    "agentrt.sandbox." + hex.EncodeToString(h.Sum(nil)[:8]),
		Capabilities: []string{},
		KillOnClose:  true,
		CommandLine:  composeCommandLine(append([]string{exe}, argv[1:]...)),
		Env:          spec.env(";"),
		Dir:          strings.ReplaceAll(spec.workdir(), "/", `\`),
		Flags:        []string{"EXTENDED_STARTUPINFO_PRESENT", "CREATE_SUSPENDED", "CREATE_NO_WINDOW", "CREATE_UNICODE_ENVIRONMENT", "handle list: stdin, stdout, stderr", "job list: the job"},
	}
	if s.Dir == "/" {
		s.Dir = ""
	}
	if n := spec.Limits.Processes; n > 0 {
		s.ActiveProcesses = uint32(n)
	}
	if m := spec.Limits.Memory; m > 0 {
		s.JobMemory = uint64(m)
	}
	if c := spec.Limits.CPU; c > 0 {
		s.ProcessCPU = int64(c / 100)
	}
	for _, p := range spec.ReadOnly {
		s.Grants = append(s.Grants, aclGrant{Path: p, Access: "read"})
	}
	for _, p := range spec.ReadWrite {
		s.Grants = append(s.Grants, aclGrant{Path: p, Access: "write"})
	}
	for _, p := range spec.protectedPaths() {
		s.Grants = append(s.Grants, aclGrant{Path: p, Access: "write", Deny: true})
	}
	return s, nil
}

// composeCommandLine quotes argv for CreateProcess the way the C runtime's
// parser (CommandLineToArgvW) splits it back: no shell ever sees it.
func composeCommandLine(argv []string) string {
	var b strings.Builder
	for i, a := range argv {
		if i > 0 {
			b.WriteByte(' ')
		}
		if a != "" && !strings.ContainsAny(a, " \t\n\v\"") {
			b.WriteString(a)
			continue
		}
		b.WriteByte('"')
		slashes := 0
		for _, c := range []byte(a) {
			switch c {
			case '\\':
				slashes++
			case '"':
				b.WriteString(strings.Repeat(`\`, 2*slashes+1))
				slashes = 0
			default:
				b.WriteString(strings.Repeat(`\`, slashes))
				slashes = 0
			}
			if c != '\\' {
				b.WriteByte(c)
			}
		}
		b.WriteString(strings.Repeat(`\`, 2*slashes))
		b.WriteByte('"')
	}
	return b.String()
}

// String renders the settings for agentrt sandbox explain.
func (s *windowsSettings) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "AppContainer profile: %s\n", s.Container)
	fmt.Fprintf(&b, "  capabilities: %s\n", orNone(s.Capabilities))
	fmt.Fprintf(&b, "Job Object:\n  kill on job close: %v\n  breakaway allowed: %v\n", s.KillOnClose, s.AllowBreakaway)
	fmt.Fprintf(&b, "  active processes: %s\n  job memory: %s\n  process CPU (100ns): %s\n",
		limitText(uint64(s.ActiveProcesses)), limitText(s.JobMemory), limitText(uint64(s.ProcessCPU)))
	b.WriteString("ACL entries for the AppContainer SID:\n")
	for _, g := range s.Grants {
		fmt.Fprintf(&b, "  %s\n", g)
	}
	fmt.Fprintf(&b, "Process:\n  command line: %s\n  directory: %s\n  flags: %s\n  environment: %s\n",
		s.CommandLine, s.Dir, strings.Join(s.Flags, ", "), orNone(s.Env))
	return b.String()
}

func orNone(l []string) string {
	if len(l) == 0 {
		return "(none)"
	}
	return strings.Join(l, " ")
}

func limitText(v uint64) string {
	if v == 0 {
		return "none"
	}
	return fmt.Sprint(v)
}
