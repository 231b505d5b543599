package cellkey_test

import (
	"crypto/ed25519"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/journal/cellkey"
)

func TestKeyIsCreatedOnceWithOwnerOnlyMode(t *testing.T) {
	dir := t.TempDir()
	k1, err := cellkey.LoadOrCreate(dir)
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(filepath.Join(dir, cellkey.FileName))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v (%v), want 0600", info.Mode().Perm(), err)
	}
	k2, err := cellkey.LoadOrCreate(dir)
	if err != nil || !k1.Equal(k2) {
		t.Fatalf("second load gave another key (%v)", err)
	}
}

func TestKeyReadableByOthersIsRefused(t *testing.T) {
	dir := t.TempDir()
	if _, err := cellkey.LoadOrCreate(dir); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, cellkey.FileName)
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := cellkey.LoadOrCreate(dir); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("got %v, want a refusal that says chmod 600", err)
	}
}

func TestTrustFileRoundTrip(t *testing.T) {
	k, err := cellkey.LoadOrCreate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pub := k.Public().(ed25519.PublicKey)
	file := "# auditors' keys\n\n" + cellkey.AuthorizedKey(pub) + "\n"
	keys, err := cellkey.ParseTrustFile([]byte(file))
	if err != nil || len(keys) != 1 || !keys[0].Equal(pub) {
		t.Fatalf("parsed %v (%v)", keys, err)
	}
	rsa := "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQDUK6gU1lDSK8Ev6CqSzj1m0fwVkmKAdoyCkbp8ZAgmN9gtp5GfjgR4YpJbN+Gz3fqfzAfEs2ZDYyRyu6DYS+2uLmzOiTt2vfO1ZKHHsgNOqRt3Ynz1EiPBeUiRGGh8cfFEtKqzPEoPvUtrYHvRsaUtSi3AXe1sTt8xoEqtDNyJ1Q== x\n"
	if _, err := cellkey.ParseTrustFile([]byte(rsa)); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("an RSA key: %v, want an error naming line 1", err)
	}
	if _, err := cellkey.ParseTrustFile([]byte("\nnot a key\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("garbage: %v, want an error naming line 2", err)
	}
}

// TestTrustFileKeyTwiceIsOneKey: a key on two lines (with two comments) is
// one trusted key, so that a verifier never sees it as two signers.
func TestTrustFileKeyTwiceIsOneKey(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(nil)
	other, _, _ := ed25519.GenerateKey(nil)
	line := cellkey.AuthorizedKey(pub)
	text := line + "\n" + cellkey.AuthorizedKey(other) + "\n" + strings.Replace(line, cellkey.Comment, "again", 1) + "\n" + line + "\n"
	keys, err := cellkey.ParseTrustFile([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || !keys[0].Equal(pub) || !keys[1].Equal(other) {
		t.Fatalf("keys %x, want the two keys once each, in file order", keys)
	}
}
