package main_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	hostcell "github.com/agentrt/agentrt/host/cell"
	badger "github.com/dgraph-io/badger/v4"
)

// TestAPIKeyIsNowhere runs the agent with a distinctive key in the
// environment variable the cell's llm.yaml names: by agentrt run,
// streamed and not, and in a cell serve daemon, to which a client without
// the key submits. It searches for the key (raw; hex in both cases;
// base64 in four alphabets) in every byte of the data directories and the
// compilation cache, in every key and value of the stores as badger reads
// them (a table block may be compressed), in exported bundles, in the
// output of every command that shows a run (journal show, its JSON,
// logs, runs, replay, audit verify; through the daemon's API for its
// cell), in everything each command and the daemon wrote to stdout and
// stderr. It finds it nowhere; and the fake provider got it, in the
// header its API reads, on every call, and each bundle names the
// credential's id where the answers record it, so the search is not
// vacuous.
func TestAPIKeyIsNowhere(t *testing.T) {
	mod := module(t)
	var r [18]byte
	rand.Read(r[:])
	key := "sk-agentrt-secret-" + hex.EncodeToString(r[:])
	needles := map[string][]byte{"raw": []byte(key), "hex": []byte(hex.EncodeToString([]byte(key))),
		"HEX": []byte(strings.ToUpper(hex.EncodeToString([]byte(key))))}
	// A base64 encoding of the key depends on its offset in the encoded
	// stream: search the three alignments, with the unstable edges cut.
	encs := map[string]*base64.Encoding{"base64": base64.StdEncoding, "base64url": base64.URLEncoding,
		"base64raw": base64.RawStdEncoding, "base64rawurl": base64.RawURLEncoding}
	for name, enc := range encs {
		for shift := 0; shift < 3; shift++ {
			s := enc.EncodeToString(append(make([]byte, shift), key...))
			needles[name+"@"+string(rune('0'+shift))] = []byte(s[4 : len(s)-4])
		}
	}
	holds := func(b []byte) []string {
		var names []string
		for name, n := range needles {
			if bytes.Contains(b, n) {
				names = append(names, name)
			}
		}
		return names
	}
	found := func(where string, b []byte) {
		t.Helper()
		if names := holds(b); len(names) > 0 {
			t.Errorf("the API key (%s) is in %s", strings.Join(names, ", "), where)
		}
	}
	// The search finds the key where it is, in every encoding, after a
	// prefix of any length.
	for p := 0; p < 3; p++ {
		plain := append([]byte("xyz"[:p]), key...)
		planted := map[string][]byte{"raw": plain, "hex": []byte(hex.EncodeToString(plain)), "HEX": []byte(strings.ToUpper(hex.EncodeToString(plain)))}
		for name, enc := range encs {
			planted[name] = []byte(enc.EncodeToString(plain))
		}
		for name, b := range planted {
			if len(holds(b)) == 0 {
				t.Fatalf("the search does not find the key in %s after %d bytes: %q", name, p, b)
			}
		}
	}

	site := startSite(t)
	sc := loadScript(t, site.URL, nil)
	sc.APIKey = key
	// Two runs, so that both a streamed and a whole answer are journaled:
	// each needs its own fake, whose turns are used up in order.
	var outputs [][]byte
	record := func(name string, cmd *exec.Cmd) []byte {
		t.Helper()
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v\n%s%s", name, err, stdout.Bytes(), stderr.Bytes())
		}
		outputs = append(outputs, stdout.Bytes(), stderr.Bytes())
		found(name+"'s stdout", stdout.Bytes())
		found(name+"'s stderr", stderr.Bytes())
		return stdout.Bytes()
	}
	cache := t.TempDir()
	var cells []*cell
	var runs []string
	// Three cells: agentrt run holding the key, unstreamed and streamed;
	// and a cell serve daemon holding it, to which a client without the
	// key submits, and through which the reads go while it runs.
	var d *daemon
	for i, stream := range []bool{false, true, true} {
		fake := startFake(t, sc)
		c := newCell(t, fake, "openai-chat", key, cache)
		args := []string{"run", mod, "--grant", exampleFile("grant.yaml"), "--json", "--input", input(site.URL, stream)}
		if i == 2 {
			d = startDaemon(t, c)
			var env []string
			for _, kv := range c.env {
				if !strings.HasPrefix(kv, "FAKELLM_API_KEY=") {
					env = append(env, kv)
				}
			}
			c.env = env
			args = append(args, "--cell", "unix:"+hostcell.SocketPath(c.data))
		}
		res, _ := parseRun(t, record("agentrt run", c.cmd(args...)))
		if res.Status != "completed" {
			t.Fatalf("run %s: %s", res.Status, res.Error)
		}
		st := fake.settledStats(t)
		if len(st.Requests) != len(sc.Turns) {
			t.Fatalf("the fake got %d requests, want %d", len(st.Requests), len(sc.Turns))
		}
		for _, rq := range st.Requests {
			if rq.KeyHeader != "authorization" {
				t.Fatalf("request %d carried the key in %q, want Authorization (the fake refuses a request without it)", rq.Seq, rq.KeyHeader)
			}
		}
		cells, runs = append(cells, c), append(runs, res.Run)
	}

	for i, c := range cells {
		run := runs[i]
		record("journal show", c.cmd("journal", "show", run))
		record("journal show --json", c.cmd("journal", "show", run, "--json"))
		record("logs --raw", c.cmd("logs", run, "--raw"))
		record("logs", c.cmd("logs", run))
		record("runs --json", c.cmd("runs", "--json"))
		record("replay", c.cmd("replay", run))
		bundle := filepath.Join(t.TempDir(), "run.bundle")
		record("audit export", c.cmd("audit", "export", run, "-o", bundle))
		b, err := os.ReadFile(bundle)
		if err != nil {
			t.Fatal(err)
		}
		found("the exported bundle", b)
		// What the journal does record of the key: its id, naming where
		// the cell read it.
		if !bytes.Contains(b, []byte("env:FAKELLM_API_KEY")) {
			t.Errorf("the bundle of run %s does not name the credential env:FAKELLM_API_KEY its answers were made with", run)
		}
		keys := filepath.Join(t.TempDir(), "cell.pub")
		writeFile(t, keys, record("keys", c.cmd("keys")))
		record("audit verify", c.cmd("audit", "verify", bundle, "--trust", keys))
	}
	// The daemon drains on SIGTERM; what it printed is searched too.
	d.stop(t)
	found("cell serve's output", d.log.Bytes())

	// Every byte of every file the cells wrote: data directories (store,
	// keys, llm.yaml, workspaces) and the compilation cache.
	files := 0
	dirs := []string{cache}
	for _, c := range cells {
		dirs = append(dirs, c.data)
	}
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			files++
			found(path, b)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// And every key and value as the store reads them back.
	entries := 0
	for _, c := range cells {
		db, err := badger.Open(badger.DefaultOptions(hostcell.StoreDir(c.data)).WithLogger(nil))
		if err != nil {
			t.Fatal(err)
		}
		err = db.View(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.IteratorOptions{AllVersions: true})
			defer it.Close()
			for it.Rewind(); it.Valid(); it.Next() {
				item := it.Item()
				v, err := item.ValueCopy(nil)
				if err != nil {
					return err
				}
				entries++
				found(fmt.Sprintf("store key %q", item.Key()), item.Key())
				found(fmt.Sprintf("the store's value under %q", item.Key()), v)
			}
			return nil
		})
		db.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("searched %d files, %d store entries, %d command outputs for the key", files, entries, len(outputs))
	if entries < 30 {
		t.Fatalf("the stores hold %d entries: the search read nothing", entries)
	}
}

// waitForDaemon waits until the cell daemon on data answers its API, or
// fails the test if it exits first.
func waitForDaemon(t *testing.T, data string, exited <-chan error) {
	t.Helper()
	client, err := hostcell.Dial("unix:" + hostcell.SocketPath(data))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ci, err := client.Cell(context.Background())
		if err == nil && !ci.ControlOnly {
			return
		}
		select {
		case err := <-exited:
			t.Fatalf("cell serve exited: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon's API did not answer: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
