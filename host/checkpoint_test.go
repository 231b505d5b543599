package host_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
)

// segmentsOut is the segments agent's output.
type segmentsOut struct {
	I        int      `json:"i"`
	Sum      uint64   `json:"sum"`
	Segments []string `json:"segments"`
	Draws    []uint64 `json:"draws"`
}

var segmentsSeed = bytes.Repeat([]byte{7}, 32)

const segmentsWall = int64(1_700_000_000_000_000_000)

func segmentsSpec(code []byte, n, every int) host.RunSpec {
	in, _ := json.Marshal(map[string]int{"n": n, "every": every})
	return host.RunSpec{Code: code, Name: "segments", Input: in, Grant: host.DefaultGrant(), Seed: segmentsSeed, WallBase: segmentsWall}
}

// TestCheckpointContinuesAsNew runs an agent that checkpoints every 1000 of
// its 2500 iterations: it runs in three segments, each a fresh instance
// started from the state the last one gave, with step numbers, the virtual
// clock and a fresh random stream going on across them; the journal
// records both checkpoints and replays to the same output.
func TestCheckpointContinuesAsNew(t *testing.T) {
	env := testutil.NewEnv(t, host.Deps{}, host.Config{})
	code := testutil.BuildGo(t, "host/testdata/agents/segments")
	res, err := env.Host.Run(context.Background(), segmentsSpec(code, 2500, 1000))
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("run: %v %+v", err, res)
	}
	var out segmentsOut
	if err := json.Unmarshal(res.Output, &out); err != nil {
		t.Fatal(err)
	}
	want, wantCheckpoints := segmentsModel(2500, 1000)
	if out.I != 2500 || !equal(out.Segments, want) {
		t.Fatalf("segments %q (i %d), want %q", out.Segments, out.I, want)
	}
	if len(out.Draws) != 3 || out.Draws[0] == out.Draws[1] || out.Draws[1] == out.Draws[2] {
		t.Fatalf("random draws per segment %v: each segment must get a stream of its own", out.Draws)
	}
	var checkpoints []uint64
	for _, e := range entries(t, env, res.Run) {
		if e.Op == "run.checkpoint" {
			checkpoints = append(checkpoints, e.Step)
		}
	}
	if len(checkpoints) != len(wantCheckpoints) || checkpoints[0] != wantCheckpoints[0] || checkpoints[1] != wantCheckpoints[1] {
		t.Fatalf("checkpoints journaled at steps %v, want %v", checkpoints, wantCheckpoints)
	}
	replaysTo(t, env, res.Run, code, res.Output)
}

// TestResumeStartsFromTheLastCheckpoint interrupts the agent in its third
// segment and resumes it: only the calls since the last checkpoint are
// answered from the journal, and the output is the uninterrupted run's.
// Interrupted in its first segment, the whole history is replayed.
func TestResumeStartsFromTheLastCheckpoint(t *testing.T) {
	code := testutil.BuildGo(t, "host/testdata/agents/segments")
	base := testutil.NewEnv(t, host.Deps{}, host.Config{})
	want, err := base.Host.Run(context.Background(), segmentsSpec(code, 2500, 1000))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name            string
		stopAt          int64 // entries journaled before the interruption
		replayedAtMost  uint64
		replayedAtLeast uint64
	}{
		{"in the third segment", 2300, 400, 250},
		{"in the first segment", 600, 600, 550},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, run := interruptedSegments(t, code, tc.stopAt)
			got, err := env.Host.Resume(context.Background(), run)
			if err != nil || got.Status != journal.StatusCompleted {
				t.Fatalf("resume: %v %+v", err, got)
			}
			if !bytes.Equal(got.Output, want.Output) {
				t.Fatalf("resumed output %s, want %s", got.Output, want.Output)
			}
			if got.Replayed > tc.replayedAtMost || got.Replayed < tc.replayedAtLeast {
				t.Fatalf("resume answered %d calls from the journal, want %d..%d", got.Replayed, tc.replayedAtLeast, tc.replayedAtMost)
			}
			replaysTo(t, env, run, code, got.Output)
		})
	}
}

// TestCheckpointTooLargeIsRefused: a state over the request limit is
// refused with too_large and the run goes on in its segment (the agent
// fails the run with the error, which is recorded and replays).
func TestCheckpointTooLargeIsRefused(t *testing.T) {
	env := testutil.NewEnv(t, host.Deps{}, host.Config{MaxRequest: 256})
	code := testutil.BuildGo(t, "host/testdata/agents/segments")
	res, err := env.Host.Run(context.Background(), segmentsSpec(code, 300, 10))
	if err == nil && res.Status == journal.StatusCompleted {
		// The state of the first checkpoint fits in 256 bytes; later ones
		// grow with the segments list until one does not.
		t.Fatalf("the run completed: %s", res.Output)
	}
	if err != nil {
		t.Fatal(err)
	}
	if res.Err == nil || !bytes.Contains([]byte(res.Err.Error()), []byte("exit")) {
		t.Fatalf("run failed with %v, want the guest's exit after too_large", res.Err)
	}
	var tooLarge bool
	for _, e := range entries(t, env, res.Run) {
		if e.Op == "run.checkpoint" && e.Status == 3 {
			tooLarge = true
		}
	}
	if !tooLarge {
		t.Fatal("no run.checkpoint was answered too_large")
	}
	replaysTo(t, env, res.Run, code, res.Output)
}

// segmentsModel computes what the segments agent reports for n iterations
// checkpointing every every, and the steps of its checkpoints, from the
// calls it makes: each segment calls run.input twice (the input, then
// State), then run.introspect once per iteration (which answers the number
// of calls before it), then run.checkpoint, except the last segment, which
// ends with run.set_output.
func segmentsModel(n, every int) (segments []string, checkpoints []uint64) {
	var steps, sum uint64
	for i, k := 0, 0; i < n; k++ {
		steps += 2
		first := steps
		for j := 0; j < every && i < n; j++ {
			sum += steps
			steps++
			i++
		}
		segments = append(segments, fmt.Sprintf("%d:%d-%d", k, first, sum))
		if i < n {
			steps++
			checkpoints = append(checkpoints, steps)
		}
	}
	return segments, checkpoints
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// interruptedSegments runs the segments agent and interrupts it after
// about stopAt journal entries.
func interruptedSegments(t *testing.T, code []byte, stopAt int64) (*testutil.Env, journal.RunID) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var n atomic.Int64
	now := func() time.Time {
		if n.Add(1) == stopAt {
			cancel()
		}
		return time.Now()
	}
	env := testutil.NewEnv(t, host.Deps{Now: now}, host.Config{})
	res, err := env.Host.Run(ctx, segmentsSpec(code, 2500, 1000))
	if !errors.Is(err, host.ErrInterrupted) {
		t.Fatalf("run: %v, want it interrupted", err)
	}
	return env, res.Run
}

// TestResumeFromACheckpointReadsOnlyTheLastSegment: the run's index names
// its last checkpoint, and a resume verifies only the start entry and the
// journal from that checkpoint on. Damage before the checkpoint (but after
// the start) is not read by the resume (replay of the whole journal finds
// it); damage to the start entry is, since the checkpoint names its hash,
// and the resume is refused.
func TestResumeFromACheckpointReadsOnlyTheLastSegment(t *testing.T) {
	code := testutil.BuildGo(t, "host/testdata/agents/segments")
	ctx := context.Background()

	env, run := interruptedSegments(t, code, 2300)
	meta, err := env.Store.Meta(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	_, cps := segmentsModel(2500, 1000)
	es := entries(t, env, run)
	if meta.Checkpoint == 0 || es[meta.Checkpoint].Op != "run.checkpoint" || es[meta.Checkpoint].Step != cps[1] {
		t.Fatalf("the index names entry %d as the last checkpoint; want the checkpoint of step %d", meta.Checkpoint, cps[1])
	}
	// Break entry 100, long before the checkpoint: its bytes no longer
	// decode.
	if err := env.Store.RewriteJournal(run, func(recs [][]byte) [][]byte {
		recs[100] = recs[100][:len(recs[100])-3]
		return recs
	}); err != nil {
		t.Fatal(err)
	}
	res, err := env.Host.Resume(ctx, run)
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("resume past damage before the checkpoint: %v %+v", err, res)
	}
	if _, err := journal.VerifyStore(ctx, env.Store, run, journal.TrustAny); err == nil {
		t.Fatal("the damaged journal verifies whole")
	}

	env, run = interruptedSegments(t, code, 2300)
	if err := env.Store.RewriteJournal(run, func(recs [][]byte) [][]byte {
		recs[0] = append([]byte(nil), recs[0]...)
		recs[0][len(recs[0])/2] ^= 1
		return recs
	}); err != nil {
		t.Fatal(err)
	}
	var verr *journal.VerifyError
	if _, err := env.Host.Resume(ctx, run); !errors.As(err, &verr) || verr.Seq > 1 {
		t.Fatalf("resume of a run whose start entry was changed: %v, want it refused at the start", err)
	}
}
