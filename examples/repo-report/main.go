// Command repo-report is an example agent that uses native tools: it copies
// a git repository into its workspace with cp, asks git for the history and
// the tracked files, counts TODO markers with grep, writes a Markdown report
// into its read-write area with tee, and outputs a summary.
//
// Every tool is a program the grant registers (grant.yaml), run under the
// host's OS sandbox with argv only: the agent names the tool and passes
// arguments, which the host checks against the tool's schema before
// anything runs. Every run is an effect, journaled before it starts, so a
// replay of this agent answers each tool call from the journal and launches
// nothing.
package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/agentrt/agentrt/guest-sdk/agent"
)

// Input names the repository to report on; the grant must let copy-repo
// read it.
type Input struct {
	Repo string `json:"repo"`
}

// Summary is the agent's output.
type Summary struct {
	Commits  int        `json:"commits"`
	Latest   string     `json:"latest"`
	Files    int        `json:"files"`
	TODOs    int        `json:"todos"`
	TODOFile []FileTODO `json:"todo_files"`
	// Report is the report file the agent wrote, as the host hashed it.
	Report Report `json:"report"`
}

// Report names the report file: its path in the workspace, its size and its
// SHA-256 (hex), as tool.run reported them.
type Report struct {
	Path   string `json:"path"`
	Size   uint64 `json:"size"`
	SHA256 string `json:"sha256"`
}

// FileTODO is how many TODO markers one file holds.
type FileTODO struct {
	Path  string `json:"path"`
	Count int    `json:"count"`
}

func main() {
	agent.MainJSON(func(_ context.Context, in Input) (*Summary, error) {
		if in.Repo == "" {
			return nil, errors.New(`input: give the repository, {"repo": "/path/to/repo"}`)
		}
		// The copy lands in the run's own workspace, as ./repo.
		if _, err := run("copy-repo", in.Repo, "repo"); err != nil {
			return nil, err
		}
		log, err := run("git-log", "-n", "100")
		if err != nil {
			return nil, err
		}
		files, err := run("git-ls-files")
		if err != nil {
			return nil, err
		}
		s := &Summary{}
		commits := lines(log)
		s.Commits = len(commits)
		if len(commits) > 0 {
			s.Latest = commits[0]
		}
		tracked := lines(files)
		s.Files = len(tracked)
		// grep exits 1 when no file matches: that is an answer, not a
		// failure, so run is not used here.
		res, err := agent.Tool("count-todo", "repo")
		if err != nil {
			return nil, fmt.Errorf("count-todo: %w", err)
		}
		if res.Exit > 1 {
			return nil, fmt.Errorf("count-todo: exit %d: %s", res.Exit, res.Stderr)
		}
		for _, l := range lines(string(res.Stdout)) {
			i := strings.LastIndexByte(l, ':')
			n, err := strconv.Atoi(l[i+1:])
			if i < 0 || err != nil {
				return nil, fmt.Errorf("count-todo: unexpected line %q", l)
			}
			if n > 0 {
				s.TODOs += n
				s.TODOFile = append(s.TODOFile, FileTODO{Path: strings.TrimPrefix(l[:i], "repo/"), Count: n})
			}
		}
		sort.Slice(s.TODOFile, func(i, j int) bool {
			a, b := s.TODOFile[i], s.TODOFile[j]
			return a.Count > b.Count || a.Count == b.Count && a.Path < b.Path
		})
		rep, err := agent.ToolWithStdin("write-report", []byte(report(s, commits, tracked)), "report.md")
		if err != nil {
			return nil, fmt.Errorf("write-report: %w", err)
		}
		if rep.Exit != 0 || len(rep.Files) != 1 {
			return nil, fmt.Errorf("write-report: exit %d, files %v: %s", rep.Exit, rep.Files, rep.Stderr)
		}
		f := rep.Files[0]
		if f.Unhashed != "" {
			// The host hashes within the tool's limits.hash, never a
			// file with holes, and not after the run was asked to stop.
			return nil, fmt.Errorf("write-report: the host did not hash %s (%s)", f.Path, f.Unhashed)
		}
		s.Report = Report{Path: f.Path, Size: f.Size, SHA256: hex.EncodeToString(f.SHA256)}
		agent.Logf("wrote %s: %d bytes, sha256 %s", f.Path, f.Size, s.Report.SHA256)
		return s, nil
	})
}

// run runs a tool that must succeed and returns its stdout.
func run(tool string, args ...string) (string, error) {
	r, err := agent.Tool(tool, args...)
	if err != nil {
		return "", fmt.Errorf("%s: %w", tool, err)
	}
	if r.Exit != 0 || r.TimedOut {
		return "", fmt.Errorf("%s: exit %d (limits %v): %s", tool, r.Exit, r.Limits, r.Stderr)
	}
	return string(r.Stdout), nil
}

func lines(s string) []string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func report(s *Summary, commits, files []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Repository report\n\n%d commits, %d tracked files, %d TODO markers.\n\n## History\n\n", s.Commits, s.Files, s.TODOs)
	for _, c := range commits {
		fmt.Fprintf(&b, "- %s\n", c)
	}
	b.WriteString("\n## TODO markers\n\n")
	if len(s.TODOFile) == 0 {
		b.WriteString("None.\n")
	}
	for _, f := range s.TODOFile {
		fmt.Fprintf(&b, "- %s: %d\n", f.Path, f.Count)
	}
	b.WriteString("\n## Files\n\n")
	for _, f := range files {
		fmt.Fprintf(&b, "- %s\n", f)
	}
	return b.String()
}
