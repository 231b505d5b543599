package tool_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
)

// Finding 3 of issue 10, item 32 of shared/SECURITY-TESTS.md: a token for
// count-todo, declared as grep reading an input directory, is presented
// with a grant file that declares count-todo as tee writing a host
// directory. The run is refused before anything is journaled or launched,
// naming the tool; the directory stays empty. The same token with the
// grant file it was issued from then runs the real grep under the real
// sandbox: the refusal spent nothing, and the binding admits the right
// declaration.
func TestTokenBindsToolDeclarations(t *testing.T) {
	b := newToolBox(t)
	env := testutil.NewEnv(t, host.Deps{Tools: host.ToolDeps{Workspaces: b.work}, Nonces: capability.NewMemoryNonces(0)}, host.Config{})
	code := testutil.BuildGo(t, "host/testdata/agents/tools")
	ctx := context.Background()
	grep := &host.Grant{Run: &host.RunGrant{}, Tool: &host.ToolGrant{Tools: []host.ToolSpec{{
		Name: "count-todo", Exec: "/usr/bin/grep",
		Args: host.ToolArgs{Fixed: []string{"-c", "TODO"}, Positional: []host.ToolPositional{{Pattern: `[a-z]+\.txt`, Path: "ro"}}},
		Read: sys(b.in), Workdir: b.in, Env: map[string]string{"LC_ALL": "C"}, Limits: host.ToolLimits{Wall: "30s"}}}}}
	tee := &host.Grant{Run: &host.RunGrant{}, Tool: &host.ToolGrant{Tools: []host.ToolSpec{{
		Name: "count-todo", Exec: "/usr/bin/tee",
		Args: host.ToolArgs{Positional: []host.ToolPositional{{Pattern: `[a-z]+\.txt`, Path: "rw"}}},
		Read: sys(), Write: []string{b.out}, Workdir: b.out, Env: map[string]string{"LC_ALL": "C"}, Limits: host.ToolLimits{Wall: "30s"}}}}}
	caps, err := grep.TokenCaps()
	if err != nil {
		t.Fatal(err)
	}
	tok, err := capability.Issue(env.Key, capability.Claims{Audience: env.Key.Public().(ed25519.PublicKey), Caps: caps,
		NotBefore: time.Now().Add(-time.Minute), Expires: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	in, _ := json.Marshal([]toolStep{{Tool: "count-todo", Args: []string{"a.txt"}, Stdin: "written by tee\n"}})

	_, err = env.Host.Run(ctx, host.RunSpec{Code: code, Token: tok, Grant: tee, Input: in})
	var tde *host.ToolDeclarationError
	if !errors.As(err, &tde) || !errors.Is(err, host.ErrToolDeclaration) || tde.Tool != "count-todo" {
		t.Fatalf("the token with tee's grant: %v, want a %v naming count-todo", err, host.ErrToolDeclaration)
	}
	want, _ := host.ToolDigest(&grep.Tool.Tools[0])
	got, _ := host.ToolDigest(&tee.Tool.Tools[0])
	if !strings.Contains(err.Error(), want.String()) || !strings.Contains(err.Error(), got.String()) {
		t.Fatalf("the error does not name both declarations: %v", err)
	}
	if left, _ := os.ReadDir(b.out); len(left) != 0 {
		t.Fatalf("%s holds %d files: tee ran", b.out, len(left))
	}
	noRuns(t, env)

	res, err := env.Host.Run(ctx, host.RunSpec{Code: code, Token: tok, Grant: grep, Input: in})
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("the token with its own grant: %v %+v", err, res)
	}
	outs := decodeOutcomes(t, res.Output)
	if len(outs) != 1 || outs[0].Result == nil || strings.TrimSpace(string(outs[0].Result.Stdout)) != "2" {
		t.Fatalf("grep under the token: %+v", outs)
	}
	if _, err := os.Stat(filepath.Join(b.out, "a.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a.txt was written in %s: %v", b.out, err)
	}
}
