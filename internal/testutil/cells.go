package testutil

import (
	"crypto/ed25519"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/journal/cellkey"
)

// TrustingCells makes n cell data directories, each with its cell key and
// trusting the others' seals (DATA/trusted_cells), and returns them with
// their keys.
func TrustingCells(t testing.TB, n int) ([]string, []ed25519.PrivateKey) {
	t.Helper()
	dirs := make([]string, n)
	keys := make([]ed25519.PrivateKey, n)
	for i := range dirs {
		dirs[i] = t.TempDir()
		k, err := cellkey.LoadOrCreate(dirs[i])
		if err != nil {
			t.Fatal(err)
		}
		keys[i] = k
	}
	for i, d := range dirs {
		var b strings.Builder
		for j, k := range keys {
			if j != i {
				b.WriteString(cellkey.AuthorizedKey(k.Public().(ed25519.PublicKey)) + "\n")
			}
		}
		if err := os.WriteFile(filepath.Join(d, cell.TrustedCellsFile), []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dirs, keys
}

// PublicKeys returns the public halves of keys.
func PublicKeys(keys []ed25519.PrivateKey) []ed25519.PublicKey {
	pubs := make([]ed25519.PublicKey, len(keys))
	for i, k := range keys {
		pubs[i] = k.Public().(ed25519.PublicKey)
	}
	return pubs
}
