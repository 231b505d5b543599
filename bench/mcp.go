package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/wasmbuild"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/badgerstore"
	sandbox "github.com/agentrt/agentrt/native-sandbox"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Figure 18: MCP tool calls through agentrt:mcp (mcp.call_tool, journaled,
// to the mcp-notes example's server launched under the sandbox), timed
// against the same call made by a go-sdk client to the same server
// program, launched directly.

// mcpExamples is the mcp-notes example, relative to this package.
func mcpExample(parts ...string) string {
	return filepath.Join(append([]string{sourceDir(), "..", "examples", "mcp-notes"}, parts...)...)
}

// mcpCallTimes reads, from run's journal, the time of each mcp.call_tool
// from its intent entry to its completed entry.
func mcpCallTimes(ctx context.Context, st *badgerstore.Store, run journal.RunID) ([]time.Duration, error) {
	intent := map[uint64]int64{}
	var out []time.Duration
	err := journal.ReadEntries(ctx, st, run, func(e *journal.Entry, _ *journal.Record) error {
		if e.Op != "mcp.call_tool" {
			return nil
		}
		switch e.Phase {
		case journal.PhaseIntent:
			intent[e.Step] = e.Time
		case journal.PhaseCompleted:
			t, ok := intent[e.Step]
			if !ok {
				return fmt.Errorf("bench: entry %d completes step %d, which has no intent", e.Seq, e.Step)
			}
			out = append(out, time.Duration(e.Time-t))
		case journal.PhaseFailed:
			return fmt.Errorf("bench: mcp.call_tool at step %d failed", e.Step)
		}
		return nil
	})
	return out, err
}

func (h *harness) mcpOverhead(ctx context.Context) ([]Figure, error) {
	if runtime.GOOS != "linux" {
		h.logf("18 skipped: the stdio server's sandbox here is bubblewrap")
		return nil, nil
	}
	if rep, err := sandbox.Check(); err != nil || !rep.Ready() {
		return nil, fmt.Errorf("bench: figure 18 launches an MCP server under the sandbox, which is not ready here: %v %v", err, rep)
	}
	n := h.cfg.MCPCalls
	code := filepath.Join(dir(h.root, "guests"), "mcp-notes.wasm")
	if err := wasmbuild.Go(ctx, mcpExample(), code); err != nil {
		return nil, err
	}
	mod, err := os.ReadFile(code)
	if err != nil {
		return nil, err
	}
	server := filepath.Join(dir(h.root, "mcp-bin"), "notes-server")
	build := exec.CommandContext(ctx, "go", "build", "-o", server, ".")
	build.Dir = mcpExample("server")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("bench: building the notes server: %v\n%s", err, out)
	}
	notes := dir(h.root, "mcp-notes")
	if os.Geteuid() == 0 {
		if err := os.Chown(notes, sandbox.DefaultUser.UID, sandbox.DefaultUser.GID); err != nil {
			return nil, err
		}
	}
	grant, err := host.ParseGrant(fmt.Appendf(nil, `capabilities:
  run: {}
  mcp:
    servers:
      - name: notes
        stdio: {exec: %s, args: [--dir, %s], read: [/usr, /lib, /lib64], write: [%s], limits: {memory: 1GiB, procs: 64}}
        tools: [list_notes]
        idempotent: [list_notes]
`, server, notes, notes))
	if err != nil {
		return nil, err
	}
	c, err := openCell(dir(h.root, "mcp-overhead"), h.engine)
	if err != nil {
		return nil, err
	}
	defer c.close()
	input := func(calls int) []byte {
		return []byte(`{"notes":[],"calls":[` + strings.TrimSuffix(strings.Repeat(`{"tool":"list_notes"},`, calls), ",") + `]}`)
	}
	// The direct path: the same program, the same tool, a go-sdk client
	// on its stdin and stdout.
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx,
		&sdk.CommandTransport{Command: exec.Command(server, "--dir", notes)}, nil)
	if err != nil {
		return nil, fmt.Errorf("bench: the direct client: %w", err)
	}
	defer cs.Close()
	direct := func() (time.Duration, error) {
		start := time.Now()
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "list_notes", Arguments: map[string]any{}})
		if err == nil && res.IsError {
			err = fmt.Errorf("bench: the direct call failed")
		}
		return time.Since(start), err
	}
	// Warm up both paths.
	warm, err := c.host.Run(ctx, host.RunSpec{Code: mod, Name: "bench", Input: input(2), Grant: grant})
	if err != nil {
		return nil, err
	}
	if warm.Status != journal.StatusCompleted {
		return nil, endedErr(ctx, c.store, "warm-up run", warm)
	}
	for range 2 {
		if _, err := direct(); err != nil {
			return nil, err
		}
	}
	var p50, p99, d50, d99 []float64
	for r := range h.cfg.Reps {
		res, err := c.host.Run(ctx, host.RunSpec{Code: mod, Name: "bench", Input: input(n), Grant: grant})
		if err != nil {
			return nil, err
		}
		if res.Status != journal.StatusCompleted {
			return nil, endedErr(ctx, c.store, "run", res)
		}
		times, err := mcpCallTimes(ctx, c.store, res.Run)
		if err != nil {
			return nil, err
		}
		// The agent's own list_notes after its list_tools, then the n.
		if len(times) != n+1 {
			return nil, fmt.Errorf("bench: run %s journaled %d tool calls, want %d", res.Run, len(times), n+1)
		}
		times = times[1:]
		p50, p99 = append(p50, ms(percentile(times, 50))), append(p99, ms(percentile(times, 99)))
		var dt []time.Duration
		for range n {
			d, err := direct()
			if err != nil {
				return nil, err
			}
			dt = append(dt, d)
		}
		d50, d99 = append(d50, ms(percentile(dt, 50))), append(d99, ms(percentile(dt, 99)))
		h.logf("18 mcp tool calls rep %d: p50 %.2f ms (direct %.2f), p99 %.2f ms (direct %.2f)", r, p50[r], d50[r], p99[r], d99[r])
	}
	measures := fmt.Sprintf("host.Host.Run of the mcp-notes example agent (Go, agent.MCPCallTool) making %d mcp.call_tool calls of list_notes to the example's "+
		"notes server (Go, go-sdk, stdio) launched under the native sandbox, on a badgerstore; each call from its intent entry to its completed entry, by the "+
		"host times the journal records: the gate, the durable commit of intent and executing, the server's tools/list read again before every call "+
		"(the pin check), the tools/call, and the completed entry; the percentile over the calls of a repetition, median over repetitions.", n)
	floor := func(name string, v []float64) *Floor {
		return &Floor{Name: name, Unit: "ms", Value: median(v), Samples: v,
			Measures: fmt.Sprintf("the same %d tools/call of list_notes made by a go-sdk client session to the same server program, launched directly (no sandbox), timed around ClientSession.CallTool.", n)}
	}
	return []Figure{{
		ID: "18a", Name: "MCP tool call through mcp.call_tool (journaled, sandboxed server), p50", Unit: "ms", Better: "lower",
		Value: median(p50), Samples: p50, Extra: map[string]float64{"added p50 ms": median(p50) - median(d50)},
		Measures: measures, Floor: floor("direct go-sdk client call, p50", d50),
	}, {
		ID: "18b", Name: "MCP tool call through mcp.call_tool, p99", Unit: "ms", Better: "lower",
		Value: median(p99), Samples: p99, Extra: map[string]float64{"added p99 ms": median(p99) - median(d99)},
		Measures: measures, Floor: floor("direct go-sdk client call, p99", d99),
	}}, nil
}
