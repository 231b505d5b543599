package badgerstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentrt/agentrt/journal"
	badger "github.com/dgraph-io/badger/v4"
	boptions "github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/pb"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/badger/v4/y"
	"google.golang.org/protobuf/proto"
)

// CheckReport is what Check found in a store.
type CheckReport struct {
	Dir string `json:"dir"`
	// OK says the files are whole and every run's journal verifies and
	// reaches its head.
	OK bool `json:"ok"`
	// Tables counts the table files read.
	Tables int `json:"tables"`
	// Problems are the defects of the files (preflight.go).
	Problems []Problem `json:"problems"`
	// Debris are files a crash left that the next open removes: empty
	// logs, and tables the MANIFEST does not list whose data the store
	// holds.
	Debris []string `json:"debris,omitempty"`
	// LogRecords counts the records the journal's log holds (wal.go), one
	// a committer transaction, left by a crash: the runs are checked with
	// them applied, as the next open applies them.
	LogRecords int `json:"log_records,omitempty"`
	// Runs is every run the readable part of the store knows of.
	Runs []RunCheck `json:"runs"`
	// Blobs counts the blobs of the blob area read and checked;
	// BadBlobs names each whose bytes do not hash to its key (the run
	// checks name the entries that reference one).
	Blobs    int       `json:"blobs"`
	BadBlobs []BadBlob `json:"bad_blobs,omitempty"`
}

// BadBlob is a blob of the blob area whose bytes are not the ones its key
// names.
type BadBlob struct {
	Sum string `json:"sum"`
	// Got is the SHA-256 of the bytes stored, hex; Problem, when the value
	// did not read at all, says why.
	Got     string `json:"got,omitempty"`
	Problem string `json:"problem,omitempty"`
}

// RunCheck is the state of one run's journal.
type RunCheck struct {
	Run string `json:"run"`
	// Status is the run index's ("" when the index lost the run).
	Status journal.RunStatus `json:"status,omitempty"`
	// Length is the number of entries the head record names (0 when it is
	// lost); Readable the number of entries read back and verified, in
	// order from entry 0.
	Length   uint64 `json:"length"`
	Readable uint64 `json:"readable"`
	Finished bool   `json:"finished"`
	OK       bool   `json:"ok"`
	// Problem says what is wrong with the journal.
	Problem string `json:"problem,omitempty"`
	// Damage names the damaged files whose key range holds the run's keys.
	Damage []string `json:"damage,omitempty"`
}

// CheckOptions configure Check and Salvage.
type CheckOptions struct {
	// Trust decides the keys whose seals count; nil: any key (integrity,
	// not provenance).
	Trust journal.TrustFunc
	// Scratch is a directory for the readable copy of a damaged store;
	// "": the system's temporary directory.
	Scratch string
}

// Check reads a whole store without changing it: every file (the MANIFEST,
// every block of every table, whether remembered as verified or not), then
// every run's journal, verified from entry 0 to its head. When the files
// are damaged, the journals are read from a readable copy (readableCopy),
// so that the report names the runs the damage reaches. It fails with
// ErrLocked while another process has the store open.
func Check(ctx context.Context, dir string, opts CheckOptions) (*CheckReport, error) {
	if _, err := os.Stat(filepath.Join(dir, manifestFile)); err != nil {
		if entries, _ := os.ReadDir(dir); len(entries) == 0 {
			return nil, fmt.Errorf("badgerstore: %s holds no store", dir)
		}
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	defer lock.release()
	in, err := inspect(dir, true)
	if err != nil {
		return nil, err
	}
	rep := &CheckReport{Dir: dir, Problems: in.problems, Tables: len(in.tables) + len(in.orphans)}
	if rep.Problems == nil {
		rep.Problems = []Problem{}
	}
	v, err := openView(ctx, in, opts.Scratch)
	if err != nil {
		return nil, err
	}
	defer v.close()
	rep.Problems = append(rep.Problems, v.problems...)
	rep.Debris = v.debris
	rep.LogRecords = v.logRecords
	runs, err := v.runs(ctx)
	if err != nil {
		return nil, err
	}
	trust := opts.Trust
	if trust == nil {
		trust = journal.TrustAny
	}
	rep.OK = len(rep.Problems) == 0
	for _, r := range runs {
		rc := v.checkRun(ctx, r, trust, rep.Problems)
		rep.OK = rep.OK && rc.OK
		rep.Runs = append(rep.Runs, rc)
	}
	if rep.Runs == nil {
		rep.Runs = []RunCheck{}
	}
	if err := v.checkBlobs(ctx, rep); err != nil {
		return nil, err
	}
	rep.OK = rep.OK && len(rep.BadBlobs) == 0
	return rep, nil
}

// checkBlobs reads every blob of the view's blob area and checks its
// bytes against its key.
func (v *view) checkBlobs(ctx context.Context, rep *CheckReport) error {
	return v.st.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = []byte(prefixBlob)
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			item := it.Item()
			sum := bytes.Clone(item.Key()[len(prefixBlob):])
			rep.Blobs++
			err := item.Value(func(data []byte) error { return journal.CheckBlob(sum, data) })
			var be *journal.BlobError
			switch {
			case errors.As(err, &be):
				rep.BadBlobs = append(rep.BadBlobs, BadBlob{Sum: journal.SumHex(sum), Got: journal.SumHex(be.Got)})
			case err != nil:
				rep.BadBlobs = append(rep.BadBlobs, BadBlob{Sum: journal.SumHex(sum), Problem: err.Error()})
			}
		}
		return nil
	})
}

// view is a store opened for reading: the store itself, read-only, when its
// files are whole, or else a readable copy of it.
type view struct {
	st *Store
	// problems are the defects found making the copy (tables that could
	// not be copied whole); debris the crash leftovers seen.
	problems []Problem
	debris   []string
	scratch  string
	// logRecords counts the records of the journal's log applied to the copy.
	logRecords int
}

func (v *view) close() {
	v.st.db.Close()
	if v.scratch != "" {
		os.RemoveAll(v.scratch)
	}
}

// openView opens the store in.dir for reading. A store with no defect,
// no crash debris, no journal's log to apply and memtable logs that need
// no repair is opened read-only where it is; any other is copied first
// (readableCopy), the copy opened, and the log applied to it.
func openView(ctx context.Context, in *inspection, scratch string) (*view, error) {
	v := &view{debris: slices.Clone(in.emptyLogs)}
	left, err := readWAL(in.dir)
	if err != nil {
		return nil, err
	}
	if len(in.problems) == 0 && len(in.orphans) == 0 && len(in.emptyLogs) == 0 && len(left.segs) == 0 {
		db, err := openBadger(in.dir, func(o badger.Options) badger.Options { return o.WithReadOnly(true) })
		if err == nil {
			v.st = &Store{db: db, c: newCommitter(db, nil)}
			return v, nil
		}
		if !truncateNeeded(err) {
			return nil, err
		}
	}
	tmp, err := os.MkdirTemp(scratch, "agentrt-store-copy-")
	if err != nil {
		return nil, err
	}
	v.scratch = tmp
	db, err := readableCopy(ctx, in, tmp, v)
	if err == nil && len(left.recs) > 0 {
		var mark uint64
		if mark, err = walMark(db); err == nil {
			err = left.behind(in.dir, mark)
		}
		if err == nil {
			err = applyWAL(db, left.recs)
		}
		if err != nil {
			db.Close()
		}
		v.logRecords = len(left.recs)
	}
	if err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	v.st = &Store{db: db, c: newCommitter(db, nil)}
	return v, nil
}

// openCopy opens the readable copy in dir. Compaction would delete tables
// the copy shares with the store (hard links, which badger truncates when
// it deletes a table), so it is off: without it, badger deletes none.
func openCopy(dir string) (*badger.DB, error) {
	db, err := openBadger(dir, func(o badger.Options) badger.Options { return o.WithNumCompactors(0) })
	if err != nil {
		return nil, fmt.Errorf("badgerstore: the readable copy of the store does not open: %w", err)
	}
	return db, nil
}

// readableCopy makes in tmp a store badger can open that holds everything
// of in.dir that reads, and opens it: every table that verifies (a hard
// link, or a copy where links cannot be made), every damaged table
// rewritten with the blocks that still read, the memtable and value logs
// (copies: badger writes them), a new MANIFEST listing the tables; then
// every table the MANIFEST does not list that holds data the rest lacks,
// at level 0 under a new id (the debris of a crash is left out, as Open
// would). What could not be copied goes to v.problems.
func readableCopy(ctx context.Context, in *inspection, tmp string, v *view) (*badger.DB, error) {
	entries, err := os.ReadDir(in.dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || name == manifestFile || name == lockFile || strings.HasPrefix(name, verifiedFile) ||
			strings.HasSuffix(name, ".sst") || slices.Contains(in.emptyLogs, name) {
			continue
		}
		if err := copyFile(filepath.Join(in.dir, name), filepath.Join(tmp, name)); err != nil {
			return nil, err
		}
	}
	levels := map[uint64]manifestTable{}
	damaged := map[string]bool{}
	for _, p := range in.problems {
		damaged[p.File] = true
	}
	for _, t := range in.tables {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		dst := filepath.Join(tmp, table.IDToFilename(t.id))
		if !damaged[t.name] {
			if err := linkOrCopy(filepath.Join(in.dir, t.name), dst); err != nil {
				return nil, err
			}
		} else if n, err := rewriteTable(filepath.Join(in.dir, t.name), dst, t); err != nil {
			v.problems = append(v.problems, Problem{File: t.name, Kind: "table", Detail: fmt.Sprintf("nothing of it can be read: %v", err)})
			continue
		} else if n == 0 {
			continue
		}
		levels[t.id] = manifestTable{t.level, t.compression}
	}
	if err := writeManifest(tmp, levels); err != nil {
		return nil, err
	}
	db, err := openCopy(tmp)
	if err != nil || len(in.orphans) == 0 {
		return db, err
	}
	var lacking []tableFile
	for _, o := range in.orphans {
		if p, ok := orphanDebris(db, in.dir, o, in.maxListed); ok {
			v.debris = append(v.debris, o.name)
		} else {
			v.problems = append(v.problems, p)
			lacking = append(lacking, o)
		}
	}
	if len(lacking) == 0 {
		return db, nil
	}
	if err := db.Close(); err != nil {
		return nil, err
	}
	// New ids, above every table of the copy (its close may have flushed
	// one): an id names a file, and the entries keep their versions.
	next := in.maxListed
	names, _ := filepath.Glob(filepath.Join(tmp, "*.sst"))
	for _, n := range names {
		if id, ok := table.ParseFileID(n); ok {
			next = max(next, id)
		}
		if id, ok := table.ParseFileID(n); ok {
			if _, listed := levels[id]; !listed {
				levels[id] = manifestTable{0, options("").Compression} // flushed by the close
			}
		}
	}
	for _, o := range lacking {
		next++
		if n, err := rewriteTable(filepath.Join(in.dir, o.name), filepath.Join(tmp, table.IDToFilename(next)), o); err == nil && n > 0 {
			levels[next] = manifestTable{0, o.compression}
		}
	}
	if err := writeManifest(tmp, levels); err != nil {
		return nil, err
	}
	return openCopy(tmp)
}

// rewriteTable writes to dst a table of the entries of src that read, and
// returns how many it wrote (none: no file is written).
func rewriteTable(src, dst string, t tableFile) (int, error) {
	bopts := table.Options{BlockSize: 4 << 10, BloomFalsePositive: 0.01, Compression: t.compression, TableSize: uint64(t.size) + 1<<20, ZSTDCompressionLevel: 1}
	b := table.NewTableBuilder(bopts)
	defer b.Close()
	n := 0
	_, err := scanTable(src, t.compression, func(k []byte, vs y.ValueStruct) {
		b.Add(bytes.Clone(k), vs, 0)
		n++
	})
	if err != nil || n == 0 {
		return 0, err
	}
	tbl, err := table.CreateTable(dst, b)
	if err != nil {
		return 0, err
	}
	return n, tbl.Close(-1)
}

// manifestTable is a table's MANIFEST record: its level and compression.
type manifestTable struct {
	level       int
	compression boptions.CompressionType
}

// writeManifest writes a MANIFEST listing the tables of levels, in
// badger's format (the 8-byte header, then one change set: length, CRC-32C
// and the protobuf ManifestChangeSet), as badger's own rewrite does.
func writeManifest(dir string, levels map[uint64]manifestTable) error {
	set := &pb.ManifestChangeSet{}
	for _, id := range slices.Sorted(maps.Keys(levels)) {
		set.Changes = append(set.Changes, &pb.ManifestChange{Id: id, Op: pb.ManifestChange_CREATE,
			Level: uint32(levels[id].level), Compression: uint32(levels[id].compression)})
	}
	body, err := proto.Marshal(set)
	if err != nil {
		return err
	}
	buf := []byte{'B', 'd', 'g', 'r', 0, 0, 0, manifestVersion}
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(body)))
	buf = binary.BigEndian.AppendUint32(buf, crc32.Checksum(body, y.CastagnoliCrcTable))
	return os.WriteFile(filepath.Join(dir, manifestFile), append(buf, body...), 0o600)
}

// manifestVersion is the MANIFEST format version of badger v4 (its
// badgerMagicVersion); ReplayManifestFile refuses any other.
const manifestVersion = 8

func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	return copyFile(src, dst)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// runs returns every run the view knows of: those in the run index, those
// with a head record, and those with journal records, sorted.
func (v *view) runs(ctx context.Context) ([]journal.RunID, error) {
	seen := map[journal.RunID]bool{}
	err := v.st.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false
		for _, prefix := range []string{prefixMeta, prefixLength, prefixJournal} {
			opts.Prefix = []byte(prefix)
			it := txn.NewIterator(opts)
			for it.Rewind(); it.Valid(); it.Next() {
				k := it.Item().Key()
				var run journal.RunID
				if len(k) >= len(prefix)+len(run) {
					copy(run[:], k[len(prefix):])
					seen[run] = true
				}
			}
			it.Close()
		}
		return nil
	})
	return sortedRuns(seen), err
}

// checkRun verifies one run's journal from entry 0 and names the damaged
// files whose key ranges hold the run's keys.
func (v *view) checkRun(ctx context.Context, run journal.RunID, trust journal.TrustFunc, problems []Problem) RunCheck {
	rc := RunCheck{Run: run.String()}
	if m, err := v.st.Meta(ctx, run); err == nil {
		rc.Status = m.Status
	} else if errors.Is(err, journal.ErrNotFound) {
		rc.Problem = "the run index has no record of the run"
	} else {
		rc.Problem = err.Error()
	}
	v.st.db.View(func(txn *badger.Txn) error {
		h, err := readHead(txn, run)
		if err == nil {
			rc.Length = h.Len
		}
		return nil
	})
	ver := journal.NewVerifier(trust)
	ver.Blobs = v.st // every blob an entry references is read and checked against its hash
	ver.OnEntry = func(*journal.Entry, *journal.Record) error { rc.Readable++; return nil }
	sum, err := journal.VerifyStoreWith(ctx, v.st, run, ver)
	switch {
	case err != nil:
		rc.Problem = joinText(rc.Problem, err.Error())
	default:
		rc.Finished = sum.End != nil
		if rc.Status.Finished() && !rc.Finished {
			rc.Problem = joinText(rc.Problem, fmt.Sprintf("the run index says %s, and the journal has no end entry", rc.Status))
		}
	}
	for _, p := range problems {
		if p.From != nil && runInRange(run, p.From, p.To) {
			rc.Damage = append(rc.Damage, p.File)
		}
	}
	rc.OK = rc.Problem == "" && len(rc.Damage) == 0
	return rc
}

// runInRange says whether a key of run (its index record, head record,
// lease, journal or events) may lie in [from, to) (to nil: unbounded).
func runInRange(run journal.RunID, from, to []byte) bool {
	var ranges [][2][]byte // inclusive bounds of each kind of key of run
	for _, prefix := range []string{prefixMeta, prefixLength, prefixLease} {
		k := runKey(prefix, run)
		ranges = append(ranges, [2][]byte{k, k})
	}
	for _, prefix := range []string{prefixJournal, prefixEvents} {
		ranges = append(ranges, [2][]byte{seqKey(prefix, run, 0), seqKey(prefix, run, ^uint64(0))})
	}
	for _, r := range ranges {
		if (to == nil || bytes.Compare(r[0], to) < 0) && bytes.Compare(r[1], from) >= 0 {
			return true
		}
	}
	return false
}

func joinText(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
