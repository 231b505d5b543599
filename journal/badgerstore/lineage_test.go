package badgerstore_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/badgerstore"
	"pgregory.net/rapid"
)

// agentRun writes a run's journal the way the host does, with times and
// cells the test chooses: a start entry with a grant that names a kv
// namespace, pure calls as one entry, effects as intent, executing and
// outcome, commits sealed by the store.
// tb is what the helpers need of a *testing.T, *testing.B or *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

type agentRun struct {
	t    tb
	st   *badgerstore.Store
	id   journal.RunID
	cell ed25519.PublicKey
	w    *journal.Writer
	c    *journal.Chain
	step uint64
	// open is the intent of the effect in progress.
	open *journal.Entry
}

func grantWithNamespace(ns string) []byte {
	b, err := abi.Marshal(map[string]any{"run": map[string]any{}, "kv": map[string]any{"namespace": ns}})
	if err != nil {
		panic(err)
	}
	return b
}

func startRun(t tb, st *badgerstore.Store, key ed25519.PrivateKey, at int64, ns string, input []byte, parent *journal.RunID) *agentRun {
	t.Helper()
	return startFork(t, st, key, at, ns, input, parent, nil)
}

// startFork is startRun for a run forked from forkOf, when it is set.
func startFork(t tb, st *badgerstore.Store, key ed25519.PrivateKey, at int64, ns string, input []byte, parent, forkOf *journal.RunID) *agentRun {
	t.Helper()
	id := journal.NewRunID(time.Unix(0, at))
	c := journal.NewChain(id, key)
	r := &agentRun{t: t, st: st, id: id, cell: key.Public().(ed25519.PublicKey), w: journal.NewWriter(st, c), c: c}
	h := &journal.Header{ModuleSHA256: make([]byte, 32), ABI: abi.Version, Input: input, Seed: make([]byte, 32), WallBase: at, Grant: grantWithNamespace(ns)}
	if parent != nil {
		h.Parent = parent[:]
	}
	if forkOf != nil {
		h.Fork = &journal.Fork{Parent: *forkOf, Seq: 1, Entry: make([]byte, journal.HashSize), Step: 0}
	}
	r.add(&journal.Entry{Phase: journal.PhaseStart, Time: at, Header: h})
	r.commitMeta(&journal.RunMeta{ID: id, Status: journal.StatusRunning, ModuleSHA256: make([]byte, 32), Started: at, Cell: r.cell})
	return r
}

func (r *agentRun) add(e *journal.Entry) {
	r.t.Helper()
	if err := r.w.Add(e); err != nil {
		r.t.Fatal(err)
	}
}

func (r *agentRun) commitMeta(m *journal.RunMeta) {
	r.t.Helper()
	if err := r.w.Commit(context.Background(), m, false); err != nil {
		r.t.Fatal(err)
	}
}

func (r *agentRun) commit() { r.commitMeta(nil) }

// handOff makes another cell, key, write the run from here on (as a peer
// resuming a dead coordinator's run does), starting with a lease entry.
func (r *agentRun) handOff(at int64, key ed25519.PrivateKey, epoch uint64) {
	r.c = journal.ResumeChain(r.id, key, r.c.Next()-1, r.c.Head())
	r.w = journal.NewWriter(r.st, r.c)
	r.cell = key.Public().(ed25519.PublicKey)
	r.add(&journal.Entry{Phase: journal.PhaseLease, Time: at, Epoch: epoch})
}

// pure records a pure call: status 0 is completed, any other failed.
func (r *agentRun) pure(at int64, op string, req, resp []byte, status uint32) {
	r.step++
	e := &journal.Entry{Phase: journal.PhaseCompleted, Step: r.step, Op: op, InputHash: journal.Sum(req), Request: req,
		OutputHash: journal.Sum(resp), Response: resp, Status: status, Time: at}
	if status != 0 {
		e.Phase = journal.PhaseFailed
	}
	r.add(e)
}

func (r *agentRun) intent(at int64, op string, req []byte) {
	r.step++
	r.open = &journal.Entry{Phase: journal.PhaseIntent, Step: r.step, Op: op, InputHash: journal.Sum(req), Request: req, Time: at}
	r.add(r.open)
	r.add(&journal.Entry{Phase: journal.PhaseExecuting, Step: r.step, Op: op, InputHash: journal.Sum(req), Time: at,
		Key: fmt.Sprintf("%s-%d", r.id, r.step)})
}

func (r *agentRun) outcome(at int64, resp []byte, status uint32) {
	o := r.open
	r.open = nil
	e := &journal.Entry{Phase: journal.PhaseCompleted, Step: o.Step, Op: o.Op, InputHash: o.InputHash,
		OutputHash: journal.Sum(resp), Response: resp, Status: status, Time: at}
	if status != 0 {
		e.Phase = journal.PhaseFailed
	}
	r.add(e)
}

func (r *agentRun) end(at int64) {
	r.add(&journal.Entry{Phase: journal.PhaseEnd, Time: at, End: &journal.End{Status: journal.StatusCompleted, Steps: r.step}})
	r.commitMeta(&journal.RunMeta{ID: r.id, Status: journal.StatusCompleted, ModuleSHA256: make([]byte, 32), Ended: at, Cell: r.cell, Steps: r.step})
}

func enc(t tb, v any) []byte {
	t.Helper()
	b, err := abi.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newKey(t tb) ed25519.PrivateKey {
	_, k, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func query(t tb, st *badgerstore.Store, f journal.Filter) []journal.Call {
	t.Helper()
	calls, err := st.Query(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	return calls
}

func steps(calls []journal.Call) []string {
	var out []string
	for _, c := range calls {
		out = append(out, fmt.Sprintf("%s/%d %s %s %s", c.Run.String()[:6], c.Step, c.Op, c.Resource, c.Outcome))
	}
	return out
}

func TestLineageCatchesUpIncrementally(t *testing.T) {
	st := open(t)
	key := newKey(t)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano()
	a := startRun(t, st, key, t0, "ns1", []byte("in"), nil)
	a.pure(t0+1, "kv.get", enc(t, &abi.KVGetRequest{Key: "k1"}), enc(t, &abi.KVGetResponse{Value: []byte("v")}), 0)
	a.pure(t0+2, "run.log", enc(t, &abi.LogRequest{Message: "hi"}), nil, 0)
	a.commit()

	if got := steps(query(t, st, journal.Filter{})); !slices.Equal(got, []string{
		a.id.String()[:6] + "/1 kv.get ns1/k1 completed",
		a.id.String()[:6] + "/2 run.log  completed",
	}) {
		t.Fatalf("after the first commit: %q", got)
	}

	// An effect committed up to its executing entry is an open call with
	// its resource; once its outcome lands, the same step is completed,
	// still with the resource its intent named, and found by its output.
	req := enc(t, &abi.HTTPRequest{Method: "GET", URL: "http://Example.COM:8080/path?q=1"})
	a.intent(t0+3, "http.request", req)
	a.commit()
	open := query(t, st, journal.Filter{Op: "http."})
	if len(open) != 1 || open[0].Outcome != journal.OutcomeOpen || open[0].Resource != "example.com:8080" || open[0].OutputHash != nil {
		t.Fatalf("open effect: %+v", open)
	}
	// Another cell takes the run over and closes the effect: the call is
	// now that cell's, and no longer found under the first one.
	key2 := newKey(t)
	cell1 := hex.EncodeToString(key.Public().(ed25519.PublicKey))
	if got := query(t, st, journal.Filter{Cell: cell1}); len(got) != 3 {
		t.Fatalf("calls of the first cell: %q", steps(got))
	}
	a.handOff(t0+4, key2, 1)
	resp := enc(t, &abi.HTTPResponse{Status: 200, Body: []byte("page")})
	a.outcome(t0+4, resp, 0)
	a.pure(t0+5, "kv.get", enc(t, &abi.KVGetRequest{Key: "k2"}), enc(t, &abi.Error{Code: abi.StatusNotFound, Message: "no"}), uint32(abi.StatusNotFound))
	a.commit()

	done := query(t, st, journal.Filter{Op: "http.request"})
	if len(done) != 1 || done[0].Outcome != journal.OutcomeCompleted || done[0].Resource != "example.com:8080" ||
		!bytes.Equal(done[0].OutputHash, journal.Sum(resp)) || done[0].Seq != 3 || done[0].Time != t0+3 {
		t.Fatalf("closed effect: %+v", done)
	}
	if got := query(t, st, journal.Filter{Cell: cell1}); len(got) != 2 {
		t.Fatalf("calls of the first cell after the handoff: %q", steps(got))
	}
	if got := query(t, st, journal.Filter{OutputHash: journal.Sum(resp)}); len(got) != 1 || got[0].Step != 3 {
		t.Fatalf("by output hash: %q", steps(got))
	}
	// The open row's keys went with it: one row per step, whatever the key.
	if got := query(t, st, journal.Filter{}); len(got) != 4 {
		t.Fatalf("all calls after the effect closed: %q", steps(got))
	}
	if got := query(t, st, journal.Filter{Resource: "ns1/*"}); !slices.Equal(steps(got), []string{
		a.id.String()[:6] + "/1 kv.get ns1/k1 completed",
		a.id.String()[:6] + "/4 kv.get ns1/k2 failed",
	}) {
		t.Fatalf("by resource prefix: %q", steps(got))
	}

	// A second run on a third cell: filters by run, cell and time tell the
	// two apart.
	key3 := newKey(t)
	b := startRun(t, st, key3, t0+100, "ns2", nil, nil)
	b.pure(t0+101, "kv.get", enc(t, &abi.KVGetRequest{Key: "k1"}), enc(t, &abi.KVGetResponse{Value: []byte("v")}), 0)
	b.end(t0 + 102)
	if got := query(t, st, journal.Filter{Op: "kv.get"}); len(got) != 3 || got[2].Run != b.id || got[2].Resource != "ns2/k1" {
		t.Fatalf("kv.get of two runs: %q", steps(got))
	}
	if got := query(t, st, journal.Filter{Run: &b.id}); len(got) != 1 || got[0].Run != b.id {
		t.Fatalf("by run: %q", steps(got))
	}
	cell := hex.EncodeToString(key3.Public().(ed25519.PublicKey))
	if got := query(t, st, journal.Filter{Cell: cell[:7]}); len(got) != 1 || got[0].Run != b.id || !bytes.Equal(got[0].Cell, key3.Public().(ed25519.PublicKey)) {
		t.Fatalf("by cell prefix: %q", steps(got))
	}
	if got := query(t, st, journal.Filter{Since: time.Unix(0, t0+2), Until: time.Unix(0, t0+101)}); !slices.Equal(steps(got), []string{
		a.id.String()[:6] + "/2 run.log  completed",
		a.id.String()[:6] + "/3 http.request example.com:8080 completed",
		a.id.String()[:6] + "/4 kv.get ns1/k2 failed",
	}) {
		t.Fatalf("by time: %q", steps(got))
	}
	if got := query(t, st, journal.Filter{Limit: 2, Op: "kv.get"}); len(got) != 2 || got[1].Step != 4 {
		t.Fatalf("limit: %q", steps(got))
	}
	// The same value read by both runs: both consumed its hash.
	v := journal.Sum(enc(t, &abi.KVGetResponse{Value: []byte("v")}))
	cons, err := st.Consumers(context.Background(), v, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(cons) != 2 || cons[0].Run != a.id || !slices.Equal(cons[0].Steps, []uint64{1}) || cons[1].Run != b.id || cons[0].Input {
		t.Fatalf("consumers of the value: %+v", cons)
	}
	cons, err = st.Consumers(context.Background(), journal.Sum([]byte("in")), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(cons) != 1 || cons[0].Run != a.id || !cons[0].Input || cons[0].Steps != nil || cons[0].Time != t0 {
		t.Fatalf("consumers of the input: %+v", cons)
	}
	// The empty payload names no data: run.log's empty response is
	// received by a, but consumes nothing.
	if cons, err := st.Consumers(context.Background(), journal.Sum(nil), 0); err != nil || len(cons) != 0 {
		t.Fatalf("consumers of the empty hash: %+v %v", cons, err)
	}
	// What the catch-ups built step by step, across the handoff that moved
	// a call to another cell, is what one build from scratch gives: no key
	// of the call's first cell is left behind.
	incremental := st.LineageKeys()
	if _, err := st.Reindex(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rebuilt := st.LineageKeys(); !reflect.DeepEqual(incremental, rebuilt) {
		t.Fatalf("the incremental index has %d keys, the rebuilt one %d", len(incremental), len(rebuilt))
	}
}

func TestLineageFollowsSubRuns(t *testing.T) {
	st := open(t)
	key := newKey(t)
	t0 := time.Now().UnixNano()
	p := startRun(t, st, key, t0, "n", nil, nil)
	p.pure(t0+1, "run.log", enc(t, &abi.LogRequest{Message: "p"}), nil, 0)
	p.end(t0 + 2)
	c := startRun(t, st, key, t0+10, "n", []byte("task"), &p.id)
	c.pure(t0+11, "run.log", enc(t, &abi.LogRequest{Message: "c"}), nil, 0)
	c.end(t0 + 12)
	g := startRun(t, st, key, t0+20, "n", nil, &c.id)
	g.pure(t0+21, "run.log", enc(t, &abi.LogRequest{Message: "g"}), nil, 0)
	g.end(t0 + 22)
	other := startRun(t, st, key, t0+30, "n", nil, nil)
	other.pure(t0+31, "run.log", enc(t, &abi.LogRequest{Message: "o"}), nil, 0)
	other.end(t0 + 32)

	got := query(t, st, journal.Filter{Run: &p.id, SubRuns: true})
	var runs []journal.RunID
	for _, call := range got {
		runs = append(runs, call.Run)
	}
	if !slices.Equal(runs, []journal.RunID{p.id, c.id, g.id}) || got[1].Parent != p.id || got[2].Parent != c.id {
		t.Fatalf("run and sub-runs: %q", steps(got))
	}
	if got := query(t, st, journal.Filter{Run: &c.id, SubRuns: true}); len(got) != 2 {
		t.Fatalf("sub-runs of the middle run: %q", steps(got))
	}
	if got := query(t, st, journal.Filter{Run: &p.id}); len(got) != 1 {
		t.Fatalf("the run alone: %q", steps(got))
	}
}

func TestLineageFollowsForksBothWays(t *testing.T) {
	st := open(t)
	key := newKey(t)
	t0 := time.Now().UnixNano()
	log := func(r *agentRun, at int64, msg string) {
		r.pure(at, "run.log", enc(t, &abi.LogRequest{Message: msg}), nil, 0)
		r.end(at + 1)
	}
	p := startRun(t, st, key, t0, "n", nil, nil)
	log(p, t0+1, "p")
	f := startFork(t, st, key, t0+10, "n", nil, nil, &p.id)
	log(f, t0+11, "f")
	ff := startFork(t, st, key, t0+20, "n", nil, nil, &f.id)
	log(ff, t0+21, "ff")
	kid := startRun(t, st, key, t0+30, "n", nil, &f.id)
	log(kid, t0+31, "kid")

	runsOf := func(calls []journal.Call) []journal.RunID {
		var runs []journal.RunID
		for _, c := range calls {
			runs = append(runs, c.Run)
		}
		return runs
	}
	// Parent to forks, transitively; a sub-run is no fork.
	got := query(t, st, journal.Filter{Run: &p.id, Forks: true})
	if !slices.Equal(runsOf(got), []journal.RunID{p.id, f.id, ff.id}) {
		t.Fatalf("run and forks: %q", steps(got))
	}
	// Fork to parent: every row of a fork names it.
	if !got[0].ForkOf.IsZero() || got[1].ForkOf != p.id || got[2].ForkOf != f.id {
		t.Fatalf("fork parents of the rows: %s %s %s", got[0].ForkOf, got[1].ForkOf, got[2].ForkOf)
	}
	// Both relations together reach the fork's sub-run too.
	if got := query(t, st, journal.Filter{Run: &p.id, Forks: true, SubRuns: true}); !slices.Equal(runsOf(got), []journal.RunID{p.id, f.id, ff.id, kid.id}) {
		t.Fatalf("forks and sub-runs: %q", steps(got))
	}
	if got := query(t, st, journal.Filter{Run: &p.id, SubRuns: true}); len(got) != 1 {
		t.Fatalf("sub-runs of a run that has only forks: %q", steps(got))
	}
	// A rebuilt index says the same.
	if _, err := st.Reindex(context.Background()); err != nil {
		t.Fatal(err)
	}
	if again := query(t, st, journal.Filter{Run: &p.id, Forks: true}); !reflect.DeepEqual(again, got) {
		t.Fatalf("after a reindex: %q, before %q", steps(again), steps(got))
	}
}

func TestPurgeRemovesTheRunsLineageKeys(t *testing.T) {
	st := open(t)
	key := newKey(t)
	t0 := time.Now().UnixNano()
	resp := enc(t, &abi.KVGetResponse{Value: []byte("shared")})
	var runs []*agentRun
	for i := range 2 {
		r := startRun(t, st, key, t0+int64(i)*100, "ns", []byte("input"), nil)
		r.pure(t0+int64(i)*100+1, "kv.get", enc(t, &abi.KVGetRequest{Key: "k"}), resp, 0)
		r.intent(t0+int64(i)*100+2, "kv.put", enc(t, &abi.KVPutRequest{Key: "k", Value: []byte{1}}))
		r.outcome(t0+int64(i)*100+3, nil, 0)
		r.end(t0 + int64(i)*100 + 4)
		runs = append(runs, r)
	}
	if got := query(t, st, journal.Filter{}); len(got) != 4 {
		t.Fatalf("before purge: %q", steps(got))
	}
	if _, err := st.Purge(context.Background(), runs[0].id, false); err != nil {
		t.Fatal(err)
	}
	gone := string(runs[0].id[:])
	keys := st.LineageKeys()
	for k := range keys {
		if strings.Contains(k, gone) {
			t.Errorf("purged run's key %q is still in the index", k)
		}
	}
	if len(keys) == 0 {
		t.Fatal("the kept run lost its index too")
	}
	if got := query(t, st, journal.Filter{OutputHash: journal.Sum(resp)}); len(got) != 1 || got[0].Run != runs[1].id {
		t.Fatalf("after purge: %q", steps(got))
	}
	cons, err := st.Consumers(context.Background(), journal.Sum([]byte("input")), 0)
	if err != nil || len(cons) != 1 || cons[0].Run != runs[1].id {
		t.Fatalf("consumers after purge: %+v %v", cons, err)
	}
}

// TestReindexBuildsTheSameIndex: an index built in many small catch-ups,
// across commits that left an effect open, holds exactly the keys and
// values of one built from scratch.
func TestReindexBuildsTheSameIndex(t *testing.T) {
	st := open(t)
	key := newKey(t)
	t0 := time.Now().UnixNano()
	a := startRun(t, st, key, t0, "ns", []byte("x"), nil)
	b := startRun(t, st, key, t0+1, "ns", nil, &a.id)
	for i := range 20 {
		r := []*agentRun{a, b}[i%2]
		at := t0 + 10 + int64(i)
		switch i % 4 {
		case 0, 1:
			r.pure(at, "kv.get", enc(t, &abi.KVGetRequest{Key: fmt.Sprint("k", i%3)}), enc(t, &abi.KVGetResponse{Value: []byte{byte(i % 2)}}), 0)
		case 2:
			r.intent(at, "http.request", enc(t, &abi.HTTPRequest{Method: "GET", URL: fmt.Sprintf("http://h%d.test/", i%3)}))
			r.commit()
			query(t, st, journal.Filter{Limit: 1})
			r.outcome(at, []byte("resp"), 0)
		case 3:
			r.pure(at, "clock.now", nil, enc(t, &abi.ClockNowResponse{UnixNano: at}), 0)
		}
		r.commit()
		query(t, st, journal.Filter{Op: "kv."})
	}
	incremental := st.LineageKeys()
	before := query(t, st, journal.Filter{})
	rep, err := st.Reindex(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Runs != 2 || rep.Calls != 20 || len(rep.Skipped) != 0 {
		t.Fatalf("reindex report %+v", rep)
	}
	if rebuilt := st.LineageKeys(); !reflect.DeepEqual(incremental, rebuilt) {
		t.Fatalf("incremental index has %d keys, rebuilt %d, and they differ", len(incremental), len(rebuilt))
	}
	if after := query(t, st, journal.Filter{}); !reflect.DeepEqual(before, after) || len(after) != 20 {
		t.Fatalf("answers differ after reindex:\n%q\n%q", steps(before), steps(after))
	}
}

func TestCorruptRecordIsReportedAndSkipped(t *testing.T) {
	st := open(t)
	key := newKey(t)
	t0 := time.Now().UnixNano()
	a := startRun(t, st, key, t0, "ns", nil, nil)
	for i := range 3 {
		a.pure(t0+1+int64(i), "kv.get", enc(t, &abi.KVGetRequest{Key: fmt.Sprint(i)}), nil, 0)
	}
	a.end(t0 + 5)
	b := startRun(t, st, key, t0+10, "ns", nil, nil)
	b.pure(t0+11, "kv.get", enc(t, &abi.KVGetRequest{Key: "b"}), nil, 0)
	b.end(t0 + 12)
	// Entry 2 of a (step 2) is cut in half: it no longer decodes.
	err := st.RewriteJournal(a.id, func(recs [][]byte) [][]byte {
		recs[2] = recs[2][:len(recs[2])/2]
		return recs
	})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // reported again on the next pass, though not read again
		rep, err := st.Index(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Skipped) != 1 || rep.Skipped[0].Run != a.id || rep.Skipped[0].Seq != 2 || rep.Skipped[0].Err == "" {
			t.Fatalf("report %+v", rep)
		}
	}
	got := query(t, st, journal.Filter{Op: "kv.get"})
	if !slices.Equal(steps(got), []string{
		a.id.String()[:6] + "/1 kv.get ns/0 completed",
		a.id.String()[:6] + "/3 kv.get ns/2 completed",
		b.id.String()[:6] + "/1 kv.get ns/b completed",
	}) {
		t.Fatalf("calls around the damaged record: %q", steps(got))
	}
}

func TestBadFiltersAreRefused(t *testing.T) {
	st := open(t)
	run := journal.NewRunID(time.Now())
	now := time.Now()
	for _, f := range []journal.Filter{
		{Limit: -1},
		{OutputHash: []byte{1, 2}},
		{InputHash: make([]byte, 31)},
		{Cell: "XYZ"},
		{Since: now, Until: now.Add(-time.Second)},
		{SubRuns: true},
		{Forks: true},
		{Op: "kv*put"},
		{Run: &run, Resource: "a*b*"},
	} {
		if _, err := st.Query(context.Background(), f); err == nil || !strings.Contains(err.Error(), "bad lineage filter") {
			t.Errorf("filter %+v: %v, want ErrBadFilter", f, err)
		}
	}
}

// bruteQuery answers f by tracing every journal of st, with no index: the
// reference the index must agree with.
func bruteQuery(t tb, st *badgerstore.Store, f journal.Filter) ([]journal.Call, map[journal.RunID]journal.RunInfo, map[journal.RunID][]journal.Call) {
	ctx := context.Background()
	metas, err := st.Runs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	infos := map[journal.RunID]journal.RunInfo{}
	calls := map[journal.RunID][]journal.Call{}
	for _, m := range metas {
		cs, info, _, err := journal.Trace(ctx, st, m.ID)
		if err != nil {
			t.Fatal(err)
		}
		infos[m.ID], calls[m.ID] = info, cs
	}
	keep := func(run journal.RunID) bool { return true }
	if f.Run != nil {
		keep = func(run journal.RunID) bool {
			// A run is kept when a path of the relations f follows
			// leads from it up to f.Run: each run has at most one
			// parent and one fork parent.
			var reaches func(run journal.RunID, hops int) bool
			reaches = func(run journal.RunID, hops int) bool {
				if run == *f.Run {
					return true
				}
				if hops > len(infos) {
					return false
				}
				in := infos[run]
				return f.SubRuns && !in.Parent.IsZero() && reaches(in.Parent, hops+1) ||
					f.Forks && !in.ForkOf.IsZero() && reaches(in.ForkOf, hops+1)
			}
			return reaches(run, 0)
		}
	}
	var out []journal.Call
	for run, cs := range calls {
		for i := range cs {
			if keep(run) && f.Match(&cs[i]) {
				out = append(out, cs[i])
			}
		}
	}
	slices.SortFunc(out, func(a, b journal.Call) int { return journal.CallLess(&a, &b) })
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, infos, calls
}

// bruteConsumers applies the definition of SPEC.md 10.1 to every journal.
func bruteConsumers(infos map[journal.RunID]journal.RunInfo, calls map[journal.RunID][]journal.Call, h []byte) []journal.Consumer {
	var out []journal.Consumer
	if bytes.Equal(h, journal.Sum(nil)) {
		return nil
	}
	for run, info := range infos {
		c := journal.Consumer{Run: run, Parent: info.Parent, Input: bytes.Equal(info.InputHash, h)}
		for _, call := range calls[run] {
			if call.Outcome != journal.OutcomeOpen && bytes.Equal(call.OutputHash, h) {
				if len(c.Steps) == 0 || call.Time < c.Time {
					c.Time = call.Time
				}
				c.Steps = append(c.Steps, call.Step)
			}
		}
		if c.Input {
			c.Time = info.Started
		}
		if c.Input || len(c.Steps) > 0 {
			slices.Sort(c.Steps)
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b journal.Consumer) int {
		return cmp.Or(cmp.Compare(a.Time, b.Time), bytes.Compare(a.Run[:], b.Run[:]))
	})
	return out
}

// TestLineageAgreesWithAScanOfEveryJournal: for random journals written in
// random commits, queried between commits (so the index catches up in
// random steps), every random filter gets from the index exactly what a
// scan of every journal gives, and so does every consumed-hash question.
func TestLineageAgreesWithAScanOfEveryJournal(t *testing.T) {
	keys := []ed25519.PrivateKey{newKey(t), newKey(t)}
	rapid.Check(t, func(rt *rapid.T) {
		dir, err := os.MkdirTemp("", "lineage")
		if err != nil {
			rt.Fatal(err)
		}
		defer os.RemoveAll(dir)
		st, err := badgerstore.Open(dir)
		if err != nil {
			rt.Fatal(err)
		}
		defer st.Close()

		t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
		now := t0
		tick := func() int64 { now += int64(rapid.IntRange(0, 2).Draw(rt, "tick")); return now }
		values := [][]byte{nil, []byte("a"), []byte("b")}
		reqs := map[string][][]byte{
			"kv.get":       {enc(rt, &abi.KVGetRequest{Key: "a"}), enc(rt, &abi.KVGetRequest{Key: "b"})},
			"kv.put":       {enc(rt, &abi.KVPutRequest{Key: "a", Value: []byte{1}})},
			"kv.list":      {enc(rt, &abi.KVListRequest{Prefix: "a"})},
			"http.request": {enc(rt, &abi.HTTPRequest{Method: "GET", URL: "http://example.com/"}), enc(rt, &abi.HTTPRequest{Method: "GET", URL: "http://H2.test:8080/x"}), {0xff}},
			"run.log":      {enc(rt, &abi.LogRequest{Message: "m"})},
		}
		ops := []string{"kv.get", "kv.put", "kv.list", "http.request", "run.log"}
		effects := map[string]bool{"kv.put": true, "http.request": true}
		var runs []*agentRun
		var ids []journal.RunID
		drawFilter := func() journal.Filter {
			f := journal.Filter{
				Op:       rapid.SampledFrom([]string{"", "", "kv.get", "kv.", "kv.*", "http.", "run.log", "clock.now"}).Draw(rt, "op"),
				Resource: rapid.SampledFrom([]string{"", "", "ns1/a", "ns2/*", "ns1/*", "example.com", "h2.test:8080", "h*", "ns1/a*"}).Draw(rt, "resource"),
				Limit:    rapid.IntRange(0, 4).Draw(rt, "limit"),
			}
			if rapid.Bool().Draw(rt, "by cell") {
				cell := hex.EncodeToString(rapid.SampledFrom(keys).Draw(rt, "cell").Public().(ed25519.PublicKey))
				f.Cell = cell[:rapid.IntRange(1, 64).Draw(rt, "cell digits")]
			}
			if rapid.Bool().Draw(rt, "since") {
				f.Since = time.Unix(0, t0+int64(rapid.IntRange(0, 40).Draw(rt, "since at")))
			}
			if rapid.Bool().Draw(rt, "until") {
				f.Until = time.Unix(0, t0+int64(rapid.IntRange(1, 80).Draw(rt, "until at")))
				if !f.Since.IsZero() && !f.Since.Before(f.Until) {
					f.Until = time.Time{}
				}
			}
			if rapid.Bool().Draw(rt, "by output") {
				f.OutputHash = journal.Sum(rapid.SampledFrom(values).Draw(rt, "output"))
			}
			if rapid.IntRange(0, 3).Draw(rt, "by input") == 0 {
				op := rapid.SampledFrom(ops).Draw(rt, "input op")
				f.InputHash = journal.Sum(rapid.SampledFrom(reqs[op]).Draw(rt, "input"))
			}
			if len(ids) > 0 && rapid.IntRange(0, 2).Draw(rt, "by run") == 0 {
				id := rapid.SampledFrom(ids).Draw(rt, "run")
				f.Run, f.SubRuns, f.Forks = &id, rapid.Bool().Draw(rt, "sub-runs"), rapid.Bool().Draw(rt, "forks")
			}
			return f
		}
		check := func() {
			f := drawFilter()
			want, infos, calls := bruteQuery(rt, st, f)
			got, err := st.Query(context.Background(), f)
			if err != nil {
				rt.Fatal(err)
			}
			if len(got) != 0 || len(want) != 0 {
				if !reflect.DeepEqual(got, want) {
					rt.Fatalf("filter %+v:\nindex %q\nscan  %q", f, steps(got), steps(want))
				}
			}
			h := journal.Sum(rapid.SampledFrom(append(values, []byte("in1"), []byte("in2"))).Draw(rt, "consumed"))
			wantC := bruteConsumers(infos, calls, h)
			gotC, err := st.Consumers(context.Background(), h, 0)
			if err != nil {
				rt.Fatal(err)
			}
			if (len(gotC) != 0 || len(wantC) != 0) && !reflect.DeepEqual(gotC, wantC) {
				rt.Fatalf("consumers of %x:\nindex %+v\nscan  %+v", h, gotC, wantC)
			}
		}
		for range rapid.IntRange(1, 40).Draw(rt, "actions") {
			switch action := rapid.IntRange(0, 9).Draw(rt, "action"); {
			case action == 0 || len(runs) == 0:
				var parent *journal.RunID
				if len(ids) > 0 && rapid.Bool().Draw(rt, "has parent") {
					p := rapid.SampledFrom(ids).Draw(rt, "parent")
					parent = &p
				}
				input := rapid.SampledFrom([][]byte{nil, []byte("in1"), []byte("in2"), []byte("a")}).Draw(rt, "input")
				var forkOf *journal.RunID
				if len(ids) > 0 && rapid.Bool().Draw(rt, "forked") {
					p := rapid.SampledFrom(ids).Draw(rt, "fork parent")
					forkOf = &p
				}
				r := startFork(rt, st, rapid.SampledFrom(keys).Draw(rt, "key"), tick(), rapid.SampledFrom([]string{"ns1", "ns2"}).Draw(rt, "ns"), input, parent, forkOf)
				runs, ids = append(runs, r), append(ids, r.id)
			case action <= 5:
				r := rapid.SampledFrom(runs).Draw(rt, "call run")
				if r.open != nil {
					r.outcome(tick(), rapid.SampledFrom(values).Draw(rt, "effect response"), rapid.SampledFrom([]uint32{0, 0, 6}).Draw(rt, "effect status"))
					break
				}
				op := rapid.SampledFrom(ops).Draw(rt, "call op")
				req := rapid.SampledFrom(reqs[op]).Draw(rt, "request")
				if effects[op] {
					r.intent(tick(), op, req)
					break
				}
				r.pure(tick(), op, req, rapid.SampledFrom(values).Draw(rt, "response"), rapid.SampledFrom([]uint32{0, 0, 5}).Draw(rt, "status"))
			case action <= 7:
				rapid.SampledFrom(runs).Draw(rt, "commit run").commit()
			default:
				check()
			}
		}
		for _, r := range runs {
			r.commit()
		}
		for range 5 {
			check()
		}
	})
}

// BenchmarkLineageQuery queries an index of 10 000 calls in 100 runs (it is
// built before the clock starts; each query still checks every run's marker).
func BenchmarkLineageQuery(b *testing.B) {
	st, err := badgerstore.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	key := newKey(b)
	t0 := time.Now().UnixNano()
	var probe []byte
	for r := range 100 {
		run := startRun(b, st, key, t0+int64(r)*1000, "ns", nil, nil)
		for i := range 100 {
			at := t0 + int64(r)*1000 + int64(i)
			resp := enc(b, &abi.KVGetResponse{Value: []byte(fmt.Sprint(r, i))})
			if r == 50 && i == 50 {
				probe = journal.Sum(resp)
			}
			switch i % 4 {
			case 0:
				run.intent(at, "kv.put", enc(b, &abi.KVPutRequest{Key: fmt.Sprint(i), Value: []byte{1}}))
				run.outcome(at, nil, 0)
			case 1:
				run.intent(at, "http.request", enc(b, &abi.HTTPRequest{Method: "GET", URL: fmt.Sprintf("http://h%d.test/", i%10)}))
				run.outcome(at, resp, 0)
			default:
				run.pure(at, "kv.get", enc(b, &abi.KVGetRequest{Key: fmt.Sprint(i)}), resp, 0)
			}
		}
		run.end(t0 + int64(r)*1000 + 999)
	}
	ctx := context.Background()
	rep, err := st.Index(ctx)
	if err != nil || rep.Calls != 10000 {
		b.Fatalf("index: %+v %v", rep, err)
	}
	for _, bc := range []struct {
		name string
		f    journal.Filter
		want int
	}{
		{"output-hash", journal.Filter{OutputHash: probe}, 1},
		{"op-limit-100", journal.Filter{Op: "kv.get", Limit: 100}, 100},
		{"resource", journal.Filter{Resource: "h3.test"}, 500},
		{"op-prefix-all-kv", journal.Filter{Op: "kv."}, 7500},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				calls, err := st.Query(ctx, bc.f)
				if err != nil || len(calls) != bc.want {
					b.Fatalf("%d calls, %v; want %d", len(calls), err, bc.want)
				}
			}
		})
	}
}

// TestQueriesWhileRunsCommit: queries that catch up while other runs
// commit see a consistent prefix of each journal, and once the writers stop,
// the index agrees with a scan.
func TestQueriesWhileRunsCommit(t *testing.T) {
	st := open(t)
	t0 := time.Now().UnixNano()
	done := make(chan struct{})
	for w := range 3 {
		go func() {
			defer func() { done <- struct{}{} }()
			t := goTB{t}
			r := startRun(t, st, newKey(t), t0+int64(w), "ns", nil, nil)
			for i := range 60 {
				at := t0 + int64(w) + int64(i)*10
				if i%3 == 0 {
					r.intent(at, "kv.put", enc(t, &abi.KVPutRequest{Key: fmt.Sprint(i)}))
					r.commit()
					r.outcome(at+1, nil, 0)
				} else {
					r.pure(at, "kv.get", enc(t, &abi.KVGetRequest{Key: fmt.Sprint(i)}), []byte{byte(i)}, 0)
				}
				r.commit()
			}
			r.end(t0 + 1000)
		}()
	}
	for running := 3; running > 0; {
		select {
		case <-done:
			running--
		default:
			query(t, st, journal.Filter{Op: "kv."})
		}
	}
	got := query(t, st, journal.Filter{})
	want, _, _ := bruteQuery(t, st, journal.Filter{})
	if len(got) != 180 || !reflect.DeepEqual(got, want) {
		t.Fatalf("after concurrent commits: %d calls, the scan %d", len(got), len(want))
	}
}

// goTB lets a goroutine other than the test's fail the test: it reports and
// ends the goroutine, which t.Fatal may not do.
type goTB struct{ *testing.T }

func (g goTB) Fatal(args ...any) { g.Error(args...); runtime.Goexit() }

func (g goTB) Fatalf(format string, args ...any) { g.Errorf(format, args...); runtime.Goexit() }
