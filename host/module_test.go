package host_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/replay"
)

func TestMalformedModulesAreRefusedBeforeRunning(t *testing.T) {
	env := testutil.NewEnv(t, host.Deps{}, host.Config{})
	ctx := context.Background()
	cases := []struct {
		name string
		code []byte
		want string
	}{
		{"not wasm", []byte("#!/bin/sh\necho hi\n"), "not a WebAssembly module"},
		{"truncated", testutil.BuildWAT(t, "host/testdata/wat/loop.wat")[:40], "compile:"},
		{"unknown imports", testutil.BuildWAT(t, "host/testdata/wat/unknown_import.wat"), "imports unknown modules: agentrt:teleport, env"},
		{"no _start", testutil.BuildWAT(t, "host/testdata/wat/no_start.wat"), "exports no _start"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := env.Host.Run(ctx, host.RunSpec{Code: c.code})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
	if runs, _ := env.Store.Runs(ctx); len(runs) != 0 {
		t.Fatalf("refused modules left %d runs", len(runs))
	}
}

func TestGuestBufferOutsideMemoryFailsTheRunReplayably(t *testing.T) {
	env := testutil.NewEnv(t, host.Deps{}, host.Config{})
	ctx := context.Background()
	code := testutil.BuildWAT(t, "host/testdata/wat/badptr.wat")
	res, err := env.Host.Run(ctx, host.RunSpec{Code: code})
	if err != nil {
		t.Fatal(err)
	}
	var ge *host.GuestError
	if res.Status != journal.StatusFailed || !errors.As(res.Err, &ge) || !strings.Contains(res.Err.Error(), "outside guest memory") {
		t.Fatalf("run ended %s with %v; want failed, a guest error naming the bad buffer", res.Status, res.Err)
	}
	j, err := replay.Load(ctx, env.Store, res.Run, journal.TrustKeys(env.Key.Public().(ed25519.PublicKey)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Replay(ctx, env.Engine, code, replay.Options{}); err != nil {
		t.Fatalf("a failed run must replay to the same failure: %v", err)
	}
}

func TestGroupCommitSealsOncePerGroup(t *testing.T) {
	env := testutil.NewEnv(t, host.Deps{}, host.Config{GroupCommit: 64})
	ctx := context.Background()
	code := testutil.BuildWAT(t, "host/testdata/wat/loop.wat")
	res, err := env.Host.Run(ctx, host.RunSpec{Code: code})
	if err != nil || res.Status != journal.StatusCompleted || string(res.Output) != "ok" {
		t.Fatalf("run: %v %+v", err, res)
	}
	sum, err := journal.VerifyStore(ctx, env.Store, res.Run, journal.TrustKeys(env.Key.Public().(ed25519.PublicKey)))
	if err != nil {
		t.Fatal(err)
	}
	// start and lease (sealed together) + 301 pure calls in groups of 64
	// + end (sealed with the last partial group).
	if sum.Entries != 304 || sum.Seals != 1+301/64+1 {
		t.Fatalf("%d entries under %d seals; want 304 under %d", sum.Entries, sum.Seals, 1+301/64+1)
	}
}

func TestTakeReturnsOnlyTheLatestCallsResponse(t *testing.T) {
	env := testutil.NewEnv(t, host.Deps{}, host.Config{})
	res, err := env.Host.Run(context.Background(), host.RunSpec{Code: testutil.BuildWAT(t, "host/testdata/wat/pending.wat"), Input: []byte("some input")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != journal.StatusCompleted || res.Steps != 2 {
		t.Fatalf("run %s after %d steps: %v (the guest traps where the host breaks the pending rules)", res.Status, res.Steps, res.Err)
	}
}
