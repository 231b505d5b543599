//go:build unix

package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal/badgerstore"
	badger "github.com/dgraph-io/badger/v4"
)

// Store damage from the command line: real bytes zeroed in a real store's
// table, its MANIFEST cut, and every command that reads the store asked
// about it. None may answer from a shorter journal, none may exit 0 where
// data is missing, and none may delete or change a file of the store.

type cliResult struct {
	code           int
	stdout, stderr string
}

func agentrtCLI(data string, args ...string) cliResult {
	var out, errb bytes.Buffer
	code := run(append([]string{"--data", data}, args...), strings.NewReader(""), &out, &errb)
	return cliResult{code, out.String(), errb.String()}
}

func (r cliResult) String() string {
	return fmt.Sprintf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
}

// damageData returns a data directory holding three finished runs of the
// smoke agent, closed (so their journals are in table files) and opened
// once more (so the tables are remembered as verified).
func damageData(t *testing.T) (string, []string) {
	t.Helper()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	module := filepath.Join(dir, "smoke.wasm")
	if err := os.WriteFile(module, testutil.BuildGo(t, "host/testdata/agents/smoke"), 0o644); err != nil {
		t.Fatal(err)
	}
	grant := filepath.Join(dir, "grant.yaml")
	if err := os.WriteFile(grant, []byte("capabilities:\n  run: {}\n  kv: {namespace: smoke}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if r := agentrtCLI(data, "--cache", filepath.Join(dir, "cache"), "run", module, "--grant", grant, "--input", fmt.Sprint("input ", i), "-q"); r.code != 0 {
			t.Fatalf("run: %v", r)
		}
	}
	r := agentrtCLI(data, "runs", "--json")
	if r.code != 0 {
		t.Fatalf("runs: %v", r)
	}
	runs := regexp.MustCompile(`"run_id":"([0-9a-f]{32})"`).FindAllStringSubmatch(r.stdout, -1)
	if len(runs) != 3 {
		t.Fatalf("runs: %v", r)
	}
	var ids []string
	for _, m := range runs {
		ids = append(ids, m[1])
	}
	return data, ids
}

// storeFiles returns every file of the store with its size and SHA-256.
func storeFiles(t *testing.T, data string) map[string]string {
	t.Helper()
	out := map[string]string{}
	dir := cell.StoreDir(data)
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() || info.Name() == "agentrt.lock" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		rel, _ := filepath.Rel(dir, p)
		out[rel] = fmt.Sprintf("%d %x", len(b), sum[:8])
		return nil
	})
	return out
}

// biggestTable returns the path of the store's biggest table file.
func biggestTable(t *testing.T, data string) string {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(cell.StoreDir(data), "*.sst"))
	if len(names) == 0 {
		t.Fatal("no table files")
	}
	size := func(p string) int64 { i, _ := os.Stat(p); return i.Size() }
	slices.SortFunc(names, func(a, b string) int { return int(size(b) - size(a)) })
	return names[0]
}

func zeroKiB(t *testing.T, file string, off int64) {
	t.Helper()
	f, err := os.OpenFile(file, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, 1024), off); err != nil {
		t.Fatal(err)
	}
}

// wantRefused checks that a command failed with the store's damage error
// naming file, and its hint.
func wantRefused(t *testing.T, r cliResult, file string) {
	t.Helper()
	if r.code == 0 || !strings.Contains(r.stderr, "agentrt: error: badgerstore: the store in") ||
		!strings.Contains(r.stderr, file) || !strings.Contains(r.stderr, "hint: nothing in the store was changed; see the damage with: agentrt store check") {
		t.Fatalf("want the damage refused, naming %s:\n%v", file, r)
	}
}

// TestZeroedTableFromTheCommandLine zeroes 1 KiB in the middle of the
// table that holds three finished runs. Every command that opens the store
// refuses it, naming the file, with exit 1: no "no runs yet", no shorter
// journal verified, no bundle signed. store check names the damage and the
// runs it reaches; store salvage copies out the runs it does not reach,
// whole, into a data directory where they replay. Nothing in the damaged
// store changes.
func TestZeroedTableFromTheCommandLine(t *testing.T) {
	data, runs := damageData(t)
	sst := biggestTable(t, data)
	info, _ := os.Stat(sst)
	zeroKiB(t, sst, info.Size()/2)
	before := storeFiles(t, data)
	name := filepath.Base(sst)

	wantRefused(t, agentrtCLI(data, "runs"), name)
	wantRefused(t, agentrtCLI(data, "journal", "show", runs[0]), name)
	wantRefused(t, agentrtCLI(data, "replay", runs[0]), name)
	wantRefused(t, agentrtCLI(data, "resume", runs[0]), name)
	bundle := filepath.Join(t.TempDir(), "run.bundle")
	wantRefused(t, agentrtCLI(data, "audit", "export", runs[0], "-o", bundle), name)
	if _, err := os.Stat(bundle); !os.IsNotExist(err) {
		t.Fatalf("a bundle was written: %v", err)
	}

	r := agentrtCLI(data, "store", "check")
	if r.code != 1 || !strings.Contains(r.stdout, name+": block ") || !strings.Contains(r.stdout, "verdict: DAMAGED") ||
		!strings.Contains(r.stderr, "hint: copy out what still verifies: agentrt store salvage --to DIR") {
		t.Fatalf("store check:\n%v", r)
	}
	r = agentrtCLI(data, "store", "check", "--json")
	var rep badgerstore.CheckReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 1 || rep.OK || len(rep.Runs) != 3 {
		t.Fatalf("store check --json: %v (%v)", r, err)
	}
	var whole []string
	for _, rc := range rep.Runs {
		if rc.OK {
			whole = append(whole, rc.Run)
		} else if rc.Length == 0 && rc.Problem == "" {
			t.Fatalf("a damaged run without a problem: %+v", rc)
		}
	}
	sameStore(t, before, storeFiles(t, data))

	to := filepath.Join(t.TempDir(), "salvaged")
	r = agentrtCLI(data, "store", "salvage", "--to", to)
	if !strings.Contains(r.stderr, "salvaged into "+to) || (r.code == 0) != (len(whole) == 3) {
		t.Fatalf("store salvage (%d runs whole before):\n%v", len(whole), r)
	}
	sameStore(t, before, storeFiles(t, data))
	for _, run := range whole {
		if r := agentrtCLI(to, "replay", run); r.code != 0 || !strings.HasPrefix(r.stdout, "verified ") {
			t.Fatalf("replay of %s in the salvaged directory:\n%v", run, r)
		}
	}
	if r := agentrtCLI(to, "store", "check"); (r.code == 0) != (len(whole) == 3) {
		t.Fatalf("store check of the salvaged directory (%d runs whole):\n%v", len(whole), r)
	}
}

// TestCutManifestFromTheCommandLine cuts the MANIFEST: in the middle of a
// record, and to its header alone (which replays, listing no table). runs
// must not answer "no runs yet": it is refused, and no table is deleted;
// store salvage then recovers all three runs, which replay.
func TestCutManifestFromTheCommandLine(t *testing.T) {
	for _, cut := range []struct {
		name string
		size func(int64) int64
		want string
	}{
		{"mid-record", func(n int64) int64 { return n - 3 }, "MANIFEST"},
		{"header only", func(int64) int64 { return 8 }, "the MANIFEST does not list"},
	} {
		t.Run(cut.name, func(t *testing.T) {
			data, runs := damageData(t)
			mf := filepath.Join(cell.StoreDir(data), badger.ManifestFilename)
			info, _ := os.Stat(mf)
			if err := os.Truncate(mf, cut.size(info.Size())); err != nil {
				t.Fatal(err)
			}
			before := storeFiles(t, data)
			r := agentrtCLI(data, "runs")
			if r.code == 0 || strings.Contains(r.stderr, "no runs yet") || !strings.Contains(r.stderr, cut.want) {
				t.Fatalf("runs with a cut MANIFEST:\n%v", r)
			}
			wantRefused(t, r, "")
			sameStore(t, before, storeFiles(t, data))
			if r := agentrtCLI(data, "store", "check"); r.code != 1 {
				t.Fatalf("store check:\n%v", r)
			}
			to := filepath.Join(t.TempDir(), "salvaged")
			if r := agentrtCLI(data, "store", "salvage", "--to", to); r.code != 0 {
				t.Fatalf("salvage of a store whose tables are all there:\n%v", r)
			}
			sameStore(t, before, storeFiles(t, data))
			for _, run := range runs {
				if r := agentrtCLI(to, "replay", run); r.code != 0 {
					t.Fatalf("replay %s after salvage:\n%v", run, r)
				}
			}
		})
	}
}

// TestDamageTheOpenDidNotSeeIsAGap zeroes 1 KiB of a table and gives the
// file its old modification time back (as bit rot would leave it), so that
// the open trusts it as verified: the damage is met by the reads. The
// journal it cuts is shown as far as it reads and fails naming the missing
// entries; replay, resume and export refuse it; the others still verify.
func TestDamageTheOpenDidNotSeeIsAGap(t *testing.T) {
	data, runs := damageData(t)
	sst := biggestTable(t, data)
	info, _ := os.Stat(sst)
	orig, err := os.ReadFile(sst)
	if err != nil {
		t.Fatal(err)
	}
	var hit string
	for off := info.Size() / 8; off < info.Size()*3/4 && hit == ""; off += 1024 {
		if err := os.WriteFile(sst, orig, 0o644); err != nil {
			t.Fatal(err)
		}
		zeroKiB(t, sst, off)
		if err := os.Chtimes(sst, info.ModTime(), info.ModTime()); err != nil {
			t.Fatal(err)
		}
		for _, run := range runs {
			// A cut after the first entries, so that there is a part to show.
			if r := agentrtCLI(data, "replay", run); r.code != 0 && strings.Contains(r.stderr, "are missing from the store") &&
				!strings.Contains(r.stderr, "entries 0..") {
				hit = run
				break
			}
		}
	}
	if hit == "" {
		t.Fatal("no zeroed KiB of the table cut a journal")
	}
	r := agentrtCLI(data, "journal", "show", hit)
	if r.code != 1 || !strings.Contains(r.stderr, "are missing from the store") || !strings.Contains(r.stdout, "SEQ") ||
		!strings.Contains(r.stderr, "hint: the store lost part of this journal") {
		t.Fatalf("journal show of the cut journal:\n%v", r)
	}
	if r := agentrtCLI(data, "audit", "export", hit, "-o", filepath.Join(t.TempDir(), "b")); r.code != 1 || !strings.Contains(r.stderr, "missing from the store") {
		t.Fatalf("export of the cut journal:\n%v", r)
	}
	if r := agentrtCLI(data, "resume", hit); r.code != 1 || !strings.Contains(r.stderr, "missing from the store") {
		t.Fatalf("resume of the cut journal:\n%v", r)
	}
	if r := agentrtCLI(data, "store", "check"); r.code != 1 || !strings.Contains(r.stdout, hit) {
		t.Fatalf("store check:\n%v", r)
	}
}

func sameStore(t *testing.T, before, after map[string]string) {
	t.Helper()
	for name, v := range before {
		if after[name] != v {
			t.Errorf("store file %s changed: %q, now %q", name, v, after[name])
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			t.Errorf("store file %s appeared", name)
		}
	}
}
