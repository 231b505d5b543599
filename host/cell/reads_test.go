package cell_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/replay"
	"github.com/dgraph-io/badger/v4"
)

// runSmoke submits the smoke agent and follows it to its end.
func runSmoke(t *testing.T, cl *cell.Client, code []byte, input string) string {
	t.Helper()
	st, err := cl.SubmitFollow(context.Background(), cell.Submission{Module: code, Name: "smoke.wasm", Input: []byte(input), Grant: smokeGrant})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for {
		l, err := st.Next()
		if err != nil {
			t.Fatalf("the stream ended without the run's end: %v", err)
		}
		if l.End != nil {
			if l.End.Status != journal.StatusCompleted {
				t.Fatalf("run %s ended %s: %s", l.End.RunID, l.End.Status, l.End.Error)
			}
			return l.End.RunID
		}
	}
}

type rec struct {
	seq uint64
	raw []byte
}

func records(t *testing.T, st journal.Store, run journal.RunID, from uint64) ([]rec, error) {
	t.Helper()
	var out []rec
	err := st.Records(context.Background(), run, from, func(seq uint64, raw []byte) error {
		out = append(out, rec{seq, bytes.Clone(raw)})
		return nil
	})
	return out, err
}

func events(t *testing.T, log host.EventLog, run journal.RunID) [][]byte {
	t.Helper()
	var out [][]byte
	if err := log.Events(context.Background(), run, func(b []byte) error { out = append(out, bytes.Clone(b)); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRemoteStoreReadsWhatTheStoreHolds reads a cell's store through its
// API, on both listeners, and compares every read with the same read of
// the store itself: the records byte for byte (whole and from a seq), the
// index records, the event log, the module, the lineage rows, a bundle
// and a checkpoint the cell signs; writes are refused.
func TestRemoteStoreReadsWhatTheStoreHolds(t *testing.T) {
	ctx := context.Background()
	a := serveAPI(t, t.TempDir(), cell.ServerOptions{})
	code := testutil.BuildGo(t, "host/testdata/agents/smoke")
	first := runSmoke(t, a.tcp, code, "one")
	runSmoke(t, a.unix, code, "two")
	run, err := journal.ParseRunID(first)
	if err != nil {
		t.Fatal(err)
	}
	local := a.cell.Store
	for name, cl := range map[string]*cell.Client{"tcp": a.tcp, "unix": a.unix} {
		t.Run(name, func(t *testing.T) {
			rs := cl.Store()
			want, err := local.Runs(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got, err := rs.Runs(ctx)
			if err != nil || len(want) != 2 || !reflect.DeepEqual(got, want) {
				t.Fatalf("runs: %+v %v, want %+v", got, err, want)
			}
			wm, _ := local.Meta(ctx, run)
			if gm, err := rs.Meta(ctx, run); err != nil || !reflect.DeepEqual(gm, wm) {
				t.Fatalf("meta: %+v %v, want %+v", gm, err, wm)
			}
			for _, from := range []uint64{0, 3} {
				wr, werr := records(t, local, run, from)
				gr, gerr := records(t, rs, run, from)
				if werr != nil || gerr != nil || len(wr) < 5 || !reflect.DeepEqual(gr, wr) {
					t.Fatalf("records from %d: %d (%v), want %d (%v)", from, len(gr), gerr, len(wr), werr)
				}
			}
			if we, ge := events(t, local, run), events(t, rs, run); len(we) == 0 || !reflect.DeepEqual(ge, we) {
				t.Fatalf("events: %d, want %d", len(ge), len(we))
			}
			if m, err := rs.Module(ctx, wm.ModuleSHA256); err != nil || !bytes.Equal(m, code) {
				t.Fatalf("module: %d bytes, %v", len(m), err)
			}
			if _, err := rs.Module(ctx, make([]byte, journal.HashSize)); !errors.Is(err, journal.ErrNotFound) {
				t.Fatalf("an unknown module: %v, want ErrNotFound", err)
			}
			// Blobs: what the store holds, by hash; a missing one is the
			// store's *journal.BlobError.
			blob := journal.NewBlob([]byte("a payload part stored by hash, read through the cell " + name))
			if err := local.Commit(ctx, &journal.Batch{Blobs: []journal.Blob{blob}}); err != nil {
				t.Fatal(err)
			}
			if b, err := rs.Blob(ctx, blob.Sum); err != nil || !bytes.Equal(b, blob.Data) {
				t.Fatalf("blob: %q, %v", b, err)
			}
			var be *journal.BlobError
			if _, err := rs.Blob(ctx, make([]byte, journal.HashSize)); !errors.As(err, &be) || !be.Missing {
				t.Fatalf("an unknown blob: %v, want a missing *journal.BlobError", err)
			}
			var re *cell.RemoteError
			if _, err := rs.Meta(ctx, journal.RunID{1}); !errors.Is(err, journal.ErrNotFound) || !errors.As(err, &re) || re.Code != http.StatusNotFound {
				t.Fatalf("an unknown run: %v, want a 404 that is ErrNotFound", err)
			}
			// The reads that verify give the same verdicts.
			wi, _ := journal.Inspect(ctx, local, run, journal.TrustKeys(a.cell.Public()))
			gi, err := journal.Inspect(ctx, rs, run, journal.TrustKeys(a.cell.Public()))
			if err != nil || !reflect.DeepEqual(gi, wi) {
				t.Fatalf("inspect: %v", err)
			}
			if _, err := replay.Load(ctx, rs, run, journal.TrustKeys(a.cell.Public())); err != nil {
				t.Fatalf("load: %v", err)
			}
			// Lineage: the cell's index answers the same rows.
			if _, err := rs.Index(ctx); err != nil {
				t.Fatal(err)
			}
			wq, _ := local.Query(ctx, journal.Filter{Op: "kv."})
			gq, err := rs.Query(ctx, journal.Filter{Op: "kv."})
			if err != nil || len(wq) == 0 || !reflect.DeepEqual(gq, wq) {
				t.Fatalf("query: %d rows (%v), want %d", len(gq), err, len(wq))
			}
			gq, err = rs.Query(ctx, journal.Filter{Run: &run, Limit: 2})
			if err != nil || len(gq) != 2 || gq[0].Run != run {
				t.Fatalf("query by run, limit 2: %+v %v", gq, err)
			}
			h := wq[0].OutputHash
			wc, _ := local.Consumers(ctx, h, 0)
			if gc, err := rs.Consumers(ctx, h, 0); err != nil || len(wc) == 0 || !reflect.DeepEqual(gc, wc) {
				t.Fatalf("consumers: %+v %v, want %+v", gc, err, wc)
			}
			if _, err := rs.Query(ctx, journal.Filter{Op: "kv.", Limit: -1}); !errors.Is(err, journal.ErrBadFilter) {
				t.Fatalf("a bad filter: %v, want ErrBadFilter", err)
			}
			if rep, err := rs.Reindex(ctx); err != nil || rep.Runs != 2 {
				t.Fatalf("reindex: %+v %v", rep, err)
			}
			// What needs the cell's key is done by the cell.
			var wb, gb bytes.Buffer
			wrep, err := replay.ExportTo(ctx, local, run, a.cell.Key, replay.EngineSettings{}, &wb)
			if err != nil {
				t.Fatal(err)
			}
			grep, err := cl.Export(ctx, run.String(), &gb)
			if grep != nil && len(grep.Engine.Also) == 0 && len(wrep.Engine.Also) == 0 {
				grep.Engine.Also = wrep.Engine.Also // none either way; JSON drops the empty list
			}
			if err != nil || !bytes.Equal(gb.Bytes(), wb.Bytes()) || !reflect.DeepEqual(grep, wrep) {
				t.Fatalf("export: %d bytes (%v), %+v, want the %d of a local export, %+v", gb.Len(), err, grep, wb.Len(), wrep)
			}
			wn, _ := journal.CheckpointOf(ctx, local, run, a.cell.Key)
			if gn, err := cl.Checkpoint(ctx, run.String()); err != nil || !bytes.Equal(gn, wn) {
				t.Fatalf("checkpoint: %q %v, want %q", gn, err, wn)
			}
			if _, err := cl.Export(ctx, "ffff", &gb); !errors.Is(err, journal.ErrNotFound) {
				t.Fatalf("export of an unknown run: %v", err)
			}
			// Writes are the cell's alone.
			if err := rs.PutModule(ctx, journal.Sum(code), code); !errors.Is(err, cell.ErrReadOnly) {
				t.Fatalf("put module: %v", err)
			}
			if err := rs.Commit(ctx, &journal.Batch{Run: run}); !errors.Is(err, cell.ErrReadOnly) {
				t.Fatalf("commit: %v", err)
			}
		})
	}
}

// TestRemoteRecordsKeepTheGap deletes a commit's records from the middle
// of a journal, under the store's head record: the store reads the
// records before the gap and fails with a *GapError; read through the
// API, the same records arrive, then the same *GapError, never a shorter
// journal. An export through the API is refused as a local one is.
func TestRemoteRecordsKeepTheGap(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	code := testutil.BuildGo(t, "host/testdata/agents/smoke")
	c, err := cell.Open(ctx, dir, cached(cell.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Host.Run(ctx, host.RunSpec{Code: code, Input: []byte("x"), Grant: mustGrant(t, smokeGrant)})
	if err != nil {
		t.Fatal(err)
	}
	run := res.Run
	c.Close(ctx)
	// Delete the second commit of the journal (j/<run><first seq>).
	db, err := badger.Open(badger.DefaultOptions(cell.StoreDir(dir)).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	prefix := append([]byte("j/"), run[:]...)
	var keys [][]byte
	db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			keys = append(keys, it.Item().KeyCopy(nil))
		}
		return nil
	})
	if len(keys) < 3 {
		t.Fatalf("the journal has %d commits; the test needs 3", len(keys))
	}
	gapAt := binary.BigEndian.Uint64(keys[1][len(prefix):])
	if err := db.Update(func(txn *badger.Txn) error { return txn.Delete(keys[1]) }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	a := serveAPI(t, dir, cell.ServerOptions{})
	wr, werr := records(t, a.cell.Store, run, 0)
	gr, gerr := records(t, a.unix.Store(), run, 0)
	var want, got *journal.GapError
	if !errors.As(werr, &want) || want.From != gapAt {
		t.Fatalf("the store read %d records, then %v; want a gap at %d", len(wr), werr, gapAt)
	}
	if !errors.As(gerr, &got) || !errors.Is(gerr, journal.ErrIncomplete) || !reflect.DeepEqual(got, want) || gerr.Error() != werr.Error() {
		t.Fatalf("through the API: %v (%+v), want %v (%+v)", gerr, got, werr, want)
	}
	if !reflect.DeepEqual(gr, wr) || uint64(len(gr)) != gapAt {
		t.Fatalf("through the API: %d records before the gap, want %d", len(gr), len(wr))
	}
	var b bytes.Buffer
	if _, err := a.unix.Export(ctx, run.String(), &b); !errors.Is(err, journal.ErrIncomplete) || !errors.As(err, &got) {
		t.Fatalf("export of a journal with a gap: %v, want ErrIncomplete", err)
	}
}

func mustGrant(t *testing.T, text string) *host.Grant {
	t.Helper()
	g, err := host.ParseGrant([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// frame encodes one frame as the API sends it.
func frame(kind byte, payload []byte) []byte {
	b := []byte{kind, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(len(payload)))
	return append(b, payload...)
}

func recordFrame(seq uint64, raw string) []byte {
	return frame('r', append(binary.BigEndian.AppendUint64(nil, seq), raw...))
}

// TestCutAnswersAreNeverAShorterJournal serves forged answers of frames
// on loopback: an answer that stops before its end frame (a daemon
// killed mid-answer), whose end frame counts other items, that announces
// a frame over the limit, or that holds an unknown kind is ErrCut, after
// the records that arrived whole; an end frame with an error is that
// error, with its status.
func TestCutAnswersAreNeverAShorterJournal(t *testing.T) {
	two := append(recordFrame(0, "a"), recordFrame(1, "b")...)
	for _, c := range []struct {
		name string
		body []byte
		cut  bool
	}{
		{"no end frame", two, true},
		{"cut inside a frame", append(bytes.Clone(two), recordFrame(2, "ccc")[:7]...), true},
		{"end frame counts 3", append(bytes.Clone(two), frame('e', []byte(`{"items":3}`))...), true},
		{"bytes after the end frame", append(append(bytes.Clone(two), frame('e', []byte(`{"items":2}`))...), 'x'), true},
		{"a frame over the limit", append(bytes.Clone(two), 'r', 0xff, 0xff, 0xff, 0xff), true},
		{"an unknown kind", append(bytes.Clone(two), frame('z', []byte("x"))...), true},
		{"a record without its seq", append(bytes.Clone(two), frame('r', []byte("abc"))...), true},
		{"an error after two records", append(bytes.Clone(two), frame('e', []byte(`{"items":2,"status":500,"error":{"error":"journal: entries are missing","kinds":["incomplete"],"gap":{"run":"00","from":2,"to":5,"length":5,"reason":"r"}}}`))...), false},
		{"whole", append(bytes.Clone(two), frame('e', []byte(`{"items":2}`))...), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", cell.FramesType)
				w.Write(c.body)
			})}
			ln, err := cell.ListenLoopback("127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go srv.Serve(ln)
			defer srv.Close()
			cl, err := cell.DialWith("http://"+ln.Addr().String(), cell.DialOptions{Token: strings.Repeat("ab", 32)})
			if err != nil {
				t.Fatal(err)
			}
			got, err := records(t, cl.Store(), journal.RunID{}, 0)
			if len(got) != 2 || string(got[1].raw) != "b" || got[1].seq != 1 {
				t.Fatalf("records before the end: %+v", got)
			}
			var re *cell.RemoteError
			switch {
			case c.cut && !errors.Is(err, cell.ErrCut):
				t.Fatalf("%v, want ErrCut", err)
			case c.name == "whole" && err != nil:
				t.Fatalf("a whole answer: %v", err)
			case c.name == "an error after two records" && (!errors.Is(err, journal.ErrIncomplete) || !errors.As(err, &re) || re.Code != 500):
				t.Fatalf("%v, want the cell's ErrIncomplete with status 500", err)
			}
		})
	}
}

// TestStatusOfEachReadError: each bad read gets its status and an error
// of the kind it is.
func TestStatusOfEachReadError(t *testing.T) {
	a := serveAPI(t, t.TempDir(), cell.ServerOptions{})
	zeros := strings.Repeat("0", 32)
	for _, c := range []struct {
		method, path string
		body         []byte
		code         int
		kind         string
	}{
		{"GET", "/v1/store/runs/zz", nil, 400, "bad_run_id"},
		{"GET", "/v1/store/runs/ffff", nil, 400, "bad_run_id"},
		{"GET", "/v1/store/runs/" + zeros, nil, 404, "not_found"},
		{"GET", "/v1/store/runs/" + zeros + "/records?from=x", nil, 400, ""},
		{"GET", "/v1/store/modules/00", nil, 400, ""},
		{"GET", "/v1/store/modules/" + strings.Repeat("00", 32), nil, 404, "not_found"},
		{"GET", "/v1/runs/last/bundle", nil, 404, "no_runs"},
		{"GET", "/v1/runs/ffff/checkpoint", nil, 404, "not_found"},
		{"GET", "/v1/lineage/calls?limit=x", nil, 400, "bad_filter"},
		{"GET", "/v1/lineage/calls?since=yesterday", nil, 400, "bad_filter"},
		{"GET", "/v1/lineage/consumers?hash=zz", nil, 400, "bad_filter"},
		{"POST", "/v1/lineage/index", []byte(`{}`), 400, ""},
	} {
		code, _, body := a.raw(t, c.method, c.path, nil, c.body)
		e := jsonError(t, body)
		if code != c.code || (c.kind != "" && !slices.Contains(e.Kinds, c.kind)) {
			t.Errorf("%s %s: %d %+v, want %d of kind %q", c.method, c.path, code, e, c.code, c.kind)
		}
	}
}

// TestControlSocketServesReads: a foreground run's control socket, which
// starts no runs, answers the reads, so that no read command fails while
// a foreground run holds the data directory.
func TestControlSocketServesReads(t *testing.T) {
	ctx := context.Background()
	a := serveAPI(t, t.TempDir(), cell.ServerOptions{ControlOnly: true})
	res, err := a.cell.Host.Run(ctx, host.RunSpec{Code: testutil.BuildGo(t, "host/testdata/agents/smoke"), Input: []byte("x"), Grant: mustGrant(t, smokeGrant)})
	if err != nil {
		t.Fatal(err)
	}
	want, werr := records(t, a.cell.Store, res.Run, 0)
	got, gerr := records(t, a.unix.Store(), res.Run, 0)
	if werr != nil || gerr != nil || len(want) == 0 || !reflect.DeepEqual(got, want) {
		t.Fatalf("records through the control socket: %d (%v), want %d (%v)", len(got), gerr, len(want), werr)
	}
	if _, err := a.unix.Checkpoint(ctx, res.Run.String()); err != nil {
		t.Fatalf("checkpoint through the control socket: %v", err)
	}
}

// TestForgedModuleIsRefused: a module answered whose bytes do not hash
// to the sum asked for is an error, as the store's own check is.
func TestForgedModuleIsRefused(t *testing.T) {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/wasm")
		w.Write([]byte("\x00asm\x01\x00\x00\x00"))
	})}
	ln, err := cell.ListenLoopback("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	cl, err := cell.DialWith("http://"+ln.Addr().String(), cell.DialOptions{Token: strings.Repeat("ab", 32)})
	if err != nil {
		t.Fatal(err)
	}
	sum := make([]byte, journal.HashSize)
	if code, err := cl.Store().Module(context.Background(), sum); err == nil || !strings.Contains(err.Error(), "hash to") {
		t.Fatalf("a forged module: %d bytes, %v; want an error naming the hash", len(code), err)
	}
}
