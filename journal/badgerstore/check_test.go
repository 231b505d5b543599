package badgerstore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/badgerstore"
	badger "github.com/dgraph-io/badger/v4"
)

func TestCheckOfAWholeStore(t *testing.T) {
	dir, runs := storeWithRuns(t, 2)
	rep, err := badgerstore.Check(context.Background(), dir, badgerstore.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || len(rep.Problems) != 0 || len(rep.Runs) != len(runs) {
		t.Fatalf("check of a whole store: %+v", rep)
	}
	for _, r := range rep.Runs {
		if !r.OK || r.Readable != damageEntries || r.Length != damageEntries {
			t.Fatalf("run %+v", r)
		}
	}
}

// TestCheckAndSalvageOfADamagedTable zeroes 1 KiB of the table that holds
// three runs' journals: check names the file, the block and the runs the
// damage reaches, and changes nothing; salvage copies every run, the
// damaged one up to the damage, into a new store where it still reads as
// incomplete, never as a shorter journal.
func TestCheckAndSalvageOfADamagedTable(t *testing.T) {
	dir, runs := storeWithRuns(t, 3)
	sst := tables(t, dir)[0]
	info, _ := os.Stat(sst)
	zeroBytes(t, sst, info.Size()/2, 1024)
	before := snapshot(t, dir)
	ctx := context.Background()

	rep, err := badgerstore.Check(ctx, dir, badgerstore.CheckOptions{Scratch: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || len(rep.Problems) == 0 || rep.Problems[0].File != filepath.Base(sst) || rep.Problems[0].Kind != "block" {
		t.Fatalf("check: %+v", rep)
	}
	var hit, intact []string
	for _, r := range rep.Runs {
		if r.OK {
			intact = append(intact, r.Run)
			continue
		}
		if len(r.Damage) == 0 || r.Damage[0] != filepath.Base(sst) || r.Readable >= damageEntries || r.Length != damageEntries {
			t.Fatalf("damaged run %+v", r)
		}
		hit = append(hit, r.Run)
	}
	if len(hit) == 0 || len(intact) == 0 || len(rep.Runs) != len(runs) {
		t.Fatalf("damaged runs %v, intact %v, of %d", hit, intact, len(runs))
	}
	sameFiles(t, before, snapshot(t, dir))

	dst := filepath.Join(t.TempDir(), "salvaged")
	srep, err := badgerstore.Salvage(ctx, dir, dst, badgerstore.CheckOptions{Scratch: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	sameFiles(t, before, snapshot(t, dir))
	st, err := badgerstore.Open(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, r := range srep.Runs {
		run, _ := journal.ParseRunID(r.Run)
		_, verr := journal.VerifyStore(ctx, st, run, journal.TrustAny)
		switch {
		case slices.Contains(intact, r.Run):
			if !r.Complete || r.Copied != damageEntries || verr != nil {
				t.Fatalf("intact run salvaged as %+v; verify %v", r, verr)
			}
		default:
			var gap *journal.GapError
			if r.Complete || r.Copied >= damageEntries || !errors.As(verr, &gap) || gap.From != r.Copied || gap.Length != damageEntries {
				t.Fatalf("damaged run salvaged as %+v; verify %v, want a gap from %d", r, verr, r.Copied)
			}
		}
	}
	// The runs name a module (all zeros) the store never had.
	if srep.Modules != 0 || len(srep.MissingModules) != 1 {
		t.Fatalf("modules copied %d, missing %v; want the one module reported missing", srep.Modules, srep.MissingModules)
	}
}

// TestSalvageOfAStoreWhoseManifestLostItsRecords: the MANIFEST cut to its
// header lists no table; every table is set aside at open, and salvage
// recovers every run whole from them.
func TestSalvageOfAStoreWhoseManifestLostItsRecords(t *testing.T) {
	dir, runs := storeWithRuns(t, 2)
	if err := os.Truncate(filepath.Join(dir, badger.ManifestFilename), 8); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rep, err := badgerstore.Check(ctx, dir, badgerstore.CheckOptions{Scratch: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || len(rep.Problems) == 0 || rep.Problems[0].Kind != "orphan" {
		t.Fatalf("check: %+v", rep)
	}
	dst := filepath.Join(t.TempDir(), "salvaged")
	srep, err := badgerstore.Salvage(ctx, dir, dst, badgerstore.CheckOptions{Scratch: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(srep.Runs) != len(runs) {
		t.Fatalf("salvaged %+v", srep.Runs)
	}
	for _, r := range srep.Runs {
		if !r.Complete || r.Copied != damageEntries {
			t.Fatalf("run %+v", r)
		}
	}
	st, err := badgerstore.Open(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	listed, _ := st.Runs(ctx)
	if len(listed) != len(runs) {
		t.Fatalf("the salvaged store lists %d runs, want %d", len(listed), len(runs))
	}
}
