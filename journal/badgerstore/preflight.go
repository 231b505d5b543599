package badgerstore

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	badger "github.com/dgraph-io/badger/v4"
	boptions "github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/badger/v4/y"
)

// The preflight: what Open checks before badger sees a store directory.
//
// Badger trusts its files. Opening a store whose MANIFEST lost records, it
// deletes every table the MANIFEST does not list; it truncates a MANIFEST
// whose end does not parse; it opens tables in goroutines of its own, where
// a damaged index is a panic that kills the process; and it reads a damaged
// block as the end of the data, so that a journal comes back shorter. So
// Open reads the files first, in a goroutine of its own, and refuses a
// store that would not open cleanly, changing nothing:
//
//  1. the MANIFEST must replay to its last byte;
//  2. every table it lists must exist, open, and pass the checksum of
//     every block (a table is checked once: its size and modification time
//     are remembered in verifiedFile, and a table that changes is checked
//     again);
//  3. a table it does not list is crash debris (badger writes a table,
//     then its MANIFEST record) only if everything in it is in the store
//     without it: such tables are set aside, the store is opened read-only,
//     and each is checked entry by entry; debris is deleted, anything else
//     is damage (the MANIFEST lost the table's record), and stays set aside;
//  4. empty memtable and value-log files, left by a kill between badger
//     creating a file and sizing it, are removed: they never held a write.

// ErrDamaged is the class of every *DamageError.
var ErrDamaged = errors.New("badgerstore: the store is damaged")

// Problem is one defect found in a store's files.
type Problem struct {
	// File is the file's name in the store directory.
	File string `json:"file"`
	// Kind is what is wrong: "manifest" (it does not replay whole or is
	// missing), "missing" (a table the MANIFEST lists is not there),
	// "table" (a table that does not open), "block" (a block of a table
	// that does not read), "orphan" (a table the MANIFEST does not list
	// that holds data the store lacks).
	Kind   string `json:"kind"`
	Detail string `json:"detail"`
	// From and To bound the keys the damage covers, To excluded (nil: to
	// the end), when the damage lies in a known key range.
	From, To []byte `json:"-"`
}

func (p Problem) String() string { return p.File + ": " + p.Detail }

// DamageError is returned by Open for a store that does not open cleanly.
// Nothing in the store was changed, except, when SetAside is true, that
// the tables the MANIFEST does not list were moved to asideDir (a
// memtable log that ended in a torn write had to be repaired to check
// them, and the store may have written tables with their ids).
type DamageError struct {
	Dir      string
	Problems []Problem
	SetAside bool
}

func (e *DamageError) Error() string {
	more := ""
	if len(e.Problems) > 1 {
		more = fmt.Sprintf(" (and %d more)", len(e.Problems)-1)
	}
	changed := "nothing in it was changed"
	if e.SetAside {
		changed = "the tables its MANIFEST does not list are set aside in " + filepath.Join(e.Dir, asideDir) + ", and nothing was deleted"
	}
	return fmt.Sprintf("badgerstore: the store in %s is damaged: %s%s; it was not opened, and %s", e.Dir, e.Problems[0], more, changed)
}

// Unwrap returns ErrDamaged.
func (e *DamageError) Unwrap() error { return ErrDamaged }

const (
	manifestFile = badger.ManifestFilename
	// verifiedFile remembers the tables whose every block verified, by
	// id, size and modification time, so that a table is checked once.
	verifiedFile = "agentrt.verified"
	// asideDir is where tables the MANIFEST does not list are set aside,
	// out of badger's sight, under their own names.
	asideDir = "orphaned"
)

// tableFile is a table file found in a store directory.
type tableFile struct {
	id          uint64
	name        string // as on disk, relative to the store: 000007.sst, or orphaned/000007.sst when set aside
	size, mtime int64
	level       int
	compression boptions.CompressionType
}

func (t tableFile) stamp() string { return fmt.Sprintf("%d %d %d", t.id, t.size, t.mtime) }

// inspection is what the preflight found in a store directory.
type inspection struct {
	dir string
	// tables are the tables the MANIFEST lists, found on disk; orphans
	// the tables on disk it does not list (or set aside before).
	tables, orphans []tableFile
	// maxListed is the highest table id the MANIFEST lists.
	maxListed uint64
	// manifest is what the MANIFEST's records say, as far as they replay.
	manifest badger.Manifest
	// restore are listed tables that an earlier open set aside.
	restore []tableFile
	// emptyLogs are memtable and value-log files of zero bytes.
	emptyLogs []string
	problems  []Problem
	// verified are the stamps of the tables known to verify; saved is
	// verifiedFile as it was read.
	verified map[string]bool
	saved    []byte
}

// inspect reads the store's files without changing any. With all, every
// table is checked, whether remembered as verified or not.
func inspect(dir string, all bool) (*inspection, error) {
	in := &inspection{dir: dir, verified: map[string]bool{}}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	aside, err := os.ReadDir(filepath.Join(dir, asideDir))
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	for _, e := range aside {
		if strings.HasSuffix(e.Name(), ".sst") {
			entries = append(entries, asideEntry{e})
		}
	}
	onDisk := map[uint64]tableFile{}
	hasManifest := false
	for _, e := range entries {
		name := e.Name()
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		switch {
		case name == manifestFile:
			hasManifest = true
		case strings.HasSuffix(name, ".mem"), strings.HasSuffix(name, ".vlog"):
			if info.Size() == 0 {
				in.emptyLogs = append(in.emptyLogs, name)
			}
		case strings.HasSuffix(name, ".sst"):
			id, ok := table.ParseFileID(name)
			if !ok {
				continue
			}
			if _, dup := onDisk[id]; dup {
				in.problem(Problem{File: name, Kind: "table", Detail: fmt.Sprintf("table %d is both in the store and set aside in %s", id, asideDir)})
				continue
			}
			onDisk[id] = tableFile{id: id, name: name, size: info.Size(), mtime: info.ModTime().UnixNano(), compression: options("").Compression}
		}
	}
	if !all {
		in.loadVerified()
	}
	if !hasManifest {
		if len(onDisk) > 0 {
			in.problem(Problem{File: manifestFile, Kind: "manifest", Detail: fmt.Sprintf("the MANIFEST is missing, and %d tables are on disk", len(onDisk))})
			for _, t := range onDisk {
				in.orphans = append(in.orphans, t)
			}
		}
		in.sortTables()
		return in, nil
	}
	m, err := replayManifest(dir)
	if err != nil {
		in.problem(Problem{File: manifestFile, Kind: "manifest", Detail: err.Error()})
	}
	in.manifest = m
	for id, tm := range m.Tables {
		in.maxListed = max(in.maxListed, id)
		t, ok := onDisk[id]
		if !ok {
			in.problem(Problem{File: table.IDToFilename(id), Kind: "missing", Detail: fmt.Sprintf("the MANIFEST lists table %d at level %d, and its file is missing", id, tm.Level)})
			continue
		}
		delete(onDisk, id)
		t.level, t.compression = int(tm.Level), tm.Compression
		if tm.KeyID != 0 {
			in.problem(Problem{File: t.name, Kind: "table", Detail: "the table is encrypted, and agentrt stores never are"})
			continue
		}
		if isAside(t.name) {
			// Set aside by an earlier open, and listed after all (the
			// MANIFEST was restored): badger gets it back once it checks.
			in.restore = append(in.restore, t)
		}
		in.tables = append(in.tables, t)
	}
	for _, t := range onDisk {
		in.orphans = append(in.orphans, t)
	}
	in.sortTables()
	for _, t := range in.tables {
		if in.verified[t.stamp()] {
			continue
		}
		if p, ok := checkTable(dir, t); !ok {
			in.problem(p...)
			continue
		}
		in.verified[t.stamp()] = true
	}
	return in, nil
}

func (in *inspection) problem(p ...Problem) { in.problems = append(in.problems, p...) }

func (in *inspection) sortTables() {
	by := func(a, b tableFile) int { return cmp.Compare(a.id, b.id) }
	slices.SortFunc(in.tables, by)
	slices.SortFunc(in.orphans, by)
}

// replayManifest replays the MANIFEST read-only (badger's own parser) and
// fails unless it replays to its last byte.
func replayManifest(dir string) (badger.Manifest, error) {
	f, err := os.Open(filepath.Join(dir, manifestFile))
	if err != nil {
		return badger.Manifest{}, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return badger.Manifest{}, err
	}
	m, end, err := badger.ReplayManifestFile(f, 0, options(dir))
	switch {
	case err != nil:
		return m, fmt.Errorf("the MANIFEST does not replay: %v", firstLine(err))
	case end < info.Size():
		return m, fmt.Errorf("the MANIFEST's last %d bytes (from offset %d) are not whole change records: the file was cut or overwritten, and the records after that point are lost",
			info.Size()-end, end)
	}
	return m, nil
}

// checkTable reads every block of a table; ok says whether all read.
func checkTable(dir string, t tableFile) ([]Problem, bool) {
	scan, err := scanTable(filepath.Join(dir, t.name), t.compression, nil)
	if err != nil {
		return []Problem{{File: t.name, Kind: "table", Detail: err.Error()}}, false
	}
	var ps []Problem
	for _, b := range scan.bad {
		detail := fmt.Sprintf("block %d of %d does not read: %s", b.index, scan.blocks, b.err)
		if b.index < 0 {
			detail = b.err
		}
		ps = append(ps, Problem{File: t.name, Kind: "block", Detail: detail, From: b.first, To: b.next})
	}
	return ps, len(ps) == 0
}

func (in *inspection) loadVerified() {
	b, err := os.ReadFile(filepath.Join(in.dir, verifiedFile)) // the store's own file, a line per table
	if err != nil {
		return
	}
	in.saved = b
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) == 3 {
			in.verified[strings.Join(fs, " ")] = true
		}
	}
}

// saveVerified remembers the stamps of the tables found verified, in a
// file written whole or not at all.
func (in *inspection) saveVerified() error {
	var b bytes.Buffer
	for _, t := range in.tables {
		if in.verified[t.stamp()] {
			fmt.Fprintln(&b, t.stamp())
		}
	}
	if bytes.Equal(b.Bytes(), in.saved) {
		return nil // nothing new: an open of an unchanged store writes nothing
	}
	tmp := filepath.Join(in.dir, verifiedFile+".tmp")
	if err := os.WriteFile(tmp, b.Bytes(), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(in.dir, verifiedFile))
}

// openChecked runs the preflight and opens the store read-write.
func openChecked(dir string) (*badger.DB, error) {
	in, err := inspect(dir, false)
	if err != nil {
		return nil, err
	}
	if len(in.problems) > 0 {
		return nil, &DamageError{Dir: dir, Problems: in.problems}
	}
	for _, t := range in.restore {
		if err := os.Rename(filepath.Join(dir, t.name), filepath.Join(dir, filepath.Base(t.name))); err != nil {
			return nil, err
		}
	}
	for i := range in.tables {
		in.tables[i].name = filepath.Base(in.tables[i].name)
	}
	for _, name := range in.emptyLogs {
		log.Printf("badgerstore: removing %s, an empty file left by a crash (it never held a write)", filepath.Join(dir, name))
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			return nil, err
		}
	}
	if len(in.orphans) > 0 {
		if err := in.settleOrphans(); err != nil {
			return nil, err
		}
	}
	db, err := openBadger(dir, nil)
	if err != nil {
		return nil, err
	}
	if err := in.saveVerified(); err != nil {
		log.Printf("badgerstore: %v (the tables will be checked again at the next open)", err)
	}
	return db, nil
}

// settleOrphans sets the tables the MANIFEST does not list aside, where
// badger does not see them (and so does not delete them), and checks each
// against the store opened without them: a table whose every entry the
// store has, at the same or a newer version, is debris of an interrupted
// flush or compaction and is deleted; an unreadable one is debris if it
// is newer than every listed table (the one badger was writing when it
// died); any other is damage, and stays set aside.
func (in *inspection) settleOrphans() error {
	if err := os.MkdirAll(filepath.Join(in.dir, asideDir), 0o700); err != nil {
		return err
	}
	for i := range in.orphans {
		o := &in.orphans[i]
		if isAside(o.name) {
			continue
		}
		aside := filepath.Join(asideDir, o.name)
		if err := os.Rename(filepath.Join(in.dir, o.name), filepath.Join(in.dir, aside)); err != nil {
			return err
		}
		o.name = aside
	}
	readOnly := true
	db, err := openBadger(in.dir, func(o badger.Options) badger.Options { return o.WithReadOnly(true) })
	if truncateNeeded(err) {
		// A memtable's log ends in a torn write, which only a read-write
		// open repairs: that is badger's ordinary recovery, and the
		// tables set aside are untouched by it.
		readOnly = false
		db, err = openBadger(in.dir, nil)
	}
	if err != nil {
		return errors.Join(err, in.unsetAside())
	}
	var damaged []Problem
	var debris []string
	for _, o := range in.orphans {
		if p, ok := orphanDebris(db, in.dir, o, in.maxListed); ok {
			debris = append(debris, o.name)
		} else {
			damaged = append(damaged, p)
		}
	}
	if err := db.Close(); err != nil {
		return err
	}
	for _, name := range debris {
		log.Printf("badgerstore: removing %s, a table an interrupted flush or compaction left (the store holds all of it)", filepath.Join(in.dir, name))
		if err := os.Remove(filepath.Join(in.dir, name)); err != nil {
			return err
		}
	}
	if len(damaged) > 0 {
		de := &DamageError{Dir: in.dir, Problems: damaged}
		if !readOnly {
			// The read-write open may have written tables with the ids
			// of the ones set aside: they keep their new names.
			de.SetAside = true
			return de
		}
		return errors.Join(de, in.unsetAside())
	}
	return nil
}

// unsetAside gives the tables set aside their names back, so that a store
// refused is left as it was found.
func (in *inspection) unsetAside() error {
	var errs []error
	for _, o := range in.orphans {
		aside := filepath.Join(in.dir, o.name)
		if _, err := os.Stat(aside); err != nil {
			continue // deleted as debris
		}
		errs = append(errs, os.Rename(aside, filepath.Join(in.dir, filepath.Base(o.name))))
	}
	os.Remove(filepath.Join(in.dir, asideDir)) // when empty
	return errors.Join(errs...)
}

// orphanDebris says whether the orphan table o holds nothing db lacks.
func orphanDebris(db *badger.DB, dir string, o tableFile, maxListed uint64) (Problem, bool) {
	txn := db.NewTransaction(false)
	defer txn.Discard()
	opts := badger.DefaultIteratorOptions
	opts.AllVersions, opts.PrefetchValues = true, false
	it := txn.NewIterator(opts)
	defer it.Close()
	var lacking int
	var first []byte
	scan, err := scanTable(filepath.Join(dir, o.name), o.compression, func(k []byte, _ y.ValueStruct) {
		key, version := y.ParseKey(k), y.ParseTs(k)
		if bytes.HasPrefix(key, badgerPrefix) {
			return // badger's own keys, which its iterators do not show
		}
		it.Seek(key)
		if it.Valid() && bytes.Equal(it.Item().Key(), key) && it.Item().Version() >= version {
			return
		}
		if lacking == 0 {
			first = bytes.Clone(key)
		}
		lacking++
	})
	name := filepath.Base(o.name)
	if err != nil {
		if o.id > maxListed && cutByAKill(filepath.Join(dir, o.name)) {
			return Problem{}, true
		}
		return Problem{File: o.name, Kind: "orphan", Detail: fmt.Sprintf("table %s, which the MANIFEST does not list, is older than the newest table it lists and does not read: %v", name, err)}, false
	}
	if lacking == 0 && len(scan.bad) == 0 {
		return Problem{}, true
	}
	return Problem{File: o.name, Kind: "orphan", From: scan.smallest, To: append(bytes.Clone(scan.biggest), 0),
		Detail: fmt.Sprintf("table %s, which the MANIFEST does not list, holds %d entries the store lacks (the first: key %s; %d blocks do not read): the MANIFEST lost its record", name, lacking, printableKey(first), len(scan.bad))}, false
}

// cutByAKill says whether the table file in path ends as one cut by a kill
// while badger wrote it: badger sizes the file first, then copies the
// table in, so a cut table is empty or ends in zero bytes, where a whole
// one ends with the non-zero length of its checksum.
func cutByAKill(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return false
	}
	if info.Size() == 0 {
		return true
	}
	var tail [4]byte
	if info.Size() < 4 {
		return false
	}
	if _, err := f.ReadAt(tail[:], info.Size()-4); err != nil {
		return false
	}
	return tail == [4]byte{}
}

// asideEntry is a directory entry of asideDir, named relative to the store.
type asideEntry struct{ os.DirEntry }

func (e asideEntry) Name() string { return filepath.Join(asideDir, e.DirEntry.Name()) }

func isAside(name string) bool { return filepath.Dir(name) == asideDir }

// truncateNeeded says whether a read-only open failed for a memtable log
// that ends in a torn write. badger wraps its errors as text (%+v, not
// %w), so the sentinel is found in the message.
func truncateNeeded(err error) bool {
	return err != nil && strings.Contains(err.Error(), badger.ErrTruncateNeeded.Error())
}

// badgerPrefix starts the keys badger keeps for itself.
var badgerPrefix = []byte("!badger!")

// printableKey shows a store key: its prefix as text, the rest in hex.
func printableKey(k []byte) string {
	if i := bytes.IndexByte(k, '/'); i > 0 && i < 8 {
		return strconv.Quote(string(k[:i+1])) + fmt.Sprintf("%x", k[i+1:])
	}
	return fmt.Sprintf("%x", k)
}
