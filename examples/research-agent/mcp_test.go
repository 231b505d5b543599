package main_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/internal/fakellm"
	"github.com/agentrt/agentrt/internal/testutil"
	sandbox "github.com/agentrt/agentrt/native-sandbox"
)

// TestResearchAgentMCP runs the agent in its MCP mode against the fake
// provider: the model is offered the notes server's granted tools beside
// fetch, and its calls reach the server (the mcp-notes example's, built
// from source and launched under the sandbox): it reads a note the
// directory holds and saves one, which is on disk after. The run replays
// without the server.
func TestResearchAgentMCP(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "notes-server")
	build := exec.Command("go", "build", "-o", bin, "./examples/mcp-notes/server")
	build.Dir = testutil.RepoRoot()
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the notes server: %v\n%s", err, out)
	}
	notes := filepath.Join(t.TempDir(), "notes")
	if err := os.Mkdir(notes, 0o755); err != nil {
		t.Fatal(err)
	}
	site := startSite(t)
	writeFile(t, filepath.Join(notes, "handbook.txt"), []byte(site.URL+"/effects is the page on effects."))
	if os.Geteuid() == 0 {
		for _, p := range []string{notes, filepath.Join(notes, "handbook.txt")} {
			if err := os.Chown(p, sandbox.DefaultUser.UID, sandbox.DefaultUser.GID); err != nil {
				t.Fatal(err)
			}
		}
	}
	grantText, err := os.ReadFile(exampleFile("grant.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	grantText = bytes.ReplaceAll(grantText, []byte("/srv/mcp-notes/server"), []byte(bin))
	grantText = bytes.ReplaceAll(grantText, []byte("/srv/notes"), []byte(notes))
	grant := filepath.Join(t.TempDir(), "grant.yaml")
	writeFile(t, grant, grantText)

	doc, err := os.ReadFile(exampleFile("script-mcp.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := fakellm.ParseScript(bytes.ReplaceAll(doc, []byte("{{site}}"), []byte(site.URL)))
	if err != nil {
		t.Fatal(err)
	}
	fake := startFake(t, sc)
	c := newCell(t, fake, "openai-chat", sc.APIKey, testutil.CompileCache())
	in, _ := json.Marshal(map[string]any{"question": "How does a server drop a repeated request?", "model": "fake-mini", "mcp": "notes"})
	res, out := parseRun(t, c.run("run", module(t), "--grant", grant, "-q", "--json", "--input", string(in)))
	if res.Status != "completed" {
		t.Fatalf("run %s: %s", res.Status, res.Error)
	}
	if want := sc.Turns[len(sc.Turns)-1].Reply.Text; out.Answer != want {
		t.Fatalf("answer %q, want %q", out.Answer, want)
	}
	if !slices.Equal(out.Notes, []string{"effects"}) || out.ToolCalls != 4 || !slices.Equal(out.Sources, []string{site.URL + "/effects"}) {
		t.Fatalf("notes %q, %d tool calls, sources %q", out.Notes, out.ToolCalls, out.Sources)
	}
	if st := fake.settledStats(t); len(st.Requests) != len(sc.Turns) {
		t.Fatalf("the fake got %d requests, want %d (a turn whose expectation failed is answered 400)", len(st.Requests), len(sc.Turns))
	}
	saved, err := os.ReadFile(filepath.Join(notes, "effects.txt"))
	if err != nil || !strings.Contains(string(saved), "idempotency key") {
		t.Fatalf("the note the model saved through the server: %q %v", saved, err)
	}
	// The journal answers every call: without the notes, replay agrees.
	if err := os.RemoveAll(notes); err != nil {
		t.Fatal(err)
	}
	c.run("replay", res.Run, "-q")
}
