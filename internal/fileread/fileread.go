// Package fileread reads the files a person names to agentrt: modules,
// grants, tokens, trust files, inputs, policies, modes, bundles,
// checkpoints and keys. Every such read goes through it, so that every one
// is bounded: it opens the file without blocking, refuses anything but a
// regular file (a device such as /dev/zero, a FIFO, a directory, a symlink
// to any of those) before reading a byte, and refuses a file larger than
// the limit of its kind, with an error that names the file, its kind and
// the limit. A file that grows while it is read is cut at the limit and
// refused the same way.
//
// It must never read a file whole without a limit, and never open one in
// a way that can block.
package fileread

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// Errors a *Error unwraps to.
var (
	// ErrNotRegular is returned for a path that is not a regular file.
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge is returned for a file over its kind's limit.
	ErrTooLarge = errors.New("larger than its kind allows")
)

// Kind is a kind of file and the most bytes one may have.
type Kind struct {
	Name  string
	Limit int64
}

// MaxModule is the largest module a cell takes, from a file or through
// its API (host/cell.MaxModule): its base64 in a submission stays well
// within the API's 64 MiB body, and the store keeps it as one value.
const MaxModule = 32 << 20

// The kinds of file agentrt reads, with their limits.
var (
	// Module is a WebAssembly module, up to the most a cell takes
	// (MaxModule).
	Module = Kind{"module", MaxModule}
	// Input is a run's input.
	Input = Kind{"input", 16 << 20}
	// Grant is a grant file, or a token's caps file (YAML or JSON).
	Grant = Kind{"grant", 1 << 20}
	// Token is a capability token (a chain of COSE_Sign1 links).
	Token = Kind{"token", 1 << 20}
	// Trust is a file of trusted keys, one authorized_keys line each.
	Trust = Kind{"trust file", 1 << 20}
	// Key is a private key file (OpenSSH format).
	Key = Kind{"key file", 64 << 10}
	// Policy is a Cedar policy file.
	Policy = Kind{"policy file", 1 << 20}
	// Vote is a statement to sign, or its armored SSH signature.
	Vote = Kind{"vote file", 64 << 10}
	// Modes is a permission modes file.
	Modes = Kind{"modes file", 1 << 20}
	// Approvals is a cell's approval rules file (approval.RulesFile).
	Approvals = Kind{"approval rules file", 1 << 20}
	// Request is a policy request to check (JSON).
	Request = Kind{"request file", 1 << 20}
	// Cells is a file of cell descriptors to place on (placement.CellsFile):
	// room for placement.MaxCells of them.
	Cells = Kind{"cells file", 16 << 20}
	// Need is a run's placement need (placement.ParseNeed).
	Need = Kind{"need file", 1 << 20}
	// Checkpoint is a signed checkpoint note (journal/SPEC.md section
	// 14.3 refuses notes over 4096 bytes).
	Checkpoint = Kind{"checkpoint", 4096}
	// Bundle is an audit bundle (replay/BUNDLE.md), which is read as a
	// stream: its limit is the format's.
	Bundle = Kind{"bundle", 1 << 40}
)

// a returns the kind's name with its article.
func (k Kind) a() string {
	if k.Name != "" && strings.ContainsRune("aeiou", rune(k.Name[0])) {
		return "an " + k.Name
	}
	return "a " + k.Name
}

// Error is a file refused, or one that could not be read.
type Error struct {
	Path string
	Kind Kind
	// What describes the file when it is not regular ("a character
	// device"), or its size when it is too large.
	What string
	Err  error
}

func (e *Error) Error() string {
	switch {
	case errors.Is(e.Err, ErrNotRegular):
		return fmt.Sprintf("%s: %s must be a regular file, and this is %s", e.Path, e.Kind.a(), e.What)
	case errors.Is(e.Err, ErrTooLarge):
		return fmt.Sprintf("%s: %s, more than the %d bytes %s may have", e.Path, e.What, e.Kind.Limit, e.Kind.a())
	}
	return fmt.Sprintf("%s: %v", e.Path, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Open opens the regular file path for reading, and returns it and its
// size, which is within k's limit. The caller reads at most the size (or
// the limit) and closes it.
func Open(path string, k Kind) (*os.File, int64, error) {
	f, err := openNonBlocking(path)
	if err != nil {
		return nil, 0, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if !info.Mode().IsRegular() {
		f.Close()
		return nil, 0, &Error{Path: path, Kind: k, What: describe(info.Mode()), Err: ErrNotRegular}
	}
	if info.Size() > k.Limit {
		f.Close()
		return nil, 0, &Error{Path: path, Kind: k, What: fmt.Sprintf("%d bytes", info.Size()), Err: ErrTooLarge}
	}
	return f, info.Size(), nil
}

// Read returns the contents of the regular file path, within k's limit.
func Read(path string, k Kind) ([]byte, error) {
	f, size, err := Open(path, k)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, 0, size+1)
	for {
		n, err := f.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if int64(len(b)) > k.Limit {
			return nil, &Error{Path: path, Kind: k, What: "it grew while it was read", Err: ErrTooLarge}
		}
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, &Error{Path: path, Kind: k, Err: err}
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // the file grew: room for more, up to the limit
		}
	}
}

// describe names a file mode that is not a regular file's.
func describe(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return "not a regular file (" + m.Type().String() + ")"
}
