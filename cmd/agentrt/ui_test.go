package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/testutil"
)

// TestCellServeUI: `agentrt cell serve --ui 127.0.0.1:0` serves the
// dashboard behind the token it writes to DATA/api.token; a run of the
// daemon granted http to 127.0.0.1 cannot reach it; and an address that is
// not loopback is refused with a hint, before anything is served.
func TestCellServeUI(t *testing.T) {
	bin, data := buildCLI(t), t.TempDir()
	d := serveDaemon(t, bin, t.TempDir(), data, "--ui", "127.0.0.1:0")
	m := regexp.MustCompile(`dashboard on http://(127\.0\.0\.1:[0-9]+) `).FindStringSubmatch(d.logText())
	if m == nil {
		t.Fatalf("the daemon named no dashboard address:\n%s", d.logText())
	}
	ui := m[1]
	tok, err := os.ReadFile(filepath.Join(data, cell.APITokenFile))
	if err != nil {
		t.Fatal(err)
	}
	in, _ := json.Marshal([]map[string]any{
		{"url": "http://" + ui + "/", "headers": map[string]string{"Authorization": "Bearer " + strings.TrimSpace(string(tok))}},
		{"method": "POST", "url": "http://" + ui + "/login", "headers": map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, "body": "token=x"},
	})
	run, err := d.client.Submit(context.Background(), cell.Submission{Module: testutil.BuildGo(t, "host/testdata/agents/egress"), Name: "egress.wasm", Input: in,
		Grant: "capabilities: {run: {}, http: {hosts: [\"127.0.0.1\"]}}"})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	if ri := d.completed(t, run); json.Unmarshal(ri.Output, &lines) != nil || len(lines) != 2 {
		t.Fatalf("output %s", ri.Output)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "denied: http.request: "+ui+" is the cell's own listener (the cell's dashboard on "+ui+")") {
			t.Errorf("the agent's call to the dashboard: %q", l)
		}
	}
	get := func(token string) (int, string) {
		req, _ := http.NewRequest("GET", "http://"+ui+"/", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(""); code != http.StatusUnauthorized || strings.Contains(body, run) {
		t.Fatalf("the dashboard without the token: %d", code)
	}
	if code, body := get(strings.TrimSpace(string(tok))); code != http.StatusOK || !strings.Contains(body, run) {
		t.Fatalf("the dashboard with the token: %d, the run listed %v", code, strings.Contains(body, run))
	}

	out, err := exec.Command(bin, "--data", t.TempDir(), "cell", "serve", "--ui", "0.0.0.0:0").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not a loopback address") || !strings.Contains(string(out), "hint:") {
		t.Fatalf("--ui on 0.0.0.0: %v\n%s", err, out)
	}
}
