package bench

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/agentrt/agentrt/internal/wasmbuild"
)

// The guests are built from source at bench time, so the figures always
// measure the modules in this tree.
var (
	//go:embed testdata/loop.wat
	loopWAT []byte
	//go:embed testdata/kvput.wat
	kvputWAT []byte
	//go:embed testdata/park.wat
	parkWAT []byte
	//go:embed testdata/spawner.wat
	spawnerWAT []byte
)

// ErrNoWat2wasm is returned when wabt's wat2wasm is not on PATH.
var ErrNoWat2wasm = errors.New("wat2wasm is not on PATH (install wabt: apt-get install wabt)")

// Guests are the modules the benchmarks run.
type Guests struct {
	// Loop makes N+1 run.input calls (testdata/loop.wat).
	Loop []byte
	// KVPut makes one run.input and N kv.put calls (testdata/kvput.wat).
	KVPut []byte
	// Park waits (timer.sleep or approval.request, by its input), then
	// makes one run.log call (testdata/park.wat).
	Park []byte
	// Spawner makes one run.input call, then spawns N children with the
	// spawn request its input carries (testdata/spawner.wat).
	Spawner []byte
	// Echo is a real Go agent built with the guest SDK
	// (testdata/agents/echo); nil unless asked for.
	Echo []byte
	// Segments is the Go agent that checkpoints every so often
	// (host/testdata/agents/segments); nil unless the Go agents are
	// asked for.
	Segments []byte
}

// BuildGuests assembles the WAT guests with wat2wasm in dir and, when goAgent
// is set, builds the Go agent with the go command.
func BuildGuests(ctx context.Context, dir string, goAgent bool) (*Guests, error) {
	var g Guests
	var err error
	if g.Loop, err = wat2wasm(ctx, dir, "loop", loopWAT); err != nil {
		return nil, err
	}
	if g.KVPut, err = wat2wasm(ctx, dir, "kvput", kvputWAT); err != nil {
		return nil, err
	}
	if g.Spawner, err = wat2wasm(ctx, dir, "spawner", spawnerWAT); err != nil {
		return nil, err
	}
	if g.Park, err = wat2wasm(ctx, dir, "park", parkWAT); err != nil {
		return nil, err
	}
	if goAgent {
		out := filepath.Join(dir, "echo.wasm")
		if err := wasmbuild.Go(ctx, filepath.Join(sourceDir(), "testdata", "agents", "echo"), out); err != nil {
			return nil, err
		}
		if g.Echo, err = os.ReadFile(out); err != nil {
			return nil, err
		}
		out = filepath.Join(dir, "segments.wasm")
		if err := wasmbuild.Go(ctx, filepath.Join(sourceDir(), "..", "host", "testdata", "agents", "segments"), out); err != nil {
			return nil, err
		}
		if g.Segments, err = os.ReadFile(out); err != nil {
			return nil, err
		}
	}
	return &g, nil
}

func wat2wasm(ctx context.Context, dir, name string, src []byte) ([]byte, error) {
	bin, err := exec.LookPath("wat2wasm")
	if err != nil {
		return nil, ErrNoWat2wasm
	}
	in := filepath.Join(dir, name+".wat")
	out := filepath.Join(dir, name+".wasm")
	if err := os.WriteFile(in, src, 0o600); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, bin, in, "-o", out)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("wat2wasm %s: %v\n%s", name, err, strings.TrimSpace(stderr.String()))
	}
	return os.ReadFile(out)
}

// countInput is the run input that tells a guest to loop n times.
func countInput(n int) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(n)) }
