// Package sdkvectors holds a guest SDK to the ABI's test vectors
// (abi/testdata/vectors, read by internal/abivectors) from the inside of a
// real wasm module: a driver program built with the SDK reads one command
// per line on stdin, makes the SDK call the command names and prints what
// it returned; a stub host answers each call from a script under wazero,
// checks the request bytes it was sent, and keeps responses that do not fit
// pending for take as host/session.go does.
//
//   - Valid request vectors in the form SDKs send (the empty body for ops
//     without request fields, the canonical encoding otherwise): the SDK's
//     encoder must produce exactly the vector's bytes.
//   - Valid response and error vectors: the SDK must read the same value as
//     the Go codec.
//   - Invalid response and error vectors: the SDK must refuse them.
//
// Invalid request vectors test hosts, which decode requests; an SDK only
// writes them.
//
// The driver protocol (guest-sdk/rust/testdata/vectors is one driver):
//
//	statuses            print every ABI status the SDK names: "0:ok 1:pending ..."
//	<op> <args...>      call the op, e.g. "kv.put x6b -"
//
// Argument tokens: "x<hex>" is text or bytes (hex may be empty), "-" is a
// null byte string, anything else a decimal number. Each command prints one
// line: "ok <fields...>" (as Render gives them) or "status <code> x<hex
// message>". The driver's first argument is the size of its response
// buffer, ResponseBuffer.
package sdkvectors

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/internal/abivectors"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"
)

// ResponseBuffer is the response buffer a driver offers the host: small,
// so that the vectors exercise both the direct path and pending/take.
const ResponseBuffer = 32

// SDKMalformed is the status code the SDKs (C and Rust) report for a
// response that breaks the ABI: their own, above the host's range.
const SDKMalformed = 0x10001

// Reply is what the stub host answers to one call.
type Reply struct {
	Status abi.Status
	Body   []byte
	// TakeStatus, when set, is what take answers instead of the body.
	TakeStatus abi.Status
	// Overlong makes call report a response one byte longer than the
	// buffer, and write nothing: a host that breaks section 3.
	Overlong bool
}

// Step is one command to the driver and what must come of it.
type Step struct {
	Name string // the vector file, or a name for a transport case
	Line string
	// Op is the op the call must reach; WantReq, when not nil, the exact
	// request bytes.
	Op      string
	WantReq []byte
	Reply   Reply
	// Want is the line the driver must print; with Prefix, its start.
	Want   string
	Prefix bool
}

// TextTok is the command token for text.
func TextTok(s string) string { return "x" + hex.EncodeToString([]byte(s)) }

// BytesTok is the command token for bytes, "-" for nil.
func BytesTok(b []byte) string {
	if b == nil {
		return "-"
	}
	return "x" + hex.EncodeToString(b)
}

// viewTok renders bytes an SDK returns: null and the empty byte string
// read the same.
func viewTok(b []byte) string { return "x" + hex.EncodeToString(b) }

func decode[T any](data []byte) (*T, error) {
	v := new(T)
	return v, abi.Unmarshal(data, v)
}

// RequestLine returns the command that makes the SDK send the request
// encoded in data.
func RequestLine(op string, data []byte) (string, error) {
	args := []string{op}
	switch op {
	case "run.input", "run.introspect", "clock.now", "run.self", "run.self_caps", "run.self_budget", "run.self_mode":
	case "run.self_may":
		r, err := decode[abi.MayRequest](data)
		if err != nil {
			return "", err
		}
		args = append(args, TextTok(r.Op), BytesTok(r.Request))
	case "run.self_journal":
		r, err := decode[abi.JournalRequest](data)
		if err != nil {
			return "", err
		}
		args = append(args, TextTok(r.Op), strconv.FormatUint(r.From, 10), strconv.FormatUint(uint64(r.Limit), 10), TextTok(r.Phase))
	case "run.set_output":
		r, err := decode[abi.SetOutputRequest](data)
		if err != nil {
			return "", err
		}
		args = append(args, BytesTok(r.Output))
	case "run.checkpoint":
		r, err := decode[abi.CheckpointRequest](data)
		if err != nil {
			return "", err
		}
		args = append(args, BytesTok(r.State))
	case "run.limit":
		r, err := decode[abi.LimitRequest](data)
		if err != nil {
			return "", err
		}
		args = append(args, strconv.Itoa(len(r.Limits)))
		for _, l := range r.Limits {
			args = append(args, TextTok(l.Dim), strconv.FormatUint(l.Amount, 10))
		}
	case "run.log":
		r, err := decode[abi.LogRequest](data)
		if err != nil {
			return "", err
		}
		args = append(args, strconv.Itoa(int(r.Level)), TextTok(r.Message))
	case "kv.get", "kv.delete":
		r, err := decode[abi.KVGetRequest](data) // same shape as KVDeleteRequest
		if err != nil {
			return "", err
		}
		args = append(args, TextTok(r.Key))
	case "kv.put":
		r, err := decode[abi.KVPutRequest](data)
		if err != nil {
			return "", err
		}
		args = append(args, TextTok(r.Key), BytesTok(r.Value))
	case "kv.list":
		r, err := decode[abi.KVListRequest](data)
		if err != nil {
			return "", err
		}
		args = append(args, TextTok(r.Prefix), TextTok(r.After), strconv.FormatUint(uint64(r.Limit), 10))
	case "http.request":
		r, err := decode[abi.HTTPRequest](data)
		if err != nil {
			return "", err
		}
		args = append(args, TextTok(r.Method), TextTok(r.URL), strconv.Itoa(len(r.Headers)))
		for _, h := range r.Headers {
			args = append(args, TextTok(h.Name), TextTok(h.Value))
		}
		args = append(args, BytesTok(r.Body))
	case "random.bytes":
		r, err := decode[abi.RandomBytesRequest](data)
		if err != nil {
			return "", err
		}
		args = append(args, strconv.FormatUint(uint64(r.N), 10))
	case "tool.run":
		r, err := decode[abi.ToolRunRequest](data)
		if err != nil {
			return "", err
		}
		args = append(args, TextTok(r.Name), strconv.Itoa(len(r.Args)))
		for _, a := range r.Args {
			args = append(args, TextTok(a))
		}
		args = append(args, BytesTok(r.Stdin))
	case "timer.sleep":
		// The SDKs send exactly one of for (agentrt_sleep, sleep) and
		// until (agentrt_sleep_until, sleep_until), and only above 0:
		// the command names the field.
		r, err := decode[abi.TimerSleepRequest](data)
		if err != nil {
			return "", err
		}
		switch {
		case r.For > 0 && r.Until == 0:
			args = append(args, TextTok("for"), strconv.FormatInt(r.For, 10))
		case r.Until > 0 && r.For == 0:
			args = append(args, TextTok("until"), strconv.FormatInt(r.Until, 10))
		default:
			return "", fmt.Errorf("an SDK sends exactly one of for and until, above 0; this request has for %d, until %d", r.For, r.Until)
		}
	case "approval.request":
		r, err := decode[abi.ApprovalRequest](data)
		if err != nil {
			return "", err
		}
		args = append(args, TextTok(r.Action), TextTok(r.Group))
	default:
		return "", fmt.Errorf("no command for op %q", op)
	}
	return strings.Join(args, " "), nil
}

// ProbeLine returns a command that calls op with arguments that do not
// matter: the stub answers with a scripted response whatever they are.
// random.bytes asks for n bytes, n being the response's length, since an
// SDK refuses any other.
func ProbeLine(op string, n int) string {
	switch op {
	case "run.set_output", "run.checkpoint":
		return op + " -"
	case "run.log":
		return op + " 1 x"
	case "run.limit":
		return op + " 0"
	case "kv.get", "kv.delete":
		return op + " " + TextTok("k")
	case "kv.put":
		return op + " " + TextTok("k") + " -"
	case "kv.list":
		return op + " x x 0"
	case "http.request":
		return op + " " + TextTok("GET") + " " + TextTok("http://example.com/") + " 0 -"
	case "random.bytes":
		return op + " " + strconv.Itoa(n)
	case "tool.run":
		return op + " " + TextTok("t") + " 0 -"
	case "timer.sleep":
		return op + " " + TextTok("for") + " 1"
	case "approval.request":
		return op + " " + TextTok("a") + " " + TextTok("g")
	case "run.self_may":
		return op + " " + TextTok("kv.get") + " -"
	case "run.self_journal":
		return op + " x 0 0 x"
	}
	return op
}

// Render returns the line a driver prints for a successful call of op
// answered with data, from the Go codec's reading of data, or the Go
// codec's error.
func Render(op string, data []byte) (string, error) {
	out := []string{"ok"}
	switch op {
	case "run.set_output", "run.log", "kv.put":
		if _, err := decode[abi.Empty](data); err != nil {
			return "", err
		}
	case "run.input":
		r, err := decode[abi.InputResponse](data)
		if err != nil {
			return "", err
		}
		out = append(out, viewTok(r.Input), viewTok(r.State), strconv.FormatUint(uint64(r.Segment), 10))
	case "run.checkpoint":
		if _, err := decode[abi.CheckpointResponse](data); err != nil {
			return "", err
		}
	case "run.limit":
		r, err := decode[abi.LimitResponse](data)
		if err != nil {
			return "", err
		}
		out = append(out, strconv.Itoa(len(r.Ceilings)))
		for _, c := range r.Ceilings {
			out = append(out, TextTok(c.Dim), strconv.FormatUint(c.Amount, 10))
		}
	case "run.self":
		r, err := decode[abi.SelfResponse](data)
		if err != nil {
			return "", err
		}
		out = append(out, strconv.FormatUint(uint64(r.ABI), 10), TextTok(r.Cell), TextTok(r.Task), strconv.FormatUint(uint64(r.Depth), 10),
			TextTok(r.Parent), TextTok(r.RunID), strconv.FormatUint(r.Attempt, 10), strconv.FormatUint(r.ParentStep, 10), viewTok(r.ModuleSHA256))
	case "run.self_caps":
		r, err := decode[abi.SelfCapsResponse](data)
		if err != nil {
			return "", err
		}
		out = append(out, TextTok(r.Caps), TextTok(r.Budget), strconv.Itoa(len(r.Capabilities)))
		for _, c := range r.Capabilities {
			out = append(out, TextTok(c))
		}
	case "run.self_may":
		r, err := decode[abi.MayResponse](data)
		if err != nil {
			return "", err
		}
		out = append(out, TextTok(r.Stage), TextTok(r.Reason), strconv.FormatUint(uint64(r.Status), 10), TextTok(r.Decision))
	case "run.self_budget":
		r, err := decode[abi.SelfBudgetResponse](data)
		if err != nil {
			return "", err
		}
		out = append(out, strconv.Itoa(len(r.Dims)))
		for _, d := range r.Dims {
			out = append(out, TextTok(d.Dim), strconv.FormatUint(d.Left, 10), strconv.FormatUint(d.Spent, 10), strconv.FormatUint(d.Ceiling, 10),
				strconv.FormatBool(d.Limited), strconv.FormatUint(d.Children, 10), strconv.FormatUint(d.Reserved, 10))
		}
	case "run.self_mode":
		r, err := decode[abi.SelfModeResponse](data)
		if err != nil {
			return "", err
		}
		out = append(out, TextTok(r.Mode), strconv.FormatBool(r.Modes), strconv.Itoa(len(r.Rules)))
		for _, m := range r.Rules {
			out = append(out, TextTok(m.Op), TextTok(m.Name), TextTok(m.Effect), TextTok(m.Method), TextTok(m.Resource))
		}
		out = append(out, TextTok(r.Default))
	case "run.self_journal":
		r, err := decode[abi.JournalResponse](data)
		if err != nil {
			return "", err
		}
		out = append(out, strconv.FormatUint(r.Next, 10), strconv.Itoa(len(r.Entries)))
		for _, e := range r.Entries {
			out = append(out, TextTok(e.Op), strconv.FormatUint(e.Seq, 10), viewTok(e.Hash), strconv.FormatUint(e.Step, 10), TextTok(e.Phase),
				viewTok(e.Input), viewTok(e.Output), strconv.FormatUint(uint64(e.Status), 10))
		}
	case "run.introspect":
		r, err := decode[abi.IntrospectResponse](data)
		if err != nil {
			return "", err
		}
		out = append(out, strconv.FormatUint(uint64(r.ABI), 10), strconv.FormatUint(r.Steps, 10), TextTok(r.RunID), strconv.Itoa(len(r.Capabilities)))
		for _, c := range r.Capabilities {
			out = append(out, TextTok(c))
		}
		out = append(out, viewTok(r.ModuleSHA256))
	case "kv.get":
		r, err := decode[abi.KVGetResponse](data)
		if err != nil {
			return "", err
		}
		out = append(out, viewTok(r.Value))
	case "kv.delete":
		r, err := decode[abi.KVDeleteResponse](data)
		if err != nil {
			return "", err
		}
		out = append(out, strconv.FormatBool(r.Existed))
	case "kv.list":
		r, err := decode[abi.KVListResponse](data)
		if err != nil {
			return "", err
		}
		out = append(out, strconv.Itoa(len(r.Keys)))
		for _, k := range r.Keys {
			out = append(out, TextTok(k))
		}
		out = append(out, strconv.FormatBool(r.More))
	case "http.request":
		r, err := decode[abi.HTTPResponse](data)
		if err != nil {
			return "", err
		}
		out = append(out, strconv.Itoa(int(r.Status)), strconv.Itoa(len(r.Headers)))
		for _, h := range r.Headers {
			out = append(out, TextTok(h.Name), TextTok(h.Value))
		}
		out = append(out, viewTok(r.Body), strconv.FormatBool(r.Truncated))
	case "clock.now":
		r, err := decode[abi.ClockNowResponse](data)
		if err != nil {
			return "", err
		}
		out = append(out, strconv.FormatInt(r.UnixNano, 10))
	case "random.bytes":
		r, err := decode[abi.RandomBytesResponse](data)
		if err != nil {
			return "", err
		}
		out = append(out, viewTok(r.Bytes))
	case "tool.run":
		r, err := decode[abi.ToolRunResponse](data)
		if err != nil {
			return "", err
		}
		out = append(out, strconv.FormatInt(r.Exit, 10), TextTok(r.Signal), viewTok(r.Stdout), viewTok(r.Stderr),
			strconv.FormatBool(r.StdoutTruncated), strconv.FormatBool(r.StderrTruncated), strconv.FormatBool(r.TimedOut),
			strconv.Itoa(len(r.Limits)))
		for _, l := range r.Limits {
			out = append(out, TextTok(l))
		}
		out = append(out, strconv.Itoa(len(r.Files)))
		for _, f := range r.Files {
			out = append(out, TextTok(f.Path), strconv.FormatBool(!utf8.ValidString(f.Path)), strconv.FormatUint(f.Size, 10), viewTok(f.SHA256), TextTok(f.Unhashed))
		}
	case "timer.sleep":
		r, err := decode[abi.TimerSleepResponse](data)
		if err != nil {
			return "", err
		}
		out = append(out, strconv.FormatInt(r.Due, 10), strconv.FormatInt(r.Woke, 10))
	case "approval.request":
		r, err := decode[abi.ApprovalResponse](data)
		if err != nil {
			return "", err
		}
		out = append(out, strconv.FormatBool(r.Approved), viewTok(r.Digest), TextTok(r.Reason), strconv.Itoa(len(r.Approvers)))
		for _, a := range r.Approvers {
			out = append(out, TextTok(a))
		}
	default:
		return "", fmt.Errorf("no rendering for op %q", op)
	}
	return strings.Join(out, " "), nil
}

// StatusLine is the line of a call that failed with code and msg.
func StatusLine(code abi.Status, msg string) string {
	return fmt.Sprintf("status %d %s", code, TextTok(msg))
}

// emptyRequest reports whether op's request has no fields.
func emptyRequest(op string) bool {
	switch op {
	case "run.input", "run.introspect", "clock.now", "run.self", "run.self_caps", "run.self_budget", "run.self_mode":
		return true
	}
	return false
}

// NotInCAndRust reports the capabilities whose vectors the C and Rust
// drivers do not run yet: agent (sub-agents, issue 15) and mcp (issue
// 16). The Go SDK shares the host's codec; the C header has
// agentrt_spawn, agentrt_await and agentrt_cancel (tested against a cell
// in host/cell); Rust has none of agent's; mcp has Go SDK functions only.
func NotInCAndRust(c abi.Capability) bool { return c == abi.CapAgent || c == abi.CapMCP }

// Covers says which op families beyond every SDK's an SDK's driver runs
// the vectors of.
type Covers struct {
	// Self: the run.self family (abi/SPEC.md §9.15). The Rust driver runs
	// them; the C header's functions for them are tested by a C guest
	// against a host (host/self_test.go), and the Go SDK shares the
	// host's codec.
	Self bool
}

// skips reports whether the vectors of op are not for an SDK that
// covers c: those of NotInCAndRust, and of the families it does not
// cover.
func (c Covers) skips(op string) bool {
	return NotInCAndRust(abi.Capability(strings.SplitN(op, ".", 2)[0])) || (!c.Self && strings.HasPrefix(op, "run.self"))
}

// VectorSteps returns the steps that test an SDK that covers c against the
// vectors in dir, checking that every op's encoder and decoder meets at
// least one.
func VectorSteps(dir string, c Covers) ([]Step, error) {
	vs, err := abivectors.Read(dir)
	if err != nil {
		return nil, err
	}
	var steps []Step
	applied := map[string]bool{}
	for _, v := range vs {
		if c.skips(v.Op) {
			continue // see NotInCAndRust, Covers
		}
		ss, err := stepsFor(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", v.File, err)
		}
		if len(ss) > 0 {
			applied[v.Op+" "+v.Kind+" "+v.Expect] = true
		}
		steps = append(steps, ss...)
	}
	// Every op's request encoder and response decoder must have met at
	// least one vector, or a deleted vector would go unnoticed.
	var missing []string
	for _, op := range abi.Ops {
		if op.Cap == abi.CapLLM || c.skips(op.Name) {
			// Its vectors are in abi/testdata/llm, which the Go SDK shares
			// with the host (guest-sdk/abi is generated from abi); the C
			// and Rust SDKs do not have the llm types.
			continue
		}
		for _, k := range []string{"request valid", "response valid"} {
			if !applied[op.Name+" "+k] {
				missing = append(missing, op.Name+" "+k)
			}
		}
	}
	keys := slices.Collect(maps.Keys(applied))
	for _, k := range []string{"response invalid", "error valid", "error invalid"} {
		if !slices.ContainsFunc(keys, func(key string) bool { return strings.HasSuffix(key, " "+k) }) {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("no vector applies to an SDK for: %s", strings.Join(missing, ", "))
	}
	return steps, nil
}

// stepsFor returns the steps that test an SDK against v (none for the
// vectors that do not apply to one).
func stepsFor(v *abivectors.Vector) ([]Step, error) {
	if strings.HasPrefix(v.Op, "mcp.") {
		// The C and Rust SDKs have no mcp functions yet; the Go SDK's
		// codec meets these vectors in internal/guestabi.
		return nil, nil
	}
	s := Step{Name: v.File, Op: v.Op}
	switch {
	case v.Kind == "request" && v.Expect == "valid":
		// An SDK sends the empty body for ops without request fields and
		// the canonical encoding for every other: vectors in the other
		// form test decoders only.
		// run.limit is both: no limits is the empty body.
		if v.Op != "run.limit" && emptyRequest(v.Op) != (len(v.Data) == 0) {
			return nil, nil
		}
		line, err := RequestLine(v.Op, v.Data)
		if err != nil {
			return nil, err
		}
		s.Line, s.WantReq = line, v.Data
		// The empty body is every response's zero value; random.bytes
		// must get the bytes it asked for.
		if v.Op == "random.bytes" {
			r, _ := decode[abi.RandomBytesRequest](v.Data)
			s.Reply.Body, err = abi.Marshal(&abi.RandomBytesResponse{Bytes: make([]byte, r.N)})
			if err != nil {
				return nil, err
			}
		}
		if s.Want, err = Render(v.Op, s.Reply.Body); err != nil {
			return nil, err
		}
	case v.Kind == "request":
		return nil, nil
	case v.Kind == "response" && v.Expect == "valid":
		s.Line = ProbeLine(v.Op, randomLen(v.Op, v.Data))
		s.Reply.Body = v.Data
		var err error
		if s.Want, err = Render(v.Op, v.Data); err != nil {
			return nil, err
		}
	case v.Kind == "response":
		s.Line = ProbeLine(v.Op, 0)
		s.Reply.Body = v.Data
		s.Want, s.Prefix = fmt.Sprintf("status %d ", SDKMalformed), true
	case v.Kind == "error" && v.Expect == "valid":
		e, err := decode[abi.Error](v.Data)
		if err != nil {
			return nil, err
		}
		s.Line = ProbeLine(v.Op, 0)
		s.Reply = Reply{Status: e.Code, Body: v.Data}
		s.Want = StatusLine(e.Code, e.Message)
	case v.Kind == "error":
		// A broken error body keeps the call's status and says so, as
		// the Go SDK does.
		s.Line = ProbeLine(v.Op, 0)
		s.Reply = Reply{Status: abi.StatusFailed, Body: v.Data}
		s.Want = StatusLine(abi.StatusFailed, "malformed error body")
	default:
		return nil, fmt.Errorf("unknown kind %q", v.Kind)
	}
	return []Step{s}, nil
}

// randomLen is the number of bytes a random.bytes response holds, the n
// its probe must ask for; 0 for other ops and bodies that do not decode.
func randomLen(op string, data []byte) int {
	if r, err := decode[abi.RandomBytesResponse](data); op == "random.bytes" && err == nil {
		return len(r.Bytes)
	}
	return 0
}

// HostileSteps answers SDK calls with damaged copies of the valid
// response and error vectors in dir: every prefix of each body, and each
// body with every byte changed in each of a few ways (low bit, a major
// type bit, the top bit, all bits). The SDK must read exactly what the Go
// codec reads from the same bytes, or refuse what it refuses:
// SDKMalformed for a response, "malformed error body" with the call's
// status for an Error body; a random.bytes answer of another length than
// asked for is refused too. refuses(op, value) says whether the SDK
// refuses, beyond that, a response the codec accepts, value being the
// codec's decoding.
func HostileSteps(dir string, c Covers, refuses func(op string, value any) bool) ([]Step, error) {
	vs, err := abivectors.Read(dir)
	if err != nil {
		return nil, err
	}
	var steps []Step
	for _, v := range vs {
		if v.Expect != "valid" || (v.Kind != "response" && v.Kind != "error") || c.skips(v.Op) {
			continue
		}
		var bodies [][]byte
		for n := range v.Data {
			bodies = append(bodies, v.Data[:n])
		}
		for i := range v.Data {
			for _, x := range []byte{0x01, 0x20, 0x80, 0xff} {
				b := bytes.Clone(v.Data)
				b[i] ^= x
				bodies = append(bodies, b)
			}
		}
		for i, b := range bodies {
			s := Step{Name: fmt.Sprintf("%s damaged %d (%x)", v.File, i, b), Op: v.Op, Reply: Reply{Body: b}}
			if v.Kind == "error" {
				e, _ := decode[abi.Error](v.Data)
				s.Line = ProbeLine(v.Op, 0)
				s.Reply.Status = e.Code
				if got, err := decode[abi.Error](b); err == nil && got.Code == e.Code && len(b) > 0 {
					s.Want = StatusLine(e.Code, got.Message)
				} else {
					s.Want = StatusLine(e.Code, "malformed error body")
				}
				steps = append(steps, s)
				continue
			}
			// The probe asks random.bytes for as many bytes as the
			// undamaged vector holds, and an answer of another length
			// breaks the op's contract (exactly n bytes).
			n := randomLen(v.Op, v.Data)
			s.Line = ProbeLine(v.Op, n)
			want, err := Render(v.Op, b)
			if err == nil && v.Op == "random.bytes" && randomLen(v.Op, b) != n {
				err = errors.New("not the bytes asked for")
			}
			if err == nil && refuses != nil {
				value, _ := decodeOp(v.Op, b)
				if refuses(v.Op, value) {
					err = errors.New("refused by the SDK")
				}
			}
			if err != nil {
				s.Want, s.Prefix = fmt.Sprintf("status %d ", SDKMalformed), true
			} else {
				s.Want = want
			}
			steps = append(steps, s)
		}
	}
	return steps, nil
}

// decodeOp decodes the response of op with the Go codec.
func decodeOp(op string, data []byte) (any, error) {
	switch op {
	case "run.input":
		return decode[abi.InputResponse](data)
	case "run.checkpoint":
		return decode[abi.CheckpointResponse](data)
	case "run.introspect":
		return decode[abi.IntrospectResponse](data)
	case "kv.get":
		return decode[abi.KVGetResponse](data)
	case "kv.delete":
		return decode[abi.KVDeleteResponse](data)
	case "kv.list":
		return decode[abi.KVListResponse](data)
	case "http.request":
		return decode[abi.HTTPResponse](data)
	case "clock.now":
		return decode[abi.ClockNowResponse](data)
	case "random.bytes":
		return decode[abi.RandomBytesResponse](data)
	case "tool.run":
		return decode[abi.ToolRunResponse](data)
	case "timer.sleep":
		return decode[abi.TimerSleepResponse](data)
	case "approval.request":
		return decode[abi.ApprovalResponse](data)
	case "run.self":
		return decode[abi.SelfResponse](data)
	case "run.self_caps":
		return decode[abi.SelfCapsResponse](data)
	case "run.self_may":
		return decode[abi.MayResponse](data)
	case "run.self_budget":
		return decode[abi.SelfBudgetResponse](data)
	case "run.self_mode":
		return decode[abi.SelfModeResponse](data)
	case "run.self_journal":
		return decode[abi.JournalResponse](data)
	}
	return decode[abi.Empty](data)
}

// TransportSteps test what no vector can: an SDK's handling of statuses
// and of pending responses.
func TransportSteps() ([]Step, error) {
	var errs []error
	mustMarshal := func(v any) []byte {
		b, err := abi.Marshal(v)
		errs = append(errs, err)
		return b
	}
	big := mustMarshal(&abi.KVGetResponse{Value: bytes.Repeat([]byte("v"), 3*ResponseBuffer)})
	steps := []Step{
		{Name: "error body with another code", Line: ProbeLine("kv.get", 0), Op: "kv.get",
			Reply: Reply{Status: abi.StatusNotFound, Body: mustMarshal(&abi.Error{Code: abi.StatusDenied, Message: "x"})},
			Want:  StatusLine(abi.StatusNotFound, "malformed error body")},
		{Name: "take answered no_pending", Line: ProbeLine("kv.get", 0), Op: "kv.get",
			Reply: Reply{Status: abi.StatusOK, Body: big, TakeStatus: abi.StatusNoPending},
			Want:  StatusLine(abi.StatusNoPending, "take of a pending response failed")},
		{Name: "error status without a body", Line: ProbeLine("kv.put", 0), Op: "kv.put",
			Reply: Reply{Status: abi.StatusInternal},
			Want:  StatusLine(abi.StatusInternal, "malformed error body")},
		{Name: "success after a failure clears the message", Line: ProbeLine("kv.get", 0), Op: "kv.get",
			Reply: Reply{Status: abi.StatusOK, Body: big},
			Want:  "ok " + viewTok(bytes.Repeat([]byte("v"), 3*ResponseBuffer))},
		{Name: "an error body that is pending", Line: ProbeLine("kv.get", 0), Op: "kv.get",
			Reply: Reply{Status: abi.StatusDenied, Body: mustMarshal(&abi.Error{Code: abi.StatusDenied, Message: strings.Repeat("m", 2*ResponseBuffer)})},
			Want:  StatusLine(abi.StatusDenied, strings.Repeat("m", 2*ResponseBuffer))},
	}
	return steps, errors.Join(errs...)
}

// ZeroFieldSteps answer calls with canonically encoded maps that break
// §6.1 rule 5 by their fields, not their bytes: an omitempty field present
// with its zero value, or a field that is not omitempty left out. The
// vectors rarely hold these, and damage seldom makes them; an SDK that
// reads each field by itself must still refuse them as the Go codec does
// (each step checks that it does).
func ZeroFieldSteps() ([]Step, error) {
	digest := bytes.Repeat([]byte{0x9f}, 32)
	cases := []struct {
		name, op string
		body     map[string]any
	}{
		{"an approval with an empty reason", "approval.request", map[string]any{"digest": digest, "reason": ""}},
		{"an approval with approved false", "approval.request", map[string]any{"digest": digest, "approved": false}},
		{"an approval with no approvers listed", "approval.request", map[string]any{"digest": digest, "approved": true, "approvers": []string{}}},
		{"an approval with approvers null", "approval.request", map[string]any{"digest": digest, "approved": true, "approvers": nil}},
		{"an approval without its digest", "approval.request", map[string]any{"approved": true, "approvers": []string{"alice"}}},
		{"a wake without woke", "timer.sleep", map[string]any{"due": 1}},
		{"a wake without due", "timer.sleep", map[string]any{"woke": 1}},
		{"a tool result with an empty signal", "tool.run", map[string]any{"exit": 0, "signal": "", "stderr": nil, "stdout": nil}},
		{"a tool result with no limits listed", "tool.run", map[string]any{"exit": 0, "limits": []string{}, "stderr": nil, "stdout": nil}},
	}
	var steps []Step
	for _, c := range cases {
		b, err := abi.Marshal(c.body)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		if _, err := Render(c.op, b); err == nil {
			return nil, fmt.Errorf("%s: the Go codec accepts %x", c.name, b)
		}
		steps = append(steps, Step{Name: c.name, Line: ProbeLine(c.op, 0), Op: c.op, Reply: Reply{Body: b},
			Want: StatusLine(SDKMalformed, "malformed "+c.op+" response")})
	}
	return steps, nil
}

// StatusTable returns the line a driver's "statuses" command must print:
// every status abi/status.go names, with its name.
func StatusTable() string {
	var parts []string
	for i := range 64 {
		s := abi.Status(i)
		if name := s.String(); name != fmt.Sprintf("status(%d)", i) {
			parts = append(parts, fmt.Sprintf("%d:%s", i, name))
		}
	}
	return strings.Join(parts, " ")
}

// stub is a host for every agentrt:* module that answers calls from a
// script.
type stub struct {
	replies []Reply
	calls   []captured
	pending map[abi.Capability]Reply
	// direct and taken count non-empty responses delivered by call and by
	// take, to show that both paths ran.
	direct, taken int
	errs          []string
}

type captured struct {
	module string
	op     uint32
	req    []byte
}

func (s *stub) call(mem api.Memory, c abi.Capability, op, reqPtr, reqLen, respPtr, respCap uint32) abi.Result {
	req, ok := mem.Read(reqPtr, reqLen)
	if !ok {
		s.errs = append(s.errs, fmt.Sprintf("call %d: request outside memory", len(s.calls)))
		return abi.Pack(abi.StatusInternal, 0)
	}
	if reqLen == 0 && reqPtr != 0 {
		s.errs = append(s.errs, fmt.Sprintf("call %d: an empty request at pointer %d, want 0", len(s.calls), reqPtr))
	}
	s.calls = append(s.calls, captured{c.Module(), op, bytes.Clone(req)})
	if len(s.replies) == 0 {
		s.errs = append(s.errs, fmt.Sprintf("call %d (%s op %d) has no scripted reply", len(s.calls), c, op))
		return abi.Pack(abi.StatusInternal, 0)
	}
	r := s.replies[0]
	s.replies = s.replies[1:]
	delete(s.pending, c) // a call drops what the module left pending
	if r.Overlong {
		return abi.Pack(r.Status, respCap+1)
	}
	if uint32(len(r.Body)) > respCap {
		s.pending[c] = r
		return abi.Pack(abi.StatusPending, uint32(len(r.Body)))
	}
	if !mem.Write(respPtr, r.Body) {
		s.errs = append(s.errs, fmt.Sprintf("call %d: response buffer outside memory", len(s.calls)))
	}
	if len(r.Body) > 0 {
		s.direct++
	}
	return abi.Pack(r.Status, uint32(len(r.Body)))
}

func (s *stub) take(mem api.Memory, c abi.Capability, ptr, capacity uint32) abi.Result {
	r, ok := s.pending[c]
	if !ok {
		return abi.Pack(abi.StatusNoPending, 0)
	}
	if r.TakeStatus != 0 {
		delete(s.pending, c)
		return abi.Pack(r.TakeStatus, 0)
	}
	if uint32(len(r.Body)) > capacity {
		return abi.Pack(abi.StatusBufferTooSmall, uint32(len(r.Body)))
	}
	delete(s.pending, c)
	if !mem.Write(ptr, r.Body) {
		s.errs = append(s.errs, "take: buffer outside memory")
	}
	s.taken++
	return abi.Pack(r.Status, uint32(len(r.Body)))
}

func (s *stub) instantiate(ctx context.Context, rt wazero.Runtime) error {
	i32, i64 := api.ValueTypeI32, api.ValueTypeI64
	for _, c := range abi.Capabilities {
		_, err := rt.NewHostModuleBuilder(c.Module()).
			NewFunctionBuilder().
			WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, m api.Module, st []uint64) {
				st[0] = uint64(s.call(m.Memory(), c, api.DecodeU32(st[0]), api.DecodeU32(st[1]), api.DecodeU32(st[2]), api.DecodeU32(st[3]), api.DecodeU32(st[4])))
			}), []api.ValueType{i32, i32, i32, i32, i32}, []api.ValueType{i64}).
			Export(abi.FuncCall).
			NewFunctionBuilder().
			WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, m api.Module, st []uint64) {
				st[0] = uint64(s.take(m.Memory(), c, api.DecodeU32(st[0]), api.DecodeU32(st[1])))
			}), []api.ValueType{i32, i32}, []api.ValueType{i64}).
			Export(abi.FuncTake).
			Instantiate(ctx)
		if err != nil {
			return err
		}
	}
	return nil
}

// Run runs the driver wasm (with args after its name) on the steps, after
// a "statuses" command, and reports every step whose call or line is not
// what it must be. It also requires that responses were delivered both
// directly and through take, unless no step has a response larger than
// ResponseBuffer.
func Run(t testing.TB, wasm []byte, args []string, steps []Step) {
	t.Helper()
	var script strings.Builder
	script.WriteString("statuses\n")
	s := &stub{pending: map[abi.Capability]Reply{}}
	for _, st := range steps {
		script.WriteString(st.Line + "\n")
		s.replies = append(s.replies, st.Reply)
	}
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	if err := s.instantiate(ctx, rt); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cfg := wazero.NewModuleConfig().WithStdin(strings.NewReader(script.String())).WithStdout(&stdout).WithStderr(&stderr).
		WithArgs(append([]string{"vectors"}, args...)...)
	_, err := rt.InstantiateWithConfig(ctx, wasm, cfg)
	var exit *sys.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 0) {
		// A trap here is a panic of the SDK (or an overflow, when the
		// driver is built with overflow checks): name the step it hit.
		at := "after the last step"
		if n := len(s.calls); n > 0 && n <= len(steps) {
			at = fmt.Sprintf("at step %d (%s: %s)", n, steps[n-1].Name, steps[n-1].Line)
		}
		t.Fatalf("the driver failed %s: %v\nstderr: %s", at, err, stderr.String())
	}
	out := stdout.String()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	for _, e := range s.errs {
		t.Error(e)
	}
	if len(lines) != len(steps)+1 || len(s.calls) != len(steps) {
		t.Fatalf("the driver printed %d lines and made %d calls for %d steps; output:\n%s", len(lines), len(s.calls), len(steps), out)
	}
	if want := StatusTable(); lines[0] != want {
		t.Errorf("status name table:\n got %s\nwant %s", lines[0], want)
	}
	big := false
	for i, st := range steps {
		got, call := lines[i+1], s.calls[i]
		op, ok := abi.LookupOpName(st.Op)
		if !ok {
			t.Fatalf("%s: unknown op %q", st.Name, st.Op)
		}
		if call.module != op.Cap.Module() || call.op != op.Code {
			t.Errorf("%s: the call reached %s op %d, want %s op %d", st.Name, call.module, call.op, op.Cap.Module(), op.Code)
		}
		if st.WantReq != nil && !bytes.Equal(call.req, st.WantReq) {
			t.Errorf("%s: the SDK sent\n%x, want\n%x", st.Name, call.req, st.WantReq)
		}
		if st.Prefix && !strings.HasPrefix(got, st.Want) || !st.Prefix && got != st.Want {
			t.Errorf("%s: the SDK returned\n%s\nwant\n%s", st.Name, got, st.Want)
		}
		big = big || len(st.Reply.Body) > ResponseBuffer
	}
	if big && (s.direct == 0 || s.taken == 0) {
		t.Errorf("responses delivered directly: %d, through take: %d; want both paths exercised", s.direct, s.taken)
	}
}
