package host_test

import (
	"context"
	"encoding/binary"
	"runtime"
	"sync"
	"testing"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
)

// keepsMemory says whether an engine of kind keeps the memories of ended
// instances here (EngineConfig.KeepMemory): wazero on Linux.
func keepsMemory(kind string) bool {
	return runtime.GOOS == "linux" && (kind == "" || kind == host.EngineWazero)
}

func leftoverRun(t *testing.T, env *testutil.Env, code []byte) uint32 {
	t.Helper()
	res, err := env.Host.Run(context.Background(), host.RunSpec{Code: code})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != journal.StatusCompleted || len(res.Output) != 4 {
		t.Fatalf("run %s ended %s with output %x: %v", res.Run, res.Status, res.Output, res.Err)
	}
	return binary.LittleEndian.Uint32(res.Output)
}

// TestNoRunReadsAnotherRunsMemory: a guest that fills its memory with a
// secret after counting what it finds there starts, run after run, on a
// memory with nothing in it, although the engine hands it the memory the
// run before it ended with (EngineConfig.KeepMemory), and so do runs at
// once.
func TestNoRunReadsAnotherRunsMemory(t *testing.T) {
	ctx := context.Background()
	kind := testutil.EngineKind()
	engine, err := host.NewEngine(ctx, host.EngineConfig{Kind: kind, CacheDir: testutil.CompileCache()})
	if err != nil {
		t.Fatal(err)
	}
	defer engine.Close(ctx)
	env := testutil.NewEnvOn(t, engine, host.Deps{}, host.Config{})
	code := testutil.BuildWAT(t, "host/testdata/wat/leftover.wat")
	for i := range 3 {
		if n := leftoverRun(t, env, code); n != 0 {
			t.Fatalf("run %d found %d bytes that are not zero in its memory", i, n)
		}
		kept, resident := host.KeptMemory(engine)
		if keepsMemory(kind) && (kept != 1 || resident < 0x80000) {
			t.Fatalf("after run %d the engine keeps %d memories, %d bytes: want the run's, 512 KiB or more touched", i, kept, resident)
		}
		// Each run after the first is handed the memory the one before
		// it ended with.
		if st, ok := engine.MemoryStats(); keepsMemory(kind) && (!ok || st.Fresh != 1 || st.Reused != uint64(i) || st.Dropped != 0) {
			t.Fatalf("after run %d: memory stats %+v (%v), want 1 fresh, %d reused, none dropped", i, st, ok, i)
		}
	}
	var wg sync.WaitGroup
	found := make([]uint32, 8)
	for i := range found {
		wg.Go(func() { found[i] = leftoverRun(t, env, code) })
	}
	wg.Wait()
	for i, n := range found {
		if n != 0 {
			t.Fatalf("run %d of 8 at once found %d bytes that are not zero", i, n)
		}
	}
}

// TestKeepMemoryBoundsWhatIsKept: an engine keeps no more touched bytes
// than KeepMemory, and none when it is below zero.
func TestKeepMemoryBoundsWhatIsKept(t *testing.T) {
	kind := testutil.EngineKind()
	if !keepsMemory(kind) {
		t.Skipf("engine %q on %s keeps no memory", kind, runtime.GOOS)
	}
	ctx := context.Background()
	code := testutil.BuildWAT(t, "host/testdata/wat/leftover.wat")
	for _, c := range []struct {
		keep     int64
		wantKept int
	}{
		{keep: -1, wantKept: 0},
		{keep: 256 << 10, wantKept: 0},    // the guest touches 512 KiB
		{keep: 1<<20 - 4096, wantKept: 1}, // one memory, not two
	} {
		engine, err := host.NewEngine(ctx, host.EngineConfig{Kind: kind, CacheDir: testutil.CompileCache(), KeepMemory: c.keep})
		if err != nil {
			t.Fatal(err)
		}
		env := testutil.NewEnvOn(t, engine, host.Deps{}, host.Config{})
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() { leftoverRun(t, env, code) })
		}
		wg.Wait()
		kept, resident := host.KeptMemory(engine)
		if kept != c.wantKept || (c.keep > 0 && resident > uint64(c.keep)) {
			t.Errorf("KeepMemory %d: %d memories kept, %d bytes; want %d, at most %d bytes", c.keep, kept, resident, c.wantKept, c.keep)
		}
		// What the stats say: every instance was handed a memory, kept
		// or new, and every new one is kept or was given back.
		st, ok := engine.MemoryStats()
		switch {
		case c.keep < 0 && ok:
			t.Errorf("KeepMemory %d: the engine says it keeps memories: %+v", c.keep, st)
		case c.keep > 0 && (!ok || st.Limit != uint64(c.keep) || st.Kept != kept || st.Reused+st.Fresh != 4 || st.Fresh != uint64(st.Kept)+st.Dropped):
			t.Errorf("KeepMemory %d: memory stats %+v (%v): want limit %d, 4 memories handed out, each new one kept or dropped", c.keep, st, ok, c.keep)
		}
		engine.Close(ctx)
		if kept, _ := host.KeptMemory(engine); kept != 0 {
			t.Errorf("KeepMemory %d: %d memories kept after Close", c.keep, kept)
		}
	}
}
