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
	steps, err := sdkvectors.VectorSteps(vectorDir)
	if err != nil {
		t.Fatal(err)
	}
	transport, err := sdkvectors.TransportSteps()
	if err != nil {
		t.Fatal(err)
	}
	sdkvectors.Run(t, wasm, nil, append(steps, transport...))
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
		{abi.CapLLM, `agentrt_llm_request_t r = {.model = "m"}; agentrt_llm_response_t res; return agentrt_llm_complete(&r, &res);`},
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
