// The C SDK, guest-sdk/c/agentrt.h, against the ABI's test vectors
// (abi/testdata/vectors): the same files the Go codecs and the Rust SDK are
// tested against, read by the same reader (internal/abivectors) and driven
// by the same harness (this package). The runner lives here, not beside the
// header, because guest-sdk is a module of its own that depends on the
// standard library alone.
//
// testdata/vectors.c is built with clang and run under wazero with a stub
// host for every agentrt:* module. For each vector the test sends the C
// program one command; the C program makes the SDK call it names, and the
// stub checks the request bytes the call sends and answers with the
// vector's bytes; the C program prints what the SDK decoded, and the test
// compares that with what the Go codec decodes from the same bytes.
package ctest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/internal/sdkvectors"
	"github.com/agentrt/agentrt/internal/wasmbuild"
	"github.com/tetratelabs/wazero"
)

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

var vectorDir = filepath.Join("..", "..", "..", "abi", "testdata", "vectors")

func TestVectors(t *testing.T) {
	wasm := build(t, filepath.Join(t.TempDir(), "vectors.wasm"), []string{"testdata/vectors.c"},
		append([]string{fmt.Sprintf("-DAGENTRT_RESPONSE_HINT=%d", sdkvectors.ResponseBuffer)}, strict...)...)
	steps, err := sdkvectors.VectorSteps(vectorDir, sdkvectors.Covers{})
	if err != nil {
		t.Fatal(err)
	}
	transport, err := sdkvectors.TransportSteps()
	if err != nil {
		t.Fatal(err)
	}
	zero, err := sdkvectors.ZeroFieldSteps()
	if err != nil {
		t.Fatal(err)
	}
	steps = append(steps, zero...)
	sdkvectors.Run(t, wasm, nil, append(steps, transport...))
}

// TestHostileResponses answers every call with damaged copies of the valid
// response and error vectors: the header must decode exactly what the Go
// codec decodes and refuse the rest, and never read outside a body (the
// stub host writes each body at the start of the buffer it was given, so a
// read past it reads other bytes and decodes something the codec does not).
func TestHostileResponses(t *testing.T) {
	wasm := build(t, filepath.Join(t.TempDir(), "vectors.wasm"), []string{"testdata/vectors.c"},
		append([]string{fmt.Sprintf("-DAGENTRT_RESPONSE_HINT=%d", sdkvectors.ResponseBuffer)}, strict...)...)
	steps, err := sdkvectors.HostileSteps(vectorDir, sdkvectors.Covers{}, refuses)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) < 5000 {
		t.Fatalf("only %d damaged bodies", len(steps))
	}
	t.Logf("%d damaged bodies", len(steps))
	for i := range steps {
		steps[i].Want = cMessage(steps[i].Want)
	}
	sdkvectors.Run(t, wasm, nil, steps)
}

// cMessage returns the status line want as the header gives it:
// agentrt_errmsg is a C string, so a message holding a NUL byte (a damaged
// body can decode to one) reads up to that byte. Other lines are returned
// as they are.
func cMessage(want string) string {
	var code abi.Status
	var msg []byte
	if _, err := fmt.Sscanf(want, "status %d x%x", &code, &msg); err != nil {
		return want
	}
	if i := bytes.IndexByte(msg, 0); i >= 0 {
		return sdkvectors.StatusLine(code, string(msg[:i]))
	}
	return want
}

// refuses says what the header refuses of a response the Go codec
// decodes, as the Rust SDK does: a tool file with both or neither of
// sha256 and unhashed, or a hash that is not 32 bytes (abi/SPEC.md 9.13: a
// host MUST send exactly one, and a hash is SHA-256).
func refuses(_ string, v any) bool {
	r, ok := v.(*abi.ToolRunResponse)
	return ok && slices.ContainsFunc(r.Files, func(f abi.ToolFile) bool {
		return (f.SHA256 == nil) == (f.Unhashed == "") || (f.SHA256 != nil && len(f.SHA256) != 32)
	})
}

// TestImportsOnlyWhatIsCalled checks the header's promise that a module
// imports a capability exactly when it calls one of its functions, so that
// its import section states what its grant must hold. It builds at -O0,
// where nothing unused is optimized away: what holds there holds at -O2.
func TestImportsOnlyWhatIsCalled(t *testing.T) {
	type program struct {
		cap  abi.Capability
		body string
	}
	programs := []program{
		{abi.CapRun, `return agentrt_log(AGENTRT_LEVEL_INFO, "hi");`},
		{abi.CapKV, `agentrt_buf_t b; return agentrt_kv_get("k", &b);`},
		{abi.CapHTTP, `agentrt_http_request_t r = {.method = "GET", .url = "http://a/"}; agentrt_http_response_t resp; return agentrt_http_request(&r, &resp);`},
		{abi.CapClock, `int64_t t; return agentrt_clock_now(&t);`},
		{abi.CapRandom, `uint8_t b[8]; return agentrt_random_bytes(b, sizeof b);`},
		{abi.CapTool, `agentrt_tool_request_t r = {.name = "grep"}; agentrt_tool_result_t res; return agentrt_tool_run(&r, &res);`},
		{abi.CapLLM, `agentrt_llm_request_t r = {.model = "m"}; agentrt_llm_response_t res; return agentrt_llm_complete(&r, &res);`},
		{abi.CapTimer, `int64_t due, woke; return agentrt_sleep(1000, &due, &woke);`},
		{abi.CapTimer, `return agentrt_sleep_until(1767225600000000000, NULL, NULL);`},
		{abi.CapApproval, `agentrt_approval_t a; agentrt_status_t st = agentrt_request_approval("deploy", "release", &a); agentrt_approval_free(&a); return st;`},
		{abi.CapAgent, `agentrt_outcome_t o; agentrt_status_t st = agentrt_await("18ee4cab4e0d0000a04efd9b1a3fd4d7", &o); agentrt_outcome_free(&o); return st;`},
	}
	ctx := context.Background()
	// The interpreter only validates at compile time: enough to list
	// imports, and far cheaper than compiling to machine code.
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	dir := t.TempDir()
	// Every capability the ABI names has a function here, and a program.
	for _, c := range abi.Capabilities {
		if c == abi.CapMCP {
			continue // the C SDK has no mcp functions yet (the Go SDK has)
		}
		if !slices.ContainsFunc(programs, func(p program) bool { return p.cap == c }) {
			t.Errorf("no program calls only %s", c)
		}
	}
	for i, p := range programs {
		src := filepath.Join(dir, fmt.Sprintf("%d-%s.c", i, p.cap))
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
