package tool

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentrt/agentrt/abi"
)

// TestToolHashingStopsWithTheRun (issue 10, item 7): once the run is asked
// to stop (cancel, drain) or its context ends, the host hashes no more of
// a tool's files: they are listed unhashed: stopped, and the call returns
// at once. With the run going on, the same files are hashed.
func TestToolHashingStopsWithTheRun(t *testing.T) {
	dir := t.TempDir()
	data := make([]byte, 10<<20)
	rand.Read(data)
	big, small := data[:8<<20], data[8<<20:]
	for name, b := range map[string][]byte{"big": big, "small": small} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	before, after := &area{files: map[string]stamp{}}, scanArea([]string{dir})
	list := func(h *hashing) []abi.ToolFile {
		files, more := writtenFiles(h, before, after, dir)
		if more || len(files) != 2 {
			t.Fatalf("listed %+v (more %v); want big and small", files, more)
		}
		return files
	}

	halted := make(chan struct{})
	close(halted)
	for _, f := range list(&hashing{ctx: context.Background(), halt: halted, budget: 1 << 30}) {
		if f.Unhashed != abi.UnhashedStopped || f.SHA256 != nil || f.Size == 0 {
			t.Errorf("after a stop: %+v; want it listed with its size, unhashed: stopped", f)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, f := range list(&hashing{ctx: ctx, halt: make(chan struct{}), budget: 1 << 30}) {
		if f.Unhashed != abi.UnhashedStopped {
			t.Errorf("after the context ended: %+v; want unhashed: stopped", f)
		}
	}
	h := &hashing{ctx: context.Background(), halt: make(chan struct{}), budget: 1 << 30}
	for _, f := range list(h) {
		if f.Unhashed != "" || len(f.SHA256) != 32 {
			t.Errorf("the control, a run going on: %+v; want it hashed", f)
		}
	}
	if h.budget != 1<<30-int64(len(big)+len(small)) {
		t.Errorf("budget left %d; want the bytes read taken from it", h.budget)
	}
}
