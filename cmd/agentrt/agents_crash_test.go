package main

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/cellkey"
)

// TestDaemonKilledWithAFamilyInFlight kills `agentrt cell serve` with
// SIGKILL while a parent run is parked awaiting two sub-agents, one of them
// with an HTTP request open, under a budget of 12 requests the family
// shares. The restarted daemon finishes every run of the family: the
// children are recovered (the request held open answered in_doubt, and
// the other child's too when one was in flight at the kill), the
// parent is woken by their ends and completes with their outcomes; the
// server never sees more requests than the parent's ceiling, and
// `agentrt replay` verifies every journal.
func TestDaemonKilledWithAFamilyInFlight(t *testing.T) {
	bin, cache, data := buildCLI(t), testutil.CompileCache(), t.TempDir()
	code := testutil.BuildGo(t, "host/testdata/agents/spender")
	key, err := cellkey.LoadOrCreate(data)
	if err != nil {
		t.Fatal(err)
	}

	// The server holds its fourth request open until the client goes.
	var mu sync.Mutex
	served := 0
	held := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		served++
		n := served
		mu.Unlock()
		if n == 4 {
			held <- struct{}{}
			<-r.Context().Done()
			return
		}
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()
	hostport := strings.TrimPrefix(srv.URL, "http://")

	grantText := fmt.Sprintf("capabilities:\n  run: {}\n  timer: {}\n  agent: {max_children: 2, max_depth: 2}\n  http: {hosts: [%q]}\n", hostport)
	g, err := host.ParseGrant([]byte(grantText))
	if err != nil {
		t.Fatal(err)
	}
	caps, err := g.TokenCaps()
	if err != nil {
		t.Fatal(err)
	}
	tok, err := capability.Issue(key, capability.Claims{Audience: key.Public().(ed25519.PublicKey), Caps: caps,
		Budget:    capability.Budget{HTTPRequests: capability.Limit(12)},
		NotBefore: time.Now().Add(-time.Hour), Expires: time.Now().Add(24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(code)
	childCaps := fmt.Sprintf("{run: {}, timer: {}, agent: {max_children: 1, max_depth: 1}, http: {hosts: [%q]}}", hostport)
	fetch := map[string]any{"url": srv.URL, "n": 3}
	child := map[string]any{"module": hex.EncodeToString(sum[:]), "caps": childCaps, "budget": "http_requests=5", "input": map[string]any{"fetch": fetch, "fetch_first": true}}
	plan, _ := json.Marshal(map[string]any{"spawn": []any{child, child}, "await": true, "fetch": map[string]any{"url": srv.URL, "n": 20}})

	d := serveDaemon(t, bin, cache, data)
	parent, err := d.client.Submit(context.Background(), cell.Submission{Module: code, Name: "spender.wasm", Grant: grantText, Token: tok, Input: plan})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-held:
	case <-time.After(60 * time.Second):
		t.Fatalf("the family never made its fourth request\n%s", d.logText())
	}
	d.kill()

	d = serveDaemon(t, bin, cache, data)
	ri := d.waitEnd(t, parent)
	if ri.Status != journal.StatusCompleted {
		t.Fatalf("the parent ended %s: %s\n%s", ri.Status, ri.Error, d.logText())
	}
	var r struct {
		Spawned  []struct{ Run string }
		Outcomes []struct {
			Run, Status string
			Output      []byte
		}
		Errors  []string
		Fetched int
	}
	if err := json.Unmarshal(ri.Output, &r); err != nil {
		t.Fatalf("output %q: %v", ri.Output, err)
	}
	if len(r.Spawned) != 2 || len(r.Outcomes) != 2 {
		t.Fatalf("the parent's report %+v", r)
	}
	runs := []string{parent}
	inDoubt := 0
	for i, o := range r.Outcomes {
		if o.Status != "completed" || o.Run != r.Spawned[i].Run {
			t.Fatalf("child %d: %+v", i, o)
		}
		var kid struct {
			Errors  []string
			Fetched int
		}
		if err := json.Unmarshal(o.Output, &kid); err != nil {
			t.Fatal(err)
		}
		for _, e := range kid.Errors {
			if !strings.HasPrefix(e, "in_doubt: ") {
				t.Errorf("child %d: %q", i, e)
			}
			inDoubt++
		}
		if len(kid.Errors) > 1 {
			t.Errorf("child %d: %d requests in doubt, but a child has one request in flight at most", i, len(kid.Errors))
		}
		if ki := d.waitEnd(t, o.Run); ki.Status != journal.StatusCompleted {
			t.Fatalf("child %s ended %s", o.Run, ki.Status)
		}
		runs = append(runs, o.Run)
	}
	// The request held open is in doubt; so is the other child's, when
	// the kill found one in flight (sent, its answer not yet journaled).
	if inDoubt < 1 || inDoubt > 2 {
		t.Errorf("%d requests in doubt after the kill, want the one held open, and at most the other child's in flight", inDoubt)
	}
	mu.Lock()
	n := served
	mu.Unlock()
	t.Logf("the server saw %d requests; the parent fetched %d after its children", n, r.Fetched)
	if !strings.Contains(d.logText(), "recovered ") {
		t.Errorf("the restarted daemon did not say what it recovered:\n%s", d.logText())
	}
	if n > 12 {
		t.Fatalf("the server saw %d requests, the family's ceiling is 12", n)
	}
	// The parent got back what its children did not spend, and spent the
	// rest itself: the family's 12, the request in doubt counted.
	if got := 6 + r.Fetched; got != 12 {
		t.Errorf("the children spent 6 and the parent %d: want the family's 12", r.Fetched)
	}
	if err := d.term(t); err != nil {
		t.Fatalf("the daemon exited with %v after SIGTERM\n%s", err, d.logText())
	}
	for _, run := range runs {
		if out, err := exec.Command(bin, "--data", data, "--cache", cache, "replay", run).CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "verified ") {
			t.Fatalf("replay of run %s: %v\n%s", run, err, out)
		}
	}
}
