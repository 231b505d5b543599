package host_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/badgerstore"
)

// faultyStore fails every commit after the first ok ones, as a full disk
// would, writing nothing.
type faultyStore struct {
	journal.Store
	ok    int32
	count atomic.Int32
}

var errDiskFull = errors.New("write /data/store/000042.vlog: no space left on device")

func (f *faultyStore) Commit(ctx context.Context, b *journal.Batch) error {
	if f.count.Add(1) > f.ok {
		return errDiskFull
	}
	return f.Store.Commit(ctx, b)
}

// TestStoreFaultStopsTheRunCleanlyAndItResumes: a store that starts failing
// mid-run stops the run at the failing step with the store's error; the
// journal holds everything committed before; once the store works again
// the run resumes to the end.
func TestStoreFaultStopsTheRunCleanlyAndItResumes(t *testing.T) {
	st, err := badgerstore.Open(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, key, _ := ed25519.GenerateKey(nil)
	faulty := &faultyStore{Store: st, ok: 4}
	sick, err := host.New(testutil.SharedEngine(t), host.Deps{Store: faulty, KV: st, Key: key}, host.Config{})
	if err != nil {
		t.Fatal(err)
	}
	code := testutil.BuildWAT(t, "host/testdata/wat/kvput.wat") // 50 kv.put: 50 durable commits
	g := &host.Grant{KV: &host.KVGrant{Namespace: "f"}}
	ctx := context.Background()
	res, err := sick.Run(ctx, host.RunSpec{Code: code, Grant: g})
	if !errors.Is(err, errDiskFull) || res == nil || res.Status != journal.StatusRunning {
		t.Fatalf("run on a failing store: %v, %+v; want the store's error and a run still running", err, res)
	}
	if !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("the error does not say what failed: %v", err)
	}
	sum, err := journal.VerifyStore(ctx, st, res.Run, journal.TrustKeys(key.Public().(ed25519.PublicKey)))
	if err != nil {
		t.Fatalf("the journal left by the fault: %v", err)
	}
	healthy, err := host.New(testutil.SharedEngine(t), host.Deps{Store: st, KV: st, Key: key}, host.Config{})
	if err != nil {
		t.Fatal(err)
	}
	done, err := healthy.Resume(ctx, res.Run)
	if err != nil || done.Status != journal.StatusCompleted || done.Steps != 50 {
		t.Fatalf("resume after the fault cleared: %v %+v", err, done)
	}
	t.Logf("fault after %d entries; resumed to %d calls", sum.Entries, done.Steps)
}
