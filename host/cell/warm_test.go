package cell_test

import (
	"context"
	"errors"
	"testing"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/badgerstore"
)

// TestWarmRunsOnlyForTheCellThatOpens: Options.Warm gets the engine the
// cell then runs with, and a cell refused because another holds the
// store (a daemon) starts nothing.
func TestWarmRunsOnlyForTheCellThatOpens(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	code := testutil.BuildWAT(t, "host/testdata/wat/loop.wat")
	var warmed *host.Engine
	c, err := cell.Open(ctx, dir, cell.Options{CacheDir: t.TempDir(), Warm: func(e *host.Engine) {
		warmed = e
		e.Warm(code, nil)
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if warmed == nil || warmed != c.Engine {
		t.Fatal("Warm was not given the cell's engine")
	}
	res, err := c.Host.Run(ctx, host.RunSpec{Code: code})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != journal.StatusCompleted {
		t.Fatalf("the run ended %s: %v", res.Status, res.Err)
	}
	if st := c.Engine.Stats(); st.Compiles != 1 || st.Hits != 1 {
		t.Fatalf("the engine compiled %d modules and found %d compiled, want the warm-up's one, found by the run", st.Compiles, st.Hits)
	}

	called := false
	_, err = cell.Open(ctx, dir, cell.Options{NoCache: true, Warm: func(*host.Engine) { called = true }})
	if !errors.Is(err, badgerstore.ErrLocked) {
		t.Fatalf("a second cell on the same data directory: %v, want ErrLocked", err)
	}
	if called {
		t.Fatal("Warm was called for a cell refused because another holds the store")
	}
}
