package abi

// Request and response bodies of every op. Field names are the CBOR map keys;
// an empty body (length 0) is the zero value of the struct. SPEC.md gives the
// CDDL of each.

// Empty is the request or response of ops that carry nothing.
type Empty struct{}

// InputResponse answers run.input.
type InputResponse struct {
	Input []byte `cbor:"input"`
	// State is the state the run continues from, in a segment after a
	// checkpoint (Segment > 0); absent in the first segment.
	State []byte `cbor:"state,omitempty"`
	// Segment counts the run's checkpoints so far: 0 in the first
	// segment, and absent then.
	Segment uint32 `cbor:"segment,omitempty"`
}

// BudgetLimit is an amount of one budget dimension: in a LimitRequest, "at
// most Amount more of Dim from now on"; in a LimitResponse, Dim's
// absolute ceiling. Dim is one of "steps", "model_calls", "input_tokens",
// "output_tokens", "micro_usd", "tool_calls", "http_requests",
// "wall_seconds" (money in micro-USD).
type BudgetLimit struct {
	Dim    string `cbor:"dim"`
	Amount uint64 `cbor:"amount"`
}

// CheckpointBudget is a run's budget ledger at a checkpoint (SPEC.md
// §9.5): the ceilings in force, what settled calls spent (steps and wall
// clock excluded: the journal counts them), the reservations still open
// and the last reservation id.
type CheckpointBudget struct {
	Ceilings []BudgetLimit   `cbor:"ceilings,omitempty"`
	Spent    []BudgetLimit   `cbor:"spent,omitempty"`
	Open     []BudgetHolding `cbor:"open,omitempty"`
	LastID   uint64          `cbor:"last_id,omitempty"`
}

// BudgetHolding is a reservation open at a checkpoint: its id, the step
// that made it, what it holds, and whether it holds a child's ceilings.
type BudgetHolding struct {
	ID      uint64        `cbor:"id"`
	Step    uint64        `cbor:"step"`
	Amounts []BudgetLimit `cbor:"amounts,omitempty"`
	Carve   bool          `cbor:"carve,omitempty"`
}

// LimitRequest is the request of run.limit: the run's own ceilings, which
// the host lowers (never raises) to what is used of each dimension now
// plus the amount. An empty list changes nothing and reports the ceilings.
type LimitRequest struct {
	Limits []BudgetLimit `cbor:"limits,omitempty"`
}

// LimitResponse answers run.limit with the absolute ceilings now in force,
// one per limited dimension, in the order of BudgetLimit's list; a
// dimension without a ceiling is absent.
type LimitResponse struct {
	Ceilings []BudgetLimit `cbor:"ceilings,omitempty"`
}

// CheckpointRequest is the request of run.checkpoint: the state the next
// segment of the run starts from.
type CheckpointRequest struct {
	State []byte `cbor:"state"`
}

// CheckpointResponse answers run.checkpoint. The guest never reads it: the
// call ends the guest's instance and the host starts the next segment. It
// is journaled as the call's response, so that replay starts each segment
// as the recorded run did.
type CheckpointResponse struct {
	// Segment is the number of the segment the checkpoint starts, from 1.
	Segment uint32 `cbor:"segment"`
	// Clock is the guest's virtual monotonic clock at the checkpoint, ns:
	// the next segment's clock goes on from it.
	Clock int64 `cbor:"clock"`
	// Header is the hash of the run's start entry (its header), so that a
	// resume that verifies the journal from the last checkpoint on is
	// still bound to the run's module, grant, input and seed.
	Header []byte `cbor:"header"`
	// Journal is the number of bytes of requests and responses the run's
	// journal holds before this call (SPEC.md §7, the journal quota), so
	// that a resume from the checkpoint counts on from there. Absent
	// (zero) in journals written before the quota.
	Journal uint64 `cbor:"journal,omitempty"`
	// Budget is the run's budget ledger before this call, so that a
	// resume from the checkpoint rebuilds it without reading the journal
	// before; absent when the ledger limits, holds and has spent nothing.
	Budget *CheckpointBudget `cbor:"budget,omitempty"`
}

// SetOutputRequest is the request of run.set_output.
type SetOutputRequest struct {
	Output []byte `cbor:"output"`
}

// Log levels of run.log.
const (
	LevelDebug uint8 = 0
	LevelInfo  uint8 = 1
	LevelWarn  uint8 = 2
	LevelError uint8 = 3
)

// LogRequest is the request of run.log.
type LogRequest struct {
	Level   uint8  `cbor:"level"`
	Message string `cbor:"msg"`
}

// IntrospectResponse answers run.introspect: who the run is.
type IntrospectResponse struct {
	RunID        string   `cbor:"run_id"`
	ModuleSHA256 []byte   `cbor:"module_sha256"`
	ABI          uint32   `cbor:"abi"`
	Capabilities []string `cbor:"capabilities"`
	// Steps is the number of import calls made before this one.
	Steps uint64 `cbor:"steps"`
}

// KVGetRequest is the request of kv.get.
type KVGetRequest struct {
	Key string `cbor:"key"`
}

// KVGetResponse answers kv.get. A missing key is StatusNotFound.
type KVGetResponse struct {
	Value []byte `cbor:"value"`
}

// KVPutRequest is the request of kv.put.
type KVPutRequest struct {
	Key   string `cbor:"key"`
	Value []byte `cbor:"value"`
}

// KVDeleteRequest is the request of kv.delete.
type KVDeleteRequest struct {
	Key string `cbor:"key"`
}

// KVDeleteResponse answers kv.delete.
type KVDeleteResponse struct {
	Existed bool `cbor:"existed"`
}

// KVListRequest is the request of kv.list: keys starting with Prefix, in
// byte order, after the key After (exclusive), at most Limit (0: the host's
// default).
type KVListRequest struct {
	Prefix string `cbor:"prefix"`
	After  string `cbor:"after,omitempty"`
	Limit  uint32 `cbor:"limit,omitempty"`
}

// KVListResponse answers kv.list. More is true when keys remain after the
// last one returned.
type KVListResponse struct {
	Keys []string `cbor:"keys"`
	More bool     `cbor:"more"`
}

// Header is one HTTP header field. Headers are a list, not a map, so that
// order and repeated names survive.
type Header struct {
	_     struct{} `cbor:",toarray"`
	Name  string
	Value string
}

// HTTPRequest is the request of http.request.
type HTTPRequest struct {
	Method  string   `cbor:"method"`
	URL     string   `cbor:"url"`
	Headers []Header `cbor:"headers,omitempty"`
	Body    []byte   `cbor:"body,omitempty"`
}

// HTTPResponse answers http.request. Truncated is set when the body was cut
// at the host's limit.
type HTTPResponse struct {
	Status    uint16   `cbor:"status"`
	Headers   []Header `cbor:"headers"`
	Body      []byte   `cbor:"body"`
	Truncated bool     `cbor:"truncated,omitempty"`
}

// ClockNowResponse answers clock.now with the host's real wall time.
type ClockNowResponse struct {
	UnixNano int64 `cbor:"unix_nano"`
}

// RandomBytesRequest is the request of random.bytes.
type RandomBytesRequest struct {
	N uint32 `cbor:"n"`
}

// RandomBytesResponse answers random.bytes with N real random bytes.
type RandomBytesResponse struct {
	Bytes []byte `cbor:"bytes"`
}

// ToolRunRequest is the request of tool.run: run the granted tool Name
// with the arguments Args (after the grant's fixed arguments), feeding it
// Stdin. The host checks every argument against the tool's schema in the
// grant before anything runs; no shell is involved.
type ToolRunRequest struct {
	Args  []string `cbor:"args,omitempty"`
	Name  string   `cbor:"name"`
	Stdin []byte   `cbor:"stdin,omitempty"`
}

// ToolFile is a regular file that a tool run created or changed in its
// read-write area, by hash. Path is relative to the tool's working
// directory when it lies beneath it (with '/' separators), else absolute.
// A file the host did not hash has no SHA256 and says why in Unhashed.
//
// A file name is bytes, and a tool may make one that is not UTF-8: Path
// then holds those bytes as they are, and travels as a CBOR byte string
// where a valid name is a text string (tool.go), so that no name makes a
// response undecodable.
type ToolFile struct {
	Path string `cbor:"path"`
	Size uint64 `cbor:"size"`
	// SHA256 is the hash of the file's content, absent when Unhashed says
	// why there is none.
	SHA256 []byte `cbor:"sha256,omitempty"`
	// Unhashed is why the file was not hashed: UnhashedSparse,
	// UnhashedLimit or UnhashedStopped. Empty when SHA256 is set.
	Unhashed string `cbor:"unhashed,omitempty"`
}

// Why a ToolFile has no hash.
const (
	// UnhashedSparse: the file has holes, which the host does not read
	// (a tool can make a file of any size in no time that way).
	UnhashedSparse = "sparse"
	// UnhashedLimit: hashing the file would pass the tool's hash limit
	// (limits.hash in the grant); the response's Limits then holds "hash".
	UnhashedLimit = "hash"
	// UnhashedStopped: the run was cancelled or drained while the host
	// hashed the tool's files.
	UnhashedStopped = "stopped"
)

// ToolRunResponse answers tool.run. A tool that ran is a successful call
// whatever its exit status, like an HTTP error status: Exit, Signal,
// TimedOut and Limits say how it ended.
type ToolRunResponse struct {
	// Exit is the tool's exit status; a tool ended by a signal reports
	// 128 + the signal's number, as a shell does.
	Exit int64 `cbor:"exit"`
	// Files lists the files written, sorted by path.
	Files []ToolFile `cbor:"files,omitempty"`
	// Limits names the limits the tool ran into: wall, cpu, memory,
	// processes, file_size, disk, output, files (more files written than
	// the host lists) or hash (files left unhashed at the hash limit).
	Limits []string `cbor:"limits,omitempty"`
	// Signal names the signal that ended the tool ("SIGKILL").
	Signal string `cbor:"signal,omitempty"`
	Stderr []byte `cbor:"stderr"`
	Stdout []byte `cbor:"stdout"`
	// TimedOut says the wall-clock limit passed and the tool was killed.
	TimedOut bool `cbor:"timed_out,omitempty"`
	// StderrTruncated and StdoutTruncated say the stream was cut at the
	// tool's output limit.
	StderrTruncated bool `cbor:"stderr_truncated,omitempty"`
	StdoutTruncated bool `cbor:"stdout_truncated,omitempty"`
}
