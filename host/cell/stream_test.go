package cell_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
)

// TestStreamFollowsAndResumes: GET /v1/runs/{run}/stream follows a run
// that waits for an approval: the events committed before the approval
// and those after it come on one connection, in order, and end with the
// run's status; the stream read so matches the one read from the store.
// A client cut off after any event resumes with ?from or Last-Event-ID
// and gets exactly the events after it. A bad offset is a 400.
func TestStreamFollowsAndResumes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, cell.ModesFile), []byte("rules:\n  - {name: ask-k0, op: kv.put, resource: smoke, effect: ask}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := serveAPI(t, dir, cell.ServerOptions{Approvals: cell.NewApprovals()})
	code := testutil.BuildGo(t, "host/testdata/agents/smoke")
	run, err := a.tcp.Submit(ctx, cell.Submission{Module: code, Name: "smoke.wasm", Input: []byte("x"), Grant: smokeGrant})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan host.StreamEvent, 4096)
	done := make(chan error, 1)
	var end *cell.StreamDone
	go func() {
		var err error
		end, err = a.unix.StreamEvents(ctx, run, 0, func(e host.StreamEvent) error { got <- e; return nil })
		close(got)
		done <- err
	}()
	waiting := func() bool {
		list, err := a.tcp.Approvals(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(list) == 1
	}
	for !waiting() {
		time.Sleep(10 * time.Millisecond)
	}
	// The start and the lease were committed before the call asked.
	var streamed []host.StreamEvent
	for len(streamed) < 2 {
		streamed = append(streamed, <-got)
	}
	before := len(streamed)
	// Every kv.put of the agent asks; each is approved as it comes.
	for open := true; open; {
		select {
		case e, ok := <-got:
			if open = ok; ok {
				streamed = append(streamed, e)
			}
		case <-time.After(10 * time.Millisecond):
			if waiting() {
				if _, err := a.tcp.Approve(ctx, run, cell.Answer{Approve: true}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if end == nil || end.Status != journal.StatusCompleted || end.Next != uint64(len(streamed)) {
		t.Fatalf("the stream ended with %+v after %d events", end, len(streamed))
	}
	id, _ := journal.ParseRunID(run)
	var stored []host.StreamEvent
	if err := host.NewStreamReader(a.cell.Store, a.cell.Store, id, 0).Read(ctx, func(e host.StreamEvent) error {
		stored = append(stored, e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(times(streamed), times(stored)) || len(streamed) <= before {
		t.Fatalf("followed %d events (%d before the approval), the store holds %d", len(streamed), before, len(stored))
	}
	var kinds []string
	for _, e := range streamed {
		kinds = append(kinds, string(e.Kind))
	}
	if k := strings.Join(kinds, " "); !strings.HasPrefix(k, "start lease ") || !strings.Contains(k, " stdout ") || !strings.HasSuffix(k, " end") {
		t.Fatalf("kinds: %s", k)
	}
	for _, from := range []int{0, 1, before, len(streamed) / 2, len(streamed) - 1, len(streamed)} {
		var rest []host.StreamEvent
		if _, err := a.tcp.StreamEvents(ctx, run, uint64(from), func(e host.StreamEvent) error { rest = append(rest, e); return nil }); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(times(rest), times(streamed[from:])) {
			t.Fatalf("from %d: %d events, want %d", from, len(rest), len(streamed)-from)
		}
	}
	// A browser's EventSource resumes with the id of the last event.
	last := len(streamed) / 2
	code2, hdr, body := a.raw(t, "GET", "/v1/runs/"+run+"/stream", map[string]string{"Last-Event-ID": strconv.FormatUint(streamed[last].Offset, 10)}, nil)
	if code2 != http.StatusOK || hdr.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("resume by Last-Event-ID: %d %s", code2, hdr.Get("Content-Type"))
	}
	if n := strings.Count(body, "\nid: ") + strings.Count(body[:min(len(body), 4)], "id: "); n != len(streamed)-last-1 {
		t.Fatalf("resume after event %d: %d events, want %d:\n%s", last, n, len(streamed)-last-1, body)
	}
	for _, h := range []map[string]string{{"Last-Event-ID": "x"}, nil} {
		path := "/v1/runs/" + run + "/stream"
		if h == nil {
			path += "?from=-1"
		}
		if code, _, body := a.raw(t, "GET", path, h, nil); code != http.StatusBadRequest || jsonError(t, body).Hint == "" {
			t.Fatalf("a bad offset (%v %s): %d %s", h, path, code, body)
		}
	}
	if _, err := a.tcp.StreamEvents(ctx, "ffffffff", 0, func(host.StreamEvent) error { return nil }); err == nil || errors.Is(err, context.Canceled) {
		t.Fatalf("the stream of no run: %v", err)
	}
}

// times clears what a JSON round trip changes (the time's location), so
// that streams read from the store and over the API compare.
func times(evs []host.StreamEvent) []host.StreamEvent {
	out := make([]host.StreamEvent, len(evs))
	for i, e := range evs {
		e.Time = e.Time.UTC().Round(0)
		out[i] = e
	}
	return out
}
