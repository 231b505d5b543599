package cell

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/journal"
)

// streamPoll is how often a followed stream looks for new commits, and
// streamKeepAlive how often an idle one sends a comment, so that proxies
// keep the connection.
const (
	streamPoll      = 200 * time.Millisecond
	streamKeepAlive = 15 * time.Second
)

// StreamDone is the data of the last event of a run's event stream (event
// "done"): the run's status once it ended or was cancelled.
type StreamDone struct {
	Status journal.RunStatus `json:"status"`
	// Next is the offset the stream would go on from.
	Next uint64 `json:"next"`
}

// stream serves GET /v1/runs/{run}/stream: the run's event stream
// (host.StreamReader) as server-sent events, each with its offset as id
// and its kind as event type, followed until the run ends or is
// cancelled. A client resumes with ?from=OFFSET or the Last-Event-ID
// header (the id of the last event it got): the stream goes on from the
// event after it, none lost, none repeated.
func (s *Server) stream(w http.ResponseWriter, r *http.Request) {
	run, ok := s.findRun(w, r)
	if !ok {
		return
	}
	from, err := streamFrom(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err, "give ?from= the offset of the first event wanted, or Last-Event-ID the id of the last event got")
		return
	}
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	send := func(id, event string, data any) bool {
		b, err := json.Marshal(data)
		if err != nil {
			return false
		}
		if id != "" {
			id = "id: " + id + "\n"
		}
		if _, err := fmt.Fprintf(w, "%sevent: %s\ndata: %s\n\n", id, event, b); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}
	rd := host.NewStreamReader(s.cell.Journal, s.cell.Journal, run, from)
	tick := time.NewTicker(streamPoll)
	defer tick.Stop()
	idle := time.Now()
	for {
		// The status is read before the stream, so that what a run
		// committed before it ended is read after.
		m, err := s.cell.Journal.Meta(r.Context(), run)
		if err != nil {
			send("", "error", map[string]string{"error": err.Error()})
			return
		}
		ended := !s.cell.Host.Live(run) && (m.Status.Finished() || m.Status == journal.StatusCancelled)
		sent := false
		err = rd.Read(r.Context(), func(e host.StreamEvent) error {
			sent = true
			if !send(strconv.FormatUint(e.Offset, 10), string(e.Kind), e) {
				return errClientGone
			}
			return nil
		})
		if err != nil {
			if !errors.Is(err, errClientGone) && r.Context().Err() == nil {
				send("", "error", map[string]string{"error": err.Error()})
			}
			return
		}
		if ended {
			send("", "done", StreamDone{Status: m.Status, Next: rd.Offset()})
			return
		}
		if sent {
			idle = time.Now()
		} else if time.Since(idle) > streamKeepAlive {
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
			idle = time.Now()
		}
		select {
		case <-tick.C:
		case <-r.Context().Done():
			return
		}
	}
}

var errClientGone = errors.New("cell: the client went away")

// streamFrom returns the offset a stream request starts at: ?from, or the
// event after Last-Event-ID, or 0.
func streamFrom(r *http.Request) (uint64, error) {
	if v := r.URL.Query().Get("from"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("from=%q is not an offset (a whole number from 0)", v)
		}
		return n, nil
	}
	if v := strings.TrimSpace(r.Header.Get("Last-Event-ID")); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n == ^uint64(0) {
			return 0, fmt.Errorf("Last-Event-ID %q is not an event id of this stream", v)
		}
		return n + 1, nil
	}
	return 0, nil
}

// StreamEvents reads run's event stream from offset from (GET
// /v1/runs/{run}/stream) and calls fn with each event until the run ends
// or is cancelled (done is then its status), fn returns an error or ctx
// ends.
func (c *Client) StreamEvents(ctx context.Context, run string, from uint64, fn func(host.StreamEvent) error) (done *StreamDone, err error) {
	resp, err := c.do(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(run)+"/stream?from="+strconv.FormatUint(from, 10), nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	sc := newStream(resp.Body).sc
	var event string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data := []byte(strings.TrimPrefix(line, "data: "))
			switch event {
			case "done":
				var d StreamDone
				if err := json.Unmarshal(data, &d); err != nil {
					return nil, fmt.Errorf("cell: event stream: %w", err)
				}
				return &d, nil
			case "error":
				var e struct{ Error string }
				_ = json.Unmarshal(data, &e)
				return nil, fmt.Errorf("cell: event stream: %s", e.Error)
			}
			var e host.StreamEvent
			if err := json.Unmarshal(data, &e); err != nil {
				return nil, fmt.Errorf("cell: event stream: %w", err)
			}
			if err := fn(e); err != nil {
				return nil, err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("cell: event stream: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nil, errors.New("cell: event stream: cut off before the run ended")
}
