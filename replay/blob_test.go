package replay_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/replay"
)

// blobbedSmoke records the smoke agent and then, test-only, rewrites its
// journal as a host that stores large payloads by hash would have written
// it: the 40 000-byte value of its kv.put (a request) and of its kv.get of
// that key (a response) are stored in blob form, which makes the two one
// blob; the journal is re-chained and re-sealed by the cell's key and the
// blob committed to the store. The ops' journal format is unchanged: only
// how the store keeps their payloads. It returns the seq of the first
// entry that references the blob and the blob.
func blobbedSmoke(t *testing.T) (*testutil.Env, journal.RunID, []byte, uint64, journal.Blob) {
	t.Helper()
	env, run, code := smokeRun(t, host.Config{})
	first, blobs := testutil.RouteThroughBlobs(t, env.Store, run, env.Key, 1024, func(e *journal.Entry) bool {
		return e.Op == "kv.put" && e.Phase == journal.PhaseIntent || e.Op == "kv.get" && e.Phase == journal.PhaseCompleted
	})
	if len(blobs) != 1 {
		t.Fatalf("%d blobs; want the request's value and the response's, one blob", len(blobs))
	}
	return env, run, code, first, blobs[0]
}

func trustOf(env *testutil.Env) []ed25519.PublicKey {
	return []ed25519.PublicKey{env.Key.Public().(ed25519.PublicKey)}
}

// TestReplayAndAuditOfPayloadsInBlobForm: a journal whose payloads are
// stored by hash replays exactly (the guest gets the 40 000 bytes of its
// kv.get resolved, byte for byte, and ends with the recorded output), and
// its bundle carries the one blob, once, and verifies offline, in memory
// and as a stream, with the blob references counted.
func TestReplayAndAuditOfPayloadsInBlobForm(t *testing.T) {
	env, run, code, _, blob := blobbedSmoke(t)
	ctx := context.Background()
	j, err := replay.Load(ctx, env.Store, run, journal.TrustKeys(trustOf(env)...))
	if err != nil {
		t.Fatal(err)
	}
	if j.Summary.BlobRefs != 2 {
		t.Fatalf("%d blob references resolved, want 2", j.Summary.BlobRefs)
	}
	rep, err := j.Replay(ctx, env.Engine, code, replay.Options{})
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	if !strings.Contains(string(rep.Output), "big=40000 err=<nil>") {
		t.Fatalf("replay output %q", rep.Output)
	}
	var buf bytes.Buffer
	erep, err := replay.ExportTo(ctx, env.Store, run, env.Key, replay.EngineSettings{}, &buf)
	if err != nil || erep.Blobs != 1 || erep.BlobBytes != int64(len(blob.Data)) {
		t.Fatalf("export: %v %+v", err, erep)
	}
	b, err := replay.DecodeBundle(buf.Bytes())
	if err != nil || len(b.Blobs) != 1 || !bytes.Equal(b.Blobs[0].Sum, blob.Sum) || !bytes.Equal(b.Blobs[0].Data, blob.Data) {
		t.Fatalf("bundle: %v, %d blobs", err, len(b.Blobs))
	}
	if again := marshal(t, b); !bytes.Equal(again, buf.Bytes()) {
		t.Fatal("the streamed bundle is not the canonical encoding of what it decodes to")
	}
	vrep, err := replay.VerifyBundle(ctx, buf.Bytes(), replay.VerifyOptions{Trusted: trustOf(env), Engine: env.Engine})
	if err != nil || !vrep.OK || !vrep.ReplayIdentical || vrep.Blobs != 1 || vrep.BlobRefs != 2 {
		t.Fatalf("verify: %v %+v", err, vrep)
	}
	// The lineage index finds the kv.put by the key its request names,
	// resolved from blob form, as Trace, its reference, does.
	calls, _, _, err := journal.Trace(ctx, env.Store, run)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range calls {
		found = found || c.Op == "kv.put" && c.Resource == "n/big"
	}
	if !found {
		t.Error("Trace: no kv.put of n/big")
	}
	indexed, err := env.Store.Query(ctx, journal.Filter{Resource: "n/big", Op: "kv.put"})
	if err != nil || len(indexed) != 1 {
		t.Errorf("lineage query of n/big: %v, %d calls", err, len(indexed))
	}
	// The in-memory bundle serves its blobs as a Store does.
	if _, err := replay.Load(ctx, b.Store(), run, journal.TrustKeys(trustOf(env)...)); err != nil {
		t.Fatalf("load from the bundle's store: %v", err)
	}
}

// TestChangedOrMissingBlobInABundle: one byte of the blob changed in a
// real exported bundle, the blob left out, or a blob no entry references
// added: verification names the blob and the entry that references it
// (class blob), or refuses the extra blob (bundle-format).
func TestChangedOrMissingBlobInABundle(t *testing.T) {
	env, run, _, first, blob := blobbedSmoke(t)
	ctx := context.Background()
	var buf bytes.Buffer
	if _, err := replay.ExportTo(ctx, env.Store, run, env.Key, replay.EngineSettings{}, &buf); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	verify := func(data []byte) *replay.AuditReport {
		rep, err := replay.VerifyBundle(ctx, data, replay.VerifyOptions{Trusted: trustOf(env), Engine: env.Engine})
		if err == nil {
			t.Fatal("a tampered bundle verified")
		}
		return rep
	}
	changed := bytes.Clone(good)
	pos := bytes.LastIndex(changed, blob.Data)
	if pos < 0 {
		t.Fatal("the blob is not in the bundle")
	}
	changed[pos+len(blob.Data)/2] ^= 0x01
	missing, _ := replay.DecodeBundle(good)
	missing.Blobs = nil
	extra, _ := replay.DecodeBundle(good)
	other := journal.NewBlob([]byte("a blob nobody references"))
	extra.Blobs = append(extra.Blobs, replay.BundleBlob{Sum: other.Sum, Data: other.Data})
	slices.SortFunc(extra.Blobs, func(a, b replay.BundleBlob) int { return bytes.Compare(a.Sum, b.Sum) })
	for _, tc := range []struct {
		name  string
		data  []byte
		class string
		want  string
	}{
		{"changed", changed, "blob", "blob " + journal.SumHex(blob.Sum) + " is changed in the bundle"},
		{"missing", marshal(t, missing), "blob", "blob " + journal.SumHex(blob.Sum) + " is missing in the bundle"},
		{"extra", marshal(t, extra), "bundle-format", "carries blob " + journal.SumHex(other.Sum) + ", which no entry references"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := verify(tc.data).Failure
			if f == nil || f.Class != tc.class || !strings.Contains(f.Message, tc.want) {
				t.Fatalf("failure %+v, want class %s saying %q", f, tc.class, tc.want)
			}
			if tc.class == "blob" && (f.Entry == nil || *f.Entry != first || f.Op != "kv.put") {
				t.Fatalf("failure names entry %v (%s), want entry %d, the kv.put that references the blob", f.Entry, f.Op, first)
			}
		})
	}
	// The streamed verification of a file says the same.
	rep, err := replay.VerifyBundleReader(ctx, bytes.NewReader(changed), int64(len(changed)), replay.VerifyOptions{Trusted: trustOf(env), Engine: env.Engine})
	if err == nil || rep.Failure.Class != "blob" || *rep.Failure.Entry != first {
		t.Fatalf("streamed verify of the changed bundle: %v", err)
	}
}

// TestChangedBlobInTheStore: one byte of the blob changed in the badger
// store: replay refuses the journal naming the blob and the entry, and so
// does export, which writes no bundle of it.
func TestChangedBlobInTheStore(t *testing.T) {
	env, run, _, first, blob := blobbedSmoke(t)
	ctx := context.Background()
	if err := env.Store.RewriteBlob(blob.Sum, func(b []byte) []byte { b[len(b)-1] ^= 0x80; return b }); err != nil {
		t.Fatal(err)
	}
	_, err := replay.Load(ctx, env.Store, run, journal.TrustKeys(trustOf(env)...))
	var ve *journal.VerifyError
	if !errors.As(err, &ve) || !errors.Is(err, journal.ErrBlob) || ve.Seq != first || !strings.Contains(err.Error(), journal.SumHex(blob.Sum)+" is changed in the store") {
		t.Fatalf("load: %v, want class blob at entry %d naming blob %x", err, first, blob.Sum)
	}
	var buf bytes.Buffer
	if _, err := replay.ExportTo(ctx, env.Store, run, env.Key, replay.EngineSettings{}, &buf); !errors.Is(err, replay.ErrExport) || !strings.Contains(err.Error(), journal.SumHex(blob.Sum)) {
		t.Fatalf("export: %v", err)
	}
}
