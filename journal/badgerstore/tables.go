package badgerstore

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	boptions "github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/badger/v4/y"
	"github.com/dgraph-io/ristretto/v2/z"
)

// Reading badger's table files ourselves, one block at a time, in a
// goroutine of ours: badger opens tables in goroutines of its own and
// panics on some corruptions (a damaged index, a block whose lengths point
// outside it), which no caller can recover from. Whatever a table holds is
// read here first, with every panic turned into an error naming the file
// and the block.

// badBlock is a block of a table that does not read.
type badBlock struct {
	index int
	// first is the block's first key and next the first key of the block
	// after it (nil for the last block): the damaged key range, as user
	// keys without badger's version suffix.
	first, next []byte
	err         string
}

// tableScan is what scanTable found in one table file.
type tableScan struct {
	blocks, keys      int
	smallest, biggest []byte // user keys
	maxVersion        uint64
	bad               []badBlock
}

// scanTable reads every block of the table in path, checking each block's
// checksum, and calls visit (when not nil) with each entry of the blocks
// that read. A table that cannot be opened at all (its index or footer is
// damaged) is an error; a damaged block is reported in bad, and the blocks
// after it are still read.
func scanTable(path string, compression boptions.CompressionType, visit func(key []byte, vs y.ValueStruct)) (scan *tableScan, err error) {
	mf, err := z.OpenMmapFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("open: %v", err)
	}
	defer mf.Close(-1) // unmaps and closes; never truncates or deletes
	var t *table.Table
	func() {
		defer recoverAs(&err, "badger's table reader panicked opening it")
		// Options for reading only: the table's own compression, and a
		// checksum check of every block read.
		t, err = table.OpenTable(mf, table.Options{ChkMode: boptions.OnBlockRead, Compression: compression, BlockSize: 4 << 10})
	}()
	if err != nil {
		return nil, fmt.Errorf("the table does not open (its index or footer is damaged): %s", firstLine(err))
	}
	scan = &tableScan{smallest: y.ParseKey(bytes.Clone(t.Smallest())), biggest: y.ParseKey(bytes.Clone(t.Biggest())), maxVersion: t.MaxVersion()}
	var bases []string
	func() {
		defer recoverAs(&err, "badger's table reader panicked reading its index")
		bases = t.KeySplits(int(t.KeyCount())+1, nil)
	}()
	if err != nil {
		return nil, err
	}
	scan.blocks = len(bases)
	for i, base := range bases {
		var next []byte
		if i+1 < len(bases) {
			next = []byte(bases[i+1])
		}
		n, err := scanBlock(t, []byte(base), next, visit)
		scan.keys += n
		if err != nil {
			b := badBlock{index: i, first: y.ParseKey([]byte(base)), err: firstLine(err)}
			if next != nil {
				b.next = y.ParseKey(next)
			}
			scan.bad = append(scan.bad, b)
		}
	}
	if len(scan.bad) == 0 && scan.keys != int(t.KeyCount()) {
		scan.bad = append(scan.bad, badBlock{index: -1, first: scan.smallest,
			err: fmt.Sprintf("%d entries read, the index counts %d", scan.keys, t.KeyCount())})
	}
	return scan, nil
}

// scanBlock reads the entries from base, the first key of a block, up to
// next (the next block's first key, or the table's end) and returns how
// many it read. A block is read whole once its checksum verifies, so the
// block is bad exactly when the iterator cannot start in it; stopping
// later means the next block does not read, which its own scan reports.
func scanBlock(t *table.Table, base, next []byte, visit func([]byte, y.ValueStruct)) (n int, err error) {
	defer recoverAs(&err, "badger's table reader panicked reading it")
	it := t.NewIterator(table.NOCACHE)
	defer it.Close() // releases the iterator's reference; the table keeps the one OpenTable gave
	it.Seek(base)
	if !it.Valid() {
		return 0, errors.New("the block does not read (its checksum or its format is bad)")
	}
	for ; it.Valid(); it.Next() {
		k := it.Key()
		if next != nil && y.CompareKeys(k, next) >= 0 {
			break
		}
		if visit != nil {
			visit(k, it.Value())
		}
		n++
	}
	return n, nil
}

func recoverAs(err *error, what string) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("%s: %s", what, firstLine(fmt.Errorf("%v", r)))
	}
}

// firstLine keeps an error to its first line: badger's panics carry pages
// of debugging dumps.
func firstLine(err error) string {
	s := strings.TrimSpace(err.Error())
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}
