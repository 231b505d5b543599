package sandbox

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

// The AppContainer calls that golang.org/x/sys/windows does not bind.
var (
	userenv                                    = windows.NewLazySystemDLL("userenv.dll")
	procCreateAppContainerProfile              = userenv.NewProc("CreateAppContainerProfile")
	procDeriveAppContainerSidFromContainerName = userenv.NewProc("DeriveAppContainerSidFromAppContainerName")
)

const (
	procThreadAttributeSecurityCapabilities = 0x00020009
	procThreadAttributeJobList              = 0x0002000D
	hresultAlreadyExists                    = 0x800700B7 // HRESULT_FROM_WIN32(ERROR_ALREADY_EXISTS)
)

// securityCapabilities is SECURITY_CAPABILITIES.
type securityCapabilities struct {
	AppContainerSid *windows.SID
	Capabilities    *windows.SIDAndAttributes
	CapabilityCount uint32
	Reserved        uint32
}

// appContainerSID creates the named profile, or finds it, and returns its SID.
func appContainerSID(name string) (*windows.SID, error) {
	n, err := windows.UTF16PtrFromString(name)
	if err != nil {
		return nil, err
	}
	var sid *windows.SID
	hr, _, _ := procCreateAppContainerProfile.Call(uintptr(unsafe.Pointer(n)), uintptr(unsafe.Pointer(n)), uintptr(unsafe.Pointer(n)), 0, 0, uintptr(unsafe.Pointer(&sid)))
	if uint32(hr) == hresultAlreadyExists {
		hr, _, _ = procDeriveAppContainerSidFromContainerName.Call(uintptr(unsafe.Pointer(n)), uintptr(unsafe.Pointer(&sid)))
	}
	if hr != 0 {
		return nil, fmt.Errorf("AppContainer profile %s: HRESULT %#x", name, uint32(hr))
	}
	return sid, nil
}

// grant adds the ACL entries for the AppContainer SID (inherited by what is
// below each path).
func grant(sid *windows.SID, grants []aclGrant) error {
	for _, g := range grants {
		sd, err := windows.GetNamedSecurityInfo(g.Path, windows.SE_FILE_OBJECT, windows.DACL_SECURITY_INFORMATION)
		if err != nil {
			return fmt.Errorf("%s: %w", g.Path, err)
		}
		dacl, _, err := sd.DACL()
		if err != nil {
			return fmt.Errorf("%s: %w", g.Path, err)
		}
		mask := windows.ACCESS_MASK(windows.GENERIC_READ | windows.GENERIC_EXECUTE)
		mode := windows.ACCESS_MODE(windows.GRANT_ACCESS)
		if g.Access == "write" {
			mask |= windows.GENERIC_WRITE | windows.DELETE
		}
		if g.Deny {
			mask, mode = windows.GENERIC_WRITE|windows.DELETE, windows.DENY_ACCESS
		}
		acl, err := windows.ACLFromEntries([]windows.EXPLICIT_ACCESS{{
			AccessPermissions: mask,
			AccessMode:        mode,
			Inheritance:       windows.SUB_CONTAINERS_AND_OBJECTS_INHERIT,
			Trustee: windows.TRUSTEE{
				TrusteeForm:  windows.TRUSTEE_IS_SID,
				TrusteeType:  windows.TRUSTEE_IS_WELL_KNOWN_GROUP,
				TrusteeValue: windows.TrusteeValueFromSID(sid),
			},
		}}, dacl)
		if err != nil {
			return fmt.Errorf("%s: %w", g.Path, err)
		}
		if err := windows.SetNamedSecurityInfo(g.Path, windows.SE_FILE_OBJECT, windows.DACL_SECURITY_INFORMATION, nil, nil, acl, nil); err != nil {
			return fmt.Errorf("%s: %w", g.Path, err)
		}
	}
	return nil
}

// launch runs argv in an AppContainer inside a Job Object. Untested on a
// real Windows machine in this repository's CI; the settings it applies are
// computed by windowsPlan, which is.
func launch(ctx context.Context, spec *Spec, argv []string, o *options) (*Result, error) {
	if _, _, err := launchUser(o); err != nil {
		return nil, err
	}
	if spec.Limits.FileSize > 0 {
		return nil, refused("drop limits.file_size on Windows (limits.disk bounds what the tool writes)", "limits.file_size cannot be enforced on Windows, which has no per-process file size limit")
	}
	disk, err := measureDisk(spec)
	if err != nil {
		return nil, err
	}
	exe, err := resolveExecutable(spec, argv[0], "windows", statFile)
	if err != nil {
		return nil, err
	}
	set, err := windowsPlan(spec, exe, argv)
	if err != nil {
		return nil, err
	}
	sid, err := appContainerSID(set.Container)
	if err != nil {
		return nil, refused("run on Windows 8 or later", "creating the AppContainer: %v", err)
	}
	if err := grant(sid, set.Grants); err != nil {
		return nil, refused("", "granting the AppContainer its paths: %v", err)
	}

	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return nil, refused("", "CreateJobObject: %v", err)
	}
	defer windows.CloseHandle(job) // kill on close: nothing survives
	var info windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION
	info.BasicLimitInformation.LimitFlags = windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
	if set.ActiveProcesses > 0 {
		info.BasicLimitInformation.LimitFlags |= windows.JOB_OBJECT_LIMIT_ACTIVE_PROCESS
		info.BasicLimitInformation.ActiveProcessLimit = set.ActiveProcesses
	}
	if set.JobMemory > 0 {
		info.BasicLimitInformation.LimitFlags |= windows.JOB_OBJECT_LIMIT_JOB_MEMORY
		info.JobMemoryLimit = uintptr(set.JobMemory)
	}
	if set.ProcessCPU > 0 {
		info.BasicLimitInformation.LimitFlags |= windows.JOB_OBJECT_LIMIT_PROCESS_TIME
		info.BasicLimitInformation.PerProcessUserTimeLimit = set.ProcessCPU
	}
	if _, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation, uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		return nil, refused("", "SetInformationJobObject: %v", err)
	}

	// stdio: inheritable ends for the child only.
	sa := &windows.SecurityAttributes{Length: uint32(unsafe.Sizeof(windows.SecurityAttributes{})), InheritHandle: 1}
	var outR, outW, errR, errW windows.Handle
	if err := windows.CreatePipe(&outR, &outW, sa, 0); err != nil {
		return nil, err
	}
	if err := windows.CreatePipe(&errR, &errW, sa, 0); err != nil {
		windows.CloseHandle(outR)
		windows.CloseHandle(outW)
		return nil, err
	}
	windows.SetHandleInformation(outR, windows.HANDLE_FLAG_INHERIT, 0)
	windows.SetHandleInformation(errR, windows.HANDLE_FLAG_INHERIT, 0)
	nul, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err
	}
	defer nul.Close()
	inH := windows.Handle(nul.Fd())
	windows.SetHandleInformation(inH, windows.HANDLE_FLAG_INHERIT, windows.HANDLE_FLAG_INHERIT)
	if o.stdin != nil {
		var inR, inW windows.Handle
		if err := windows.CreatePipe(&inR, &inW, sa, 0); err != nil {
			return nil, err
		}
		windows.SetHandleInformation(inW, windows.HANDLE_FLAG_INHERIT, 0)
		inH = inR
		defer windows.CloseHandle(inR)
		go func() {
			w := os.NewFile(uintptr(inW), "stdin")
			io.Copy(w, o.stdin)
			w.Close()
		}()
	}

	attrs, err := windows.NewProcThreadAttributeList(3)
	if err != nil {
		return nil, err
	}
	defer attrs.Delete()
	sc := securityCapabilities{AppContainerSid: sid}
	if err := attrs.Update(procThreadAttributeSecurityCapabilities, unsafe.Pointer(&sc), unsafe.Sizeof(sc)); err != nil {
		return nil, refused("", "AppContainer attribute: %v", err)
	}
	handles := []windows.Handle{inH, outW, errW}
	if err := attrs.Update(windows.PROC_THREAD_ATTRIBUTE_HANDLE_LIST, unsafe.Pointer(&handles[0]), uintptr(len(handles))*unsafe.Sizeof(handles[0])); err != nil {
		return nil, err
	}
	jobs := []windows.Handle{job}
	if err := attrs.Update(procThreadAttributeJobList, unsafe.Pointer(&jobs[0]), unsafe.Sizeof(jobs[0])); err != nil {
		return nil, refused("run on Windows 10 or later", "job list attribute: %v", err)
	}

	si := &windows.StartupInfoEx{ProcThreadAttributeList: attrs.List()}
	si.Cb = uint32(unsafe.Sizeof(*si))
	si.Flags = windows.STARTF_USESTDHANDLES
	si.StdInput, si.StdOutput, si.StdErr = inH, outW, errW
	env := set.Env
	sort.Strings(env)
	block, err := windowsEnvBlock(env)
	if err != nil {
		return nil, err
	}
	cmdline, err := windows.UTF16PtrFromString(set.CommandLine)
	if err != nil {
		return nil, err
	}
	app, err := windows.UTF16PtrFromString(exe)
	if err != nil {
		return nil, err
	}
	var dir *uint16
	if set.Dir != "" {
		if dir, err = windows.UTF16PtrFromString(set.Dir); err != nil {
			return nil, err
		}
	}
	var pi windows.ProcessInformation
	flags := uint32(windows.EXTENDED_STARTUPINFO_PRESENT | windows.CREATE_UNICODE_ENVIRONMENT | windows.CREATE_NO_WINDOW)
	start := time.Now()
	err = windows.CreateProcess(app, cmdline, nil, nil, true, flags, block, dir, &si.StartupInfo, &pi)
	windows.CloseHandle(outW)
	windows.CloseHandle(errW)
	if err != nil {
		windows.CloseHandle(outR)
		windows.CloseHandle(errR)
		return nil, refused("", "CreateProcess %s: %v", exe, err)
	}
	defer windows.CloseHandle(pi.Process)
	windows.CloseHandle(pi.Thread)

	stdout, stderr := o.captures(spec)
	var wg sync.WaitGroup
	for _, p := range []struct {
		h windows.Handle
		c *capture
	}{{outR, stdout}, {errR, stderr}} {
		wg.Add(1)
		go func(h windows.Handle, c *capture) {
			defer wg.Done()
			f := os.NewFile(uintptr(h), "pipe")
			io.Copy(c, f)
			f.Close()
		}(p.h, p.c)
	}

	res := &Result{}
	disk.start(func() { windows.TerminateJobObject(job, 1) })
	done := make(chan struct{})
	go func() {
		windows.WaitForSingleObject(pi.Process, windows.INFINITE)
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		res.Canceled = true
		windows.TerminateJobObject(job, 1)
		<-done
	case <-time.After(spec.Limits.Wall):
		res.TimedOut = true
		res.exceeded(LimitWall)
		windows.TerminateJobObject(job, 1)
		<-done
	}
	// Every other process of the job goes too: the tool's exit ends the launch.
	windows.TerminateJobObject(job, 1)
	wg.Wait()
	res.WallTime = time.Since(start)
	disk.finish(res)
	var code uint32
	windows.GetExitCodeProcess(pi.Process, &code)
	res.ExitCode = int(code)
	var acct struct {
		TotalUserTime, TotalKernelTime, ThisPeriodTotalUserTime, ThisPeriodTotalKernelTime int64
		TotalPageFaultCount, TotalProcesses, ActiveProcesses, TotalTerminatedProcesses     uint32
	}
	if windows.QueryInformationJobObject(job, windows.JobObjectBasicAccountingInformation, uintptr(unsafe.Pointer(&acct)), uint32(unsafe.Sizeof(acct)), nil) == nil {
		res.CPUTime = time.Duration(acct.TotalUserTime+acct.TotalKernelTime) * 100
	}
	res.fill(stdout, stderr)
	runtime.KeepAlive(handles)
	runtime.KeepAlive(jobs)
	runtime.KeepAlive(&sc)
	if res.Canceled {
		return res, ctx.Err()
	}
	return res, nil
}

// windowsEnvBlock builds a CreateProcess environment block.
func windowsEnvBlock(env []string) (*uint16, error) {
	if len(env) == 0 {
		return &[]uint16{0, 0}[0], nil
	}
	var u []uint16
	for _, kv := range env {
		s, err := windows.UTF16FromString(kv)
		if err != nil {
			return nil, err
		}
		u = append(u, s...)
	}
	u = append(u, 0)
	return &u[0], nil
}

// Check reports what this machine supports.
func Check(opts ...Option) (*Report, error) {
	r := &Report{Platform: runtime.GOOS + "/" + runtime.GOARCH, Backend: "AppContainer + Job Object"}
	err := procCreateAppContainerProfile.Find()
	r.add("AppContainer (userenv.dll)", err == nil, true, errText(err, "available"))
	return r, nil
}

func errText(err error, ok string) string {
	if err != nil {
		return err.Error()
	}
	return ok
}
