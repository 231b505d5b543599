package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
)

// TestRunWaitsForItsChildren: agentrt run against a daemon follows a
// parent that parks awaiting its child (the child's request is held until
// the parent is parked) through the park and the wake, and exits 0 with
// the parent's real outcome, completed, instead of 75.
func TestRunWaitsForItsChildren(t *testing.T) {
	bin, cache, data := buildCLI(t), t.TempDir(), t.TempDir()
	code := testutil.BuildGo(t, "host/testdata/agents/spender")
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	hostport := strings.TrimPrefix(srv.URL, "http://")
	dir := t.TempDir()
	module := filepath.Join(dir, "spender.wasm")
	grant := filepath.Join(dir, "grant.yaml")
	if err := os.WriteFile(module, code, 0o644); err != nil {
		t.Fatal(err)
	}
	grantText := fmt.Sprintf("capabilities:\n  run: {}\n  timer: {}\n  agent: {max_children: 1, max_depth: 2}\n  http: {hosts: [%q]}\n", hostport)
	if err := os.WriteFile(grant, []byte(grantText), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(code)
	childCaps := fmt.Sprintf("{run: {}, timer: {}, agent: {max_children: 1, max_depth: 1}, http: {hosts: [%q]}}", hostport)
	child := map[string]any{"module": hex.EncodeToString(sum[:]), "caps": childCaps, "input": map[string]any{"fetch": map[string]any{"url": srv.URL, "n": 1}}}
	plan, _ := json.Marshal(map[string]any{"spawn": []any{child}, "await": true})

	d := serveDaemon(t, bin, cache, data)
	cmd := exec.Command(bin, "--data", data, "--cache", cache, "run", module, "--grant", grant, "--json", "--input", string(plan))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The parent parks awaiting its child, whose request is held.
	deadline := time.Now().Add(60 * time.Second)
	for {
		runs, err := d.client.Runs(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		parked := false
		for _, ri := range runs {
			parked = parked || (ri.Status == journal.StatusParked && ri.Wait != nil && ri.Wait.Kind == string(journal.WaitRun) && ri.Wait.Run != "")
		}
		if parked {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no parent parked awaiting its child in 60 s\n%s", d.logText())
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(release)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("agentrt run: %v\n%s", err, stderr.String())
	}
	var ri cell.RunInfo
	if err := json.Unmarshal(stdout.Bytes(), &ri); err != nil {
		t.Fatalf("stdout %q: %v", stdout.String(), err)
	}
	if ri.Status != journal.StatusCompleted || !strings.Contains(string(ri.Output), `"Status":"completed"`) {
		t.Fatalf("the parent: %s, output %s", ri.Status, ri.Output)
	}
	if !strings.Contains(stderr.String(), "awaits its child") || !strings.Contains(stderr.String(), "waiting for the cell to wake it") {
		t.Fatalf("stderr does not say it waited:\n%s", stderr.String())
	}
}
