package replay_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"testing"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/replay"
)

func TestReplaySmoke(t *testing.T) {
	code := testutil.BuildGo(t, "host/testdata/agents/smoke")
	env := testutil.NewEnv(t, host.Deps{}, host.Config{})
	ctx := context.Background()
	res, err := env.Host.Run(ctx, host.RunSpec{Code: code, Input: []byte("x"),
		Grant: &host.Grant{Run: &host.RunGrant{}, KV: &host.KVGrant{Namespace: "n"}}})
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("run: %v %v", err, res)
	}
	trust := journal.TrustKeys(env.Key.Public().(ed25519.PublicKey))
	j, err := replay.Load(ctx, env.Store, res.Run, trust)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := j.Replay(ctx, env.Engine, code, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if string(rep.Output) != string(res.Output) || rep.Calls != int(res.Steps) {
		t.Fatalf("replay output %q calls %d; run output %q steps %d", rep.Output, rep.Calls, res.Output, res.Steps)
	}
	// Untrusted key.
	_, other, _ := ed25519.GenerateKey(nil)
	_, err = replay.Load(ctx, env.Store, res.Run, journal.TrustKeys(other.Public().(ed25519.PublicKey)))
	if !errors.Is(err, journal.ErrUntrusted) {
		t.Fatalf("got %v, want ErrUntrusted", err)
	}
}
