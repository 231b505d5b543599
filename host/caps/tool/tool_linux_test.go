package tool_test

// Tests of the tool capability that launch real programs (grep, cp, tee,
// echo, git, dash) under the real sandbox: bubblewrap, seccomp, Landlock.
// They need what make deps installs; a missing piece fails them rather than
// skipping, so that a machine that cannot sandbox never passes as green.

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/badgerstore"
	sandbox "github.com/agentrt/agentrt/native-sandbox"
)

type toolStep struct {
	Tool  string   `json:"tool"`
	Args  []string `json:"args,omitempty"`
	Stdin string   `json:"stdin,omitempty"`
}

type toolOutcome struct {
	Tool   string               `json:"tool"`
	Err    string               `json:"err"`
	Names  [][]byte             `json:"names"`
	Result *abi.ToolRunResponse `json:"result"`
}

// sysRead are the system directories a dynamically linked tool needs.
var sysRead = []string{"/usr", "/lib", "/lib64", "/bin"}

// toolBox is the tree a tool test works in: read-only inputs, a writable
// output directory, a git repository and the root of the run workspaces.
type toolBox struct {
	in, out, repo, work string
}

func newToolBox(t *testing.T) *toolBox {
	t.Helper()
	for _, p := range []string{"/usr/bin/bwrap", "/usr/bin/grep", "/usr/bin/git", "/usr/bin/cp", "/usr/bin/tee", "/usr/bin/echo", "/usr/bin/dash"} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s is missing: run make deps (%v)", p, err)
		}
	}
	root := t.TempDir()
	b := &toolBox{in: filepath.Join(root, "in"), out: filepath.Join(root, "out"), repo: filepath.Join(root, "repo"), work: filepath.Join(root, "work")}
	for _, d := range []string{b.in, b.out} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The tools' write area belongs to the user they run as (nobody, when
	// the tests run as root): the kernel's permission checks hold for them.
	u, err := sandbox.ToolUser()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(b.out, u.UID, u.GID); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(b.in, "a.txt"), "one TODO\ntwo\nTODO three\n")
	writeFile(t, filepath.Join(b.in, "b.txt"), "nothing to do here\n")
	gitRepo(t, b.repo, map[string]string{"README.md": "# demo\n"}, map[string]string{"main.go": "package main\n"})
	return b
}

func writeFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// gitRepo makes a repository in dir with one commit per map of files.
func gitRepo(t *testing.T, dir string, commits ...map[string]string) {
	t.Helper()
	git := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com",
			"GIT_AUTHOR_DATE=2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE=2026-01-01T00:00:00Z")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	git("init", "-q", "-b", "main")
	for i, files := range commits {
		for name, content := range files {
			writeFile(t, filepath.Join(dir, name), content)
		}
		git("add", ".")
		git("commit", "-q", "-m", []string{"first commit", "add main"}[min(i, 1)])
	}
}

func sys(extra ...string) []string { return append(slices.Clone(sysRead), extra...) }

// grant registers the tools of the tests.
func (b *toolBox) grant() *host.Grant {
	env := map[string]string{"LC_ALL": "C"}
	lim := host.ToolLimits{Wall: "60s"}
	file := host.ToolPositional{Pattern: `[A-Za-z0-9._/-]+`, Path: "ro"}
	return &host.Grant{Run: &host.RunGrant{}, Tool: &host.ToolGrant{Tools: []host.ToolSpec{
		{Name: "grep-count", Exec: "/usr/bin/grep",
			Args: host.ToolArgs{Fixed: []string{"-c"}, Flags: []host.ToolFlag{{Name: "-i"}, {Name: "-e", Value: "[A-Za-z]+"}},
				Positional: []host.ToolPositional{file}, Max: 3},
			Read: sys(b.in), Workdir: b.in, Env: env,
			Limits: host.ToolLimits{Wall: "60s", CPU: "10s", Memory: "512MiB", Procs: 16, Output: "64KiB"}},
		{Name: "copy", Exec: "/usr/bin/cp",
			Args: host.ToolArgs{Positional: []host.ToolPositional{file, {Pattern: `[A-Za-z0-9._/-]+`, Path: "rw"}}},
			Read: sys(b.in), Write: []string{b.out}, Env: env, Limits: lim},
		{Name: "note", Exec: "/usr/bin/tee",
			Args: host.ToolArgs{Positional: []host.ToolPositional{{Pattern: `[a-z]+\.txt`, Path: "rw"}}},
			Read: sys(), Workspace: true, Env: env, Limits: lim},
		{Name: "echo", Exec: "/usr/bin/echo", Args: host.ToolArgs{Positional: []host.ToolPositional{{Pattern: `.*`}}, Max: 8},
			Read: sys(), Write: []string{b.out}, Env: env, Limits: lim},
		{Name: "git-log", Exec: "/usr/bin/git",
			Args: host.ToolArgs{Fixed: []string{"log", "--oneline", "--no-decorate", "--no-color"}, Flags: []host.ToolFlag{{Name: "-n", Value: "[0-9]{1,3}"}}},
			Read: sys(b.repo), Workdir: b.repo, Env: map[string]string{"LC_ALL": "C", "HOME": b.repo, "GIT_CONFIG_NOSYSTEM": "1"}, Limits: lim},
		// The script is the grant's, fixed; the guest passes nothing. It
		// counts its launches in out/runs.log.
		{Name: "mark", Exec: "/usr/bin/dash", Args: host.ToolArgs{Fixed: []string{"-c", "echo run >> runs.log"}},
			Read: sys(), Write: []string{b.out}, Env: env, Limits: lim},
	}}}
}

// launches counts the lines of out/runs.log: one per launch of mark.
func (b *toolBox) launches(t *testing.T) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(b.out, "runs.log"))
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(data), "run\n")
}

func runTools(t *testing.T, env *testutil.Env, g *host.Grant, steps []toolStep) (*host.Result, []toolOutcome) {
	t.Helper()
	in, err := json.Marshal(steps)
	if err != nil {
		t.Fatal(err)
	}
	res, err := env.Host.Run(context.Background(), host.RunSpec{Code: testutil.BuildGo(t, "host/testdata/agents/tools"), Grant: g, Input: in})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != journal.StatusCompleted {
		t.Fatalf("run ended %s: %v", res.Status, res.Err)
	}
	return res, decodeOutcomes(t, res.Output)
}

func decodeOutcomes(t *testing.T, out []byte) []toolOutcome {
	t.Helper()
	var outs []toolOutcome
	if err := json.Unmarshal(out, &outs); err != nil {
		t.Fatalf("output %s: %v", out, err)
	}
	return outs
}

// toolEntries returns the journal entries of the tool.run steps, by step.
func toolEntries(t *testing.T, env *testutil.Env, run journal.RunID) map[uint64][]*journal.Entry {
	out := map[uint64][]*journal.Entry{}
	for _, e := range entries(t, env, run) {
		if e.Op == "tool.run" {
			out[e.Step] = append(out[e.Step], e)
		}
	}
	return out
}

func phases(es []*journal.Entry) string {
	var p []string
	for _, e := range es {
		p = append(p, e.Phase.String())
	}
	return strings.Join(p, " ")
}

func TestToolsReadTheirInputsWriteTheirOutputsAndReplayWithoutLaunching(t *testing.T) {
	b := newToolBox(t)
	env := testutil.NewEnv(t, host.Deps{Tools: host.ToolDeps{Workspaces: b.work}}, host.Config{})
	res, outs := runTools(t, env, b.grant(), []toolStep{
		{Tool: "grep-count", Args: []string{"-e", "TODO", "a.txt", "b.txt"}},
		{Tool: "copy", Args: []string{filepath.Join(b.in, "a.txt"), "copy.txt"}},
		{Tool: "note", Args: []string{"notes.txt"}, Stdin: "remember the milk\n"},
		{Tool: "git-log", Args: []string{"-n", "5"}},
		{Tool: "grep-count", Args: []string{"-i", "-e", "nope", "a.txt"}},
		{Tool: "mark"},
	})
	for _, o := range outs {
		if o.Err != "" || o.Result == nil {
			t.Fatalf("%s: %s", o.Tool, o.Err)
		}
	}
	if r := outs[0].Result; string(r.Stdout) != "a.txt:2\nb.txt:0\n" || r.Exit != 0 || len(r.Files) != 0 {
		t.Errorf("grep-count: exit %d, stdout %q, stderr %q, files %v", r.Exit, r.Stdout, r.Stderr, r.Files)
	}
	// cp read its input and wrote its output in the write area, reported by hash.
	a, err := os.ReadFile(filepath.Join(b.in, "a.txt"))
	if err != nil {
		t.Fatal(err)
	}
	copied, err := os.ReadFile(filepath.Join(b.out, "copy.txt"))
	if err != nil || !bytes.Equal(copied, a) {
		t.Fatalf("out/copy.txt: %q %v, want the content of in/a.txt", copied, err)
	}
	sum := sha256.Sum256(a)
	want := []abi.ToolFile{{Path: "copy.txt", Size: uint64(len(a)), SHA256: sum[:]}}
	if r := outs[1].Result; r.Exit != 0 || !slices.EqualFunc(r.Files, want, toolFileEqual) {
		t.Errorf("copy: exit %d, stderr %q, files %+v, want %+v", r.Exit, r.Stderr, r.Files, want)
	}
	// tee read its stdin and wrote into the run's own workspace.
	note, err := os.ReadFile(filepath.Join(b.work, res.Run.String(), "notes.txt"))
	if err != nil || string(note) != "remember the milk\n" {
		t.Fatalf("workspace notes.txt: %q %v", note, err)
	}
	if r := outs[2].Result; string(r.Stdout) != "remember the milk\n" || len(r.Files) != 1 || r.Files[0].Path != "notes.txt" || r.Files[0].Size != 18 {
		t.Errorf("note: stdout %q, files %+v", r.Stdout, r.Files)
	}
	if r := outs[3].Result; !regexp.MustCompile(`^[0-9a-f]{7,} add main\n[0-9a-f]{7,} first commit\n$`).Match(r.Stdout) {
		t.Errorf("git log: exit %d, stdout %q, stderr %q", r.Exit, r.Stdout, r.Stderr)
	}
	// A tool that ran and failed is a successful call carrying its status.
	if r := outs[4].Result; r.Exit != 1 || string(r.Stdout) != "0\n" {
		t.Errorf("grep without a match: exit %d, stdout %q", r.Exit, r.Stdout)
	}
	if n := b.launches(t); n != 1 {
		t.Fatalf("mark ran %d times, want 1", n)
	}

	// The journal holds intent (with the request), executing (with the
	// idempotency key) and completed (with the response) for each run.
	steps := toolEntries(t, env, res.Run)
	if len(steps) != len(outs) {
		t.Fatalf("%d tool.run steps journaled, want %d", len(steps), len(outs))
	}
	i := 0
	for _, step := range slices.Sorted(maps.Keys(steps)) {
		es := steps[step]
		if phases(es) != "intent executing completed" {
			t.Fatalf("step %d journaled %q", step, phases(es))
		}
		var req abi.ToolRunRequest
		if err := abi.Unmarshal(es[0].Request, &req); err != nil || req.Name != outs[i].Tool {
			t.Errorf("step %d intent request %+v (%v), want tool %s", step, req, err, outs[i].Tool)
		}
		if es[1].Key != res.Run.String()+"-"+strconv.FormatUint(step, 10) {
			t.Errorf("step %d executing key %q", step, es[1].Key)
		}
		var resp abi.ToolRunResponse
		if err := abi.Unmarshal(es[2].Response, &resp); err != nil || !bytes.Equal(resp.Stdout, outs[i].Result.Stdout) || resp.Exit != outs[i].Result.Exit {
			t.Errorf("step %d completed response %+v (%v), want the guest's %+v", step, resp, err, outs[i].Result)
		}
		i++
	}

	// Replay answers every call from the journal: nothing is launched.
	writeFile(t, filepath.Join(b.out, "copy.txt"), "changed since\n")
	replaysTo(t, env, res.Run, testutil.BuildGo(t, "host/testdata/agents/tools"), res.Output)
	if n := b.launches(t); n != 1 {
		t.Fatalf("after replay mark has run %d times, want 1: replay launched it", n)
	}
	if got, _ := os.ReadFile(filepath.Join(b.out, "copy.txt")); string(got) != "changed since\n" {
		t.Fatalf("replay ran cp again: out/copy.txt is %q", got)
	}
}

func toolFileEqual(a, b abi.ToolFile) bool {
	return a.Path == b.Path && a.Size == b.Size && bytes.Equal(a.SHA256, b.SHA256) && a.Unhashed == b.Unhashed
}

func TestToolSchemaRefusesArgumentsBeforeTheIntent(t *testing.T) {
	b := newToolBox(t)
	env := testutil.NewEnv(t, host.Deps{Tools: host.ToolDeps{Workspaces: b.work}}, host.Config{})
	tests := []struct {
		step toolStep
		want string
	}{
		{toolStep{Tool: "rm", Args: []string{"-rf", "/"}},
			`denied: tool.run: no tool "rm" in the grant (granted: grep-count, copy, note, echo, git-log, mark)`},
		{toolStep{Tool: "grep-count", Args: []string{"--include=*.go", "a.txt"}},
			`denied: tool.run: tool grep-count: argument 1 "--include=*.go": flag --include is not in the tool's schema (allowed: -i, -e)`},
		{toolStep{Tool: "git-log", Args: []string{"--output=/tmp/x"}},
			`denied: tool.run: tool git-log: argument 1 "--output=/tmp/x": flag --output is not in the tool's schema (allowed: -n)`},
		{toolStep{Tool: "grep-count", Args: []string{"-e", "1x", "a.txt"}},
			`denied: tool.run: tool grep-count: argument 2 "1x": the value of flag -e does not match the pattern "[A-Za-z]+"`},
		{toolStep{Tool: "grep-count", Args: []string{"a.txt", "-e"}},
			`denied: tool.run: tool grep-count: argument 2 "-e": flag -e needs a value (as the next argument, or -e=VALUE)`},
		{toolStep{Tool: "grep-count", Args: []string{"-i=yes", "a.txt"}},
			`denied: tool.run: tool grep-count: argument 1 "-i=yes": flag -i=yes is not in the tool's schema (allowed: -i, -e)`},
		{toolStep{Tool: "grep-count", Args: []string{"-e", "TODO", "a.txt;id"}},
			`denied: tool.run: tool grep-count: argument 3 "a.txt;id": positional value 1 does not match the pattern "[A-Za-z0-9._/-]+"`},
		{toolStep{Tool: "grep-count", Args: []string{"-e", "root", "/etc/passwd"}},
			`denied: tool.run: tool grep-count: argument 3 "/etc/passwd": positional value 1 is a path (/etc/passwd) outside the tool's readable area (`},
		{toolStep{Tool: "grep-count", Args: []string{"-e", "x", "../out/copy.txt"}},
			`denied: tool.run: tool grep-count: argument 3 "../out/copy.txt": positional value 1 holds a '..' element; give the path without it`},
		{toolStep{Tool: "grep-count", Args: []string{"-e", "x", "a.txt", "b.txt", "a.txt", "b.txt"}},
			`denied: tool.run: tool grep-count: argument 6 "b.txt": more than 3 positional values (args.max)`},
		{toolStep{Tool: "copy", Args: []string{filepath.Join(b.in, "a.txt"), filepath.Join(b.in, "evil.txt")}},
			`denied: tool.run: tool copy: argument 2 "` + filepath.Join(b.in, "evil.txt") + `": positional value 2 is a path (` + filepath.Join(b.in, "evil.txt") + `) outside the tool's read-write area (` + b.out + `)`},
		{toolStep{Tool: "mark", Args: []string{"x"}},
			`denied: tool.run: tool mark: argument 1 "x": the tool takes no positional values (only flags: none)`},
		{toolStep{Tool: "grep-count", Args: []string{"-e", "TODO", "a\x00b"}},
			`bad_request: tool.run: argument 3 holds a NUL byte, which no argv can carry`},
	}
	var steps []toolStep
	for _, tt := range tests {
		steps = append(steps, tt.step)
	}
	// Shell metacharacters are data: echo prints them, and no shell
	// runs the command substitution.
	meta := []string{"$(touch pwned)", "a;b", "|", "*", "`touch pwned`", "&&", "'x'"}
	steps = append(steps, toolStep{Tool: "echo", Args: meta}, toolStep{Tool: "mark"})
	res, outs := runTools(t, env, b.grant(), steps)
	journaled := toolEntries(t, env, res.Run)
	for i, tt := range tests {
		if o := outs[i]; o.Result != nil || !strings.HasPrefix(o.Err, tt.want) {
			t.Errorf("%s %q:\n got %q\nwant %q", tt.step.Tool, tt.step.Args, o.Err, tt.want)
		}
		// Step i+2: run.input is step 1. A refusal is one failed entry:
		// nothing was journaled as intent, so nothing was launched.
		if p := phases(journaled[uint64(i+2)]); p != "failed" {
			t.Errorf("%s %q journaled %q, want one failed entry", tt.step.Tool, tt.step.Args, p)
		}
	}
	echo := outs[len(tests)].Result
	if echo == nil || string(echo.Stdout) != strings.Join(meta, " ")+"\n" {
		t.Fatalf("echo of metacharacters: %+v (%s)", echo, outs[len(tests)].Err)
	}
	if _, err := os.Stat(filepath.Join(b.out, "pwned")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a shell ran the metacharacters: out/pwned: %v", err)
	}
	if n := b.launches(t); n != 1 {
		t.Fatalf("mark ran %d times, want 1", n)
	}
}

// interruptTool runs the slow tool and stops the run while it is running:
// as if the host died with the tool in flight.
func interruptTool(t *testing.T, b *toolBox, env *testutil.Env, g *host.Grant) journal.RunID {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// The tool writes runs.log first thing, then waits: cut it there.
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) && ctx.Err() == nil {
			if b.launches(t) > 0 {
				cancel()
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	in, _ := json.Marshal([]toolStep{{Tool: "slow"}})
	res, err := env.Host.Run(ctx, host.RunSpec{Code: testutil.BuildGo(t, "host/testdata/agents/tools"), Grant: g, Input: in})
	if !errors.Is(err, host.ErrInterrupted) {
		t.Fatalf("run: %v, want ErrInterrupted", err)
	}
	if p := phases(toolEntries(t, env, res.Run)[2]); p != "intent executing" {
		t.Fatalf("the interrupted tool journaled %q, want it in doubt (intent executing)", p)
	}
	return res.Run
}

func slowGrant(b *toolBox, idempotent bool) *host.Grant {
	g := b.grant()
	g.Tool.Tools = append(g.Tool.Tools, host.ToolSpec{Name: "slow", Exec: "/usr/bin/dash",
		Args: host.ToolArgs{Fixed: []string{"-c", "echo run >> runs.log; test -e release || exec sleep 50"}},
		Read: sys(), Write: []string{b.out}, Limits: host.ToolLimits{Wall: "55s"}, Idempotent: idempotent})
	return g
}

func resumeTools(t *testing.T, b *toolBox, env *testutil.Env, run journal.RunID) toolOutcome {
	t.Helper()
	// Let a second launch finish at once.
	writeFile(t, filepath.Join(b.out, "release"), "")
	res, err := env.Host.Resume(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != journal.StatusCompleted {
		t.Fatalf("resumed run ended %s: %v", res.Status, res.Err)
	}
	replaysTo(t, env, run, testutil.BuildGo(t, "host/testdata/agents/tools"), res.Output)
	return decodeOutcomes(t, res.Output)[0]
}

func TestToolInDoubtIsNotRunAgainUnlessIdempotent(t *testing.T) {
	b := newToolBox(t)
	env := testutil.NewEnv(t, host.Deps{Tools: host.ToolDeps{Workspaces: b.work}}, host.Config{})
	run := interruptTool(t, b, env, slowGrant(b, false))
	o := resumeTools(t, b, env, run)
	if !strings.HasPrefix(o.Err, "in_doubt: tool.run of step 2 was in flight when the run stopped") {
		t.Fatalf("the tool in doubt answered %q %+v", o.Err, o.Result)
	}
	if n := b.launches(t); n != 1 {
		t.Fatalf("the non-idempotent tool ran %d times, want once", n)
	}
	if p := phases(toolEntries(t, env, run)[2]); p != "intent executing failed" {
		t.Fatalf("step 2 journaled %q", p)
	}
}

func TestToolInDoubtRunsAgainWhenIdempotent(t *testing.T) {
	b := newToolBox(t)
	env := testutil.NewEnv(t, host.Deps{Tools: host.ToolDeps{Workspaces: b.work}}, host.Config{})
	run := interruptTool(t, b, env, slowGrant(b, true))
	o := resumeTools(t, b, env, run)
	if o.Err != "" || o.Result == nil || o.Result.Exit != 0 {
		t.Fatalf("the idempotent tool in doubt answered %q %+v", o.Err, o.Result)
	}
	if n := b.launches(t); n != 2 {
		t.Fatalf("the idempotent tool ran %d times, want twice (once cut, once on resume)", n)
	}
	if p := phases(toolEntries(t, env, run)[2]); p != "intent executing completed" {
		t.Fatalf("step 2 journaled %q", p)
	}
}

func TestToolFailsClosedWithoutTheSandbox(t *testing.T) {
	b := newToolBox(t)
	missing := filepath.Join(t.TempDir(), "bwrap")
	env := testutil.NewEnv(t, host.Deps{Tools: host.ToolDeps{Workspaces: b.work, Sandbox: []sandbox.Option{sandbox.WithBwrap(missing)}}}, host.Config{})
	res, outs := runTools(t, env, b.grant(), []toolStep{{Tool: "mark"}})
	want := "failed: tool.run: tool mark: sandbox: launch refused: bwrap not found at " + missing + " (hint: install bubblewrap"
	if outs[0].Result != nil || !strings.HasPrefix(outs[0].Err, want) {
		t.Fatalf("got %q %+v, want %q...", outs[0].Err, outs[0].Result, want)
	}
	if n := b.launches(t); n != 0 {
		t.Fatalf("mark ran %d times without a sandbox", n)
	}
	// An effect that failed at dispatch: intent and executing were durable
	// first, and the outcome is failed.
	if p := phases(toolEntries(t, env, res.Run)[2]); p != "intent executing failed" {
		t.Fatalf("journaled %q", p)
	}
}

// launchOrder is a journal.Store that notes, for every tool.run entry it
// commits, whether the commit was durable and how many times mark had run
// when the commit began.
type launchOrder struct {
	journal.Store
	b   *toolBox
	t   *testing.T
	got []string
}

func (l *launchOrder) Commit(ctx context.Context, batch *journal.Batch) error {
	n := l.b.launches(l.t)
	for _, r := range batch.Records {
		e, err := journal.DecodeEntry(r.Entry)
		if err != nil {
			return err
		}
		switch {
		case e.Op != "tool.run":
		case e.Phase == journal.PhaseCompleted:
			// Outcomes may be group-committed: only the order matters.
			l.got = append(l.got, fmt.Sprintf("%s launches=%d", e.Phase, n))
		default:
			l.got = append(l.got, fmt.Sprintf("%s durable=%v launches=%d", e.Phase, batch.Durable, n))
		}
	}
	return l.Store.Commit(ctx, batch)
}

// TestToolLaunchesOnlyAfterItsIntentIsDurable defends the write-ahead
// invariant for tools: the intent and executing entries are durable before
// the program starts, and the outcome is written after it ran.
func TestToolLaunchesOnlyAfterItsIntentIsDurable(t *testing.T) {
	b := newToolBox(t)
	st, err := badgerstore.Open(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	log := &launchOrder{Store: st, b: b, t: t}
	_, key, _ := ed25519.GenerateKey(nil)
	h, err := host.New(testutil.SharedEngine(t), host.Deps{Store: log, KV: st, Key: key, Tools: host.ToolDeps{Workspaces: b.work}}, host.Config{})
	if err != nil {
		t.Fatal(err)
	}
	in, _ := json.Marshal([]toolStep{{Tool: "mark"}})
	res, err := h.Run(context.Background(), host.RunSpec{Code: testutil.BuildGo(t, "host/testdata/agents/tools"), Grant: b.grant(), Input: in})
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("run: %v %+v", err, res)
	}
	want := []string{"intent durable=true launches=0", "executing durable=true launches=0", "completed launches=1"}
	if !slices.Equal(log.got, want) {
		t.Fatalf("tool.run entries committed as\n%q\nwant\n%q", log.got, want)
	}
}

// TestToolLaunchesStayWithinTheTokensWallBudget: a token whose budget
// allows the run 1 second of wall time caps every launch at that, whatever
// the tool's own limit (55 s here): the slow tool is killed and reported
// timed out.
func TestToolLaunchesStayWithinTheTokensWallBudget(t *testing.T) {
	b := newToolBox(t)
	env := testutil.NewEnv(t, host.Deps{Tools: host.ToolDeps{Workspaces: b.work}}, host.Config{})
	g := slowGrant(b, false)
	caps, err := g.TokenCaps()
	if err != nil {
		t.Fatal(err)
	}
	tok, err := capability.Issue(env.Key, capability.Claims{
		Caps:      capability.Caps{Run: &capability.Unit{}, Tool: caps.Tool},
		Budget:    capability.Budget{WallSeconds: capability.Limit(1)},
		NotBefore: time.Now().Add(-time.Minute), Expires: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	in, _ := json.Marshal([]toolStep{{Tool: "slow"}})
	res, err := env.Host.Run(context.Background(), host.RunSpec{Code: testutil.BuildGo(t, "host/testdata/agents/tools"), Grant: g, Token: tok, Input: in})
	// The budget caps the run too: the tool timed out within it, and the
	// run was stopped at its next step, having used it all.
	if err != nil || res.Status != journal.StatusFailed || !strings.Contains(res.Err.Error(), "wall-time budget of 1s") {
		t.Fatalf("run: %v %+v; want failed, stopped by its wall-time budget", err, res)
	}
	var timedOut bool
	for _, es := range toolEntries(t, env, res.Run) {
		var r abi.ToolRunResponse
		if e := es[len(es)-1]; e.Phase == journal.PhaseCompleted && abi.Unmarshal(e.Response, &r) == nil {
			timedOut = r.TimedOut
		}
	}
	if !timedOut {
		t.Fatal("the slow tool under a 1 s budget did not time out")
	}
}

// TestToolLaunchedLateGetsWhatIsLeftOfTheWallBudget: a tool launched
// after the run has used part of its wall-time budget may run only for what
// is left of it, not for the whole budget again (a 2 s tool, then a 50 s
// one, under a 4 s budget: the run ends near 4 s, not near 6 s).
func TestToolLaunchedLateGetsWhatIsLeftOfTheWallBudget(t *testing.T) {
	b := newToolBox(t)
	env := testutil.NewEnv(t, host.Deps{Tools: host.ToolDeps{Workspaces: b.work}}, host.Config{})
	g := slowGrant(b, false)
	g.Tool.Tools = append(g.Tool.Tools, host.ToolSpec{Name: "nap", Exec: "/usr/bin/dash",
		Args: host.ToolArgs{Fixed: []string{"-c", "exec sleep 2"}}, Read: sys(), Limits: host.ToolLimits{Wall: "30s"}})
	caps, err := g.TokenCaps()
	if err != nil {
		t.Fatal(err)
	}
	const budget = 4 * time.Second
	tok, err := capability.Issue(env.Key, capability.Claims{
		Caps:      capability.Caps{Run: &capability.Unit{}, Tool: caps.Tool},
		Budget:    capability.Budget{WallSeconds: capability.Limit(uint64(budget / time.Second))},
		NotBefore: time.Now().Add(-time.Minute), Expires: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	in, _ := json.Marshal([]toolStep{{Tool: "nap"}, {Tool: "slow"}})
	start := time.Now()
	res, err := env.Host.Run(context.Background(), host.RunSpec{Code: testutil.BuildGo(t, "host/testdata/agents/tools"), Grant: g, Token: tok, Input: in})
	took := time.Since(start)
	if err != nil || res.Status != journal.StatusFailed || !strings.Contains(res.Err.Error(), "wall-time budget") {
		t.Fatalf("run: %v %+v; want failed, stopped by its wall-time budget", err, res)
	}
	// Budget 4 s: the second tool had about 2 s. Had it been given the
	// whole budget again, the run would have taken 6 s or more.
	if took >= budget+1500*time.Millisecond {
		t.Fatalf("the run took %s under a %s budget: the late tool was given more than what was left", took, budget)
	}
}

// TestToolRunByRootIsNotRootToTheKernel (issue 10, item 4): an agent
// granted cat with /etc in its read list, on a host running as root, reads
// /etc/passwd but not /etc/shadow: the tool runs as nobody, and the
// files it writes in the run's workspace are nobody's.
func TestToolRunByRootIsNotRootToTheKernel(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the attack is a tool run by a root host; CI runs as root")
	}
	b := newToolBox(t)
	env := testutil.NewEnv(t, host.Deps{Tools: host.ToolDeps{Workspaces: b.work}}, host.Config{})
	g := b.grant()
	g.Tool.Tools = append(g.Tool.Tools, host.ToolSpec{Name: "cat", Exec: "/usr/bin/cat",
		Args: host.ToolArgs{Positional: []host.ToolPositional{{Pattern: `/etc/[a-z]+`, Path: "ro"}}},
		Read: sys("/etc"), Workspace: true, Env: map[string]string{"LC_ALL": "C"}, Limits: host.ToolLimits{Wall: "30s"}})
	res, outs := runTools(t, env, g, []toolStep{
		{Tool: "cat", Args: []string{"/etc/shadow"}},
		{Tool: "cat", Args: []string{"/etc/passwd"}},
		{Tool: "note", Args: []string{"mine.txt"}, Stdin: "written by the tool\n"},
	})
	if r := outs[0].Result; r == nil || r.Exit != 1 || string(r.Stderr) != "/usr/bin/cat: /etc/shadow: Permission denied\n" || len(r.Stdout) != 0 {
		t.Errorf("cat /etc/shadow: %+v (%s); want exit 1 and Permission denied", r, outs[0].Err)
	}
	if r := outs[1].Result; r == nil || r.Exit != 0 || !strings.HasPrefix(string(r.Stdout), "root:x:0:0:") {
		t.Errorf("cat /etc/passwd (the control): %+v (%s)", r, outs[1].Err)
	}
	ws := filepath.Join(b.work, res.Run.String())
	for _, p := range []string{ws, filepath.Join(ws, "mine.txt")} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 65534 || st.Gid != 65534 {
			t.Errorf("%s is owned by %d:%d; want nobody (65534:65534)", p, st.Uid, st.Gid)
		}
	}
}

// TestToolDiskAndFileSizeLimitsAreReported (issue 10, item 5): the grant's
// limits.disk and limits.file_size reach the sandbox, and the response
// names them when the tool runs into them: dd writing 200 MiB into the
// workspace under a 32 MiB disk limit is killed, and one file past an
// 8 MiB file size limit stops with EFBIG.
func TestToolDiskAndFileSizeLimitsAreReported(t *testing.T) {
	b := newToolBox(t)
	env := testutil.NewEnv(t, host.Deps{Tools: host.ToolDeps{Workspaces: b.work}}, host.Config{})
	g := b.grant()
	dd := func(name string, lim host.ToolLimits) host.ToolSpec {
		lim.Wall = "60s"
		return host.ToolSpec{Name: name, Exec: "/usr/bin/dd",
			Args: host.ToolArgs{Fixed: []string{"if=/dev/zero", "bs=1M"}, Positional: []host.ToolPositional{{Pattern: `of=[a-z]+`}, {Pattern: `count=[0-9]+`}}},
			Read: sys(), Workspace: true, Env: map[string]string{"LC_ALL": "C"}, Limits: lim}
	}
	g.Tool.Tools = append(g.Tool.Tools, dd("dd-disk", host.ToolLimits{Disk: "32MiB"}), dd("dd-file", host.ToolLimits{FileSize: "8MiB"}))
	res, outs := runTools(t, env, g, []toolStep{
		{Tool: "dd-disk", Args: []string{"of=big", "count=200"}},
		{Tool: "dd-file", Args: []string{"of=one", "count=20"}},
		{Tool: "dd-file", Args: []string{"of=small", "count=4"}},
	})
	if r := outs[0].Result; r == nil || r.Signal != "SIGKILL" || !slices.Contains(r.Limits, "disk") {
		t.Errorf("200 MiB under a 32 MiB disk limit: %+v (%s); want SIGKILL and limits [disk]", r, outs[0].Err)
	}
	if fi, err := os.Stat(filepath.Join(b.work, res.Run.String(), "big")); err != nil || fi.Size() >= 200<<20 {
		t.Errorf("the workspace's big file: %v %v; want it cut short", fi, err)
	}
	if r := outs[1].Result; r == nil || r.Exit != 1 || !strings.Contains(string(r.Stderr), "File too large") || !slices.Equal(r.Limits, []string{"file_size"}) {
		t.Errorf("20 MiB under an 8 MiB file size limit: %+v (%s); want exit 1, File too large, limits [file_size]", r, outs[1].Err)
	}
	if r := outs[2].Result; r == nil || r.Exit != 0 || len(r.Limits) != 0 || len(r.Files) != 1 || r.Files[0].Size != 4<<20 {
		t.Errorf("4 MiB under an 8 MiB limit (the control): %+v (%s)", r, outs[2].Err)
	}
}

// TestToolOutputCannotKeepTheHostBusy (issue 10, item 7): two sparse
// 8 GiB files from a tool held the call for 24 to 58 s while the host
// hashed their holes. Now a file with holes is listed with its size and
// unhashed: sparse, without a byte read; past the tool's hash limit a file
// is listed unhashed: hash, and the response names the limit.
func TestToolOutputCannotKeepTheHostBusy(t *testing.T) {
	b := newToolBox(t)
	env := testutil.NewEnv(t, host.Deps{Tools: host.ToolDeps{Workspaces: b.work}}, host.Config{})
	g := b.grant()
	g.Tool.Tools = append(g.Tool.Tools,
		host.ToolSpec{Name: "holes", Exec: "/usr/bin/truncate", Args: host.ToolArgs{Fixed: []string{"-s", "8G"}, Positional: []host.ToolPositional{{Pattern: `[a-z]+`, Path: "rw"}}, Max: 2},
			Read: sys(), Workspace: true, Limits: host.ToolLimits{Wall: "30s"}},
		host.ToolSpec{Name: "two", Exec: "/usr/bin/dash", Args: host.ToolArgs{Fixed: []string{"-c", "head -c 786432 /dev/urandom > one; head -c 786432 /dev/urandom > two"}},
			Read: sys(), Workspace: true, Limits: host.ToolLimits{Wall: "30s", Hash: "1MiB"}})
	res, outs := runTools(t, env, g, []toolStep{{Tool: "holes", Args: []string{"a", "b"}}, {Tool: "two"}})
	r := outs[0].Result
	want := []abi.ToolFile{{Path: "a", Size: 8 << 30, Unhashed: "sparse"}, {Path: "b", Size: 8 << 30, Unhashed: "sparse"}}
	if r == nil || r.Exit != 0 || !slices.EqualFunc(r.Files, want, toolFileEqual) || len(r.Limits) != 0 {
		t.Fatalf("two 8 GiB holes: %+v (%s); want them listed unhashed, sparse", r, outs[0].Err)
	}
	es := toolEntries(t, env, res.Run)[2]
	took := time.Duration(es[2].Time - es[1].Time)
	t.Logf("tool.run with two sparse 8 GiB files: %v from executing to completed", took)
	if took > 5*time.Second {
		t.Errorf("the call took %v: the host read the holes", took)
	}
	r = outs[1].Result
	if r == nil || r.Exit != 0 || len(r.Files) != 2 || !slices.Equal(r.Limits, []string{"hash"}) {
		t.Fatalf("two 768 KiB files under a 1 MiB hash limit: %+v (%s)", r, outs[1].Err)
	}
	one, err := os.ReadFile(filepath.Join(b.work, res.Run.String(), "one"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(one)
	if f := r.Files[0]; f.Path != "one" || f.Size != 786432 || !bytes.Equal(f.SHA256, sum[:]) || f.Unhashed != "" {
		t.Errorf("the first file: %+v; want it hashed", f)
	}
	if f := r.Files[1]; f.Path != "two" || f.Size != 786432 || f.SHA256 != nil || f.Unhashed != "hash" {
		t.Errorf("the second file: %+v; want it listed, unhashed: hash", f)
	}
}

// TestToolFileNamesThatAreNotUTF8 (issue 10, item 12): a tool that made a
// file whose name is not UTF-8 made the whole result undecodable, and the
// agent lost the exit code and the output. The name now travels as bytes:
// the agent gets the exit status, the output and the name exactly.
func TestToolFileNamesThatAreNotUTF8(t *testing.T) {
	b := newToolBox(t)
	env := testutil.NewEnv(t, host.Deps{Tools: host.ToolDeps{Workspaces: b.work}}, host.Config{})
	g := b.grant()
	g.Tool.Tools = append(g.Tool.Tools, host.ToolSpec{Name: "latin1", Exec: "/usr/bin/dash",
		// café.txt in Latin-1 (0xe9), then café in UTF-8, then exit 3.
		Args: host.ToolArgs{Fixed: []string{"-c", `printf x > "$(printf 'caf\351.txt')"; printf y > "$(printf 'caf\303\251.txt')"; echo done; exit 3`}},
		Read: sys(), Workspace: true, Limits: host.ToolLimits{Wall: "30s"}})
	res, outs := runTools(t, env, g, []toolStep{{Tool: "latin1"}})
	o := outs[0]
	if o.Err != "" || o.Result == nil || o.Result.Exit != 3 || string(o.Result.Stdout) != "done\n" {
		t.Fatalf("the tool's result: %+v (%s); want exit 3 and its output", o.Result, o.Err)
	}
	want := [][]byte{[]byte("caf\u00e9.txt"), []byte("caf\xe9.txt")} // sorted bytewise
	if !slices.EqualFunc(o.Names, want, bytes.Equal) {
		t.Errorf("file names %q; want %q, byte for byte", o.Names, want)
	}
	// On the host, the name is the one the tool made.
	if _, err := os.Stat(filepath.Join(b.work, res.Run.String(), "caf\xe9.txt")); err != nil {
		t.Error(err)
	}
	// The journaled response holds the name as a byte string, and replays.
	es := toolEntries(t, env, res.Run)[2]
	if !bytes.Contains(es[2].Response, append([]byte("dpath\x48"), "caf\xe9.txt"...)) {
		t.Errorf("journaled response %x; want the Latin-1 name as a byte string", es[2].Response)
	}
	replaysTo(t, env, res.Run, testutil.BuildGo(t, "host/testdata/agents/tools"), res.Output)
}

// TestToolCannotReachTheCellsDataDirectory (the lead's rule, SECURITY-TESTS
// 31): whatever the grant lists, a tool never sees the cell's data
// directory (its key, API token, store), except its run's own workspace in
// DATA/work, nor its compilation cache where --cache puts it outside DATA. A grant naming DATA, a parent of it, a path in it or a link
// to it in a tool's paths is denied at the gate, before anything is
// journaled as intent or launched: the agent cannot read DATA/cell_ed25519.
func TestToolCannotReachTheCellsDataDirectory(t *testing.T) {
	b := newToolBox(t)
	data := filepath.Join(t.TempDir(), "data")
	// The module is compiled into the cell's cache first, under a long
	// limit: under -race, beside the other packages' tests, a cold compile
	// of a Go guest can outlast the cell's 30 s, which is not what this
	// test is about.
	cache := filepath.Join(t.TempDir(), "cache")
	warm, err := host.NewEngine(context.Background(), host.EngineConfig{Kind: host.EngineWazero, CacheDir: cache, Compile: host.CompileLimits{Timeout: 10 * time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := warm.Compile(context.Background(), testutil.BuildGo(t, "host/testdata/agents/tools")); err != nil {
		t.Fatal(err)
	}
	warm.Close(context.Background())
	c, err := cell.Open(context.Background(), data, cell.Options{Engine: host.EngineWazero, CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	key := filepath.Join(data, "cell_ed25519")
	if _, err := os.Stat(key); err != nil {
		t.Fatalf("the cell has no key file: %v", err)
	}
	link := filepath.Join(b.in, "innocent")
	if err := os.Symlink(data, link); err != nil {
		t.Fatal(err)
	}
	cat := func(name string, read []string, extra ...string) host.ToolSpec {
		return host.ToolSpec{Name: name, Exec: "/usr/bin/cat", Args: host.ToolArgs{Positional: []host.ToolPositional{{Pattern: `/.+`, Path: "ro"}}},
			Read: append(sys(), read...), Write: extra, Workspace: true, Limits: host.ToolLimits{Wall: "30s"}}
	}
	g := b.grant()
	g.Tool.Tools = append(g.Tool.Tools,
		cat("cat-data", []string{data}),
		cat("cat-parent", []string{filepath.Dir(data)}),
		cat("cat-root", []string{"/"}),
		cat("cat-link", []string{link}),
		cat("cat-store", []string{filepath.Join(data, "store")}),
		cat("cat-work", []string{cell.WorkDir(data)}),
		cat("write-data", nil, data),
		// The compilation cache, outside DATA here (--cache): what a tool
		// could plant there (a module's rewrite, compiled code) the cell
		// would execute in later runs.
		cat("cat-cache", []string{cache}),
		cat("write-cache", nil, filepath.Join(cache, "agentrt-rewrite")),
	)
	steps := []toolStep{
		{Tool: "cat-data", Args: []string{key}},
		{Tool: "cat-parent", Args: []string{key}},
		{Tool: "cat-root", Args: []string{key}},
		{Tool: "cat-link", Args: []string{filepath.Join(link, "cell_ed25519")}},
		{Tool: "cat-store", Args: []string{filepath.Join(data, "store", "MANIFEST")}},
		{Tool: "cat-work", Args: []string{filepath.Join(cell.WorkDir(data), "x")}},
		{Tool: "write-data", Args: []string{key}},
		{Tool: "cat-cache", Args: []string{filepath.Join(cache, "agentrt-rewrite")}},
		{Tool: "write-cache", Args: []string{filepath.Join(cache, "agentrt-rewrite", "planted")}},
		// The control: the run's own workspace, in DATA/work, is usable.
		{Tool: "note", Args: []string{"mine.txt"}, Stdin: "in the workspace\n"},
	}
	in, _ := json.Marshal(steps)
	res, err := c.Host.Run(context.Background(), host.RunSpec{Code: testutil.BuildGo(t, "host/testdata/agents/tools"), Grant: g, Input: in})
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("run: %v %+v", err, res)
	}
	outs := decodeOutcomes(t, res.Output)
	journaled := map[uint64][]*journal.Entry{}
	err = journal.ReadEntries(context.Background(), c.Store, res.Run, func(e *journal.Entry, _ *journal.Record) error {
		if e.Op == "tool.run" {
			journaled[e.Step] = append(journaled[e.Step], e)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range outs[:len(outs)-1] {
		reached := "the cell's data directory " + data
		if strings.HasSuffix(o.Tool, "-cache") {
			reached = "the cell's compilation cache " + cache
		}
		if o.Result != nil || !strings.HasPrefix(o.Err, "denied: tool.run: tool "+o.Tool+": ") || !strings.Contains(o.Err, "reaches "+reached) {
			t.Errorf("%s: %q %+v; want it denied for reaching %s", o.Tool, o.Err, o.Result, reached)
		}
		if p := phases(journaled[uint64(i+2)]); p != "failed" {
			t.Errorf("%s journaled %q; want one failed entry: nothing launched", o.Tool, p)
		}
		if o.Result != nil && bytes.Contains(o.Result.Stdout, []byte("OPENSSH PRIVATE KEY")) {
			t.Fatalf("%s read the cell's key", o.Tool)
		}
	}
	if o := outs[len(outs)-1]; o.Err != "" || o.Result == nil || o.Result.Exit != 0 {
		t.Errorf("the workspace in DATA/work: %q %+v; want it usable", o.Err, o.Result)
	}
	if got, err := os.ReadFile(filepath.Join(cell.WorkDir(data), res.Run.String(), "mine.txt")); err != nil || string(got) != "in the workspace\n" {
		t.Errorf("DATA/work/<run>/mine.txt: %q %v", got, err)
	}
}
