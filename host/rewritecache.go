package host

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"path/filepath"
)

// rewriteVersion names what wasmModule.rewrite writes. Bump it with every
// change to rewrite's output: a cache file of another version is never
// read. TestRewriteOutputIsPinned fails when the output changes, so that
// the bump is not forgotten.
const rewriteVersion = 1

// rewriteCacheDir is the folder of the engine's cache directory
// (EngineConfig.CacheDir) that holds rewritten modules.
const rewriteCacheDir = "agentrt-rewrite"

// rewriteMagic starts every cache file.
var rewriteMagic = []byte("agentrt-rewrite\x00")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// rewriteCache keeps the rewritten bytes of modules on disk, so that a
// process that runs a module rewritten before (every agentrt run of the
// same agent) reads them instead of rewriting: a Go agent of 3.6 MB takes
// some 38 ms to rewrite here, 3 ms to read back. The module's checks
// (readModule, checkRun) still run on every load, beside the engine's
// work on the rewrite (Engine.prepare): only their pure consequence, the
// rewrite, is kept.
//
// A file names the module's SHA-256, the run's module limits, whether the
// engine needs the yield instrumentation and rewriteVersion; it holds a
// CRC-32C of the bytes, so that a torn or damaged file is rewritten rather
// than compiled. The folder is trusted as the engine's compilation cache
// beside it is (that one holds native code): whoever can write the data
// directory can change what the cell executes.
type rewriteCache struct{ dir string }

// path names the file of the rewrite of the module whose SHA-256 is sum
// for module limits ml, with the yield instrumentation or not, by an
// engine whose compile limits are cl: a file exists only once the module
// passed the checks of cl and ml (readModule, checkRun).
func (c rewriteCache) path(sum [32]byte, ml moduleLimits, instrument bool, cl CompileLimits) string {
	h := sha256.New()
	fmt.Fprintf(h, "agentrt rewrite v%d\n%x\n%d %d %d %t\n%d %d %d %d %d\n", rewriteVersion, sum,
		ml.memoryPages, ml.tableElements, ml.tables, instrument,
		cl.ModuleBytes, cl.FunctionBytes, cl.Nesting, cl.Branches, cl.Locals)
	return filepath.Join(c.dir, hex.EncodeToString(h.Sum(nil)))
}

// load returns the rewritten bytes kept at path, and the func that
// releases them once compiled, or false when there are none, or none
// intact. Where it can, it maps the file rather than reading it: a copy
// into fresh memory costs more than the rewrite it saves on a machine
// whose page faults are dear (some 3 ms a MiB on the 2-core VMs of
// bench/README.md). Files are only ever replaced (store), never written
// in place, so a mapping stays valid.
func (c rewriteCache) load(path string) ([]byte, func(), bool) {
	b, release, err := mapFile(path)
	if err != nil {
		return nil, nil, false
	}
	head := len(rewriteMagic) + 4 + 8
	if len(b) < head || !bytes.Equal(b[:len(rewriteMagic)], rewriteMagic) {
		release()
		return nil, nil, false
	}
	sum := binary.LittleEndian.Uint32(b[len(rewriteMagic):])
	n := binary.LittleEndian.Uint64(b[len(rewriteMagic)+4:])
	bin := b[head:]
	if uint64(len(bin)) != n || crc32.Checksum(bin, castagnoli) != sum {
		release()
		return nil, nil, false
	}
	return bin, release, true
}

// store keeps bin at path (replaceFile).
func (c rewriteCache) store(path string, bin []byte) error {
	head := make([]byte, 0, len(rewriteMagic)+12)
	head = append(head, rewriteMagic...)
	head = binary.LittleEndian.AppendUint32(head, crc32.Checksum(bin, castagnoli))
	head = binary.LittleEndian.AppendUint64(head, uint64(len(bin)))
	return replaceFile(path, 0o600, head, bin)
}
