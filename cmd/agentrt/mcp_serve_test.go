package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrt/agentrt/internal/testutil"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPServeOverStdio drives agentrt mcp serve as an MCP client
// launches it, a go-sdk client on its stdin and stdout: the tools are
// listed, a run of a pushed module is started and listed, its journal
// summarized and verified, and a run whose grant the client's token does
// not cover is refused. Nothing but MCP reaches stdout.
func TestMCPServeOverStdio(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	mod := filepath.Join(dir, "smoke.wasm")
	if err := os.WriteFile(mod, testutil.BuildGo(t, "host/testdata/agents/smoke"), 0o644); err != nil {
		t.Fatal(err)
	}
	caps := filepath.Join(dir, "caps.yaml")
	if err := os.WriteFile(caps, []byte("capabilities:\n  run: {}\n  kv: {namespace: smoke}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := run(append([]string{"--data", data}, args...), strings.NewReader(""), &out, &errb); code != 0 {
			t.Fatalf("agentrt %v: exit %d\n%s", args, code, errb.String())
		}
		return strings.TrimSpace(out.String())
	}
	sum := cmd("module", "push", mod)
	token := filepath.Join(dir, "client.token")
	cmd("token", "issue", "--caps", caps, "-o", token)

	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr lockedWriter
	served := make(chan int, 1)
	go func() {
		code := run([]string{"--data", data, "mcp", "serve", "--token", token}, inR, outW, &stderr)
		outW.Close()
		served <- code
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test-client", Version: "1"}, nil).Connect(ctx, &sdk.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatalf("connecting: %v (stderr: %s)", err, stderr.String())
	}
	var names []string
	for tl, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tl.Name)
	}
	if strings.Join(names, ",") != "answer_approval,list_approvals,list_runs,run_summary,start_run,verify_run" {
		t.Fatalf("tools %v", names)
	}
	tool := func(name string, args map[string]any, out any) string {
		t.Helper()
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if res.IsError {
			return res.Content[0].(*sdk.TextContent).Text
		}
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: %s: %v", name, b, err)
		}
		return ""
	}
	grant := "capabilities:\n  run: {}\n  kv: {namespace: smoke}\n"
	var started struct {
		Run    string `json:"run_id"`
		Status string
		Output string
	}
	if msg := tool("start_run", map[string]any{"module_sha256": sum, "grant": grant, "wait": true}, &started); msg != "" {
		t.Fatalf("start_run: %s", msg)
	}
	if started.Status != "completed" || started.Output == "" {
		t.Fatalf("start_run: %+v", started)
	}
	var runs struct {
		Runs []struct {
			Run string `json:"run_id"`
		}
	}
	if msg := tool("list_runs", map[string]any{}, &runs); msg != "" || len(runs.Runs) != 1 || runs.Runs[0].Run != started.Run {
		t.Fatalf("list_runs: %q %+v", msg, runs)
	}
	var sum2 struct {
		Status  string
		Entries int
		Seals   int
	}
	if msg := tool("run_summary", map[string]any{"run_id": started.Run}, &sum2); msg != "" || sum2.Status != "completed" || sum2.Entries == 0 || sum2.Seals == 0 {
		t.Fatalf("run_summary: %q %+v", msg, sum2)
	}
	var ver struct {
		Verified bool
		Output   string
	}
	if msg := tool("verify_run", map[string]any{"run_id": started.Run}, &ver); msg != "" || !ver.Verified || ver.Output != started.Output {
		t.Fatalf("verify_run: %q %+v", msg, ver)
	}
	// The token allows kv namespace smoke only.
	wider := "capabilities:\n  run: {}\n  kv: {namespace: other}\n"
	if msg := tool("start_run", map[string]any{"module_sha256": sum, "grant": wider}, &started); !strings.Contains(msg, "the run was refused") {
		t.Fatalf("a grant the token does not cover: %q", msg)
	}
	cs.Close()
	inW.Close()
	if code := <-served; code != 0 {
		t.Fatalf("mcp serve exited %d: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "agentrt mcp serve: cell ") {
		t.Errorf("stderr %q", stderr.String())
	}
}

// lockedWriter is a buffer written by the server's goroutine and read by
// the test.
type lockedWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
