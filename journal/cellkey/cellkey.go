// Package cellkey loads and creates a cell's ed25519 identity. The private
// key is kept in OpenSSH format (people already know how to guard those)
// with mode 0600; the public key is the cell's identity and is shown as an
// authorized_keys line, which is also the format of an auditor's trust file.
package cellkey

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"github.com/agentrt/agentrt/internal/fileread"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/ssh"
)

// FileName is the key file's name in a data directory.
const FileName = "cell_ed25519"

// Comment ends the authorized_keys line of a cell key.
const Comment = "agentrt-cell"

// LoadOrCreate returns the key in dir/FileName, creating it (0600) on first
// use. It refuses a key file that others can read.
func LoadOrCreate(dir string) (ed25519.PrivateKey, error) {
	path := filepath.Join(dir, FileName)
	key, err := Load(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, Comment)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return Load(path) // another process created it first
	}
	if err != nil {
		return nil, err
	}
	if err := pem.Encode(f, block); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	return priv, f.Close()
}

// Load reads an OpenSSH ed25519 private key file.
func Load(path string) (ed25519.PrivateKey, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 && !isWindows() {
		return nil, fmt.Errorf("cell key %s has mode %#o; it must be readable by its owner only (chmod 600 %s)", path, perm, path)
	}
	b, err := fileread.Read(path, fileread.Key)
	if err != nil {
		return nil, err
	}
	raw, err := ssh.ParseRawPrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("cell key %s: %w", path, err)
	}
	switch k := raw.(type) {
	case *ed25519.PrivateKey:
		return *k, nil
	case ed25519.PrivateKey:
		return k, nil
	}
	return nil, fmt.Errorf("cell key %s is a %T, not ed25519", path, raw)
}

// AuthorizedKey returns pub as one authorized_keys line, without newline.
func AuthorizedKey(pub ed25519.PublicKey) string {
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		panic(err) // an ed25519 key always converts
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sp))) + " " + Comment
}

// ParseTrustFile reads trusted cell keys, one authorized_keys line each;
// blank lines and # comments are skipped, and any key that is not ed25519 is
// an error naming its line. A key listed twice (with the same or another
// comment) is one key: it is returned once, where it first appears.
func ParseTrustFile(b []byte) ([]ed25519.PublicKey, error) {
	var keys []ed25519.PublicKey
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		pk, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
		if err != nil {
			return nil, fmt.Errorf("trust file line %d: %w", n, err)
		}
		cpk, ok := pk.(ssh.CryptoPublicKey)
		if !ok {
			return nil, fmt.Errorf("trust file line %d: unsupported key", n)
		}
		ed, ok := cpk.CryptoPublicKey().(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("trust file line %d: %s key, want ssh-ed25519", n, pk.Type())
		}
		if seen[string(ed)] {
			continue
		}
		seen[string(ed)] = true
		keys = append(keys, ed)
	}
	return keys, sc.Err()
}
