package cell_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
)

// newServer opens a cell in a fresh directory and serves its API on a
// loopback test server.
func newServer(t *testing.T, opts cell.ServerOptions) (*cell.Cell, *cell.Client) {
	t.Helper()
	return newServerIn(t, t.TempDir(), opts)
}

// newServerIn is newServer on the data directory dir, whose cell asks
// opts.Approvals, when set, about the calls its permission modes park.
func newServerIn(t *testing.T, dir string, opts cell.ServerOptions) (*cell.Cell, *cell.Client) {
	t.Helper()
	ctx := context.Background()
	copts := cell.Options{NoCache: true}
	if opts.Approvals != nil {
		copts.Approver = opts.Approvals
	}
	c, err := cell.Open(ctx, dir, copts)
	if err != nil {
		t.Fatal(err)
	}
	opts.Logf = t.Logf
	srv := cell.NewServer(c, opts)
	c.AddSink(srv.Sink)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		srv.Shutdown(ctx)
		c.Close(ctx)
	})
	cl, err := cell.Dial(hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	return c, cl
}

const smokeGrant = "capabilities:\n  run: {}\n  kv: {namespace: smoke}\n"

// TestSubmitFollowStreamsTheRunToItsEnd submits the smoke agent with
// ?follow=1: the stream opens with the run id, carries the guest's output
// and ends with the completed run; the run is then listed and its stored
// events read back.
func TestSubmitFollowStreamsTheRunToItsEnd(t *testing.T) {
	ctx := context.Background()
	_, cl := newServer(t, cell.ServerOptions{})
	code := testutil.BuildGo(t, "host/testdata/agents/smoke")
	st, err := cl.SubmitFollow(ctx, cell.Submission{Module: code, Name: "smoke.wasm", Input: []byte("hello"), Grant: smokeGrant})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var run string
	var out strings.Builder
	var end *cell.RunInfo
	for end == nil {
		l, err := st.Next()
		if err != nil {
			t.Fatalf("stream ended without the run's end: %v (so far %q)", err, out.String())
		}
		switch {
		case l.RunID != "":
			run = l.RunID
		case l.End != nil:
			end = l.End
		default:
			out.WriteString(l.Data)
		}
	}
	if run == "" || end.RunID != run || end.Status != journal.StatusCompleted || end.Live {
		t.Fatalf("stream of %q ended with %+v", run, end)
	}
	if !strings.Contains(out.String(), "to stdout") || !strings.Contains(string(end.Output), "input=hello") {
		t.Fatalf("the stream carried %q and output %s, want the guest's stdout and output", out.String(), end.Output)
	}
	runs, err := cl.Runs(ctx)
	if err != nil || len(runs) != 1 || runs[0].RunID != run {
		t.Fatalf("runs: %+v %v", runs, err)
	}
	ev, err := cl.Events(ctx, run[:8], false)
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	var stored strings.Builder
	for {
		l, err := ev.Next()
		if errors.Is(err, cell.ErrStreamEnd) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		stored.WriteString(l.Data)
	}
	if stored.String() != out.String() {
		t.Fatalf("stored events %q differ from the streamed %q", stored.String(), out.String())
	}
	if _, err := cl.Cancel(ctx, run); err == nil || !strings.Contains(err.Error(), "has finished") {
		t.Fatalf("cancel of a finished run: %v", err)
	}
}

// TestBadSubmissionsGetClearErrors: each bad request gets its status, an
// error that names the problem, and a hint where one is known; nothing is
// stored.
func TestBadSubmissionsGetClearErrors(t *testing.T) {
	ctx := context.Background()
	c, cl := newServer(t, cell.ServerOptions{})
	code := testutil.BuildGo(t, "host/testdata/agents/smoke")
	for _, tc := range []struct {
		name string
		sub  cell.Submission
		code int
		want string
	}{
		{"not wasm", cell.Submission{Module: []byte("#!/bin/sh\necho hi\n")}, http.StatusUnprocessableEntity, "not a WebAssembly module"},
		{"missing capability", cell.Submission{Module: code}, http.StatusUnprocessableEntity, "imports capabilities its grant lacks: kv"},
		{"bad grant", cell.Submission{Module: code, Grant: "capabilities: {kv: {}}"}, http.StatusBadRequest, "grant: kv: a non-empty UTF-8 namespace"},
		{"bad seed", cell.Submission{Module: code, Grant: smokeGrant, Seed: "abc"}, http.StatusBadRequest, `seed "abc" is not 32 bytes of hex`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cl.Submit(ctx, tc.sub)
			var re *cell.RemoteError
			if !errors.As(err, &re) || re.Code != tc.code || !strings.Contains(re.Error(), tc.want) {
				t.Fatalf("got %v, want %d %q", err, tc.code, tc.want)
			}
		})
	}
	// Only the module its grant refused is journaled (a start and a failed
	// end); malformed submissions store nothing.
	if runs, err := c.Store.Runs(ctx); err != nil || len(runs) != 1 || runs[0].Status != journal.StatusFailed {
		t.Fatalf("refused submissions stored runs %+v (%v), want the one refused by its grant", runs, err)
	}
}

// TestControlOnlyServesNoSubmissions: a foreground run's control socket
// reads and cancels, and refuses to start runs with a hint.
func TestControlOnlyServesNoSubmissions(t *testing.T) {
	_, cl := newServer(t, cell.ServerOptions{ControlOnly: true})
	_, err := cl.Submit(context.Background(), cell.Submission{Module: []byte{0, 'a', 's', 'm'}})
	var re *cell.RemoteError
	if !errors.As(err, &re) || re.Code != http.StatusNotFound || !strings.Contains(re.Hint(), "agentrt cell serve") {
		t.Fatalf("submission to a control socket: %v", err)
	}
}

// TestRawRequests sends what a client library would not: unknown fields,
// broken JSON, a body over the limit, an unknown run.
func TestRawRequests(t *testing.T) {
	ctx := context.Background()
	c, err := cell.Open(ctx, t.TempDir(), cell.Options{NoCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	srv := cell.NewServer(c, cell.ServerOptions{Logf: t.Logf})
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	for _, tc := range []struct {
		method, path string
		body         []byte
		code         int
		want         string
	}{
		{"POST", "/v1/runs", []byte(`{"module": "AGFzbQ==", "moduel": 1}`), 400, `unknown field \"moduel\"`},
		{"POST", "/v1/runs", []byte(`{"module": `), 400, "submission: unexpected EOF"},
		{"POST", "/v1/runs", bytes.Repeat([]byte(" "), cell.MaxSubmission+1), 413, "request body too large"},
		{"GET", "/v1/runs/ffffffffffffffffffffffffffffffff", nil, 404, "not found"},
		{"GET", "/v1/runs/xyz", nil, 400, "run id"},
		{"POST", "/v1/runs/last/cancel", nil, 404, "no runs yet"},
		{"GET", "/v2/whatever", nil, 404, "no endpoint GET /v2/whatever"},
	} {
		req, _ := http.NewRequest(tc.method, hs.URL+tc.path, bytes.NewReader(tc.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || !strings.Contains(b.String(), tc.want) {
			t.Errorf("%s %s: %d %s, want %d with %q", tc.method, tc.path, resp.StatusCode, b.String(), tc.code, tc.want)
		}
	}
}

// TestListenRefusesWhatIsNotLocal: the API has no authentication, so it is
// never offered beyond loopback; a socket path too long is refused by name.
func TestListenRefusesWhatIsNotLocal(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", "10.1.2.3:7070", "[::]:0", "example.com:80", "7070"} {
		if ln, err := cell.ListenLoopback(addr); err == nil {
			ln.Close()
			t.Errorf("listen on %s was allowed", addr)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "localhost:0"} {
		ln, err := cell.ListenLoopback(addr)
		if err != nil {
			t.Errorf("listen on %s: %v", addr, err)
			continue
		}
		ln.Close()
	}
	long := filepath.Join(t.TempDir(), strings.Repeat("d", 120), cell.SocketName)
	if _, err := cell.ListenSocket(long); !errors.Is(err, cell.ErrSocketPath) {
		t.Errorf("a %d-byte socket path: %v, want ErrSocketPath", len(long), err)
	}
}

// TestApprovalsThroughTheAPI: with a permission mode that asks before
// kv.put of key k0, a run on the daemon parks at that call, the stream says
// so, the API lists it and the run's info shows it; an answer lets it
// through, and the journal records who approved it. A denial fails the
// smoke agent, which needs the write.
func TestApprovalsThroughTheAPI(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, cell.ModesFile), []byte("rules:\n  - {name: ask-k0, op: kv.put, resource: smoke, effect: ask}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, cl := newServerIn(t, dir, cell.ServerOptions{Approvals: cell.NewApprovals()})
	code := testutil.BuildGo(t, "host/testdata/agents/smoke")
	for _, approve := range []bool{true, false} {
		st, err := cl.SubmitFollow(ctx, cell.Submission{Module: code, Name: "smoke.wasm", Input: []byte("x"), Grant: smokeGrant})
		if err != nil {
			t.Fatal(err)
		}
		var run string
		var end *cell.RunInfo
		for end == nil {
			l, err := st.Next()
			if err != nil {
				t.Fatalf("stream: %v", err)
			}
			switch {
			case l.RunID != "":
				run = l.RunID
			case l.Kind == cell.EventApproval:
				ri, err := cl.Run(ctx, run)
				if err != nil || len(ri.Waiting) != 1 || ri.Waiting[0].Op != "kv.put" || ri.Waiting[0].Rule != "ask-k0" {
					t.Fatalf("the parked run's info: %+v %v", ri.Waiting, err)
				}
				if list, err := cl.Approvals(ctx); err != nil || len(list) != 1 {
					t.Fatalf("approvals: %+v %v", list, err)
				}
				if _, err := cl.Approve(ctx, run, cell.Answer{Approve: approve, By: "tester"}); err != nil {
					t.Fatal(err)
				}
			case l.End != nil:
				end = l.End
			}
		}
		st.Close()
		want := journal.StatusCompleted
		if !approve {
			want = journal.StatusFailed
		}
		if end.Status != want {
			t.Fatalf("approve=%v: the run ended %s (%s), want %s", approve, end.Status, end.Error, want)
		}
		id, _ := journal.ParseRunID(run)
		var rec *host.GateRecord
		journal.ReadEntries(ctx, c.Store, id, func(e *journal.Entry, _ *journal.Record) error {
			var g host.GateRecord
			if rec == nil && e.Op == "kv.put" && len(e.Gate) > 0 && abi.Unmarshal(e.Gate, &g) == nil && g.Mode == "ask" {
				rec = &g
			}
			return nil
		})
		if rec == nil || rec.Approved != approve || rec.Approver != "api:tester" {
			t.Fatalf("approve=%v: gate record %+v", approve, rec)
		}
	}
	if _, err := cl.Approve(ctx, "last", cell.Answer{Approve: true, By: "x"}); err == nil || !strings.Contains(err.Error(), "no call of the run is waiting") {
		t.Fatalf("answering nothing: %v", err)
	}
}
