package main_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	sandbox "github.com/agentrt/agentrt/native-sandbox"
	"github.com/agentrt/agentrt/replay"
)

// TestMain lets the test binary serve as the sandbox helper, as agentrt
// does.
func TestMain(m *testing.M) {
	sandbox.HelperMain()
	os.Exit(m.Run())
}

// makeRepo creates a small git repository: two commits, three TODO markers
// in two files, and one marker inside .git that must not count.
func makeRepo(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "project")
	git := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "cmd"), 0o755); err != nil {
		t.Fatal(err)
	}
	git("init", "-q", "-b", "main")
	write("README.md", "# project\n\nTODO: write the docs\n")
	git("add", ".")
	git("commit", "-q", "-m", "start the project")
	write("cmd/main.go", "package main\n\n// TODO: parse flags\n// TODO: handle errors\nfunc main() {}\n")
	write("LICENSE", "no markers here\n")
	git("add", ".")
	git("commit", "-q", "-m", "add the command")
	write(".git/description", "TODO: not a tracked file\n")
	return dir
}

// grantFor reads grant.yaml with the repository path in place of /srv/repo.
func grantFor(t *testing.T, repo string) *host.Grant {
	t.Helper()
	text, err := os.ReadFile("grant.yaml")
	if err != nil {
		t.Fatal(err)
	}
	g, err := host.ParseGrant([]byte(strings.ReplaceAll(string(text), "/srv/repo", repo)))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

type summary struct {
	Commits   int
	Latest    string
	Files     int
	TODOs     int `json:"todos"`
	TODOFiles []struct {
		Path  string
		Count int
	} `json:"todo_files"`
	Report struct {
		Path   string
		Size   uint64
		SHA256 string
	}
}

func TestRepoReportUsesNativeToolsAndReplays(t *testing.T) {
	for _, p := range []string{"/usr/bin/bwrap", "/usr/bin/git", "/usr/bin/grep", "/usr/bin/cp", "/usr/bin/tee"} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s is missing: run make deps (%v)", p, err)
		}
	}
	repo := makeRepo(t)
	work := filepath.Join(t.TempDir(), "work")
	code := testutil.BuildGo(t, "examples/repo-report")
	env := testutil.NewEnv(t, host.Deps{Tools: host.ToolDeps{Workspaces: work}}, host.Config{})
	ctx := context.Background()
	input, _ := json.Marshal(map[string]string{"repo": repo})
	res, err := env.Host.Run(ctx, host.RunSpec{Code: code, Input: input, Grant: grantFor(t, repo)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != journal.StatusCompleted {
		t.Fatalf("run ended %s: %v; the agent's stderr:\n%s", res.Status, res.Err, env.Stderr(t, res.Run))
	}
	var s summary
	if err := json.Unmarshal(res.Output, &s); err != nil {
		t.Fatalf("output %s: %v", res.Output, err)
	}
	if s.Commits != 2 || !strings.HasSuffix(s.Latest, " add the command") || s.Files != 3 || s.TODOs != 3 ||
		len(s.TODOFiles) != 2 || s.TODOFiles[0].Path != "cmd/main.go" || s.TODOFiles[0].Count != 2 ||
		s.TODOFiles[1].Path != "README.md" || s.TODOFiles[1].Count != 1 {
		t.Fatalf("summary %s", res.Output)
	}

	// The report is in the run's workspace, and the summary names it by
	// the hash the host computed after the tool ran.
	ws := filepath.Join(work, res.Run.String())
	report, err := os.ReadFile(filepath.Join(ws, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(report)
	if s.Report.Path != "report.md" || s.Report.Size != uint64(len(report)) || s.Report.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("summary names %+v; report.md is %d bytes, sha256 %x", s.Report, len(report), sum)
	}
	for _, want := range []string{"2 commits, 3 tracked files, 3 TODO markers.", " add the command\n", " start the project\n", "- cmd/main.go: 2\n", "- LICENSE\n"} {
		if !strings.Contains(string(report), want) {
			t.Errorf("report.md lacks %q:\n%s", want, report)
		}
	}
	// The source was only read: the copy is in the workspace.
	if _, err := os.Stat(filepath.Join(ws, "repo", ".git")); err != nil {
		t.Fatalf("the copy in the workspace: %v", err)
	}

	// Replay re-executes the agent against the journal: every tool call is
	// answered from it, so with the workspace gone nothing recreates it.
	if err := os.RemoveAll(ws); err != nil {
		t.Fatal(err)
	}
	j, err := replay.Load(ctx, env.Store, res.Run, journal.TrustKeys(env.Key.Public().(ed25519.PublicKey)))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := j.Replay(ctx, env.Engine, code, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if string(rep.Output) != string(res.Output) || uint64(rep.Calls) != res.Steps {
		t.Fatalf("replay output %s after %d calls, run output %s after %d", rep.Output, rep.Calls, res.Output, res.Steps)
	}
	if _, err := os.Stat(ws); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("replay launched a tool: the workspace is back (%v)", err)
	}
}
