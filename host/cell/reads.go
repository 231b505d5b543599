package cell

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/replay"
)

// The read endpoints: what agentrt's read commands need of a data
// directory that a daemon (or a foreground run) holds, whose store no
// other process may open. The store's own reads (records, index records,
// modules, event logs) answer exactly what the store holds, so that a
// client runs its own code on them (journal show, replay, audit prove)
// and gets what it would get from the store; what needs the cell's key
// (a bundle, a checkpoint) or its lineage index is done here. None of
// them writes to a journal; the lineage index, derived from journals, is
// brought up to date as a local query would.

// readRoutes registers the read endpoints on mux. A control-only server
// (a foreground run's) serves them too: reading is what it is for.
func (s *Server) readRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/store/runs", s.storeRuns)
	mux.HandleFunc("GET /v1/store/runs/{id}", s.storeMeta)
	mux.HandleFunc("GET /v1/store/runs/{id}/records", s.storeRecords)
	mux.HandleFunc("GET /v1/store/runs/{id}/events", s.storeEvents)
	mux.HandleFunc("GET /v1/store/modules/{sha256}", s.storeModule)
	mux.HandleFunc("GET /v1/store/blobs/{sha256}", s.storeBlob)
	mux.HandleFunc("GET /v1/runs/{run}/bundle", s.bundle)
	mux.HandleFunc("GET /v1/runs/{run}/checkpoint", s.checkpoint)
	mux.HandleFunc("POST /v1/lineage/index", s.lineageIndex)
	mux.HandleFunc("POST /v1/lineage/reindex", s.lineageIndex)
	mux.HandleFunc("GET /v1/lineage/calls", s.lineageCalls)
	mux.HandleFunc("GET /v1/lineage/consumers", s.lineageConsumers)
}

// runID parses the {id} path value, a whole run id (the store's reads do
// not resolve prefixes or "last": FindRun does, on the client).
func runID(w http.ResponseWriter, r *http.Request) (journal.RunID, bool) {
	id, err := journal.ParseRunID(r.PathValue("id"))
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("%q: %w", r.PathValue("id"), err), "name the run by its whole id (GET /v1/runs lists them)")
		return id, false
	}
	return id, true
}

// readErrorCode is the status of a failed read.
func readErrorCode(err error) int {
	switch {
	case errors.Is(err, journal.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, journal.ErrBadFilter), errors.Is(err, journal.ErrBadRunID):
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

// storeRuns answers every run's index record, newest first, as frames of
// its canonical CBOR.
func (s *Server) storeRuns(w http.ResponseWriter, r *http.Request) {
	runs, err := s.cell.Journal.Runs(r.Context())
	if err != nil {
		writeError(w, readErrorCode(err), err, "")
		return
	}
	fw := newFrameWriter(w)
	for i := range runs {
		b, err := abi.Marshal(&runs[i])
		if err == nil {
			err = fw.item(b)
		}
		if err != nil {
			fw.end(err, nil)
			return
		}
	}
	fw.end(nil, nil)
}

// storeMeta answers one run's index record, in canonical CBOR.
func (s *Server) storeMeta(w http.ResponseWriter, r *http.Request) {
	run, ok := runID(w, r)
	if !ok {
		return
	}
	m, err := s.cell.Journal.Meta(r.Context(), run)
	if err != nil {
		writeError(w, readErrorCode(err), err, "")
		return
	}
	b, err := abi.Marshal(&m)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err, "")
		return
	}
	writeBytes(w, "application/cbor", b)
}

// storeRecords answers the records of a journal from ?from= on, as the
// store keeps them; a journal the store cannot give back whole ends with
// the gap, after the records it could read.
func (s *Server) storeRecords(w http.ResponseWriter, r *http.Request) {
	run, ok := runID(w, r)
	if !ok {
		return
	}
	var from uint64
	if q := r.URL.Query().Get("from"); q != "" {
		var err error
		if from, err = strconv.ParseUint(q, 10, 64); err != nil {
			writeError(w, http.StatusBadRequest, fmt.Errorf("from=%q is not an entry's seq", q), "")
			return
		}
	}
	fw := newFrameWriter(w)
	err := s.cell.Journal.Records(r.Context(), run, from, fw.record)
	fw.end(err, nil)
}

// storeEvents answers a run's event-log records as stored (canonical CBOR
// of host.Event): the guest's bytes exactly, which JSON would not keep.
func (s *Server) storeEvents(w http.ResponseWriter, r *http.Request) {
	run, ok := runID(w, r)
	if !ok {
		return
	}
	fw := newFrameWriter(w)
	err := s.cell.Journal.Events(r.Context(), run, fw.item)
	fw.end(err, nil)
}

// storeModule answers a module by its SHA-256.
func (s *Server) storeModule(w http.ResponseWriter, r *http.Request) {
	sum, err := hex.DecodeString(r.PathValue("sha256"))
	if err != nil || len(sum) != journal.HashSize {
		writeError(w, http.StatusBadRequest, fmt.Errorf("%q is not a SHA-256 (64 hex digits)", r.PathValue("sha256")), "")
		return
	}
	code, err := s.cell.Journal.Module(r.Context(), sum)
	if err != nil {
		writeError(w, readErrorCode(err), err, "")
		return
	}
	writeBytes(w, "application/wasm", code)
}

// storeBlob answers a blob of the store's blob area by its SHA-256
// (journal/SPEC.md section 15), so that a replay or an audit through the
// cell resolves payloads in blob form as it does on the store. The bytes
// are checked against the hash by the store here and by the client.
func (s *Server) storeBlob(w http.ResponseWriter, r *http.Request) {
	sum, err := hex.DecodeString(r.PathValue("sha256"))
	if err != nil || len(sum) != journal.HashSize {
		writeError(w, http.StatusBadRequest, fmt.Errorf("%q is not a SHA-256 (64 hex digits)", r.PathValue("sha256")), "")
		return
	}
	b, err := s.cell.Journal.Blob(r.Context(), sum)
	var be *journal.BlobError
	switch {
	case errors.As(err, &be) && be.Missing:
		writeError(w, http.StatusNotFound, err, "")
		return
	case err != nil:
		writeError(w, readErrorCode(err), err, "")
		return
	}
	writeBytes(w, "application/octet-stream", b)
}

// writeBytes answers b whole, its length announced, so that a client
// tells a body cut short from a whole one.
func writeBytes(w http.ResponseWriter, contentType string, b []byte) {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}

// ExportInfo reports a bundle the cell exported, in the end frame of GET
// /v1/runs/{run}/bundle.
type ExportInfo struct {
	Run         string                `json:"run"`
	Entries     uint64                `json:"entries"`
	ModuleBytes int                   `json:"module_bytes"`
	Keys        int                   `json:"keys"`
	Bytes       int64                 `json:"bytes"`
	Engine      replay.EngineSettings `json:"engine"`
}

// bundle exports a run's audit bundle, signed with the cell's key, as
// frames of its bytes. The export verifies the journal as it writes it;
// a refusal, however late, is the end frame's error, and the client
// discards what it received.
func (s *Server) bundle(w http.ResponseWriter, r *http.Request) {
	run, ok := s.findRun(w, r)
	if !ok {
		return
	}
	fw := newFrameWriter(w)
	rep, err := replay.ExportTo(r.Context(), s.cell.Journal, run, s.cell.Key, replay.EngineSettings{}, fw)
	if err != nil {
		fw.end(err, nil)
		return
	}
	fw.end(nil, &ExportInfo{Run: rep.Run.String(), Entries: rep.Entries, ModuleBytes: rep.ModuleBytes, Keys: rep.Keys, Bytes: rep.Bytes, Engine: rep.Engine})
}

// checkpoint signs, with the cell's key, a checkpoint of a run's journal
// as it is now: a C2SP signed note.
func (s *Server) checkpoint(w http.ResponseWriter, r *http.Request) {
	run, ok := s.findRun(w, r)
	if !ok {
		return
	}
	note, err := journal.CheckpointOf(r.Context(), s.cell.Journal, run, s.cell.Key)
	if err != nil {
		writeError(w, readErrorCode(err), err, "")
		return
	}
	writeBytes(w, "text/plain; charset=utf-8", note)
}

// IndexInfo answers POST /v1/lineage/index and POST /v1/lineage/reindex:
// what bringing the lineage index up to date (or rebuilding it) did. They
// are POSTs because they write: the index is derived from the journals,
// which neither changes.
type IndexInfo struct {
	Runs    int        `json:"runs"`
	Entries int        `json:"entries"`
	Calls   int        `json:"calls"`
	Skipped []SkipInfo `json:"skipped"`
}

// SkipInfo is a record the lineage index left out.
type SkipInfo struct {
	Run   string `json:"run"`
	Seq   uint64 `json:"seq"`
	Error string `json:"error"`
}

func (s *Server) lineageIndex(w http.ResponseWriter, r *http.Request) {
	if s.clusterLineage(w) || !noBody(w, r) {
		return
	}
	index := s.cell.Store.Index
	if r.URL.Path == "/v1/lineage/reindex" {
		index = s.cell.Store.Reindex
	}
	rep, err := index(r.Context())
	if err != nil {
		writeError(w, readErrorCode(err), err, "")
		return
	}
	out := IndexInfo{Runs: rep.Runs, Entries: rep.Entries, Calls: rep.Calls, Skipped: []SkipInfo{}}
	for _, sk := range rep.Skipped {
		out.Skipped = append(out.Skipped, SkipInfo{Run: sk.Run.String(), Seq: sk.Seq, Error: sk.Err})
	}
	writeJSON(w, http.StatusOK, out)
}

// CallInfo is a row of GET /v1/lineage/calls: one import call.
type CallInfo struct {
	Run        string `json:"run"`
	Parent     string `json:"parent,omitempty"`
	ForkOf     string `json:"fork_of,omitempty"`
	Step       uint64 `json:"step"`
	Seq        uint64 `json:"seq"`
	Op         string `json:"op"`
	Resource   string `json:"resource,omitempty"`
	Cell       string `json:"cell"`
	Time       string `json:"time"`
	InputHash  string `json:"input_hash"`
	OutputHash string `json:"output_hash,omitempty"`
	Outcome    string `json:"outcome"`
	// Status is the ABI status code of a completed or failed call.
	Status uint32 `json:"status"`
}

// ConsumerInfo is a row of GET /v1/lineage/consumers.
type ConsumerInfo struct {
	Run    string   `json:"run"`
	Parent string   `json:"parent,omitempty"`
	Input  bool     `json:"input"`
	Steps  []uint64 `json:"steps"`
	Time   string   `json:"time"`
}

func timeText(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }

func idText(id journal.RunID) string {
	if id.IsZero() {
		return ""
	}
	return id.String()
}

// filterOf reads a lineage filter from a query string, as
// Client.Query writes it.
func (s *Server) filterOf(r *http.Request) (journal.Filter, error) {
	q := r.URL.Query()
	f := journal.Filter{Op: q.Get("op"), Resource: q.Get("resource"), Cell: q.Get("cell"), SubRuns: q.Get("sub_runs") != "", Forks: q.Get("forks") != ""}
	bad := func(name string, err error) error {
		return fmt.Errorf("%w: %s=%q: %v", journal.ErrBadFilter, name, q.Get(name), err)
	}
	if v := q.Get("run"); v != "" {
		run, err := FindRun(r.Context(), s.cell.Journal, v)
		if err != nil {
			return f, err
		}
		f.Run = &run
	}
	for name, t := range map[string]*time.Time{"since": &f.Since, "until": &f.Until} {
		if v := q.Get(name); v != "" {
			var err error
			if *t, err = time.Parse(time.RFC3339Nano, v); err != nil {
				return f, bad(name, err)
			}
		}
	}
	for name, h := range map[string]*[]byte{"input_hash": &f.InputHash, "output_hash": &f.OutputHash} {
		if v := q.Get(name); v != "" {
			var err error
			if *h, err = hex.DecodeString(v); err != nil {
				return f, bad(name, err)
			}
		}
	}
	if v := q.Get("limit"); v != "" {
		var err error
		if f.Limit, err = strconv.Atoi(v); err != nil {
			return f, bad("limit", err)
		}
	}
	return f, nil
}

// lineageCalls answers the calls a filter selects, oldest first, as a
// JSON array written row by row (an array cut short does not decode).
func (s *Server) lineageCalls(w http.ResponseWriter, r *http.Request) {
	if s.clusterLineage(w) {
		return
	}
	f, err := s.filterOf(r)
	if err != nil {
		writeError(w, readErrorCode(err), err, "see: agentrt journal query --help")
		return
	}
	calls, err := s.cell.Store.Query(r.Context(), f)
	if err != nil {
		writeError(w, readErrorCode(err), err, "")
		return
	}
	writeArray(w, len(calls), func(i int) any {
		c := &calls[i]
		return CallInfo{Run: c.Run.String(), Parent: idText(c.Parent), ForkOf: idText(c.ForkOf), Step: c.Step, Seq: c.Seq, Op: c.Op, Resource: c.Resource,
			Cell: hex.EncodeToString(c.Cell), Time: timeText(c.Time), InputHash: hex.EncodeToString(c.InputHash),
			OutputHash: hex.EncodeToString(c.OutputHash), Outcome: string(c.Outcome), Status: c.Status}
	})
}

// lineageConsumers answers the runs that consumed ?hash=.
func (s *Server) lineageConsumers(w http.ResponseWriter, r *http.Request) {
	if s.clusterLineage(w) {
		return
	}
	q := r.URL.Query()
	h, err := hex.DecodeString(q.Get("hash"))
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("%w: hash=%q: %v", journal.ErrBadFilter, q.Get("hash"), err), "")
		return
	}
	limit := 0
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil {
			writeError(w, http.StatusBadRequest, fmt.Errorf("%w: limit=%q: %v", journal.ErrBadFilter, v, err), "")
			return
		}
	}
	cons, err := s.cell.Store.Consumers(r.Context(), h, limit)
	if err != nil {
		writeError(w, readErrorCode(err), err, "")
		return
	}
	writeArray(w, len(cons), func(i int) any {
		c := &cons[i]
		steps := c.Steps
		if steps == nil {
			steps = []uint64{}
		}
		return ConsumerInfo{Run: c.Run.String(), Parent: idText(c.Parent), Input: c.Input, Steps: steps, Time: timeText(c.Time)}
	})
}

// writeArray answers a JSON array of n rows, encoding one row at a time.
func writeArray(w http.ResponseWriter, n int, row func(int) any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	w.Write([]byte("["))
	for i := range n {
		if i > 0 {
			w.Write([]byte(","))
		}
		if enc.Encode(row(i)) != nil {
			return
		}
	}
	w.Write([]byte("]\n"))
}

// clusterLineage refuses a lineage request on a cell whose runs are in a
// cluster: the lineage index is kept only by the badger store, and an
// empty answer would read as "no such call".
func (s *Server) clusterLineage(w http.ResponseWriter) bool {
	if s.cell.Cluster == nil {
		return false
	}
	writeError(w, http.StatusNotImplemented, errors.New("the lineage index is not kept for runs in a cluster store"),
		"read the run's journal (agentrt journal show RUN), which every cell of the cluster serves")
	return true
}
