package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentrt/agentrt/internal/fakellm"
)

const script = `api_key: sk-proc
turns:
  - expect: {api: chat, model: gpt-test}
    reply: {text: "from a real process", chunks: 2}
    usage: {input_tokens: 11, output_tokens: 4, cache_read_tokens: 2}
`

// The fake runs as a process of its own, as the demo and the crash tests
// run it: it prints its URL, serves, answers its stats over HTTP, and
// exits 0 on SIGTERM.
func TestRunsAsAProcess(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("SIGTERM")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "fakellm")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	file := filepath.Join(dir, "script.yaml")
	os.WriteFile(file, []byte(script), 0o644)
	cmd := exec.Command(bin, "--script", file, "--listen", "127.0.0.1:0")
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "http://127.0.0.1:") {
		t.Fatalf("first line %q, %v; stderr %s", line, err, stderr.String())
	}
	url := strings.TrimSpace(line)
	req, _ := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(`{"model":"gpt-test","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer sk-proc")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "from a real process") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	resp, err = http.Get(url + fakellm.StatsPath)
	if err != nil {
		t.Fatal(err)
	}
	var st fakellm.Stats
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil || len(st.Requests) != 1 || st.Usage != (fakellm.Usage{InputTokens: 11, OutputTokens: 4, CacheReadTokens: 2}) {
		t.Fatalf("stats %+v, %v", st, err)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v; stderr %s", err, stderr.String())
		}
	case <-time.After(5 * time.Second):
		t.Error("still serving 5 s after SIGTERM")
	}
}

func TestCommandErrors(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte(script), 0o644)
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("api_key: k\nturns:\n  - reply: {txt: a}\n"), 0o644)
	cases := []struct {
		args       []string
		want, hint string
	}{
		{nil, "fakellm: error: --script is required", "hint: write the turns"},
		{[]string{"--script", filepath.Join(dir, "none.yaml")}, "no such file", "hint: check the --script path"},
		{[]string{"--script", bad}, `bad.yaml: line 3: unknown key "txt" in turns[0].reply; allowed: text, chunks`, "hint: fix the script"},
		{[]string{"--script", good, "--listen", "0.0.0.0:0"}, `--listen "0.0.0.0:0" is not a loopback address`, "hint: listen on 127.0.0.1"},
		{[]string{"--script", good, "--listen", "nowhere"}, `--listen "nowhere"`, "hint: give HOST:PORT"},
		{[]string{"--script", good, "extra"}, `unexpected argument "extra"`, "hint: fakellm takes flags only"},
		{[]string{"--scrpt", good}, "flag provided but not defined: -scrpt", "hint: run fakellm --help"},
	}
	for _, c := range cases {
		var out, errOut bytes.Buffer
		code := run(c.args, &out, &errOut, nil)
		if code != 1 || !strings.Contains(errOut.String(), c.want) || !strings.Contains(errOut.String(), c.hint) || out.Len() != 0 {
			t.Errorf("%v: exit %d, stderr %q", c.args, code, errOut.String())
		}
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"--help"}, &out, &errOut, nil); code != 0 || !strings.Contains(errOut.String(), "api_key: sk-fake") || !strings.Contains(errOut.String(), "-listen address") {
		t.Errorf("--help: exit %d, %q", code, errOut.String())
	}
}

// In-process, the command serves until stop is closed.
func TestServesUntilStopped(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "s.yaml")
	os.WriteFile(file, []byte(script), 0o644)
	stop := make(chan struct{})
	r, w := io.Pipe()
	code := make(chan int, 1)
	go func() { code <- run([]string{"--script", file}, w, io.Discard, stop); w.Close() }()
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(strings.TrimSpace(line) + fakellm.StatsPath)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v", resp, err)
	}
	resp.Body.Close()
	go io.Copy(io.Discard, r)
	close(stop)
	if c := <-code; c != 0 {
		t.Errorf("exit %d", c)
	}
}

// The script --help shows is one the fake takes.
func TestHelpScriptParses(t *testing.T) {
	_, rest, _ := strings.Cut(usage, "A script (YAML or JSON):\n\n")
	doc, _, _ := strings.Cut(rest, "\nFlags:")
	sc, err := fakellm.ParseScript([]byte(doc))
	if err != nil || len(sc.Turns) != 2 || len(sc.Turns[0].Faults) != 1 || sc.Turns[1].Reply.ToolCalls[0].Name != "fetch" {
		t.Fatalf("%v\n%s", err, doc)
	}
}

// The script the README shows is one the fake takes.
func TestREADMEScriptParses(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "## A fake model provider\n")
	_, rest, ok2 := strings.Cut(rest, "```yaml\n")
	doc, _, ok3 := strings.Cut(rest, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("the README has no fake provider section with a yaml block")
	}
	sc, err := fakellm.ParseScript([]byte(doc))
	if err != nil || len(sc.Turns[0].Faults) != 2 || sc.Turns[0].Expect.API != "chat" {
		t.Fatalf("%v\n%s", err, doc)
	}
}
