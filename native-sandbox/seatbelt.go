package sandbox

import (
	"fmt"
	"strings"
)

// sandboxExec is macOS's Seatbelt launcher.
const sandboxExec = "/usr/bin/sandbox-exec"

// seatbeltProfile returns a deny-by-default Seatbelt profile for the spec
// and the -D parameters it reads. Spec paths never appear in the profile
// text: each is a parameter (RO0, RW0, PR0, ...), so no path can inject
// SBPL. The literals it does contain are fixed device paths.
func seatbeltProfile(spec *Spec) (profile string, params []string) {
	var b strings.Builder
	b.WriteString(`(version 1)
(deny default)
; Programs may start and signal only processes of this sandbox.
(allow process-fork)
(allow signal (target same-sandbox))
(allow sysctl-read)
; Metadata (stat) of any path: dyld and realpath walk the ancestors of the
; paths below. Contents stay denied.
(allow file-read-metadata)
(allow file-read* file-write-data
  (literal "/dev/null") (literal "/dev/zero") (literal "/dev/dtracehelper"))
(allow file-read* (literal "/dev/random") (literal "/dev/urandom"))
`)
	param := func(prefix string, i int, p string) string {
		name := fmt.Sprintf("%s%d", prefix, i)
		params = append(params, "-D", name+"="+p)
		return fmt.Sprintf(`(subpath (param %q))`, name)
	}
	var ro, rw, pr []string
	for i, p := range spec.ReadOnly {
		ro = append(ro, param("RO", i, p))
	}
	for i, p := range spec.ReadWrite {
		rw = append(rw, param("RW", i, p))
	}
	for i, p := range spec.protectedPaths() {
		pr = append(pr, param("PR", i, p))
	}
	if len(ro)+len(rw) > 0 {
		all := strings.Join(append(append([]string{}, ro...), rw...), "\n  ")
		fmt.Fprintf(&b, "; Read and execute: the read-only and read-write paths.\n(allow file-read* process-exec\n  %s)\n", all)
	}
	if len(rw) > 0 {
		b.WriteString("; Write: the read-write paths, except the protected ones.\n(allow file-write*\n")
		for _, r := range rw {
			if len(pr) == 0 {
				fmt.Fprintf(&b, "  %s\n", r)
				continue
			}
			fmt.Fprintf(&b, "  (require-all %s (require-not (require-any %s)))\n", r, strings.Join(pr, " "))
		}
		b.WriteString(")\n")
	}
	b.WriteString("; No network rule: with (deny default) every socket operation is denied.\n")
	return b.String(), params
}

// seatbeltArgs returns the whole command line: sandbox-exec, the profile,
// its parameters, then the tool's argv with its resolved executable.
func seatbeltArgs(spec *Spec, exe string, argv []string) []string {
	profile, params := seatbeltProfile(spec)
	args := append([]string{sandboxExec, "-p", profile}, params...)
	args = append(args, "--", exe)
	return append(args, argv[1:]...)
}
