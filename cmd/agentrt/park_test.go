package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"golang.org/x/crypto/ssh"
)

// hitCounter is an HTTP server that counts the POSTs it gets, by
// idempotency key, and their effects, by body: as a server that honours
// Idempotency-Key, it applies a request sent again with a key it has seen
// once (keys counts it again, bodies does not).
type hitCounter struct {
	*httptest.Server
	mu     sync.Mutex
	bodies map[string]int
	keys   map[string]int
}

func newHitCounter(t *testing.T) *hitCounter {
	h := &hitCounter{bodies: map[string]int{}, keys: map[string]int{}}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		buf := make([]byte, 64)
		n, _ := r.Body.Read(buf)
		b.Write(buf[:n])
		h.mu.Lock()
		key := r.Header.Get("Idempotency-Key")
		if key == "" || h.keys[key] == 0 {
			h.bodies[b.String()]++
		}
		h.keys[key]++
		h.mu.Unlock()
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(h.Close)
	return h
}

// approverKeyFile writes an unencrypted OpenSSH ed25519 key for name and
// returns its path and its authorized_keys line.
func approverKeyFile(t *testing.T, dir, name string) (string, string) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	blk, err := ssh.MarshalPrivateKey(priv, name)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(blk), 0o600); err != nil {
		t.Fatal(err)
	}
	sp, _ := ssh.NewPublicKey(pub)
	return path, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sp))) + " " + name
}

// TestApprovalParkedAcrossThreeSIGKILLs parks a run for a 2-of-2 approval
// in a real `agentrt cell serve`, kills the daemon with SIGKILL three
// times (parked with no vote, parked with one vote, just after the
// deciding vote), and votes through the CLI: once with --key, once with a
// statement signed by the real `ssh-keygen -Y sign`. The run completes,
// approved by both; its effects around the wait (an HTTP POST and a kv
// increment each side) were each made once; its journal replays and its
// bundle verifies offline with the approvers' keys.
func TestApprovalParkedAcrossThreeSIGKILLs(t *testing.T) {
	keygen, err := exec.LookPath("ssh-keygen")
	if err != nil {
		t.Skip("ssh-keygen (Debian openssh-client) is not installed")
	}
	f := &cellFixture{bin: buildCLI(t), code: testutil.BuildC(t, "host/testdata/agents/waiter"), cache: testutil.CompileCache()}
	data, keys := t.TempDir(), t.TempDir()
	aliceKey, aliceLine := approverKeyFile(t, keys, "alice")
	bobKey := filepath.Join(keys, "bob")
	if out, err := exec.Command(keygen, "-q", "-t", "ed25519", "-N", "", "-C", "bob", "-f", bobKey).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	bobPub, err := os.ReadFile(bobKey + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	bobLine := strings.Join(strings.Fields(string(bobPub))[:2], " ") + " bob"
	if err := os.MkdirAll(filepath.Join(data, "approvers"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "approvers", "release"), []byte(aliceLine+"\n"+bobLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "approvals.yaml"), []byte("groups:\n  release: {quorum: 2, two_person: true}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hits := newHitCounter(t)
	d := f.serve(t, data)
	// The server honours Idempotency-Key, and the grant says so: the third
	// kill may land while the run, resumed, is inside its POST "after",
	// which is then sent again with its key rather than left in doubt.
	grant := "capabilities:\n  run: {}\n  kv: {namespace: waiter}\n  http: {hosts: [\"127.0.0.1\"], idempotent: true}\n  timer: {}\n  approval: {groups: [release]}\n"
	input, _ := json.Marshal(map[string]any{"action": "deploy v2 to production", "group": "release", "hits": hits.URL, "counter": true})
	run, err := d.client.Submit(context.Background(), cell.Submission{Module: f.code, Name: "waiter.wasm", Grant: grant, Input: input})
	if err != nil {
		t.Fatal(err)
	}
	parked := func(ri cell.RunInfo) bool { return ri.Status == journal.StatusParked && ri.Wait != nil }
	d.waitFor(t, run, "parked", parked)
	ri, _ := d.client.Run(context.Background(), run)
	step := fmt.Sprint(ri.Wait.Step)

	// 1: killed while parked with no vote.
	d.kill()
	d = f.serve(t, data)
	d.waitFor(t, run, "stayed parked", parked)
	list, err := f.cmd(data, "approvals").CombinedOutput()
	if err != nil || !strings.Contains(string(list), run) || !strings.Contains(string(list), "0 of 2") {
		t.Fatalf("agentrt approvals: %v\n%s", err, list)
	}
	if out, err := f.cmd(data, "approve", run, step, "--key", aliceKey).CombinedOutput(); err != nil || !strings.Contains(string(out), "vote counted; pending: 1 of 2 (alice)") {
		t.Fatalf("alice's vote: %v\n%s", err, out)
	}
	if out, err := f.cmd(data, "approve", run, step, "--key", aliceKey).CombinedOutput(); err == nil || !strings.Contains(string(out), "duplicate") {
		t.Fatalf("alice's second vote was not refused as a duplicate: %v\n%s", err, out)
	}

	// 2: killed while parked with one vote stored.
	d.kill()
	d = f.serve(t, data)
	d.waitFor(t, run, "stayed parked", parked)
	statement := filepath.Join(keys, "vote.txt")
	out, err := f.cmd(data, "approve", run, step, "--print").Output()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(statement, out, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(keygen, "-Y", "sign", "-n", "agentrt-approval", "-f", bobKey, statement).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen -Y sign: %v\n%s", err, out)
	}
	if out, err := f.cmd(data, "approve", run, step, "--statement", statement, "--signature", statement+".sig").CombinedOutput(); err != nil || !strings.Contains(string(out), "approved") {
		t.Fatalf("bob's vote signed by ssh-keygen: %v\n%s", err, out)
	}

	// 3: killed just after the deciding vote, as the run resumes.
	d.kill()
	d = f.serve(t, data)
	ri = d.waitEnd(t, run)
	if ri.Status != journal.StatusCompleted {
		t.Fatalf("the run ended %s: %s\n%s", ri.Status, ri.Error, d.logText())
	}
	var res struct {
		Approved  bool
		Approvers []string
		Effects   string
	}
	if err := json.Unmarshal(ri.Output, &res); err != nil || !res.Approved || strings.Join(res.Approvers, ",") != "alice,bob" || res.Effects != "2" {
		t.Fatalf("the agent got %s (%v)", ri.Output, err)
	}
	hits.mu.Lock()
	if hits.bodies["before"] != 1 || hits.bodies["after"] != 1 || len(hits.keys) != 2 || hits.keys[""] != 0 {
		t.Errorf("the effects around the wait: %v, keys %v; want each once, under two keys", hits.bodies, hits.keys)
	}
	hits.mu.Unlock()
	if err := d.term(t); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	f.replayed(t, data, run)
	bundle := filepath.Join(keys, "run.bundle")
	if out, err := f.cmd(data, "audit", "export", run, "-o", bundle).CombinedOutput(); err != nil {
		t.Fatalf("export: %v\n%s", err, out)
	}
	cellKeys, err := f.cmd(data, "keys").Output()
	if err != nil {
		t.Fatal(err)
	}
	trust := writeTemp(t, string(cellKeys))
	approvers := writeTemp(t, aliceLine+"\n"+bobLine+"\n")
	out, err = f.cmd(data, "audit", "verify", bundle, "--trust", trust, "--trust-approvers", approvers).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "approvals:  1 requests, 1 decided, 2 votes checked against trusted approver keys") {
		t.Fatalf("audit verify: %v\n%s", err, out)
	}
}
