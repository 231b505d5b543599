package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
)

// TestCellKeepMemory: agentrt cell serve --keep-memory bounds the zeroed
// guest memory the daemon keeps between runs, and GET /v1/cell and
// agentrt cell status show it. An agent that looks for what the run
// before it left in its memory (leftover.wat: it counts the bytes that
// are not zero, then fills its memory with a secret) finds nothing,
// although the daemon hands it that run's memory. --keep-memory 0 keeps
// none, and a size that is not one is refused before the daemon starts.
func TestCellKeepMemory(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("guest memories are kept on Linux (the daemon's default engine, wazero)")
	}
	bin, cache, data := buildCLI(t), testutil.CompileCache(), t.TempDir()
	code := testutil.BuildWAT(t, "host/testdata/wat/leftover.wat")
	ctx := context.Background()

	out, err := exec.Command(bin, "--data", data, "--cache", cache, "cell", "serve", "--keep-memory", "64MB!").CombinedOutput()
	if err == nil || !strings.Contains(string(out), `--keep-memory: "64MB!" is not a size`) || !strings.Contains(string(out), "hint: ") {
		t.Fatalf("cell serve --keep-memory 64MB!: %v\n%s", err, out)
	}

	// leftover.wat touches 512 KiB: 1 MiB keeps one memory.
	d := serveDaemon(t, bin, cache, data, "--keep-memory", "1MiB")
	for i := range 3 {
		run, err := d.client.Submit(ctx, cell.Submission{Module: code, Name: "leftover.wat"})
		if err != nil {
			t.Fatal(err)
		}
		ri := d.waitEnd(t, run)
		if ri.Status != journal.StatusCompleted {
			t.Fatalf("run %d ended %s: %s\n%s", i, ri.Status, ri.Error, d.logText())
		}
		got := ri.OutputBase64
		if ri.Output != nil {
			var s string
			if err := json.Unmarshal(ri.Output, &s); err != nil {
				t.Fatalf("run %d output %s: %v", i, ri.Output, err)
			}
			got = []byte(s)
		}
		if len(got) != 4 || binary.LittleEndian.Uint32(got) != 0 {
			t.Fatalf("run %d found what the run before it left in its memory: output %x", i, got)
		}
		ci, err := d.client.Cell(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m := ci.Memory
		if m == nil || m.Limit != 1<<20 || m.Kept != 1 || m.Resident < 512<<10 || m.Resident > m.Limit || m.Fresh != 1 || m.Reused != uint64(i) || m.Dropped != 0 {
			t.Fatalf("after run %d GET /v1/cell shows memory %+v: want the run's memory kept, handed to each run after the first", i, m)
		}
	}
	out, err = exec.Command(bin, "--data", data, "--cache", cache, "cell", "status").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "memory    1 guest memories kept, ") || !strings.Contains(string(out), "of at most 1.0 MiB; 2 runs started on a kept one, 1 on a new one, 0 given back") {
		t.Fatalf("agentrt cell status: %v\n%s", err, out)
	}
	if err := d.term(t); err != nil {
		t.Fatalf("the daemon exited with %v\n%s", err, d.logText())
	}

	d = serveDaemon(t, bin, cache, data, "--keep-memory", "0")
	run, err := d.client.Submit(ctx, cell.Submission{Module: code, Name: "leftover.wat"})
	if err != nil {
		t.Fatal(err)
	}
	if ri := d.waitEnd(t, run); ri.Status != journal.StatusCompleted {
		t.Fatalf("run ended %s: %s", ri.Status, ri.Error)
	}
	ci, err := d.client.Cell(ctx)
	if err != nil || ci.Memory != nil {
		t.Fatalf("with --keep-memory 0 GET /v1/cell shows memory %+v (%v), want none", ci.Memory, err)
	}
	out, err = exec.Command(bin, "--data", data, "--cache", cache, "cell", "status").CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("memory    no guest memory kept between runs")) {
		t.Fatalf("agentrt cell status with --keep-memory 0: %v\n%s", err, out)
	}
	if err := d.term(t); err != nil {
		t.Fatalf("the daemon exited with %v\n%s", err, d.logText())
	}
}
