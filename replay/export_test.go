package replay_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/replay"
)

func smokeRun(t *testing.T, cfg host.Config) (*testutil.Env, journal.RunID, []byte) {
	t.Helper()
	code := testutil.BuildGo(t, "host/testdata/agents/smoke")
	env := testutil.NewEnv(t, host.Deps{}, cfg)
	res, err := env.Host.Run(context.Background(), host.RunSpec{Code: code, Input: []byte("x"),
		Grant: &host.Grant{Run: &host.RunGrant{}, KV: &host.KVGrant{Namespace: "n"}}})
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("run: %v %v", err, res)
	}
	return env, res.Run, code
}

// TestExportStreamsTheCanonicalBundle: the bundle ExportTo streams is the
// canonical encoding of the bundle it describes (DecodeBundle, Marshal: the
// same bytes), records the engine and the request limit of the host that
// recorded the run, and verifies.
func TestExportStreamsTheCanonicalBundle(t *testing.T) {
	env, run, _ := smokeRun(t, host.Config{MaxRequest: 100_000})
	ctx := context.Background()
	var buf bytes.Buffer
	rep, err := replay.ExportTo(ctx, env.Store, run, env.Key, replay.EngineSettings{}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Bytes != int64(buf.Len()) || rep.Engine.Engine != env.Engine.Kind() || rep.Engine.MaxRequest != 100_000 || len(rep.Engine.Also) != 0 {
		t.Fatalf("export report %+v, want engine %s and max request 100000", rep, env.Engine.Kind())
	}
	b, err := replay.DecodeBundle(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	again, err := b.Marshal()
	if err != nil || !bytes.Equal(again, buf.Bytes()) {
		t.Fatalf("the streamed bundle is not the canonical encoding of what it decodes to (%v)", err)
	}
	if uint64(len(b.Records)) != rep.Entries || b.Engine.Engine != rep.Engine.Engine || b.Engine.MaxRequest != rep.Engine.MaxRequest {
		t.Fatalf("bundle %d records %+v, report %+v", len(b.Records), b.Engine, rep)
	}
	vrep, err := replay.VerifyBundle(ctx, buf.Bytes(), replay.VerifyOptions{Trusted: []ed25519.PublicKey{env.Key.Public().(ed25519.PublicKey)}, Engine: env.Engine})
	if err != nil || !vrep.OK || vrep.Engine.MaxRequest != 100_000 {
		t.Fatalf("verify: %v %+v", err, vrep)
	}
}

// TestExportOfARunRecordedBeforeHostsRecordedTheirEngine: a run whose
// index names no engine and no request limit (as every run before they
// were recorded) exports as "unrecorded", with the limit every such host
// used, and verifies.
func TestExportOfARunRecordedBeforeHostsRecordedTheirEngine(t *testing.T) {
	env, run, _ := smokeRun(t, host.Config{})
	ctx := context.Background()
	m, err := env.Store.Meta(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	m.Engines, m.MaxRequest = nil, 0
	n, err := env.Store.Head(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Store.Commit(ctx, &journal.Batch{Run: run, Next: n, Meta: &m}); err != nil {
		t.Fatal(err)
	}
	b, err := replay.Export(ctx, env.Store, run, env.Key, replay.EngineSettings{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Engine.Engine != replay.EngineUnrecorded || b.Engine.MaxRequest != abi.MaxRequest {
		t.Fatalf("settings %+v, want unrecorded and %d", b.Engine, abi.MaxRequest)
	}
	data, _ := b.Marshal()
	if _, err := replay.VerifyBundle(ctx, data, replay.VerifyOptions{Trusted: []ed25519.PublicKey{env.Key.Public().(ed25519.PublicKey)}, Engine: env.Engine}); err != nil {
		t.Fatal(err)
	}
}

// TestEngineSettingsShape: the engines a bundle may name, and the list of
// the others.
func TestEngineSettingsShape(t *testing.T) {
	seed, err := replay.DecodeBundle(seedBundle(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		es replay.EngineSettings
		ok bool
	}{
		{replay.EngineSettings{Engine: "wazero", ABI: 1, MaxRequest: 1}, true},
		{replay.EngineSettings{Engine: "wasmtime", ABI: 1, MaxRequest: 1, Also: []string{"wazero"}}, true},
		{replay.EngineSettings{Engine: replay.EngineUnrecorded, ABI: 1, MaxRequest: 1}, true},
		{replay.EngineSettings{Engine: replay.EngineUnrecorded, ABI: 1, MaxRequest: 1, Also: []string{"wazero"}}, false},
		{replay.EngineSettings{Engine: "wazero", ABI: 1, MaxRequest: 1, Also: []string{"wazero"}}, false},
		{replay.EngineSettings{Engine: "wazero", ABI: 1, MaxRequest: 1, Also: []string{"wasmtime", "wasmtime"}}, false},
		{replay.EngineSettings{Engine: "v8", ABI: 1, MaxRequest: 1}, false},
		{replay.EngineSettings{Engine: "wazero", ABI: 1, MaxRequest: 0}, false},
	} {
		b := *seed
		b.Engine = c.es
		data, err := b.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := replay.DecodeBundle(data); (err == nil) != c.ok {
			t.Errorf("settings %+v: %v, want ok %v", c.es, err, c.ok)
		}
	}
}

// TestResumeOnTheOtherEngineIsRecorded: a run started on one engine and
// resumed on the other names both in its index, in that order, and keeps
// the request limit it started with; its bundle says so, and verifies.
func TestResumeOnTheOtherEngineIsRecorded(t *testing.T) {
	first := testutil.SharedEngine(t)
	other := host.EngineWasmtime
	if first.Kind() == host.EngineWasmtime {
		other = host.EngineWazero
	}
	if !host.EngineAvailable(other) {
		t.Skipf("this binary has no %s engine (build tag wasmtime)", other)
	}
	second := testutil.NewEngine(t, other)
	env := testutil.NewEnvOn(t, first, host.Deps{}, host.Config{MaxRequest: 50_000})
	ctx := context.Background()
	code := testutil.BuildWAT(t, "bench/testdata/loop.wat")
	st, err := env.Host.Start(ctx, host.RunSpec{Code: code, Input: binary.LittleEndian.AppendUint64(nil, 300_000)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := st.Execute(ctx); done <- err }()
	for {
		if n, _ := env.Store.Head(ctx, st.Run); n > 300 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err := env.Host.Cancel(ctx, st.Run); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil && !errors.Is(err, host.ErrInterrupted) {
		t.Fatal(err)
	}
	h2, err := host.New(second, host.Deps{Store: env.Store, KV: env.Store, Events: env.Store, Key: env.Key}, host.Config{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := h2.Resume(ctx, st.Run)
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("resume on %s: %v %+v", other, err, res)
	}
	m, err := env.Store.Meta(ctx, st.Run)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m.Engines, []string{first.Kind(), other}) || m.MaxRequest != 50_000 {
		t.Fatalf("index: engines %v, max request %d", m.Engines, m.MaxRequest)
	}
	var buf bytes.Buffer
	rep, err := replay.ExportTo(ctx, env.Store, st.Run, env.Key, replay.EngineSettings{}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Engine.Engine != first.Kind() || !slices.Equal(rep.Engine.Also, []string{other}) || rep.Engine.MaxRequest != 50_000 {
		t.Fatalf("settings %+v", rep.Engine)
	}
	if _, err := replay.VerifyBundle(ctx, buf.Bytes(), replay.VerifyOptions{Trusted: []ed25519.PublicKey{env.Key.Public().(ed25519.PublicKey)}, Engine: first}); err != nil {
		t.Fatal(err)
	}
}

// changingReader serves data, but from the third time a read covers
// position at, serves it with that byte changed: a file rewritten while
// it is verified, after the journal pass.
type changingReader struct {
	data  []byte
	at    int64
	reads int
}

func (c *changingReader) ReadAt(p []byte, off int64) (int, error) {
	n := copy(p, c.data[min(off, int64(len(c.data))):])
	if off <= c.at && c.at < off+int64(n) {
		c.reads++
		if c.reads >= 3 {
			p[c.at-off] ^= 0xff
		}
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// TestBundleChangedWhileVerifiedFails: the re-execution reads the records
// again; a record changed since the journal pass verified them is caught
// (the records no longer chain to the verified head), not replayed.
func TestBundleChangedWhileVerifiedFails(t *testing.T) {
	f := bundleFixture(t)
	// A byte of the entry of a record in the middle of the journal.
	rec := f.bundle.Records[len(f.bundle.Records)/2]
	at := int64(bytes.Index(f.data, rec) + 10)
	if at < 10 {
		t.Fatal("record not found in the bundle")
	}
	_, err := replay.VerifyBundleReader(context.Background(), &changingReader{data: f.data, at: at}, int64(len(f.data)),
		replay.VerifyOptions{Trusted: f.trusted, Engine: f.env.Engine})
	if replay.Class(err) != "divergence" || !strings.Contains(err.Error(), "changed while it was being verified") {
		t.Fatalf("a bundle changed between the passes: %v", err)
	}
	// Unchanged, the same reader verifies.
	if _, err := replay.VerifyBundleReader(context.Background(), bytes.NewReader(f.data), int64(len(f.data)),
		replay.VerifyOptions{Trusted: f.trusted, Engine: f.env.Engine}); err != nil {
		t.Fatal(err)
	}
}
