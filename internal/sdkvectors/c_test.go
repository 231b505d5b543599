// The C SDK, guest-sdk/c/agentrt.h, against the ABI's test vectors
// (abi/testdata/vectors): the same files the Go codecs are tested against.
//
// testdata/vectors.c is built with clang and run under wazero with a stub
// host for every agentrt:* module. For each vector the test sends the C
// program one command; the C program makes the SDK call it names, and the
// stub checks the request bytes the call sends and answers with the
// vector's bytes; the C program prints what the SDK decoded, and the test
// compares that with what the Go codec decodes from the same bytes.
//
//   - Valid request vectors in the form SDKs send (the empty body for ops
//     without request fields, the canonical encoding otherwise): the C
//     encoder must produce exactly the vector's bytes.
//   - Valid response and error vectors: the C decoder must read the same
//     value as the Go decoder.
//   - Invalid response and error vectors: the C decoder must refuse them.
//
// Invalid request vectors test hosts, which decode requests; the SDK only
// writes them.

package sdkvectors

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/internal/abivectors"
	"github.com/agentrt/agentrt/internal/wasmbuild"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"
)

// responseHint is the C SDK's response buffer in the test build: small, so
// that the vectors exercise both the direct path and pending/take.
const responseHint = 32

// Status codes of the SDK's own (agentrt.h), not of the ABI.
const sdkMalformed = 0x10001

func build(t *testing.T, out string, files []string, flags ...string) []byte {
	t.Helper()
	if err := wasmbuild.CFiles(context.Background(), out, files, flags...); err != nil {
		// Never a skip: a missing toolchain must not pass as a green run.
		var te *wasmbuild.ToolchainError
		if errors.As(err, &te) {
			t.Fatalf("building the C test program: %v\nhint: %s", err, te.Hint)
		}
		t.Fatalf("building the C test program: %v", err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// strict are the warnings the header must build clean under.
var strict = []string{"-Wextra", "-Wpedantic", "-Werror"}

// vector is one file of abi/testdata/vectors.
type vector = abivectors.Vector

func readVectors(t *testing.T) []*vector {
	t.Helper()
	vs, err := abivectors.Read(filepath.Join("..", "..", "abi", "testdata", "vectors"))
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

// reply is what the stub host answers to one call.
type reply struct {
	status abi.Status
	body   []byte
	// takeStatus, when set, is what take answers instead of the body.
	takeStatus abi.Status
}

// step is one command to the C program and what must come of it.
type step struct {
	name string // the vector file, or a name for a transport case
	line string
	// op is the op the call must reach; wantReq, when not nil, the exact
	// request bytes.
	op      string
	wantReq []byte
	reply   reply
	// want is the line the C program must print; with prefix, its start.
	want   string
	prefix bool
}

// Tokens of the command and output lines (see testdata/vectors.c).
func textTok(s string) string { return "x" + hex.EncodeToString([]byte(s)) }

func bytesTok(b []byte) string {
	if b == nil {
		return "-"
	}
	return "x" + hex.EncodeToString(b)
}

// viewTok renders bytes the SDK returns: views are never NULL, so null and
// the empty byte string read the same.
func viewTok(b []byte) string { return "x" + hex.EncodeToString(b) }

func decode[T any](data []byte) (*T, error) {
	v := new(T)
	return v, abi.Unmarshal(data, v)
}

// requestLine returns the command that makes the C SDK send the request
// encoded in data.
func requestLine(op string, data []byte) (string, error) {
	args := []string{op}
	switch op {
	case "run.input", "run.introspect", "clock.now":
	case "run.set_output":
		r, err := decode[abi.SetOutputRequest](data)
		if err != nil {
			return "", err
		}
		args = append(args, bytesTok(r.Output))
	case "run.checkpoint":
		r, err := decode[abi.CheckpointRequest](data)
		if err != nil {
			return "", err
		}
		args = append(args, bytesTok(r.State))
	case "run.log":
		r, err := decode[abi.LogRequest](data)
		if err != nil {
			return "", err
		}
		args = append(args, strconv.Itoa(int(r.Level)), textTok(r.Message))
	case "kv.get", "kv.delete":
		r, err := decode[abi.KVGetRequest](data) // same shape as KVDeleteRequest
		if err != nil {
			return "", err
		}
		args = append(args, textTok(r.Key))
	case "kv.put":
		r, err := decode[abi.KVPutRequest](data)
		if err != nil {
			return "", err
		}
		args = append(args, textTok(r.Key), bytesTok(r.Value))
	case "kv.list":
		r, err := decode[abi.KVListRequest](data)
		if err != nil {
			return "", err
		}
		args = append(args, textTok(r.Prefix), textTok(r.After), strconv.FormatUint(uint64(r.Limit), 10))
	case "http.request":
		r, err := decode[abi.HTTPRequest](data)
		if err != nil {
			return "", err
		}
		args = append(args, textTok(r.Method), textTok(r.URL), strconv.Itoa(len(r.Headers)))
		for _, h := range r.Headers {
			args = append(args, textTok(h.Name), textTok(h.Value))
		}
		args = append(args, bytesTok(r.Body))
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
		args = append(args, textTok(r.Name), strconv.Itoa(len(r.Args)))
		for _, a := range r.Args {
			args = append(args, textTok(a))
		}
		args = append(args, bytesTok(r.Stdin))
	default:
		return "", fmt.Errorf("no command for op %q", op)
	}
	return strings.Join(args, " "), nil
}

// probeLine returns a command that calls op with arguments that do not
// matter: the stub answers with a response vector whatever they are.
// random.bytes asks for n bytes, n being the response's length, since the
// SDK refuses any other.
func probeLine(op string, n int) string {
	switch op {
	case "run.set_output", "run.checkpoint":
		return op + " -"
	case "run.log":
		return op + " 1 x"
	case "kv.get", "kv.delete":
		return op + " " + textTok("k")
	case "kv.put":
		return op + " " + textTok("k") + " -"
	case "kv.list":
		return op + " x x 0"
	case "http.request":
		return op + " " + textTok("GET") + " " + textTok("http://example.com/") + " 0 -"
	case "random.bytes":
		return op + " " + strconv.Itoa(n)
	case "tool.run":
		return op + " " + textTok("t") + " 0 -"
	}
	return op
}

// render returns the line the C program prints for a successful call of op
// answered with data, from the Go codec's reading of data.
func render(op string, data []byte) (string, error) {
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
	case "run.introspect":
		r, err := decode[abi.IntrospectResponse](data)
		if err != nil {
			return "", err
		}
		out = append(out, strconv.FormatUint(uint64(r.ABI), 10), strconv.FormatUint(r.Steps, 10), textTok(r.RunID), strconv.Itoa(len(r.Capabilities)))
		for _, c := range r.Capabilities {
			out = append(out, textTok(c))
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
			out = append(out, textTok(k))
		}
		out = append(out, strconv.FormatBool(r.More))
	case "http.request":
		r, err := decode[abi.HTTPResponse](data)
		if err != nil {
			return "", err
		}
		out = append(out, strconv.Itoa(int(r.Status)), strconv.Itoa(len(r.Headers)))
		for _, h := range r.Headers {
			out = append(out, textTok(h.Name), textTok(h.Value))
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
		out = append(out, strconv.FormatInt(r.Exit, 10), textTok(r.Signal), viewTok(r.Stdout), viewTok(r.Stderr),
			strconv.FormatBool(r.StdoutTruncated), strconv.FormatBool(r.StderrTruncated), strconv.FormatBool(r.TimedOut),
			strconv.Itoa(len(r.Limits)))
		for _, l := range r.Limits {
			out = append(out, textTok(l))
		}
		out = append(out, strconv.Itoa(len(r.Files)))
		for _, f := range r.Files {
			out = append(out, textTok(f.Path), strconv.FormatBool(!utf8.ValidString(f.Path)), strconv.FormatUint(f.Size, 10), viewTok(f.SHA256), textTok(f.Unhashed))
		}
	default:
		return "", fmt.Errorf("no rendering for op %q", op)
	}
	return strings.Join(out, " "), nil
}

func statusLine(code abi.Status, msg string) string {
	return fmt.Sprintf("status %d %s", code, textTok(msg))
}

// emptyRequest reports whether op's request has no fields.
func emptyRequest(op string) bool {
	return op == "run.input" || op == "run.introspect" || op == "clock.now"
}

// stepsFor returns the steps that test the C SDK against v (none for the
// vectors that do not apply to it).
func stepsFor(v *vector) ([]step, error) {
	s := step{name: v.File, op: v.Op}
	switch {
	case v.Kind == "request" && v.Expect == "valid":
		// The SDK sends the empty body for ops without request fields and
		// the canonical encoding for every other: vectors in the other
		// form test decoders only.
		if emptyRequest(v.Op) != (len(v.Data) == 0) {
			return nil, nil
		}
		line, err := requestLine(v.Op, v.Data)
		if err != nil {
			return nil, err
		}
		s.line, s.wantReq = line, v.Data
		// The empty body is every response's zero value; random.bytes
		// must get the bytes it asked for.
		if v.Op == "random.bytes" {
			r, _ := decode[abi.RandomBytesRequest](v.Data)
			s.reply.body, err = abi.Marshal(&abi.RandomBytesResponse{Bytes: make([]byte, r.N)})
			if err != nil {
				return nil, err
			}
		}
		if s.want, err = render(v.Op, s.reply.body); err != nil {
			return nil, err
		}
	case v.Kind == "request":
		return nil, nil
	case v.Kind == "response" && v.Expect == "valid":
		n := 0
		if r, err := decode[abi.RandomBytesResponse](v.Data); v.Op == "random.bytes" && err == nil {
			n = len(r.Bytes)
		}
		s.line = probeLine(v.Op, n)
		s.reply.body = v.Data
		var err error
		if s.want, err = render(v.Op, v.Data); err != nil {
			return nil, err
		}
	case v.Kind == "response":
		s.line = probeLine(v.Op, 0)
		s.reply.body = v.Data
		s.want, s.prefix = fmt.Sprintf("status %d ", sdkMalformed), true
	case v.Kind == "error" && v.Expect == "valid":
		e, err := decode[abi.Error](v.Data)
		if err != nil {
			return nil, err
		}
		s.line = probeLine(v.Op, 0)
		s.reply = reply{status: e.Code, body: v.Data}
		s.want = statusLine(e.Code, e.Message)
	case v.Kind == "error":
		// A broken error body keeps the call's status and says so, as
		// the Go SDK does.
		s.line = probeLine(v.Op, 0)
		s.reply = reply{status: abi.StatusFailed, body: v.Data}
		s.want = statusLine(abi.StatusFailed, "malformed error body")
	default:
		return nil, fmt.Errorf("unknown kind %q", v.Kind)
	}
	return []step{s}, nil
}

// transportSteps test what no vector can: the SDK's handling of statuses.
func transportSteps(t *testing.T) []step {
	mustMarshal := func(v any) []byte {
		b, err := abi.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	big := mustMarshal(&abi.KVGetResponse{Value: bytes.Repeat([]byte("v"), 3*responseHint)})
	return []step{
		{name: "error body with another code", line: probeLine("kv.get", 0), op: "kv.get",
			reply: reply{status: abi.StatusNotFound, body: mustMarshal(&abi.Error{Code: abi.StatusDenied, Message: "x"})},
			want:  statusLine(abi.StatusNotFound, "malformed error body")},
		{name: "take answered no_pending", line: probeLine("kv.get", 0), op: "kv.get",
			reply: reply{status: abi.StatusOK, body: big, takeStatus: abi.StatusNoPending},
			want:  statusLine(abi.StatusNoPending, "take of a pending response failed")},
		{name: "error status without a body", line: probeLine("kv.put", 0), op: "kv.put",
			reply: reply{status: abi.StatusInternal},
			want:  statusLine(abi.StatusInternal, "malformed error body")},
		{name: "success after a failure clears the message", line: probeLine("kv.get", 0), op: "kv.get",
			reply: reply{status: abi.StatusOK, body: big},
			want:  "ok " + viewTok(bytes.Repeat([]byte("v"), 3*responseHint))},
	}
}

// stub is a host for every agentrt:* module that answers calls from a
// script, keeping responses that do not fit pending for take exactly as
// host/session.go does.
type stub struct {
	replies []reply
	calls   []captured
	pending map[abi.Capability]reply
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
	s.calls = append(s.calls, captured{c.Module(), op, bytes.Clone(req)})
	if len(s.replies) == 0 {
		s.errs = append(s.errs, fmt.Sprintf("call %d (%s op %d) has no scripted reply", len(s.calls), c, op))
		return abi.Pack(abi.StatusInternal, 0)
	}
	r := s.replies[0]
	s.replies = s.replies[1:]
	if uint32(len(r.body)) > respCap {
		s.pending[c] = r
		return abi.Pack(abi.StatusPending, uint32(len(r.body)))
	}
	if !mem.Write(respPtr, r.body) {
		s.errs = append(s.errs, fmt.Sprintf("call %d: response buffer outside memory", len(s.calls)))
	}
	if len(r.body) > 0 {
		s.direct++
	}
	return abi.Pack(r.status, uint32(len(r.body)))
}

func (s *stub) take(mem api.Memory, c abi.Capability, ptr, capacity uint32) abi.Result {
	r, ok := s.pending[c]
	if !ok {
		return abi.Pack(abi.StatusNoPending, 0)
	}
	if r.takeStatus != 0 {
		delete(s.pending, c)
		return abi.Pack(r.takeStatus, 0)
	}
	if uint32(len(r.body)) > capacity {
		return abi.Pack(abi.StatusBufferTooSmall, uint32(len(r.body)))
	}
	delete(s.pending, c)
	if !mem.Write(ptr, r.body) {
		s.errs = append(s.errs, "take: buffer outside memory")
	}
	s.taken++
	return abi.Pack(r.status, uint32(len(r.body)))
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

// runC runs the C program with script on stdin under wazero and the stub,
// and returns its stdout.
func runC(t *testing.T, wasm, script []byte, s *stub) string {
	t.Helper()
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	if err := s.instantiate(ctx, rt); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cfg := wazero.NewModuleConfig().WithStdin(bytes.NewReader(script)).WithStdout(&stdout).WithStderr(&stderr).WithArgs("vectors")
	_, err := rt.InstantiateWithConfig(ctx, wasm, cfg)
	var exit *sys.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 0) {
		t.Fatalf("the C program failed: %v\nstderr: %s\nstdout so far:\n%s", err, stderr.String(), stdout.String())
	}
	return stdout.String()
}

// abiStatuses returns the line the C program's "statuses" command must
// print: every status abi/status.go names, with its name.
func abiStatuses() string {
	var parts []string
	for i := range 64 {
		s := abi.Status(i)
		if name := s.String(); name != fmt.Sprintf("status(%d)", i) {
			parts = append(parts, fmt.Sprintf("%d:%s", i, name))
		}
	}
	return strings.Join(parts, " ")
}

func TestVectors(t *testing.T) {
	wasm := build(t, filepath.Join(t.TempDir(), "vectors.wasm"), []string{"testdata/vectors.c"},
		append([]string{fmt.Sprintf("-DAGENTRT_RESPONSE_HINT=%d", responseHint)}, strict...)...)

	var steps []step
	applied := map[string]bool{}
	for _, v := range readVectors(t) {
		ss, err := stepsFor(v)
		if err != nil {
			t.Fatalf("%s: %v", v.File, err)
		}
		for _, s := range ss {
			applied[v.Op+" "+v.Kind+" "+v.Expect] = true
			steps = append(steps, s)
		}
	}
	steps = append(steps, transportSteps(t)...)
	// Every op's request encoder and response decoder must have met at
	// least one vector, or a deleted vector would go unnoticed here.
	for _, op := range abi.Ops {
		for _, k := range []string{"request valid", "response valid"} {
			if !applied[op.Name+" "+k] {
				t.Errorf("no %s vector of %s applies to the C SDK", k, op.Name)
			}
		}
	}
	for _, k := range []string{"response invalid", "error valid", "error invalid"} {
		found := false
		for key := range applied {
			found = found || strings.HasSuffix(key, " "+k)
		}
		if !found {
			t.Errorf("no %s vector applies to the C SDK", k)
		}
	}

	var script strings.Builder
	script.WriteString("statuses\n")
	s := &stub{pending: map[abi.Capability]reply{}}
	for _, st := range steps {
		script.WriteString(st.line + "\n")
		s.replies = append(s.replies, st.reply)
	}
	out := runC(t, wasm, []byte(script.String()), s)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")

	for _, e := range s.errs {
		t.Error(e)
	}
	if len(lines) != len(steps)+1 || len(s.calls) != len(steps) {
		t.Fatalf("the C program printed %d lines and made %d calls for %d steps; output:\n%s", len(lines), len(s.calls), len(steps), out)
	}
	if want := abiStatuses(); lines[0] != want {
		t.Errorf("agentrt_status_name table:\n got %s\nwant %s", lines[0], want)
	}
	for i, st := range steps {
		got, call := lines[i+1], s.calls[i]
		op, _ := abi.LookupOpName(st.op)
		if call.module != op.Cap.Module() || call.op != op.Code {
			t.Errorf("%s: the call reached %s op %d, want %s op %d", st.name, call.module, call.op, op.Cap.Module(), op.Code)
		}
		if st.wantReq != nil && !bytes.Equal(call.req, st.wantReq) {
			t.Errorf("%s: the C SDK sent\n%x, want\n%x", st.name, call.req, st.wantReq)
		}
		if st.prefix && !strings.HasPrefix(got, st.want) || !st.prefix && got != st.want {
			t.Errorf("%s: the C SDK returned\n%s\nwant\n%s", st.name, got, st.want)
		}
	}
	if s.direct == 0 || s.taken == 0 {
		t.Errorf("responses delivered directly: %d, through take: %d; want both paths exercised", s.direct, s.taken)
	}
}

// TestImportsOnlyWhatIsCalled checks the header's promise that a module
// imports a capability exactly when it calls one of its functions, so that
// its import section states what its grant must hold. It builds at -O0,
// where nothing unused is optimized away: what holds there holds at -O2.
func TestImportsOnlyWhatIsCalled(t *testing.T) {
	programs := []struct {
		cap  abi.Capability
		body string
	}{
		{abi.CapRun, `return agentrt_log(AGENTRT_LEVEL_INFO, "hi");`},
		{abi.CapKV, `agentrt_buf_t b; return agentrt_kv_get("k", &b);`},
		{abi.CapHTTP, `agentrt_http_request_t r = {.method = "GET", .url = "http://a/"}; agentrt_http_response_t resp; return agentrt_http_request(&r, &resp);`},
		{abi.CapClock, `int64_t t; return agentrt_clock_now(&t);`},
		{abi.CapRandom, `uint8_t b[8]; return agentrt_random_bytes(b, sizeof b);`},
		{abi.CapTool, `agentrt_tool_request_t r = {.name = "grep"}; agentrt_tool_result_t res; return agentrt_tool_run(&r, &res);`},
	}
	ctx := context.Background()
	// The interpreter only validates at compile time: enough to list
	// imports, and far cheaper than compiling to machine code.
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	dir := t.TempDir()
	for _, p := range programs {
		src := filepath.Join(dir, string(p.cap)+".c")
		code := "#include \"agentrt.h\"\nint main(void) { " + p.body + " }\n"
		if err := os.WriteFile(src, []byte(code), 0o644); err != nil {
			t.Fatal(err)
		}
		wasm := build(t, strings.TrimSuffix(src, ".c")+".wasm", []string{src}, append([]string{"-O0"}, strict...)...)
		m, err := rt.CompileModule(ctx, wasm)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range m.ImportedFunctions() {
			mod, name, _ := f.Import()
			if strings.HasPrefix(mod, abi.ModulePrefix) {
				got = append(got, mod+"."+name)
			}
		}
		slices.Sort(got)
		want := []string{p.cap.Module() + ".call", p.cap.Module() + ".take"}
		if !slices.Equal(got, want) {
			t.Errorf("a module calling only %s imports %v, want %v", p.cap, got, want)
		}
	}
}
