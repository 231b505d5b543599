// Package rusttest tests the Rust SDK, the crate in guest-sdk/rust, against
// the ABI's test vectors (abi/testdata/vectors): the same files the Go
// codec and the C header are tested against, read by the same reader
// (internal/abivectors) and driven by the same harness
// (internal/sdkvectors).
//
// guest-sdk/rust/testdata/vectors is a wasm32-wasi program built with the crate by
// wasmbuild.Rust, the build agentrt build uses, and run under wazero with a
// stub host for every agentrt:* module. For each vector the test sends it
// one command; it makes the SDK call the command names, the stub checks
// the request bytes the call sends and answers with the vector's bytes, and
// the program prints what the SDK decoded, which the test compares with
// what the Go codec decodes from the same bytes.
//
// The runner lives here, not beside the crate, because guest-sdk is a Go
// module of its own that depends on the standard library alone.
package rusttest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/internal/sdkvectors"
	"github.com/agentrt/agentrt/internal/wasmbuild"
	"github.com/tetratelabs/wazero"
)

var vectorDir = filepath.Join("..", "..", "..", "abi", "testdata", "vectors")

// crateDir is the Rust SDK.
var crateDir = filepath.Join("..", "..", "..", "guest-sdk", "rust")

func TestMain(m *testing.M) {
	// One cargo target directory for the test binary, outside the
	// repository: builds of the crate share it, and nothing is left in
	// the source tree.
	dir, err := os.MkdirTemp("", "agentrt-rust-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("CARGO_TARGET_DIR", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// build builds the Cargo package in dir with wasmbuild.Rust.
func build(t *testing.T, dir string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "agent.wasm")
	if err := wasmbuild.Rust(context.Background(), dir, out); err != nil {
		// Never a skip: a missing toolchain must not pass as a green run.
		var te *wasmbuild.ToolchainError
		if errors.As(err, &te) {
			t.Fatalf("building %s: %v\nhint: %s", dir, err, te.Hint)
		}
		t.Fatalf("building %s: %v", dir, err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var driver struct {
	sync.Once
	wasm []byte
	ok   bool
}

// vectorsDriver returns testdata/vectors, built once per test binary.
func vectorsDriver(t *testing.T) []byte {
	t.Helper()
	driver.Do(func() {
		driver.wasm = build(t, filepath.Join(crateDir, "testdata", "vectors"))
		driver.ok = true
	})
	if !driver.ok {
		t.Fatal("the driver did not build (see the first test that tried)")
	}
	return driver.wasm
}

var driverArgs = []string{strconv.Itoa(sdkvectors.ResponseBuffer)}

// rustSteps test the Rust SDK where it goes beyond what the harness asks of
// every SDK: statuses it does not know, a take answered pending, a host that
// reports more than the buffer holds, answers the codec decodes but the op
// forbids.
func rustSteps(t *testing.T) []sdkvectors.Step {
	later := func(code abi.Status, msg string) []byte {
		b, err := abi.Marshal(&abi.Error{Code: code, Message: msg})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	value, err := abi.Marshal(&abi.KVGetResponse{Value: bytes.Repeat([]byte("v"), 3*sdkvectors.ResponseBuffer)})
	if err != nil {
		t.Fatal(err)
	}
	get := sdkvectors.ProbeLine("kv.get", 0)
	return []sdkvectors.Step{
		{Name: "a status this SDK does not know, with its message", Line: get, Op: "kv.get",
			Reply: sdkvectors.Reply{Status: 11, Body: later(11, "a later host's status")},
			Want:  sdkvectors.StatusLine(11, "a later host's status")},
		{Name: "an unknown status far up", Line: get, Op: "kv.get",
			Reply: sdkvectors.Reply{Status: 0xfffe, Body: later(0xfffe, "")},
			Want:  sdkvectors.StatusLine(0xfffe, "")},
		{Name: "an unknown status with a broken body", Line: get, Op: "kv.get",
			Reply: sdkvectors.Reply{Status: 12, Body: []byte{0xa1}},
			Want:  sdkvectors.StatusLine(12, "malformed error body")},
		{Name: "take answered pending", Line: get, Op: "kv.get",
			Reply: sdkvectors.Reply{Status: abi.StatusOK, Body: value, TakeStatus: abi.StatusPending},
			Want:  sdkvectors.StatusLine(sdkvectors.SDKMalformed, "take answered pending")},
		{Name: "take answered buffer_too_small", Line: get, Op: "kv.get",
			Reply: sdkvectors.Reply{Status: abi.StatusOK, Body: value, TakeStatus: abi.StatusBufferTooSmall},
			Want:  sdkvectors.StatusLine(abi.StatusBufferTooSmall, "take of a pending response failed")},
		{Name: "ok with a length past the buffer", Line: get, Op: "kv.get",
			Reply: sdkvectors.Reply{Status: abi.StatusOK, Overlong: true},
			Want:  sdkvectors.StatusLine(sdkvectors.SDKMalformed, "the host reported a response longer than the buffer")},
		{Name: "an error with a length past the buffer", Line: get, Op: "kv.get",
			Reply: sdkvectors.Reply{Status: abi.StatusFailed, Overlong: true},
			Want:  sdkvectors.StatusLine(abi.StatusFailed, "malformed error body")},
		{Name: "a tool file with a 31-byte hash", Line: sdkvectors.ProbeLine("tool.run", 0), Op: "tool.run",
			Reply: sdkvectors.Reply{Body: mustMarshal(t, &abi.ToolRunResponse{Files: []abi.ToolFile{{Path: "a", Size: 1, SHA256: make([]byte, 31)}}})},
			Want:  sdkvectors.StatusLine(sdkvectors.SDKMalformed, "malformed tool.run response")},
		{Name: "a tool file with neither hash nor reason", Line: sdkvectors.ProbeLine("tool.run", 0), Op: "tool.run",
			Reply: sdkvectors.Reply{Body: mustMarshal(t, &abi.ToolRunResponse{Files: []abi.ToolFile{{Path: "a", Size: 1}}})},
			Want:  sdkvectors.StatusLine(sdkvectors.SDKMalformed, "malformed tool.run response")},
		{Name: "random.bytes answered with fewer bytes", Line: "random.bytes 4", Op: "random.bytes",
			Reply: sdkvectors.Reply{Body: mustMarshal(t, &abi.RandomBytesResponse{Bytes: []byte{1, 2, 3}})},
			Want:  sdkvectors.StatusLine(sdkvectors.SDKMalformed, "random.bytes: the host returned 3 bytes, not the 4 asked for")},
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	b, err := abi.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestVectors(t *testing.T) {
	steps, err := sdkvectors.VectorSteps(vectorDir, sdkvectors.Covers{Self: true})
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
	steps = append(append(steps, transport...), rustSteps(t)...)
	sdkvectors.Run(t, vectorsDriver(t), driverArgs, steps)
}

// refuses says what the Rust SDK refuses of a response the Go codec
// decodes: a tool file with both or neither of sha256 and unhashed, or a
// hash that is not 32 bytes (abi/SPEC.md 9.13: a host MUST send exactly
// one, and a hash is SHA-256).
func refuses(_ string, v any) bool {
	r, ok := v.(*abi.ToolRunResponse)
	return ok && slices.ContainsFunc(r.Files, func(f abi.ToolFile) bool {
		return (f.SHA256 == nil) == (f.Unhashed == "") || (f.SHA256 != nil && len(f.SHA256) != 32)
	})
}

// TestHostileResponses answers every call with damaged vectors: the SDK
// must decode exactly what the Go codec decodes, refuse the rest, and never
// panic (the driver is built with overflow checks and debug assertions, so
// an overflow traps too).
func TestHostileResponses(t *testing.T) {
	steps, err := sdkvectors.HostileSteps(vectorDir, sdkvectors.Covers{Self: true}, refuses)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) < 5000 {
		t.Fatalf("only %d damaged bodies", len(steps))
	}
	t.Logf("%d damaged bodies", len(steps))
	sdkvectors.Run(t, vectorsDriver(t), driverArgs, steps)
}

// TestImportsOnlyWhatIsCalled checks the crate's promise that a module
// imports a capability exactly when it calls one of its functions, so that
// its import section states what its grant must hold. The programs are
// built unoptimized (cargo's dev profile), where nothing unused is
// optimized away: what holds there holds in a release build.
func TestImportsOnlyWhatIsCalled(t *testing.T) {
	type program struct {
		cap  abi.Capability
		body string
	}
	programs := []program{
		{abi.CapRun, `agentrt::log(agentrt::Level::INFO, "hi")`},
		{abi.CapKV, `agentrt::kv_get("k").map(|_| ())`},
		{abi.CapHTTP, `agentrt::http_get("http://a/").map(|_| ())`},
		{abi.CapClock, `agentrt::now_unix_nano().map(|_| ())`},
		{abi.CapRandom, `agentrt::random_bytes(8).map(|_| ())`},
		{abi.CapTool, `agentrt::tool("grep", &["-c", "x"]).map(|_| ())`},
		{abi.CapTimer, `agentrt::sleep(std::time::Duration::from_secs(1)).map(|_| ())`},
		{abi.CapApproval, `agentrt::request_approval("deploy", "release").map(|_| ())`},
	}
	// Every capability the ABI names has a function here, and a program;
	// llm is the exception, as in sdkvectors.VectorSteps: the crate has no
	// llm types yet.
	for _, c := range abi.Capabilities {
		if c != abi.CapLLM && !sdkvectors.NotInCAndRust(c) && !slices.ContainsFunc(programs, func(p program) bool { return p.cap == c }) {
			t.Errorf("no program calls only %s", c)
		}
	}
	sdk, err := filepath.Abs(crateDir)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	manifest := fmt.Sprintf("[package]\nname = \"imports\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\n[dependencies]\nagentrt = { path = %q }\n", sdk)
	files := map[string]string{"Cargo.toml": manifest}
	for _, p := range programs {
		files[filepath.Join("src", "bin", string(p.cap)+".rs")] = "fn main() {\n    let _ = " + p.body + ";\n}\n"
	}
	for name, body := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tools := rustTools(t)
	cargo(t, tools, dir, "build", "--offline", "--bins", "--target", tools.Target)

	ctx := context.Background()
	// The interpreter only validates at compile time: enough to list
	// imports, and far cheaper than compiling to machine code.
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	for _, p := range programs {
		wasm, err := os.ReadFile(filepath.Join(os.Getenv("CARGO_TARGET_DIR"), tools.Target, "debug", string(p.cap)+".wasm"))
		if err != nil {
			t.Fatal(err)
		}
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

// TestCrateUnitTests runs the crate's own tests (its CBOR reader's unit
// tests, and that the example in its documentation compiles) with cargo
// test on the build machine, with the toolchain the wasm builds use.
func TestCrateUnitTests(t *testing.T) {
	tools := rustTools(t)
	// A copy of the crate, so that cargo's Cargo.lock is not written
	// into the source tree.
	dir := t.TempDir()
	manifest, err := os.ReadFile(filepath.Join(crateDir, "Cargo.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "Cargo.toml"), manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(dir, "src"), os.DirFS(filepath.Join(crateDir, "src"))); err != nil {
		t.Fatal(err)
	}
	out := cargo(t, tools, dir, "test", "--offline")
	passed := 0
	for _, m := range regexp.MustCompile(`(?m)^test result: (\S+) (\d+) passed`).FindAllStringSubmatch(out, -1) {
		n, _ := strconv.Atoi(m[2])
		if m[1] != "ok." {
			t.Errorf("cargo test: %s", m[0])
		}
		passed += n
	}
	if passed == 0 {
		t.Fatalf("cargo test ran no tests:\n%s", out)
	}
}

func rustTools(t *testing.T) *wasmbuild.RustTools {
	t.Helper()
	tools, err := wasmbuild.FindRust(context.Background(), crateDir)
	if err != nil {
		var te *wasmbuild.ToolchainError
		if errors.As(err, &te) {
			t.Fatalf("%v\nhint: %s", err, te.Hint)
		}
		t.Fatal(err)
	}
	return tools
}

// cargo runs cargo with the toolchain's rustc and rustdoc in dir and
// returns its output.
func cargo(t *testing.T, tools *wasmbuild.RustTools, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(tools.Cargo, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "RUSTC="+tools.Rustc, "CARGO_TERM_COLOR=never")
	if tools.Rustdoc != "" {
		cmd.Env = append(cmd.Env, "RUSTDOC="+tools.Rustdoc)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cargo %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
