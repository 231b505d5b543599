package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/internal/testutil"
)

// jsonRun is what run --json and runs --json say of a run's output.
type jsonRun struct {
	RunID        string          `json:"run_id"`
	Status       string          `json:"status"`
	Output       json.RawMessage `json:"output"`
	OutputText   bool            `json:"output_text"`
	OutputBase64 []byte          `json:"output_base64"`
}

// bytes returns the output the object carries, and how: "json", "text" or
// "base64".
func (r jsonRun) bytes(t *testing.T) ([]byte, string) {
	t.Helper()
	switch {
	case r.OutputBase64 != nil:
		if r.Output != nil || r.OutputText {
			t.Fatalf("output_base64 with output %s, output_text %v", r.Output, r.OutputText)
		}
		return r.OutputBase64, "base64"
	case r.OutputText:
		var s string
		if err := json.Unmarshal(r.Output, &s); err != nil {
			t.Fatalf("output_text with output %s: %v", r.Output, err)
		}
		return []byte(s), "text"
	}
	return r.Output, "json"
}

// TestRunJSONCarriesBinaryOutput runs agents whose output is bytes that
// are not UTF-8, UTF-8 text with control characters, and JSON, on a cell
// of the command's own and on a daemon: run --json and runs --json carry
// each exactly (output_base64, a string with output_text, the JSON
// itself), the same bytes the plain run writes to a pipe.
func TestRunJSONCarriesBinaryOutput(t *testing.T) {
	bin, err := exec.LookPath("agentrt")
	if err != nil {
		t.Fatal("agentrt is not on PATH: TestMain puts this test binary there as agentrt")
	}
	dir := t.TempDir()
	smoke := filepath.Join(dir, "smoke.wasm")
	hostile := filepath.Join(dir, "hostile.wasm")
	for file, src := range map[string]string{smoke: "host/testdata/agents/smoke", hostile: "cmd/agentrt/testdata/agents/hostile"} {
		if err := os.WriteFile(file, testutil.BuildGo(t, src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	grant := writeTemp(t, "capabilities:\n  run: {}\n  kv: {namespace: smoke}\n  http: {hosts: [127.0.0.1]}\n")
	// One seed, so that every run of an agent writes the same output.
	seed := strings.Repeat("07", 32)
	binary := []byte{0xff, 0xfe, 0, 'a', 0x80, 0xc3}
	cases := []struct {
		name, module string
		input        []byte
		how          string
		prefix       []byte // of the output
	}{
		// smoke's output starts with "input=" and its input.
		{"not UTF-8", smoke, binary, "base64", append([]byte("input="), binary...)},
		{"text with controls", smoke, []byte("tab\there\x1b[31m \u202e"), "text", []byte("input=tab\there\x1b[31m \u202e\n")},
		{"JSON", hostile, []byte(`[{"op":"output","text":"{\"b\": [1, 2.5, \"é\"]}"}]`), "json", []byte(`{"b": [1, 2.5, "é"]}`)},
	}
	cache := testutil.CompileCache()
	agentrt := func(t *testing.T, data string, input []byte, args ...string) []byte {
		t.Helper()
		in := filepath.Join(t.TempDir(), "input")
		if err := os.WriteFile(in, input, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, append([]string{"--data", data, "--cache", cache}, append(args, "--input-file", in)...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("agentrt %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return stdout.Bytes()
	}
	check := func(t *testing.T, where string, obj []byte, how string, want []byte) {
		t.Helper()
		var r jsonRun
		if err := json.Unmarshal(obj, &r); err != nil {
			t.Fatalf("%s: %s is not JSON: %v", where, obj, err)
		}
		got, gotHow := r.bytes(t)
		if gotHow != how {
			t.Fatalf("%s: output as %s, want %s: %s", where, gotHow, how, obj)
		}
		// The plain run ends the output with a newline when it has none.
		if !bytes.HasSuffix(got, []byte("\n")) {
			got = append(got, '\n')
		}
		if how == "json" {
			// Embedded JSON is the same value; the CLI may respace it.
			var a, b any
			if json.Unmarshal(got, &a) != nil || json.Unmarshal(want, &b) != nil || !jsonEqual(a, b) {
				t.Fatalf("%s: output %s, want %s", where, got, want)
			}
			return
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: output %q, want %q", where, got, want)
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := t.TempDir()
			run := []string{"run", tc.module, "--grant", grant, "-q", "--seed", seed}
			// To a pipe, the plain run writes the output as it is (and a
			// newline when it ends without one).
			plain := agentrt(t, data, tc.input, run...)
			if !bytes.HasPrefix(plain, tc.prefix) {
				t.Fatalf("plain output %q, want it to start with %q", plain, tc.prefix)
			}
			check(t, "run --json", agentrt(t, data, tc.input, append(run, "--json")...), tc.how, plain)

			// The same through a daemon: the run's end and the run list.
			f := &cellFixture{bin: bin, cache: cache}
			daemonData := t.TempDir()
			d := f.serve(t, daemonData)
			check(t, "run --json on the daemon", agentrt(t, daemonData, tc.input, append(run, "--json")...), tc.how, plain)
			// The daemon's API carries a JSON output as JSON: the same
			// value, compacted; anything else byte for byte.
			remote := agentrt(t, daemonData, tc.input, run...)
			var a, b any
			if tc.how == "json" && (json.Unmarshal(remote, &a) != nil || json.Unmarshal(plain, &b) != nil || !jsonEqual(a, b)) ||
				tc.how != "json" && !bytes.Equal(remote, plain) {
				t.Fatalf("the daemon's plain output %q, want %q", remote, plain)
			}
			list := f.cmd(daemonData, "runs", "--json")
			out, err := list.Output()
			if err != nil {
				t.Fatalf("runs --json: %v", err)
			}
			lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
			if len(lines) != 2 {
				t.Fatalf("runs --json: %d lines, want 2:\n%s", len(lines), out)
			}
			for _, l := range lines {
				check(t, "runs --json", l, tc.how, plain)
			}
			if err := d.term(t); err != nil {
				t.Fatalf("the daemon exited with %v\n%s", err, d.logText())
			}
		})
	}
}

// jsonEqual compares decoded JSON values.
func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}
