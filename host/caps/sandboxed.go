// What the grants of sandboxed programs (the tool capability's tools, the
// mcp capability's stdio servers) check alike.

package caps

import (
	"fmt"
	slashpath "path"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The least memory and processes a sandboxed program is granted: below
// them nothing starts (the sandbox's own helper needs them). The tool
// grant and the mcp grant's stdio servers refuse less.
const (
	MinSandboxMemory = 16 << 20
	MinSandboxProcs  = 4
)

// ParseDuration parses a grant's duration limit, such as 30s or 2m; an
// empty v is 0. field names the limit in the error.
func ParseDuration(field, v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s: %q is not a positive duration; write e.g. 30s or 2m", field, v)
	}
	return d, nil
}

var sizeRE = regexp.MustCompile(`^([0-9]{1,12})(|B|K|KB|KiB|M|MB|MiB|G|GB|GiB)$`)

// ParseSize parses a grant's size limit: bytes, or a number with K, M or
// G (KB, KiB, ... all binary); an empty v is 0. field names the limit in
// the error.
func ParseSize(field, v string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	m := sizeRE.FindStringSubmatch(v)
	if m == nil {
		return 0, fmt.Errorf("%s: %q is not a size; write bytes, or e.g. 64KiB, 512MiB, 2GiB", field, v)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	shift := map[byte]uint{'K': 10, 'M': 20, 'G': 30}[(m[2] + "B")[0]]
	if n > (1<<62)>>shift {
		return 0, fmt.Errorf("%s: %q is too large", field, v)
	}
	return n << shift, nil
}

// CheckEnv checks the environment a grant gives a sandboxed program:
// names not empty, without '=' or NUL, names and values UTF-8 without NUL.
func CheckEnv(env map[string]string) error {
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") || !utf8.ValidString(k) {
			return fmt.Errorf("env: %q is not a variable name (not empty, no '=', no NUL)", k)
		}
		if strings.ContainsRune(v, 0) || !utf8.ValidString(v) {
			return fmt.Errorf("env.%s: the value must be UTF-8 without NUL", k)
		}
	}
	return nil
}

var winAbsRE = regexp.MustCompile(`^[A-Za-z]:[\\/]`)

// IsWindowsAbs reports whether p is an absolute Windows path, such as
// C:\tools or C:/tools.
func IsWindowsAbs(p string) bool { return winAbsRE.MatchString(p) }

// IsWholeHost reports whether the path p is the root of a file system:
// "/", or a Windows drive such as C:\.
func IsWholeHost(p string) bool {
	return p == "/" || winAbsRE.MatchString(p) && len(strings.TrimRight(p, `\/`)) <= 2
}

// CheckGrantPath requires an absolute, clean path, in the syntax of
// either family: a grant recorded on Linux is checked again wherever it is
// replayed or audited. field names the path in the error.
func CheckGrantPath(field, p string) error {
	switch {
	case p == "":
		return fmt.Errorf("%s: a path is required", field)
	case strings.ContainsRune(p, 0) || !utf8.ValidString(p):
		return fmt.Errorf("%s: the path must be UTF-8 without NUL", field)
	case strings.HasPrefix(p, "/"):
		if slashpath.Clean(p) != p {
			return fmt.Errorf("%s: %q is not clean; write it as %q", field, p, slashpath.Clean(p))
		}
	case winAbsRE.MatchString(p):
		if strings.Contains(strings.ReplaceAll(p, "/", `\`), `\..`) {
			return fmt.Errorf("%s: %q contains '..'", field, p)
		}
	default:
		return fmt.Errorf("%s: %q is not absolute; give the full path", field, p)
	}
	return nil
}

// WithinAny reports whether the absolute path p is one of roots or lies
// beneath one, in each root's syntax (Windows paths compare without case
// and with either separator).
func WithinAny(p string, roots []string) bool {
	for _, r := range roots {
		if winAbsRE.MatchString(r) {
			pp, rr := strings.ToLower(strings.ReplaceAll(p, "/", `\`)), strings.ToLower(strings.TrimRight(strings.ReplaceAll(r, "/", `\`), `\`))
			if pp == rr || strings.HasPrefix(pp, rr+`\`) {
				return true
			}
			continue
		}
		if r == "/" && strings.HasPrefix(p, "/") || p == r || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}
