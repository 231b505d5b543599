//go:build unix

package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/badgerstore"
	"github.com/agentrt/agentrt/journal/cellkey"
)

// TestBlobsFromTheCommandLine: a real run of the smoke agent whose
// 40 000-byte kv value is stored by hash (rewritten so, test-only: no op
// writes blobs yet) replays, exports with its blob and verifies offline;
// one byte of the blob changed in the bundle file fails `audit verify`
// naming the blob and the entry, and one changed in the store fails
// `replay`, `audit export` and `store check` naming it.
func TestBlobsFromTheCommandLine(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	module := filepath.Join(dir, "smoke.wasm")
	if err := os.WriteFile(module, testutil.BuildGo(t, "host/testdata/agents/smoke"), 0o644); err != nil {
		t.Fatal(err)
	}
	grant := filepath.Join(dir, "grant.yaml")
	if err := os.WriteFile(grant, []byte("capabilities:\n  run: {}\n  kv: {namespace: smoke}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(dir, "cache")
	if r := agentrtCLI(data, "--cache", cache, "run", module, "--grant", grant, "--input", "x", "-q"); r.code != 0 {
		t.Fatalf("run: %v", r)
	}
	key, err := cellkey.Load(filepath.Join(data, "cell_ed25519"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := badgerstore.Open(cell.StoreDir(data))
	if err != nil {
		t.Fatal(err)
	}
	runs, err := st.Runs(t.Context())
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs: %v %d", err, len(runs))
	}
	first, blobs := testutil.RouteThroughBlobs(t, st, runs[0].ID, key, 1024, func(e *journal.Entry) bool {
		return e.Op == "kv.put" && e.Phase == journal.PhaseIntent || e.Op == "kv.get" && e.Phase == journal.PhaseCompleted
	})
	st.Close()
	sum := journal.SumHex(blobs[0].Sum)
	entry := fmt.Sprintf("entry %d", first)

	if r := agentrtCLI(data, "--cache", cache, "replay", "last"); r.code != 0 || !strings.Contains(r.stdout+r.stderr, "verified") {
		t.Fatalf("replay: %v", r)
	}
	bundle := filepath.Join(dir, "run.bundle")
	if r := agentrtCLI(data, "audit", "export", "last", "-o", bundle); r.code != 0 || !strings.Contains(r.stderr, "with 1 blobs") {
		t.Fatalf("export: %v", r)
	}
	keys := filepath.Join(dir, "cell.keys")
	r := agentrtCLI(data, "keys")
	if r.code != 0 {
		t.Fatalf("keys: %v", r)
	}
	if err := os.WriteFile(keys, []byte(r.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := agentrtCLI(data, "audit", "verify", bundle, "--trust", keys); r.code != 0 || !strings.Contains(r.stdout, "blobs:      1 carried, 2 references resolved") {
		t.Fatalf("verify: %v", r)
	}
	b, _ := os.ReadFile(bundle)
	pos := bytes.LastIndex(b, blobs[0].Data)
	b[pos+len(blobs[0].Data)/2] ^= 1
	tampered := filepath.Join(dir, "tampered.bundle")
	if err := os.WriteFile(tampered, b, 0o644); err != nil {
		t.Fatal(err)
	}
	r = agentrtCLI(data, "audit", "verify", tampered, "--trust", keys)
	if r.code != 1 || !strings.Contains(r.stdout+r.stderr, sum) || !strings.Contains(r.stdout+r.stderr, entry) || !strings.Contains(r.stderr, "agentrt: error:") {
		t.Fatalf("verify of the tampered bundle: %v (want the blob %s and %s named)", r, sum, entry)
	}
	t.Logf("audit verify of the tampered bundle: %s", r.stderr)

	st, err = badgerstore.Open(cell.StoreDir(data))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.RewriteBlob(blobs[0].Sum, func(b []byte) []byte { b[5] ^= 1; return b }); err != nil {
		t.Fatal(err)
	}
	st.Close()
	for _, args := range [][]string{{"--cache", cache, "replay", "last"}, {"audit", "export", "last", "-o", filepath.Join(dir, "again.bundle")}, {"store", "check"}} {
		r := agentrtCLI(data, args...)
		if r.code == 0 || !strings.Contains(r.stdout+r.stderr, sum) {
			t.Errorf("%v after the blob changed in the store: %v", args, r)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "again.bundle")); err == nil {
		t.Error("export wrote a bundle of a journal whose blob changed")
	}
}
