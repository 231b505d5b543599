package badgerstore_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/badgerstore"
	badger "github.com/dgraph-io/badger/v4"
)

// Real damage to the files of a real store: bytes zeroed in table files,
// MANIFESTs cut, tables whose MANIFEST record is lost, debris of crashes.
// Open must refuse a damaged store with a *DamageError naming the file, and
// change nothing; a read must never return a shorter journal.

// damageRuns are the runs the damage tests store: big enough that the
// journal spans many blocks of its table.
const damageEntries = 3000

// storeWithRuns returns a closed store holding runs of damageEntries
// entries each, every one flushed to its table files.
func storeWithRuns(t *testing.T, n int) (string, []journal.RunID) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	st, err := badgerstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var runs []journal.RunID
	for i := range n {
		run := journal.NewRunID(time.Now().Add(time.Duration(i) * time.Second))
		recs := chainOf(t, run, damageEntries)
		m := &journal.RunMeta{ID: run, Status: journal.StatusRunning, ModuleSHA256: make([]byte, 32), Cell: make([]byte, 32)}
		if err := st.Commit(ctx, &journal.Batch{Run: run, Records: recs, Meta: m, Durable: true}); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, run)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, runs
}

// snapshot returns every file under dir (the journal's log in wal/
// included) by its path from dir, with its size and SHA-256.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		name, _ := filepath.Rel(dir, path)
		sum := sha256.Sum256(b)
		out[filepath.ToSlash(name)] = fmt.Sprintf("%d %x", len(b), sum[:8])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameFiles(t *testing.T, before, after map[string]string) {
	t.Helper()
	for name, v := range before {
		if name == "agentrt.lock" {
			continue
		}
		if after[name] != v {
			t.Errorf("%s changed: before %q, after %q", name, v, after[name])
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok && name != "agentrt.lock" {
			t.Errorf("%s appeared", name)
		}
	}
}

// tables returns the table files of dir, biggest first.
func tables(t *testing.T, dir string) []string {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	size := func(p string) int64 { i, _ := os.Stat(p); return i.Size() }
	slices.SortFunc(names, func(a, b string) int { return int(size(b) - size(a)) })
	if len(names) == 0 {
		t.Fatal("the store has no table files")
	}
	return names
}

func zeroBytes(t *testing.T, file string, off, n int64) {
	t.Helper()
	f, err := os.OpenFile(file, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, n), off); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func damageOf(t *testing.T, err error) *badgerstore.DamageError {
	t.Helper()
	var de *badgerstore.DamageError
	if !errors.As(err, &de) || !errors.Is(err, badgerstore.ErrDamaged) {
		t.Fatalf("open: %v, want a *DamageError", err)
	}
	return de
}

func TestZeroedBlockOfATableRefusesTheStoreAndChangesNothing(t *testing.T) {
	dir, _ := storeWithRuns(t, 2)
	sst := tables(t, dir)[0]
	info, _ := os.Stat(sst)
	zeroBytes(t, sst, info.Size()/3, 1024)
	before := snapshot(t, dir)
	for range 2 { // and again: a refusal is not a repair
		_, err := badgerstore.Open(dir)
		de := damageOf(t, err)
		p := de.Problems[0]
		if p.File != filepath.Base(sst) || p.Kind != "block" || !strings.Contains(err.Error(), filepath.Base(sst)) {
			t.Fatalf("problem %+v (%v), want a bad block of %s", p, err, filepath.Base(sst))
		}
	}
	sameFiles(t, before, snapshot(t, dir))
}

func TestCutManifestRefusesTheStoreAndDeletesNoTable(t *testing.T) {
	for _, cut := range []struct {
		name string
		size func(int64) int64
		kind string
	}{
		// In the middle of a change record: the MANIFEST does not replay
		// whole.
		{"mid-record", func(n int64) int64 { return n - 3 }, "manifest"},
		// Its header alone: it replays, listing no table, and every table
		// on disk holds data the store lacks.
		{"header only", func(int64) int64 { return 8 }, "orphan"},
	} {
		t.Run(cut.name, func(t *testing.T) {
			dir, _ := storeWithRuns(t, 2)
			mf := filepath.Join(dir, badger.ManifestFilename)
			info, _ := os.Stat(mf)
			if err := os.Truncate(mf, cut.size(info.Size())); err != nil {
				t.Fatal(err)
			}
			before := snapshot(t, dir)
			_, err := badgerstore.Open(dir)
			de := damageOf(t, err)
			if de.Problems[0].Kind != cut.kind {
				t.Fatalf("problems %v, want kind %s", de.Problems, cut.kind)
			}
			sameFiles(t, before, snapshot(t, dir))
		})
	}
}

// TestMutatedTablesNeverPanic damages table files in many places (1 KiB
// of random bytes or zeros, at spread offsets, the index and footer
// included): every open is refused with a *DamageError naming the file,
// and none panics.
func TestMutatedTablesNeverPanic(t *testing.T) {
	dir, _ := storeWithRuns(t, 1)
	sst := tables(t, dir)[0]
	orig, err := os.ReadFile(sst)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	n := 40
	if testing.Short() {
		n = 8
	}
	for i := range n {
		b := slices.Clone(orig)
		off := len(b) * i / n
		size := min(1024, len(b)-off)
		if i%2 == 0 {
			clear(b[off : off+size])
		} else {
			for j := range size {
				b[off+j] = byte(rng.Uint32())
			}
		}
		if err := os.WriteFile(sst, b, 0o644); err != nil {
			t.Fatal(err)
		}
		st, err := badgerstore.Open(dir)
		if err == nil {
			st.Close()
			t.Fatalf("mutation %d (offset %d of %d): the store opened", i, off, len(b))
		}
		if de := damageOf(t, err); de.Problems[0].File != filepath.Base(sst) {
			t.Fatalf("mutation %d: problems %v, want %s", i, de.Problems, filepath.Base(sst))
		}
	}
	if err := os.WriteFile(sst, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := badgerstore.Open(dir)
	if err != nil {
		t.Fatalf("the undamaged table again: %v", err)
	}
	st.Close()
}

// TestTableDamagedWhileOpenIsAGap zeroes bytes of a table under an open
// store, so that badger's own reads meet the damage: the journal read
// back is not a shorter one, but a *GapError naming the missing entries.
func TestTableDamagedWhileOpenIsAGap(t *testing.T) {
	dir, runs := storeWithRuns(t, 1)
	st, err := badgerstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sst := tables(t, dir)[0]
	info, _ := os.Stat(sst)
	zeroBytes(t, sst, info.Size()/2, 1024)
	ctx := context.Background()
	var read uint64
	err = st.Records(ctx, runs[0], 0, func(uint64, []byte) error { read++; return nil })
	var gap *journal.GapError
	if !errors.As(err, &gap) || !errors.Is(err, journal.ErrIncomplete) {
		t.Fatalf("read %d entries, then %v; want a *GapError", read, err)
	}
	if gap.From != read || gap.Length != damageEntries || gap.From >= damageEntries {
		t.Fatalf("gap %+v after %d entries read, want from %d of %d", gap, read, read, damageEntries)
	}
	if _, err := journal.VerifyStore(ctx, st, runs[0], journal.TrustAny); !errors.Is(err, journal.ErrIncomplete) {
		t.Fatalf("verify: %v, want ErrIncomplete", err)
	}
}

// TestEmptyValueLogLeftByAKillIsRemoved: a kill between badger creating a
// value-log file and sizing it leaves it empty, which badger refuses to
// open; it never held a write, and Open removes it.
func TestEmptyValueLogLeftByAKillIsRemoved(t *testing.T) {
	dir, runs := storeWithRuns(t, 1)
	logs, _ := filepath.Glob(filepath.Join(dir, "*.vlog"))
	slices.Sort(logs)
	var fid int
	fmt.Sscanf(filepath.Base(logs[len(logs)-1]), "%d.vlog", &fid)
	empty := filepath.Join(dir, fmt.Sprintf("%06d.vlog", fid+1))
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// What badger itself makes of it, on a copy.
	cp := copyDir(t, dir)
	if db, err := badger.Open(badger.DefaultOptions(cp).WithLogger(nil)); err == nil {
		db.Close()
		t.Fatal("badger opened a store with an empty value log: the test no longer shows the case")
	}
	st, err := badgerstore.Open(dir)
	if err != nil {
		t.Fatalf("open with an empty value log: %v", err)
	}
	defer st.Close()
	if info, err := os.Stat(empty); err == nil && info.Size() == 0 {
		t.Fatal("the empty value log is still there") // badger may have made a new one of that name
	}
	if sum, err := journal.VerifyStore(context.Background(), st, runs[0], journal.TrustAny); err != nil || sum.Entries != damageEntries {
		t.Fatalf("verify after the repair: %v %v", sum, err)
	}
}

// TestTablesTheManifestDoesNotList: a table with a higher id than every
// listed one, holding only what the store has (what a compaction killed
// before its MANIFEST record leaves), is deleted; so is an unreadable one
// (a table cut by the kill while badger wrote it). An older unreadable one,
// or one holding data the store lacks, is damage.
func TestTablesTheManifestDoesNotList(t *testing.T) {
	t.Run("copy of a listed table is debris", func(t *testing.T) {
		dir, runs := storeWithRuns(t, 1)
		src := tables(t, dir)[0]
		debris := filepath.Join(dir, "000900.sst")
		copyFile(t, src, debris)
		st, err := badgerstore.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		for _, p := range []string{debris, filepath.Join(dir, "orphaned", "000900.sst")} {
			if _, err := os.Stat(p); !os.IsNotExist(err) {
				t.Fatalf("%s: %v, want it deleted", p, err)
			}
		}
		if _, err := journal.VerifyStore(context.Background(), st, runs[0], journal.TrustAny); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("cut newest table is debris", func(t *testing.T) {
		dir, _ := storeWithRuns(t, 1)
		b, _ := os.ReadFile(tables(t, dir)[0])
		debris := filepath.Join(dir, "000900.sst")
		os.WriteFile(debris, append(b[:len(b)/2:len(b)/2], make([]byte, len(b)/2)...), 0o644)
		st, err := badgerstore.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		st.Close()
		if _, err := os.Stat(debris); !os.IsNotExist(err) {
			t.Fatalf("the cut table is still there: %v", err)
		}
	})
	t.Run("unlisted table with data the store lacks is damage", func(t *testing.T) {
		dir, _ := storeWithRuns(t, 1)
		other, _ := storeWithRuns(t, 1) // another store's table: runs this one lacks
		copyFile(t, tables(t, other)[0], filepath.Join(dir, "000900.sst"))
		before := snapshot(t, dir)
		_, err := badgerstore.Open(dir)
		de := damageOf(t, err)
		if p := de.Problems[0]; p.Kind != "orphan" || !strings.Contains(p.File, "000900.sst") {
			t.Fatalf("problems %v", de.Problems)
		}
		sameFiles(t, before, snapshot(t, dir))
	})
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

func copyDir(t *testing.T, dir string) string {
	t.Helper()
	cp := t.TempDir()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Type().IsRegular() {
			copyFile(t, filepath.Join(dir, e.Name()), filepath.Join(cp, e.Name()))
		}
	}
	return cp
}

// TestDebrisBesideATornMemtableLog: a kill during a flush can leave a
// table the MANIFEST does not list and a memtable log that ends in a torn
// write, together. The read-only open that checks the table cannot repair
// the log; the store repairs it the ordinary way (a read-write open) and
// still finds the table to be debris. (The crash test met this at its 94th
// kill.)
func TestDebrisBesideATornMemtableLog(t *testing.T) {
	dir, runs := storeWithRuns(t, 1)
	st, err := badgerstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	run := journal.NewRunID(time.Now())
	m := &journal.RunMeta{ID: run, Status: journal.StatusRunning, ModuleSHA256: make([]byte, 32), Cell: make([]byte, 32)}
	if err := st.Commit(ctx, &journal.Batch{Run: run, Records: chainOf(t, run, 50), Meta: m, Durable: true}); err != nil {
		t.Fatal(err)
	}
	// The store as a kill would leave it: copied while open, its memtable
	// log holding the last commit unflushed.
	cp := copyDir(t, dir)
	st.Close()
	os.Remove(filepath.Join(cp, "agentrt.lock"))
	mems, _ := filepath.Glob(filepath.Join(cp, "*.mem"))
	if len(mems) == 0 {
		t.Fatal("no memtable log in the copy")
	}
	b, err := os.ReadFile(mems[len(mems)-1])
	if err != nil {
		t.Fatal(err)
	}
	end := len(b)
	for end > 0 && b[end-1] == 0 {
		end--
	}
	copy(b[end:], []byte{0x99, 0x42, 0x17, 0x01, 0xff, 0xfe}) // half an entry after the last whole one
	if err := os.WriteFile(mems[len(mems)-1], b, 0o644); err != nil {
		t.Fatal(err)
	}
	debris := filepath.Join(cp, "000900.sst")
	copyFile(t, tables(t, cp)[0], debris)

	st2, err := badgerstore.Open(cp)
	if err != nil {
		t.Fatalf("open after the kill: %v", err)
	}
	defer st2.Close()
	if _, err := os.Stat(filepath.Join(cp, "orphaned", "000900.sst")); !os.IsNotExist(err) {
		t.Fatalf("the debris is still there: %v", err)
	}
	for _, r := range []journal.RunID{runs[0], run} {
		if sum, err := journal.VerifyStore(ctx, st2, r, journal.TrustAny); err != nil {
			t.Fatalf("run %s after the repair: %v %v", r, sum, err)
		}
	}
}

// TestLineageOfACutJournalReportsTheGap: a journal cut by damage the open
// could not see is indexed as far as it reads, the query goes on, and the
// gap is reported as a record that does not decode is.
func TestLineageOfACutJournalReportsTheGap(t *testing.T) {
	dir, runs := storeWithRuns(t, 1)
	st, err := badgerstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sst := tables(t, dir)[0]
	info, _ := os.Stat(sst)
	zeroBytes(t, sst, info.Size()/2, 1024)
	rep, err := st.Index(context.Background())
	if err != nil {
		t.Fatalf("index of a cut journal: %v", err)
	}
	if len(rep.Skipped) != 1 || rep.Skipped[0].Run != runs[0] || !strings.Contains(rep.Skipped[0].Err, "missing from the store") {
		t.Fatalf("skipped %v, want the gap of run %s", rep.Skipped, runs[0])
	}
}
