package host_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
)

// tokenEnv is a host that trusts root as a token root and remembers
// presented nonces, with the probe agent.
func tokenEnv(t *testing.T) (env *testutil.Env, root ed25519.PrivateKey, code []byte) {
	t.Helper()
	_, root, _ = ed25519.GenerateKey(nil)
	env = testutil.NewEnv(t, host.Deps{TokenRoots: []ed25519.PublicKey{root.Public().(ed25519.PublicKey)},
		Nonces: capability.NewMemoryNonces(0)}, host.Config{})
	return env, root, testutil.BuildGo(t, "host/testdata/agents/probe")
}

// noRuns fails t when env's store holds a run: a refused token starts
// nothing, not even a refusal record.
func noRuns(t *testing.T, env *testutil.Env) {
	t.Helper()
	runs, err := env.Store.Runs(context.Background())
	if err != nil || len(runs) != 0 {
		t.Fatalf("the store holds %d runs (%v), want none", len(runs), err)
	}
}

// Finding 2 of issue 10, item 32 of shared/SECURITY-TESTS.md: the holder
// of an attenuated token drops its last link, which narrowed HTTP to one
// host, and presents the rest (the root's claims, both hosts) to a real
// host. It is refused before anything is journaled, with the class named;
// the untruncated token still runs, and still gets one host only.
func TestTruncatedTokenIsRefused(t *testing.T) {
	env, root, code := tokenEnv(t)
	ctx := context.Background()
	cell := env.Key.Public().(ed25519.PublicKey)
	rootTok, err := capability.Issue(root, capability.Claims{Audience: cell, Caps: probeCaps("a.example", "b.example"),
		NotBefore: time.Now().Add(-time.Minute), Expires: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	// The root's holder delegates one host; the child carries a new key.
	child, err := capability.Attenuate(rootTok, nil, capability.Claims{Caps: probeCaps("a.example:443")})
	if err != nil {
		t.Fatal(err)
	}
	drop := func(tok []byte) []byte {
		p, err := capability.Parse(tok)
		if err != nil {
			t.Fatal(err)
		}
		p.Links = p.Links[:len(p.Links)-1]
		return p.Bytes()
	}
	sealed, err := capability.Seal(child, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, tok := range map[string][]byte{"with the child's key": drop(child), "with the child's seal": drop(sealed)} {
		t.Run(name, func(t *testing.T) {
			_, err := env.Host.Start(ctx, host.RunSpec{Code: code, Token: tok, Input: []byte(`[]`)})
			var ce *capability.Error
			if !errors.Is(err, capability.ErrProof) || !errors.As(err, &ce) || ce.Link != 0 {
				t.Fatalf("a truncated token: %v, want %v at link 0", err, capability.ErrProof)
			}
			if !strings.Contains(err.Error(), "bad proof of possession") {
				t.Fatalf("the error does not name the class: %v", err)
			}
			noRuns(t, env)
		})
	}
	// The child as its holder has it runs, with its one host.
	steps := `[{"op":"http","url":"http://b.example/"}]`
	res, err := env.Host.Run(ctx, host.RunSpec{Code: code, Token: child, Input: []byte(steps)})
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("the child: %v %+v", err, res)
	}
	if !strings.Contains(string(res.Output), "denied") || !strings.Contains(string(res.Output), "b.example") {
		t.Fatalf("the child reached the host it narrowed away: %s", res.Output)
	}
}

// Item 32: a link spliced from another token of the same root, and the
// last two links reordered, refused at the host as broken chains.
func TestSplicedTokenIsRefused(t *testing.T) {
	env, root, code := tokenEnv(t)
	ctx := context.Background()
	cell := env.Key.Public().(ed25519.PublicKey)
	issueTo := func(hosts ...string) []byte {
		tok, err := capability.Issue(root, capability.Claims{Audience: cell, Caps: probeCaps(hosts...),
			NotBefore: time.Now().Add(-time.Minute), Expires: time.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	narrow, err := capability.Attenuate(issueTo("a.example", "b.example"), nil, capability.Claims{Caps: probeCaps("a.example")})
	if err != nil {
		t.Fatal(err)
	}
	narrower, err := capability.Attenuate(narrow, nil, capability.Claims{Caps: probeCaps("a.example:443")})
	if err != nil {
		t.Fatal(err)
	}
	other, err := capability.Attenuate(issueTo("a.example", "c.example"), nil, capability.Claims{Caps: probeCaps("c.example")})
	if err != nil {
		t.Fatal(err)
	}
	mine, theirs := parse(t, narrower), parse(t, other)
	spliced := *mine
	spliced.Links = append(append([]capability.Link{}, mine.Links[0]), theirs.Links[1], mine.Links[2])
	reordered := *mine
	reordered.Links = []capability.Link{mine.Links[0], mine.Links[2], mine.Links[1]}
	for name, tok := range map[string][]byte{"spliced": spliced.Bytes(), "reordered": reordered.Bytes()} {
		t.Run(name, func(t *testing.T) {
			_, err := env.Host.Start(ctx, host.RunSpec{Code: code, Token: tok, Input: []byte(`[]`)})
			var ce *capability.Error
			if !errors.Is(err, capability.ErrBrokenChain) || !errors.As(err, &ce) || ce.Link != 1 {
				t.Fatalf("got %v, want %v at link 1", err, capability.ErrBrokenChain)
			}
			noRuns(t, env)
		})
	}
}

func parse(t *testing.T, tok []byte) *capability.Token {
	t.Helper()
	p, err := capability.Parse(tok)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Finding 11 of issue 10 refused a token whose ceilings no layer enforced;
// the gate's budget layer now enforces every dimension, so each is
// accepted, and the run's ledger holds it (its report shows the ceiling).
func TestEveryCeilingIsEnforcedAndAccepted(t *testing.T) {
	env, root, code := tokenEnv(t)
	ctx := context.Background()
	cell := env.Key.Public().(ed25519.PublicKey)
	for _, tc := range []struct {
		name   string
		budget capability.Budget
		want   uint64
	}{
		{"steps", capability.Budget{Steps: capability.Limit(100)}, 100},
		{"http_requests", capability.Budget{HTTPRequests: capability.Limit(0)}, 0},
		{"tool_calls", capability.Budget{ToolCalls: capability.Limit(5), WallSeconds: capability.Limit(60)}, 5},
		{"model_calls", capability.Budget{ModelCalls: capability.Limit(5)}, 5},
		{"input_tokens", capability.Budget{InputTokens: capability.Limit(1000)}, 1000},
		{"output_tokens", capability.Budget{OutputTokens: capability.Limit(1000)}, 1000},
		{"micro_usd", capability.Budget{MicroUSD: capability.Limit(9_900_000)}, 9_900_000},
		{"wall_seconds", capability.Budget{WallSeconds: capability.Limit(60)}, 60},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := host.CheckEnforced(tc.budget); err != nil {
				t.Fatal(err)
			}
			tok, err := capability.Issue(root, capability.Claims{Audience: cell, Caps: probeCaps("a.example"), Budget: tc.budget,
				NotBefore: time.Now().Add(-time.Minute), Expires: time.Now().Add(time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			res, err := env.Host.Run(ctx, host.RunSpec{Code: code, Token: tok, Input: []byte(`[]`)})
			if err != nil || res.Status != journal.StatusCompleted {
				t.Fatalf("%s: %v %+v", tc.name, err, res)
			}
			rep, err := host.BudgetReport(entries(t, env, res.Run))
			if err != nil {
				t.Fatal(err)
			}
			for _, row := range rep.Rows {
				if row.Name == tc.name && (row.Ceiling == nil || *row.Ceiling != tc.want) {
					t.Fatalf("the report's %s ceiling is %v, want %d", tc.name, row.Ceiling, tc.want)
				}
			}
		})
	}
}

// TestToolDeclBindsEveryField: each field of host.ToolSpec, set on its
// own, changes the digest a token binds the tool by. A field added to
// ToolSpec and not to host.ToolDecl (and capability/SPEC.md) fails here,
// instead of being a way around the token.
func TestToolDeclBindsEveryField(t *testing.T) {
	base := host.ToolSpec{Name: "t", Exec: "/usr/bin/t"}
	baseDigest, err := host.ToolDigest(&base)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{baseDigest.String(): "the base"}
	// walk sets each leaf of v to a non-zero value in turn, measuring the
	// digest each time and restoring the zero value after.
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		switch v.Kind() {
		case reflect.Struct:
			for i := range v.NumField() {
				walk(v.Field(i), path+"."+v.Type().Field(i).Name)
			}
			return
		case reflect.Slice:
			if v.Type().Elem().Kind() == reflect.Struct {
				// One element, each of whose fields is measured.
				v.Set(reflect.MakeSlice(v.Type(), 1, 1))
				walk(v.Index(0), path+"[0]")
				v.Set(reflect.Zero(v.Type()))
				return
			}
		}
		if path == ".Name" || path == ".Exec" {
			return // the base sets them
		}
		old := reflect.New(v.Type()).Elem()
		old.Set(v)
		switch v.Kind() {
		case reflect.String:
			v.SetString("x")
		case reflect.Bool:
			v.SetBool(true)
		case reflect.Int:
			v.SetInt(7)
		case reflect.Slice:
			v.Set(reflect.ValueOf([]string{"/x"}))
		case reflect.Map:
			v.Set(reflect.ValueOf(map[string]string{"K": ""}))
		default:
			t.Fatalf("ToolSpec%s: a %s; teach this test to set it", path, v.Kind())
		}
		d, err := host.ToolDigest(&base)
		if err != nil {
			t.Fatal(err)
		}
		if other, dup := seen[d.String()]; dup {
			t.Errorf("ToolSpec%s does not reach the token's digest (the same as %s): add it to host.ToolDecl, capability.ToolDecl and capability/SPEC.md", path, other)
		}
		seen[d.String()] = path
		v.Set(old)
	}
	walk(reflect.ValueOf(&base).Elem(), "")
	if len(seen) < 15 {
		t.Fatalf("measured %d fields; the walk is broken", len(seen)-1)
	}
}

// TestToolVectorsFromGrantEntries: each tool vector's grant entry, parsed
// as a grant file, gives exactly the vector's canonical declaration, so the
// host computes the digest capability/SPEC.md specifies.
func TestToolVectorsFromGrantEntries(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(testutil.RepoRoot(), "capability/testdata/tools/*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no tool vectors (%v)", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var entry, decl string
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "entry: "); ok {
				entry = v
			}
			if v, ok := strings.CutPrefix(line, "decl: "); ok {
				decl = v
			}
		}
		g, err := host.ParseGrant([]byte("capabilities: {tool: {tools: [" + entry + "]}}"))
		if err != nil {
			t.Fatalf("%s: %v", filepath.Base(f), err)
		}
		got, err := host.ToolDecl(&g.Tool.Tools[0]).Canonical()
		if err != nil || fmt.Sprintf("%x", got) != decl {
			t.Errorf("%s: the grant entry gives %x (%v), the vector %s", filepath.Base(f), got, err, decl)
		}
	}
}

func TestParseCapsFile(t *testing.T) {
	c, b, err := host.ParseCapsFile([]byte(`
capabilities:
  run: {}
  kv: {namespace: crawler, namespaces: [notes, crawler]}
  http: {hosts: [Example.com, "api.example.com:443"], idempotent: true}
  tool:
    tools:
      - {name: count, exec: /usr/bin/grep, args: {fixed: [-c]}}
    names: [ls]
budget:
  steps: 10
  wall_seconds: 0
`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.String(), "run, kv[crawler notes], http[api.example.com:443 example.com] idempotent, tool[count ls]"; got != want {
		t.Errorf("caps %q, want %q", got, want)
	}
	if got, want := b.String(), "steps=10,wall_seconds=0"; got != want {
		t.Errorf("budget %q, want %q", got, want)
	}
	want, _ := host.ToolDigest(&host.ToolSpec{Name: "count", Exec: "/usr/bin/grep", Args: host.ToolArgs{Fixed: []string{"-c"}}})
	if d, _ := c.ToolDigest("count"); d.String() != want.String() {
		t.Errorf("a declared tool's digest %s, want %s", d, want)
	}
	if d, ok := c.ToolDigest("ls"); !ok || d != nil {
		t.Errorf("a tool kept by name has digest %v, want none yet (the parent's)", d)
	}
	for doc, want := range map[string]string{
		"capabilities: {tools: {names: [x]}}":                              `unknown key "tools" in capabilities; allowed: run, kv, http, clock, random, tool, llm, timer, approval, mcp, agent (did you mean tool?)`,
		"capabilities: {http: {hosts: []}}":                                "list is empty",
		"capabilities: {http: {hosts: [a.com:99999]}}":                     "port",
		"budget: {steps: 1}":                                               "no 'capabilities' map",
		"capabilities: {tool: {}}":                                         "declare the tools",
		"capabilities: {tool: {tools: [{name: g, exec: grep}]}}":           "not absolute",
		"capabilities: {tool: {names: [g], tools: [{name: g, exec: /g}]}}": "both names and tools",
	} {
		if _, _, err := host.ParseCapsFile([]byte(doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error naming %q", doc, err, want)
		}
	}
}

// TestTokenForAGrantIsReusedForAMinute: the token a host issues on the fly
// for a plain grant serves the runs started from the same grant for a
// minute after it was issued, and no other: a different grant, a minute
// later, or a clock set back gets a token of its own. Every run's token
// verifies at the run's start, and holds its grant, as replay's audit
// checks them.
func TestTokenForAGrantIsReusedForAMinute(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	at := func(d time.Duration) {
		mu.Lock()
		now = now.Add(d)
		mu.Unlock()
	}
	env := testutil.NewEnv(t, host.Deps{Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }}, host.Config{})
	code := testutil.BuildWAT(t, "host/testdata/wat/loop.wat")
	cell := env.Key.Public().(ed25519.PublicKey)
	ctx := context.Background()
	grantA := func() *host.Grant { return &host.Grant{Run: &host.RunGrant{}, KV: &host.KVGrant{Namespace: "a"}} }
	grantB := func() *host.Grant { return &host.Grant{Run: &host.RunGrant{}, KV: &host.KVGrant{Namespace: "b"}} }
	run := func(g *host.Grant) []byte {
		t.Helper()
		st, err := env.Host.Start(ctx, host.RunSpec{Code: code, Grant: g, Input: make([]byte, 8)})
		if err != nil {
			t.Fatal(err)
		}
		res, err := st.Execute(ctx)
		if err != nil || res.Status != journal.StatusCompleted {
			t.Fatalf("run: %v %+v", err, res)
		}
		var hdr *journal.Header
		var started time.Time
		err = journal.ReadEntries(ctx, env.Store, res.Run, func(e *journal.Entry, _ *journal.Record) error {
			if e.Header != nil {
				hdr, started = e.Header, time.Unix(0, e.Time)
			}
			return nil
		})
		if err != nil || hdr == nil {
			t.Fatalf("read the header of %s: %v", res.Run, err)
		}
		v, err := capability.Verify(hdr.Token, []ed25519.PublicKey{cell}, capability.Options{Now: started, Audience: cell})
		if err != nil {
			t.Fatalf("the token of run %s does not verify at its start: %v", res.Run, err)
		}
		rg, err := host.DecodeGrant(hdr.Grant)
		if err != nil {
			t.Fatal(err)
		}
		if err := rg.WithinToken(v.Claims); err != nil {
			t.Fatalf("run %s's grant is not within its token: %v", res.Run, err)
		}
		return hdr.Token
	}
	first := run(grantA())
	at(30 * time.Second)
	if again := run(grantA()); !bytes.Equal(again, first) {
		t.Fatal("a run of the same grant 30 s later got a new token; want the one issued for the first")
	}
	if other := run(grantB()); bytes.Equal(other, first) {
		t.Fatal("a run of another grant got the first grant's token")
	}
	at(31 * time.Second)
	later := run(grantA())
	if bytes.Equal(later, first) {
		t.Fatal("a run of the same grant 61 s after its token was issued got that token again")
	}
	at(-10 * time.Second)
	if back := run(grantA()); bytes.Equal(back, later) {
		t.Fatal("a run at a time before its grant's token was issued got that token")
	}
}
