package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// Result is the complete outcome of one launch. Launch fills it in even
// when the tool was killed; the caller needs nothing else to journal it.
type Result struct {
	// ExitCode is the tool's exit status. A tool ended by signal n reports
	// 128+n on Linux and macOS (bwrap collapses the two, as a shell does).
	ExitCode int
	// Signal is the signal that ended the tool, or 0.
	Signal int
	// Stdout and Stderr hold at most Limits.Output bytes each.
	Stdout, Stderr []byte
	// StdoutTruncated and StderrTruncated report that the stream went past
	// the cap; the rest was read and discarded, not left to block the tool.
	StdoutTruncated, StderrTruncated bool
	// TimedOut reports that Limits.Wall passed and every process of the
	// tool was killed.
	TimedOut bool
	// Canceled reports that the context ended first and every process of
	// the tool was killed.
	Canceled bool
	// Exceeded lists the limits the tool is known to have run into.
	Exceeded []Limit
	// WallTime is the time from start to the end of the last process;
	// CPUTime the user and system time of the tool's processes that were
	// waited for.
	WallTime, CPUTime time.Duration
}

// Limit names a limit in Result.Exceeded.
type Limit string

// The limits a Result can report.
const (
	LimitWall      Limit = "wall"
	LimitCPU       Limit = "cpu"
	LimitMemory    Limit = "memory"
	LimitProcesses Limit = "processes"
	LimitFileSize  Limit = "file_size"
	LimitOutput    Limit = "output"
	LimitDisk      Limit = "disk"
)

// ErrUnsupported is returned by Launch and Check on a platform that has no
// sandbox backend. Nothing is run.
var ErrUnsupported = errors.New("sandbox: no sandbox backend for this platform")

// ErrRefused is matched (errors.Is) by every *RefusedError.
var ErrRefused = errors.New("sandbox: launch refused")

// RefusedError is returned by Launch when the sandbox cannot be set up as
// the Spec demands (backend missing or degraded, a feature not supported,
// an executable that cannot be run safely), and also when setup failed
// inside the sandbox before the tool was executed. The tool did not run.
type RefusedError struct {
	// What says what is missing or wrong.
	What string
	// Hint says how to fix it, when known.
	Hint string
}

func (e *RefusedError) Error() string { return "sandbox: launch refused: " + e.What }

// Is makes errors.Is(err, ErrRefused) true.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

func refused(hint, format string, args ...any) error {
	return &RefusedError{What: fmt.Sprintf(format, args...), Hint: hint}
}

// Option configures a launch.
type Option func(*options)

type options struct {
	bwrap          string
	helper         string
	stdin          io.Reader
	stdout, stderr io.Writer
	user           *User
}

// User is a host user and group, by number.
type User struct{ UID, GID int }

// DefaultUser is the identity tools run as when the launcher runs as root:
// nobody and nogroup on Debian and most Linux systems.
var DefaultUser = User{UID: 65534, GID: 65534}

// WithUser sets the host user and group the tool runs as when this process
// runs as root (default DefaultUser). The launcher switches to it, with no
// supplementary groups, before the sandbox is made, so that the kernel's
// file permission checks see that user and not root; root (0) is refused.
// A process that is not root runs tools as itself, and refuses a WithUser
// naming anyone else. Windows refuses it: tools run in an AppContainer.
func WithUser(u User) Option { return func(o *options) { o.user = &u } }

// WithBwrap sets the bubblewrap binary (Linux). By default it is looked up
// in /usr/bin, /usr/local/bin and then the PATH of this process.
func WithBwrap(path string) Option { return func(o *options) { o.bwrap = path } }

// WithHelper sets the binary re-executed as the sandbox helper. It must call
// HelperMain at start-up. By default it is this process's own executable,
// which then must have called HelperMain.
func WithHelper(path string) Option { return func(o *options) { o.helper = path } }

// WithStdin gives the tool a standard input; by default it reads /dev/null.
func WithStdin(r io.Reader) Option { return func(o *options) { o.stdin = r } }

// WithOutput streams the tool's standard output and error to stdout and
// stderr (either may be nil) as the tool writes them, for a tool that
// speaks a protocol on its pipes (an MCP server over stdio) or whose
// output is followed live. Every byte is written to the stream, and the
// Result still holds the first Limits.Output bytes of each. A stream's
// Write blocks the tool's pipe until it returns; a Write error drops the
// rest of that stream's output, which is still drained.
func WithOutput(stdout, stderr io.Writer) Option {
	return func(o *options) { o.stdout, o.stderr = stdout, stderr }
}

// captures returns the captures of a launch's stdout and stderr.
func (o *options) captures(spec *Spec) (stdout, stderr *capture) {
	return &capture{max: spec.outputCap(), stream: o.stdout}, &capture{max: spec.outputCap(), stream: o.stderr}
}

// Launch runs argv under the sandbox described by spec and returns when the
// tool and every process it started are gone.
//
// argv[0] is an absolute path, or a bare name looked up in spec.Path; no
// shell is involved anywhere. The launch is refused (*RefusedError, nothing
// runs) when the platform's sandbox cannot be set up as specified; it
// returns ErrUnsupported on a platform without a backend, and a
// *SpecError for an invalid spec. When ctx ends first, Launch kills the
// tool's processes and returns the Result together with ctx.Err().
func Launch(ctx context.Context, spec *Spec, argv []string, opts ...Option) (*Result, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if len(argv) == 0 || argv[0] == "" {
		return nil, errors.New("sandbox: empty argv; give the program and its arguments")
	}
	if !spec.Network.None() {
		return nil, errNetworkAllowlist
	}
	var o options
	for _, f := range opts {
		f(&o)
	}
	return launch(ctx, spec, argv, &o)
}

// errNetworkAllowlist refuses allowlist specs everywhere: enforcing an
// allowlist needs a filtering proxy in the sandbox's network namespace, and
// pretending with a full network would fail open.
var errNetworkAllowlist = refused("use network: none; allowlists come with a filtering proxy",
	"network allowlists are not supported yet")

// capture keeps the first max bytes written to it and counts the rest,
// and passes every byte to stream, when set.
type capture struct {
	max       int64
	buf       bytes.Buffer
	truncated bool
	stream    io.Writer
}

func (c *capture) Write(p []byte) (int, error) {
	if c.stream != nil {
		if _, err := c.stream.Write(p); err != nil {
			c.stream = nil // its reader is gone; keep draining
		}
	}
	room := c.max - int64(c.buf.Len())
	if int64(len(p)) > room {
		c.truncated = true
		if room > 0 {
			c.buf.Write(p[:room])
		}
		// Report the whole write as done: the rest is drained, so a
		// chatty tool is never blocked on a full pipe.
		return len(p), nil
	}
	return c.buf.Write(p)
}

// fill copies the captured streams into r.
func (r *Result) fill(stdout, stderr *capture) {
	r.Stdout, r.StdoutTruncated = stdout.buf.Bytes(), stdout.truncated
	r.Stderr, r.StderrTruncated = stderr.buf.Bytes(), stderr.truncated
	if r.StdoutTruncated || r.StderrTruncated {
		r.exceeded(LimitOutput)
	}
}

func (r *Result) exceeded(l Limit) {
	for _, e := range r.Exceeded {
		if e == l {
			return
		}
	}
	r.Exceeded = append(r.Exceeded, l)
}
