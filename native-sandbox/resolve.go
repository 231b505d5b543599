package sandbox

import (
	"io/fs"
	"os"
	"path"
	"strings"
)

// resolveExecutable finds the program argv0 names, in the syntax of goos,
// without a shell and without the host's PATH: an absolute path is taken as
// it is, a bare name is looked up in spec.Path in order, and anything else
// (a relative path) is refused. The program must lie inside a path the
// sandbox exposes. On Windows, batch files are refused, because
// CreateProcess runs them through cmd.exe, a shell that re-parses the
// arguments.
func resolveExecutable(spec *Spec, argv0, goos string, stat func(string) (fs.FileInfo, error)) (string, error) {
	if goos == "windows" {
		lower := strings.ToLower(argv0)
		if strings.HasSuffix(lower, ".bat") || strings.HasSuffix(lower, ".cmd") {
			return "", refused("run the program the script runs, with its arguments", "%q is a batch file, which Windows runs through cmd.exe, a shell", argv0)
		}
	}
	exposed := func(p string) bool { return under(p, spec.ReadOnly) || under(p, spec.ReadWrite) }
	check := func(p string) error {
		if !exposed(p) {
			return refused("list the program, or its directory, under read_only", "%s is outside every read_only and read_write path, so it does not exist in the sandbox", p)
		}
		fi, err := stat(p)
		if err != nil {
			return refused("check the path", "%s: %v", p, unwrapPathErr(err))
		}
		if !fi.Mode().IsRegular() || (goos != "windows" && fi.Mode().Perm()&0o111 == 0) {
			return refused("give an executable file", "%s is not an executable file", p)
		}
		return nil
	}
	if isAbs(argv0) {
		if err := check(argv0); err != nil {
			return "", err
		}
		return argv0, nil
	}
	if strings.ContainsAny(argv0, `/\`) {
		return "", refused("give an absolute path, or a bare name found on the spec's path", "%q is a relative path, whose meaning depends on the working directory", argv0)
	}
	if len(spec.Path) == 0 {
		return "", refused("give an absolute path, or list directories under path: in the spec", "%q is a bare name and the spec has no path to look it up in", argv0)
	}
	names := []string{argv0}
	if goos == "windows" && path.Ext(argv0) == "" {
		names = []string{argv0 + ".exe", argv0 + ".com"}
	}
	for _, dir := range spec.Path {
		for _, n := range names {
			p := joinPath(dir, n)
			if check(p) == nil {
				return p, nil
			}
		}
	}
	return "", refused("list the program's directory under path: (and read_only)", "%q is not found in the spec's path %v", argv0, spec.Path)
}

func unwrapPathErr(err error) error {
	if pe, ok := err.(*fs.PathError); ok {
		return pe.Err
	}
	return err
}

// statFile is the stat resolveExecutable uses for real launches.
var statFile = os.Stat
