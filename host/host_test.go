package host_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
)

func smokeGrant() *host.Grant {
	return &host.Grant{Run: &host.RunGrant{}, KV: &host.KVGrant{Namespace: "smoke"}}
}

func TestSmokeRunJournalsEveryCall(t *testing.T) {
	code := testutil.BuildGo(t, "host/testdata/agents/smoke")
	var events []host.Event
	env := testutil.NewEnv(t, host.Deps{Sink: func(e host.Event) { events = append(events, e) }}, host.Config{})
	ctx := context.Background()
	res, err := env.Host.Run(ctx, host.RunSpec{Code: code, Name: "smoke", Input: []byte("hi"), Grant: smokeGrant()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != journal.StatusCompleted {
		t.Fatalf("status %s: %v", res.Status, res.Err)
	}
	out := string(res.Output)
	for _, want := range []string{"input=hi\n", "keys=[k0 k1 k2] more=false\n", "k2=vvv err=<nil>\n", "big=40000 err=<nil>\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	sum, err := journal.VerifyStore(ctx, env.Store, res.Run, journal.TrustKeys(env.Key.Public().(ed25519.PublicKey)))
	if err != nil {
		t.Fatal(err)
	}
	if sum.End == nil || sum.End.Status != journal.StatusCompleted || sum.End.Steps != res.Steps {
		t.Fatalf("end record %+v, want completed after %d steps", sum.End, res.Steps)
	}
	var sawStdout bool
	for _, e := range events {
		if e.Kind == host.EventStdout && strings.Contains(string(e.Data), "to stdout") {
			sawStdout = true
		}
	}
	if !sawStdout {
		t.Errorf("guest stdout did not reach the event sink: %+v", events)
	}
	t.Logf("%d steps, %d entries, %d seals", res.Steps, sum.Entries, sum.Seals)
}

func TestLinkRefusesUngrantedCapability(t *testing.T) {
	code := testutil.BuildGo(t, "host/testdata/agents/smoke")
	env := testutil.NewEnv(t, host.Deps{}, host.Config{})
	_, err := env.Host.Run(context.Background(), host.RunSpec{Code: code, Grant: host.DefaultGrant()})
	var le *host.LinkError
	if !errors.As(err, &le) {
		t.Fatalf("got %v, want a *host.LinkError", err)
	}
	if len(le.Missing) != 1 || le.Missing[0] != abi.CapKV || !strings.Contains(err.Error(), "kv") {
		t.Fatalf("LinkError %+v (%v), want kv missing", le, err)
	}
	// The refusal is journaled: a start with the token and grant, and a
	// failed end saying why, sealed and verifiable.
	runs, err := env.Store.Runs(context.Background())
	if err != nil || len(runs) != 1 || runs[0].ID != le.Run || runs[0].Status != journal.StatusFailed {
		t.Fatalf("a refused module left runs %+v (err %v), want one failed run %s", runs, err, le.Run)
	}
	sum, err := journal.VerifyStore(context.Background(), env.Store, le.Run, journal.TrustKeys(env.Key.Public().(ed25519.PublicKey)))
	if err != nil {
		t.Fatal(err)
	}
	if sum.Entries != 2 || sum.End == nil || !strings.Contains(sum.End.Error, "imports capabilities its grant lacks: kv") || len(sum.Header.Token) == 0 {
		t.Fatalf("the refusal's journal: %d entries, end %+v, token %d bytes", sum.Entries, sum.End, len(sum.Header.Token))
	}
}
