package cell

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// APITokenFile is the file in a data directory that holds the cell API's
// bearer token: the credential a client presents on a TCP listener, where
// any local process, or a web page the machine's browser opens, can reach
// the port. The unix socket needs none: its file mode is its credential.
const APITokenFile = "api.token"

// EnvAPIToken names the environment variable that gives a client the API
// token instead of DATA/api.token, for clients that cannot read the data
// directory.
const EnvAPIToken = "AGENTRT_API_TOKEN"

// apiTokenBytes is the token's entropy: 256 bits, written as 64 hex digits.
const apiTokenBytes = 32

// ErrNoAPIToken is returned by Dial for an http:// target when neither
// $AGENTRT_API_TOKEN nor the data directory's api.token gives a token.
var ErrNoAPIToken = errors.New("cell: no API token for a TCP address")

// ErrBadAPIToken is returned for a token file or variable that does not
// hold a token (64 hex digits), or a token file others may read.
var ErrBadAPIToken = errors.New("cell: bad API token")

// APITokenPath returns the API token file of the cell in dataDir.
func APITokenPath(dataDir string) string { return filepath.Join(dataDir, APITokenFile) }

// LoadOrCreateAPIToken returns the API token of the cell in dataDir,
// creating it (mode 0600, 32 random bytes as hex) on first use. A token
// once created is reused: clients keep working across restarts; delete the
// file to rotate it.
func LoadOrCreateAPIToken(dataDir string) (string, error) {
	path := APITokenPath(dataDir)
	tok, err := ReadAPIToken(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return tok, err
	}
	b := make([]byte, apiTokenBytes)
	if _, err := io.ReadFull(rand.Reader, b); err != nil {
		return "", err
	}
	tok = hex.EncodeToString(b)
	// Written whole to a temporary file, then linked into place: a crash
	// leaves no half-written token, and a link never replaces a token a
	// client may already hold.
	f, err := os.CreateTemp(dataDir, APITokenFile+".*")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name()) // CreateTemp made it 0600
	if _, err := f.WriteString(tok + "\n"); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	if err := os.Link(f.Name(), path); errors.Is(err, fs.ErrExist) {
		return ReadAPIToken(path) // created meanwhile
	} else if err != nil {
		return "", err
	}
	return tok, nil
}

// ReadAPIToken reads a token file: 64 hex digits and an optional newline,
// in a regular file that only its owner may read (as ssh asks of a private
// key: a token others can read is no credential).
func ReadAPIToken(path string) (string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if !info.Mode().IsRegular() {
		return "", fmt.Errorf("%w: %s is not a regular file", ErrBadAPIToken, path)
	}
	if runtime.GOOS != "windows" && info.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("%w: %s may be read by others (mode %04o); chmod 600 it, or delete it and restart the daemon for a new one", ErrBadAPIToken, path, info.Mode().Perm())
	}
	if info.Size() > 2*apiTokenBytes+2 {
		return "", fmt.Errorf("%w: %s is %d bytes, not 64 hex digits", ErrBadAPIToken, path, info.Size())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	tok, err := parseAPIToken(string(b))
	if err != nil {
		return "", fmt.Errorf("%w: %s: %v", ErrBadAPIToken, path, err)
	}
	return tok, nil
}

func parseAPIToken(s string) (string, error) {
	s = strings.TrimRight(s, "\r\n")
	if len(s) != 2*apiTokenBytes {
		return "", fmt.Errorf("a token is %d hex digits, this is %d characters", 2*apiTokenBytes, len(s))
	}
	if _, err := hex.DecodeString(s); err != nil {
		return "", errors.New("a token is hex digits")
	}
	return strings.ToLower(s), nil
}

// tokenIdentity names the holder of token in the journal: the credential
// class and the first 32 bits of the token's SHA-256, which tell a rotated
// token from its successor and reveal nothing of it.
func tokenIdentity(token string) string {
	h := sha256.Sum256([]byte(token))
	return "token:api#" + hex.EncodeToString(h[:4])
}
