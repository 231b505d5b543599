// Package uibench sets up what the dashboard's paging benchmark measures: a
// cell serving its dashboard on loopback with one long run in its journal,
// and a client that asks for timeline pages the way a program does (the
// API token as a bearer, HTML accepted). host/cell's
// BenchmarkUIJournalPage100k and bench's figure 20c share it, so that both
// time the same thing.
//
// It is benchmark scaffolding: it listens on 127.0.0.1 only and keeps
// nothing once Close returns.
package uibench

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"time"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/journal"
)

// Journal is a cell in a data directory serving its dashboard, and a run
// of its journal to page through.
type Journal struct {
	// Cell is the cell; Run the run of LoopRun.
	Cell *cell.Cell
	Run  journal.RunID
	// URL is the dashboard's base (http://127.0.0.1:PORT) and Token the
	// credential it takes.
	URL, Token string

	srv    *cell.Server
	hs     *http.Server
	client *http.Client
}

// Open opens a cell in dir (copts as given) and serves its dashboard on a
// loopback port.
func Open(ctx context.Context, dir string, copts cell.Options) (*Journal, error) {
	c, err := cell.Open(ctx, dir, copts)
	if err != nil {
		return nil, err
	}
	tok, err := cell.LoadOrCreateAPIToken(dir)
	if err != nil {
		c.Close(ctx)
		return nil, err
	}
	srv := cell.NewServer(c, cell.ServerOptions{APIToken: tok})
	ln, err := cell.ListenUI("127.0.0.1:0", false)
	if err != nil {
		c.Close(ctx)
		return nil, err
	}
	hs, err := srv.UI(ln, cell.UIOptions{Token: tok})
	if err != nil {
		ln.Close()
		c.Close(ctx)
		return nil, err
	}
	go hs.Serve(ln)
	return &Journal{Cell: c, URL: "http://" + ln.Addr().String(), Token: tok, srv: srv, hs: hs,
		client: &http.Client{Timeout: time.Minute}}, nil
}

// LoopRun runs loop (bench/testdata/loop.wat, assembled) to its end with
// n calls in the cell, sets Run to it and returns it: a journal of n+1
// pure calls, group-committed.
func (j *Journal) LoopRun(ctx context.Context, loop []byte, n uint64) (journal.RunID, error) {
	in := binary.LittleEndian.AppendUint64(nil, n)
	res, err := j.Cell.Host.Run(ctx, host.RunSpec{Code: loop, Name: "loop.wasm", Input: in, Grant: &host.Grant{Run: &host.RunGrant{}}})
	if err != nil {
		return journal.RunID{}, err
	}
	if res.Status != journal.StatusCompleted {
		return journal.RunID{}, fmt.Errorf("uibench: the loop run ended %s: %v", res.Status, res.Err)
	}
	j.Run = res.Run
	return res.Run, nil
}

// timelineRow is a timeline row of a run page; its group is the entry's
// seq.
var timelineRow = regexp.MustCompile(`<tr class="ph-[a-z]+[^"]*" id="e(\d+)">`)

// Page asks the dashboard for the timeline page of Run from entry from
// (cell.UIPageSize entries), reads it whole, and returns how long that
// took and the page.
func (j *Journal) Page(ctx context.Context, from uint64) (time.Duration, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/runs/%s?from=%d", j.URL, j.Run, from), nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+j.Token)
	req.Header.Set("Accept", "text/html")
	start := time.Now()
	resp, err := j.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	if err != nil {
		return 0, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, nil, fmt.Errorf("uibench: GET %s: %s", req.URL.Path, resp.Status)
	}
	return took, body, nil
}

// Rows returns the seqs of the timeline rows of a run page, in order.
func Rows(page []byte) []string {
	var out []string
	for _, m := range timelineRow.FindAllSubmatch(page, -1) {
		out = append(out, string(m[1]))
	}
	return out
}

// Offset is the from of the i-th page of a benchmark over a journal of n
// entries: spread over the journal by a prime stride, so that no page is
// read twice in a row and none runs past the end.
func Offset(i int, n uint64) uint64 {
	return uint64(i*7919) % (n - cell.UIPageSize)
}

// Close stops serving and closes the cell.
func (j *Journal) Close(ctx context.Context) error {
	j.hs.Close()
	j.srv.Shutdown(ctx)
	return j.Cell.Close(ctx)
}
