package cell

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/replay"
)

// ErrReadOnly is returned by the writes of a RemoteStore: a cell's store
// is written by the cell alone.
var ErrReadOnly = errors.New("cell: the store of a cell reached through its API is read-only")

// RemoteStore is the store of a cell reached through its API (the read
// endpoints, reads.go): a journal.Store whose reads answer what the cell's
// store holds, record for record and byte for byte, and whose writes fail
// with ErrReadOnly. The code that reads a store (journal.Inspect,
// replay.Load, journal.TreeOf, host.ReadEvents) runs on it unchanged, so
// a read command gives the same answer through a daemon as from the store
// itself. A journal the cell's store cannot give back whole is the same
// *journal.GapError; an answer cut short (the daemon died) is ErrCut,
// never a shorter journal.
type RemoteStore struct {
	c *Client
}

var _ journal.Store = (*RemoteStore)(nil)

// Store returns the cell's store, read through its API.
func (c *Client) Store() *RemoteStore { return &RemoteStore{c: c} }

// PutModule fails with ErrReadOnly.
func (s *RemoteStore) PutModule(context.Context, []byte, []byte) error { return ErrReadOnly }

// Commit fails with ErrReadOnly.
func (s *RemoteStore) Commit(context.Context, *journal.Batch) error { return ErrReadOnly }

// Close releases the client's idle connections.
func (s *RemoteStore) Close() error {
	s.c.hc.CloseIdleConnections()
	return nil
}

// frames sends a GET whose answer is frames and calls fn with each record
// or item frame's kind and payload (valid during the call only) until the
// end frame, which it returns: with a nil error when the read succeeded,
// the cell's error when it did not, ErrCut when the answer broke off, fn's
// error when fn failed.
func (c *Client) frames(ctx context.Context, path string, fn func(kind byte, payload []byte) error) (FramesEnd, error) {
	resp, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return FramesEnd{}, err
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != FramesType {
		return FramesEnd{}, fmt.Errorf("cell: GET %s answered %q, not frames", path, ct)
	}
	fr := newFrameReader(resp.Body)
	for {
		kind, payload, err := fr.next()
		if err == io.EOF {
			return fr.end, nil
		}
		if err != nil {
			return FramesEnd{}, err
		}
		if err := fn(kind, payload); err != nil {
			return FramesEnd{}, err
		}
	}
}

// Records implements journal.Store: the records of run from seq from on,
// as the cell's store keeps them.
func (s *RemoteStore) Records(ctx context.Context, run journal.RunID, from uint64, fn func(seq uint64, raw []byte) error) error {
	_, err := s.c.frames(ctx, "/v1/store/runs/"+run.String()+"/records?from="+strconv.FormatUint(from, 10), func(kind byte, p []byte) error {
		if kind != frameRecord {
			return fmt.Errorf("%w: an item frame among the records of run %s", ErrCut, run)
		}
		return fn(binary.BigEndian.Uint64(p[:8]), p[8:])
	})
	return err
}

// items reads an answer of item frames.
func (s *RemoteStore) items(ctx context.Context, path string, fn func([]byte) error) error {
	_, err := s.c.frames(ctx, path, func(kind byte, p []byte) error {
		if kind != frameItem {
			return fmt.Errorf("%w: a record frame in the answer to GET %s", ErrCut, path)
		}
		return fn(p)
	})
	return err
}

// Events implements host.EventLog: the run's event-log records as stored.
func (s *RemoteStore) Events(ctx context.Context, run journal.RunID, fn func([]byte) error) error {
	return s.items(ctx, "/v1/store/runs/"+run.String()+"/events", fn)
}

// Runs implements journal.Store: every run's index record, newest first.
func (s *RemoteStore) Runs(ctx context.Context) ([]journal.RunMeta, error) {
	var out []journal.RunMeta
	err := s.items(ctx, "/v1/store/runs", func(b []byte) error {
		var m journal.RunMeta
		if err := abi.Unmarshal(b, &m); err != nil {
			return fmt.Errorf("cell: a run index record does not decode: %w", err)
		}
		out = append(out, m)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// body sends a GET and returns its whole body, of at most limit bytes; a
// body shorter than it announced is an error.
func (s *RemoteStore) body(ctx context.Context, path string, limit int64) ([]byte, error) {
	resp, err := s.c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: GET %s: %v", ErrCut, path, err)
	case int64(len(b)) > limit:
		return nil, fmt.Errorf("cell: GET %s answered over %d bytes", path, limit)
	case resp.ContentLength >= 0 && int64(len(b)) != resp.ContentLength:
		return nil, fmt.Errorf("%w: GET %s: %d of %d bytes", ErrCut, path, len(b), resp.ContentLength)
	}
	return b, nil
}

// Meta implements journal.Store.
func (s *RemoteStore) Meta(ctx context.Context, run journal.RunID) (journal.RunMeta, error) {
	var m journal.RunMeta
	b, err := s.body(ctx, "/v1/store/runs/"+run.String(), MaxFrame)
	if err != nil {
		return m, err
	}
	if err := abi.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("cell: the index record of run %s does not decode: %w", run, err)
	}
	return m, nil
}

// Module implements journal.Store; the module's bytes are checked
// against sum, as the store itself checks them.
func (s *RemoteStore) Module(ctx context.Context, sum []byte) ([]byte, error) {
	code, err := s.body(ctx, "/v1/store/modules/"+hex.EncodeToString(sum), MaxModule)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(journal.Sum(code), sum) {
		return nil, fmt.Errorf("cell: module %x: the cell answered bytes that hash to %x", sum, journal.Sum(code))
	}
	return code, nil
}

// Blob implements journal.Blobs over the cell's blob area. The bytes
// are checked against sum here, as the store checks them: a cell cannot
// answer a changed blob. A blob the cell does not hold is a
// *journal.BlobError (missing), as from the store.
func (s *RemoteStore) Blob(ctx context.Context, sum []byte) ([]byte, error) {
	b, err := s.body(ctx, "/v1/store/blobs/"+hex.EncodeToString(sum), journal.MaxBlobSize)
	var re *RemoteError
	if errors.As(err, &re) && re.Code == http.StatusNotFound {
		return nil, &journal.BlobError{Sum: sum, Missing: true, Where: "the cell's store"}
	}
	if err != nil {
		return nil, err
	}
	if err := journal.CheckBlobIn("the cell's store", sum, b); err != nil {
		return nil, err
	}
	return b, nil
}

// Index implements journal.Lineage: the cell brings its lineage index up
// to date.
func (s *RemoteStore) Index(ctx context.Context) (journal.IndexReport, error) {
	return s.index(ctx, http.MethodPost, "/v1/lineage/index")
}

// Reindex rebuilds the cell's lineage index from every journal.
func (s *RemoteStore) Reindex(ctx context.Context) (journal.IndexReport, error) {
	return s.index(ctx, http.MethodPost, "/v1/lineage/reindex")
}

func (s *RemoteStore) index(ctx context.Context, method, path string) (journal.IndexReport, error) {
	var info IndexInfo
	if err := s.c.call(ctx, method, path, nil, &info); err != nil {
		return journal.IndexReport{}, err
	}
	rep := journal.IndexReport{Runs: info.Runs, Entries: info.Entries, Calls: info.Calls}
	for _, sk := range info.Skipped {
		run, err := journal.ParseRunID(sk.Run)
		if err != nil {
			return rep, fmt.Errorf("cell: bad answer to %s %s: run %q: %w", method, path, sk.Run, err)
		}
		rep.Skipped = append(rep.Skipped, journal.Skip{Run: run, Seq: sk.Seq, Err: sk.Error})
	}
	return rep, nil
}

// Query implements journal.Lineage: the cell runs the query on its index.
func (s *RemoteStore) Query(ctx context.Context, f journal.Filter) ([]journal.Call, error) {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.Run != nil {
		q.Set("run", f.Run.String())
	}
	if f.SubRuns {
		q.Set("sub_runs", "1")
	}
	if f.Forks {
		q.Set("forks", "1")
	}
	set("op", f.Op)
	set("resource", f.Resource)
	set("cell", f.Cell)
	if !f.Since.IsZero() {
		q.Set("since", f.Since.UTC().Format(time.RFC3339Nano))
	}
	if !f.Until.IsZero() {
		q.Set("until", f.Until.UTC().Format(time.RFC3339Nano))
	}
	if f.InputHash != nil {
		q.Set("input_hash", hex.EncodeToString(f.InputHash))
	}
	if f.OutputHash != nil {
		q.Set("output_hash", hex.EncodeToString(f.OutputHash))
	}
	if f.Limit != 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var rows []CallInfo
	if err := s.array(ctx, "/v1/lineage/calls?"+q.Encode(), &rows); err != nil {
		return nil, err
	}
	calls := make([]journal.Call, len(rows))
	for i, r := range rows {
		c := &calls[i]
		c.Step, c.Seq, c.Op, c.Resource, c.Outcome, c.Status = r.Step, r.Seq, r.Op, r.Resource, journal.Outcome(r.Outcome), r.Status
		var err error
		if c.Run, c.Parent, c.Time, err = runParentTime(r.Run, r.Parent, r.Time); err == nil {
			c.Cell, err = hex.DecodeString(r.Cell)
		}
		if err == nil && r.ForkOf != "" {
			c.ForkOf, err = journal.ParseRunID(r.ForkOf)
		}
		if err == nil {
			c.InputHash, err = hex.DecodeString(r.InputHash)
		}
		if err == nil && r.OutputHash != "" {
			c.OutputHash, err = hex.DecodeString(r.OutputHash)
		}
		if err != nil {
			return nil, fmt.Errorf("cell: bad answer to GET /v1/lineage/calls: row %d: %w", i, err)
		}
	}
	return calls, nil
}

// Consumers implements journal.Lineage.
func (s *RemoteStore) Consumers(ctx context.Context, h []byte, limit int) ([]journal.Consumer, error) {
	q := url.Values{"hash": {hex.EncodeToString(h)}}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var rows []ConsumerInfo
	if err := s.array(ctx, "/v1/lineage/consumers?"+q.Encode(), &rows); err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, nil
	}
	out := make([]journal.Consumer, len(rows))
	for i, r := range rows {
		c := &out[i]
		c.Input, c.Steps = r.Input, r.Steps
		if len(c.Steps) == 0 {
			c.Steps = nil
		}
		var err error
		if c.Run, c.Parent, c.Time, err = runParentTime(r.Run, r.Parent, r.Time); err != nil {
			return nil, fmt.Errorf("cell: bad answer to GET /v1/lineage/consumers: row %d: %w", i, err)
		}
	}
	return out, nil
}

// array decodes an answer that is a JSON array; one cut short does not
// decode, and is ErrCut.
func (s *RemoteStore) array(ctx context.Context, path string, out any) error {
	resp, err := s.c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%w: GET %s: %v", ErrCut, path, err)
	}
	return nil
}

func runParentTime(run, parent, t string) (journal.RunID, journal.RunID, int64, error) {
	var p journal.RunID
	r, err := journal.ParseRunID(run)
	if err == nil && parent != "" {
		p, err = journal.ParseRunID(parent)
	}
	if err != nil {
		return r, p, 0, err
	}
	tm, err := time.Parse(time.RFC3339Nano, t)
	return r, p, tm.UnixNano(), err
}

// Export has the cell write the audit bundle of run (an id, a unique
// prefix, or "last") to w, signed with its key (replay.ExportTo, in the
// cell). A refused export, or one cut short, returns an error, and what
// was written to w must be discarded.
func (c *Client) Export(ctx context.Context, run string, w io.Writer) (*replay.ExportReport, error) {
	var n int64
	end, err := c.frames(ctx, "/v1/runs/"+url.PathEscape(run)+"/bundle", func(kind byte, p []byte) error {
		if kind != frameItem {
			return fmt.Errorf("%w: a record frame in a bundle", ErrCut)
		}
		n += int64(len(p))
		_, err := w.Write(p)
		return err
	})
	if err != nil {
		return nil, err
	}
	info := end.Export
	if info == nil || info.Bytes != n {
		return nil, fmt.Errorf("%w: the bundle's end frame does not report the %d bytes received", ErrCut, n)
	}
	id, err := journal.ParseRunID(info.Run)
	if err != nil {
		return nil, fmt.Errorf("cell: bad export report: %w", err)
	}
	return &replay.ExportReport{Run: id, Entries: info.Entries, ModuleBytes: info.ModuleBytes, Keys: info.Keys, Bytes: info.Bytes, Engine: info.Engine}, nil
}

// maxNote bounds a checkpoint's signed note (journal/SPEC.md 14.3 refuses
// one over 4096 bytes).
const maxNote = 4096

// Checkpoint has the cell sign a checkpoint of the journal of run (an id,
// a unique prefix, or "last") as it is now (journal.CheckpointOf, in the
// cell), and returns the signed note.
func (c *Client) Checkpoint(ctx context.Context, run string) ([]byte, error) {
	return c.Store().body(ctx, "/v1/runs/"+url.PathEscape(run)+"/checkpoint", maxNote)
}
