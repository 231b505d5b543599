package host_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/policy"
)

// issue returns a token for env's cell, signed by root, granting caps.
func issue(t *testing.T, env *testutil.Env, root ed25519.PrivateKey, caps capability.Caps, expires time.Time) []byte {
	t.Helper()
	caps.Normalize()
	tok, err := capability.Issue(root, capability.Claims{Audience: env.Key.Public().(ed25519.PublicKey), Caps: caps,
		NotBefore: time.Now().Add(-time.Minute), Expires: expires})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func probeCaps(hosts ...string) capability.Caps {
	return capability.Caps{Run: &capability.Unit{}, KV: &capability.KV{Namespaces: []string{"p"}},
		HTTP: &capability.HTTP{Hosts: hosts}, Clock: &capability.Unit{}, Random: &capability.Unit{}}
}

// gateRecord returns the gate record of the entries of step.
func gateRecord(t *testing.T, env *testutil.Env, run journal.RunID, step uint64) *host.GateRecord {
	t.Helper()
	for _, e := range entries(t, env, run) {
		if e.Step == step && len(e.Gate) > 0 {
			var g host.GateRecord
			if err := abi.Unmarshal(e.Gate, &g); err != nil {
				t.Fatal(err)
			}
			return &g
		}
	}
	t.Fatalf("step %d has no gate record", step)
	return nil
}

// TestTokenGrantsTheRunAndOnlyThat: a run started with a token from a
// trusted root gets exactly what the token allows. A host the token does
// not name is refused at call time, journaled with the reason (and, with a
// policy, the gate's record of the capability layer); the token is in the
// run's header; the run replays.
func TestTokenGrantsTheRunAndOnlyThat(t *testing.T) {
	_, root, _ := ed25519.GenerateKey(nil)
	pol, err := policy.NewEngine(policy.Platform(), nil)
	if err != nil {
		t.Fatal(err)
	}
	env := testutil.NewEnv(t, host.Deps{TokenRoots: []ed25519.PublicKey{root.Public().(ed25519.PublicKey)},
		Nonces: capability.NewMemoryNonces(0), Policy: pol}, host.Config{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	t.Cleanup(srv.Close)
	allowed := strings.TrimPrefix(srv.URL, "http://")
	tok := issue(t, env, root, probeCaps(allowed), time.Now().Add(time.Hour))
	code := testutil.BuildGo(t, "host/testdata/agents/probe")
	steps := fmt.Sprintf(`[{"op":"http","url":"%s/a"},{"op":"http","url":"http://other.example/"},{"op":"kv.put","key":"k","size":1}]`, srv.URL)
	ctx := context.Background()
	res, err := env.Host.Run(ctx, host.RunSpec{Code: code, Token: tok, Input: []byte(steps)})
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("run: %v %+v", err, res)
	}
	var lines []string
	if err := jsonLines(res.Output, &lines); err != nil {
		t.Fatal(err)
	}
	if lines[0] != "http 200 2 ok" || !strings.HasPrefix(lines[1], "http denied: http.request: host other.example") || lines[2] != "kv.put <nil>" {
		t.Fatalf("outputs %q: want the granted host served, the other denied, kv allowed", lines)
	}
	// Step 3 is the second request (step 1 is run.input).
	g := gateRecord(t, env, res.Run, 3)
	if g.Allow || g.Layer != host.LayerCapability || !strings.Contains(g.Reason, "other.example") {
		t.Fatalf("gate record of the refused call: %+v", g)
	}
	if g := gateRecord(t, env, res.Run, 2); !g.Allow || g.Policy == nil || g.Policy.By != policy.ByPlatform {
		t.Fatalf("gate record of the allowed call: %+v", g)
	}
	sum, err := journal.VerifyStore(ctx, env.Store, res.Run, journal.TrustKeys(env.Key.Public().(ed25519.PublicKey)))
	// The token carries its subject's key; the header keeps it sealed
	// by that key (ed25519 signatures are deterministic).
	sealed, _ := capability.Seal(tok, nil)
	if err != nil || string(sum.Header.Token) != string(sealed) {
		t.Fatalf("the header does not carry the token, sealed (%v)", err)
	}
	replaysTo(t, env, res.Run, code, res.Output)

	// The same token again: refused, it was presented before.
	if _, err := env.Host.Run(ctx, host.RunSpec{Code: code, Token: tok, Input: []byte(`[]`)}); !errors.Is(err, capability.ErrReplay) {
		t.Fatalf("a token presented twice: %v, want ErrReplay", err)
	}
}

// TestTokenRefusals: tokens that do not verify start nothing, each refused
// with its class.
func TestTokenRefusals(t *testing.T) {
	_, root, _ := ed25519.GenerateKey(nil)
	_, stranger, _ := ed25519.GenerateKey(nil)
	env := testutil.NewEnv(t, host.Deps{TokenRoots: []ed25519.PublicKey{root.Public().(ed25519.PublicKey)}}, host.Config{})
	code := testutil.BuildGo(t, "host/testdata/agents/probe")
	ctx := context.Background()
	other, _ := capability.Issue(root, capability.Claims{Audience: stranger.Public().(ed25519.PublicKey), Caps: probeCaps("a"),
		NotBefore: time.Now().Add(-time.Minute), Expires: time.Now().Add(time.Hour)})
	for _, tc := range []struct {
		name  string
		token []byte
		want  error
	}{
		{"expired", issue(t, env, root, probeCaps("a"), time.Now().Add(-time.Second)), capability.ErrExpired},
		{"untrusted root", issue(t, env, stranger, probeCaps("a"), time.Now().Add(time.Hour)), capability.ErrUntrustedRoot},
		{"another cell", other, capability.ErrAudience},
		{"garbage", []byte("not a token"), capability.ErrDecode},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := env.Host.Run(ctx, host.RunSpec{Code: code, Token: tc.token}); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	// A grant file asking for more than the token: refused.
	tok := issue(t, env, root, probeCaps("a.example"), time.Now().Add(time.Hour))
	if _, err := env.Host.Run(ctx, host.RunSpec{Code: code, Token: tok, Grant: probeGrant("b.example")}); err == nil || !strings.Contains(err.Error(), "more than the token allows") {
		t.Fatalf("a grant wider than its token: %v", err)
	}
	if runs, _ := env.Store.Runs(ctx); len(runs) != 0 {
		t.Fatalf("refused tokens left %d runs", len(runs))
	}
}

// TestPolicyDenialIsJournaled: a customer policy that forbids kv.put
// refuses the call with denied, and the journal records the decision and
// the determining policy; the run replays.
func TestPolicyDenialIsJournaled(t *testing.T) {
	customer := []policy.Source{{Name: "ops.cedar", Text: []byte(`
@id("allow-all") permit (principal, action, resource);
@id("no-writes") forbid (principal, action == Action::"kv.put", resource);`)}}
	pol, err := policy.NewEngine(policy.Platform(), customer)
	if err != nil {
		t.Fatal(err)
	}
	env := testutil.NewEnv(t, host.Deps{Policy: pol}, host.Config{})
	code := testutil.BuildGo(t, "host/testdata/agents/probe")
	res, err := env.Host.Run(context.Background(), host.RunSpec{Code: code, Grant: probeGrant(), Input: []byte(`[{"op":"kv.put","key":"k","size":1},{"op":"kv.get","key":"k"}]`)})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	if err := jsonLines(res.Output, &lines); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(lines[0], "kv.put denied: policy: denied by customer:no-writes") || !strings.HasPrefix(lines[1], "kv.get 0 not_found") {
		t.Fatalf("outputs %q", lines)
	}
	g := gateRecord(t, env, res.Run, 2)
	if g.Allow || g.Layer != host.LayerPolicy || g.Policy.By != policy.ByCustomer || g.Policy.Determining[0] != "customer:no-writes" {
		t.Fatalf("gate record %+v (policy %+v)", g, g.Policy)
	}
	for _, e := range entries(t, env, res.Run) {
		if e.Step == 2 && e.Phase != journal.PhaseFailed {
			t.Fatalf("the denied kv.put has a %s entry: nothing but its failed outcome may be journaled", e.Phase)
		}
	}
	replaysTo(t, env, res.Run, code, res.Output)
}

// TestPolicyDecisionsFollowTheAttributesTheyRead: the session keeps the
// policy's decisions by the facts they can depend on, leaving out the
// context attributes no policy names. A policy that reads the key of a
// kv.put decides each key on its own: the agent cannot pass a forbidden
// key on the decision made for an allowed one, before it or after it.
func TestPolicyDecisionsFollowTheAttributesTheyRead(t *testing.T) {
	pol := platformPolicy(t, `
@id("allow-all") permit (principal, action, resource);
@id("no-secret") forbid (principal, action == Action::"kv.put", resource) when { context.key == "secret" };`)
	env := testutil.NewEnv(t, host.Deps{Policy: pol}, host.Config{})
	code := testutil.BuildGo(t, "host/testdata/agents/probe")
	res, err := env.Host.Run(context.Background(), host.RunSpec{Code: code, Grant: probeGrant(), Input: []byte(
		`[{"op":"kv.put","key":"a","size":1},{"op":"kv.put","key":"secret","size":1},{"op":"kv.put","key":"b","size":1},{"op":"kv.put","key":"secret","size":2}]`)})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	if err := jsonLines(res.Output, &lines); err != nil {
		t.Fatal(err)
	}
	want := []string{"kv.put <nil>", "kv.put denied: policy: denied by customer:no-secret", "kv.put <nil>", "kv.put denied: policy: denied by customer:no-secret"}
	if len(lines) != len(want) {
		t.Fatalf("outputs %q", lines)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("call %d: %q, want %q", i+1, lines[i], w)
		}
	}
	if g := gateRecord(t, env, res.Run, 3); g.Allow || g.Policy.Determining[0] != "customer:no-secret" {
		t.Errorf("the second kv.put's gate record (step 3): %+v", g)
	}
}

// approver answers asks with a fixed answer, counting them; with block set
// it waits for its context instead.
type approver struct {
	answer bool
	block  bool
	asked  atomic.Int32
	last   host.Approval
}

func (a *approver) Approve(ctx context.Context, ap host.Approval) (bool, string, error) {
	a.asked.Add(1)
	a.last = ap
	if a.block {
		<-ctx.Done()
		return false, "", ctx.Err()
	}
	return a.answer, "tester", nil
}

// TestModesAskTheApprover: a mode that asks before HTTP parks the call on
// the approver: a yes lets it through, a no denies it, and the journal
// records the answer and who gave it. Without an approver, an ask is a no.
// A mode never turns a policy denial into an allow.
func TestModesAskTheApprover(t *testing.T) {
	modes, err := policy.ParseModes([]byte("rules:\n  - {name: ask-http, op: http.request, effect: ask}\n  - {name: allow-kv, op: 'kv.*', effect: allow}\n"))
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.NewEngine(policy.Platform(), []policy.Source{{Name: "c.cedar", Text: []byte(`
@id("allow-all") permit (principal, action, resource);
@id("no-kv-writes") forbid (principal, action == Action::"kv.put", resource);`)}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	t.Cleanup(srv.Close)
	code := testutil.BuildGo(t, "host/testdata/agents/probe")
	steps := fmt.Sprintf(`[{"op":"http","url":"%s/"},{"op":"kv.put","key":"k","size":1}]`, srv.URL)
	for _, tc := range []struct {
		name     string
		approver *approver
		want     string
	}{
		{"yes", &approver{answer: true}, "http 200 2 ok"},
		{"no", &approver{answer: false}, "http denied: http.request was not approved (permission mode rule \"ask-http\" asked; tester answered no)"},
		{"no approver", nil, "http denied: http.request was not approved: the permission modes ask for approval, and no one can answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			deps := host.Deps{Policy: pol, Modes: modes}
			if tc.approver != nil {
				deps.Approver = tc.approver
			}
			env := testutil.NewEnv(t, deps, host.Config{})
			res, err := env.Host.Run(context.Background(), host.RunSpec{Code: code, Grant: probeGrant(strings.TrimPrefix(srv.URL, "http://")), Input: []byte(steps)})
			if err != nil {
				t.Fatal(err)
			}
			var lines []string
			if err := jsonLines(res.Output, &lines); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(lines[0], tc.want) {
				t.Fatalf("the asked call answered %q, want %q", lines[0], tc.want)
			}
			// kv.put: the policy forbids it; the allow-kv mode cannot lift that.
			if !strings.HasPrefix(lines[1], "kv.put denied: policy") {
				t.Fatalf("kv.put answered %q: a mode must never turn a denial into an allow", lines[1])
			}
			g := gateRecord(t, env, res.Run, 2)
			if g.Mode != policy.Ask || g.Rule != "ask-http" || g.Approved != (tc.name == "yes") {
				t.Fatalf("gate record %+v", g)
			}
			if tc.approver != nil && (tc.approver.asked.Load() != 1 || tc.approver.last.Op != "http.request" || tc.approver.last.Step != 2) {
				t.Fatalf("the approver was asked %d times, last %+v", tc.approver.asked.Load(), tc.approver.last)
			}
			replaysTo(t, env, res.Run, code, res.Output)
		})
	}
}

// TestCancelWhileWaitingForApproval: a run parked on an approval stops on
// Cancel without journaling the call; a resume asks again.
func TestCancelWhileWaitingForApproval(t *testing.T) {
	modes, err := policy.ParseModes([]byte("rules:\n  - {name: ask-http, op: http.request, effect: ask}\n"))
	if err != nil {
		t.Fatal(err)
	}
	blocking := &approver{block: true}
	env := testutil.NewEnv(t, host.Deps{Modes: modes, Approver: blocking}, host.Config{})
	code := testutil.BuildGo(t, "host/testdata/agents/probe")
	ctx := context.Background()
	st, err := env.Host.Start(ctx, host.RunSpec{Code: code, Grant: probeGrant("127.0.0.1:1"), Input: []byte(`[{"op":"http","url":"http://127.0.0.1:1/"}]`)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := st.Execute(ctx); done <- err }()
	for blocking.asked.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	if err := env.Host.Cancel(ctx, st.Run); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, host.ErrCancelled) {
		t.Fatalf("the parked run returned %v, want it cancelled", err)
	}
	for _, e := range entries(t, env, st.Run) {
		if e.Op == "http.request" {
			t.Fatalf("the call parked on its approval was journaled (%s)", e.Phase)
		}
	}
}
