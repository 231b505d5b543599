package bench

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/agentrt/agentrt/host"
	agentcell "github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/badgerstore"
	"github.com/agentrt/agentrt/journal/cellkey"
)

// interrupted records a run of the loop guest that stops (its context
// ends) after about n journal entries, on st, and returns its id: the
// journal a killed process leaves, every commit in place.
func (h *harness) interrupted(ctx context.Context, st *badgerstore.Store, key ed25519.PrivateKey, n int) (journal.RunID, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var entries atomic.Int64
	now := func() time.Time {
		if entries.Add(1) == int64(n) {
			cancel()
		}
		return time.Now()
	}
	hst, err := host.New(h.engine, host.Deps{Store: st, KV: st, Events: st, Key: key, Now: now}, host.Config{})
	if err != nil {
		return journal.RunID{}, err
	}
	res, err := hst.Run(ctx, host.RunSpec{Code: h.guests.Loop, Name: "bench", Input: countInput(n + 100), Grant: host.DefaultGrant()})
	if !errors.Is(err, host.ErrInterrupted) {
		return journal.RunID{}, fmt.Errorf("bench: the run to resume was not interrupted: %v", err)
	}
	return res.Run, nil
}

// Figure 7: resume latency.
func (h *harness) resume(ctx context.Context) ([]Figure, error) {
	var figs []Figure
	sizes := []int{100, 10_000, 100_000}
	if h.cfg.PureCalls < 100_000 {
		sizes = []int{100, 1000}
	}
	for i, n := range sizes {
		res, clean, err := h.resumeOnce(ctx, n, 0)
		if err != nil {
			return nil, err
		}
		figs = append(figs, Figure{
			ID: fmt.Sprintf("7%c", 'a'+i), Name: fmt.Sprintf("resume, journal of %d entries", n), Unit: "ms", Better: "lower",
			Value: median(res), Samples: res,
			Measures: fmt.Sprintf("host.Host.Resume of an interrupted run of testdata/loop.wat whose journal holds about %d entries (its context ended mid-run, as a kill leaves it: every commit in place): verify the journal (chain, hashes, seals), compile from the warm in-process cache, re-execute answering every recorded call from the journal, then about 100 live calls and the end commit. In-process: the process start of `agentrt resume` (about 40 ms for the CLI here) is not included. The loop guest never checkpoints, so the time grows with the journal (see 7f-7k for a checkpointing agent).", n),
			Floor: &Floor{Name: "clean restart", Unit: "ms", Value: median(clean), Samples: clean,
				Measures: "host.Host.Run of the same module on the same store making 101 live calls and the end commit: the same work after the replay, from a clean start."},
		})
	}
	filler := 100_000
	if h.cfg.PureCalls < 100_000 {
		filler = 2000
	}
	res, clean, err := h.resumeOnce(ctx, 1000, filler)
	if err != nil {
		return nil, err
	}
	figs = append(figs, Figure{
		ID: "7d", Name: fmt.Sprintf("resume, 1 000 entries in a store of %d, in-process", filler), Unit: "ms", Better: "lower",
		Value: median(res), Samples: res,
		Measures: fmt.Sprintf("as 7a, for a run of about 1 000 entries in a store already holding a %d-entry run.", filler),
		Floor: &Floor{Name: "clean restart", Unit: "ms", Value: median(clean), Samples: clean,
			Measures: "as in 7a, on the same store."},
	})
	if h.cfg.GoAgent { // the checkpointing Go agent
		for i, every := range []int{1000, 0} {
			for j, n := range []int{100, 10_000, 100_000} {
				res, clean, err := h.resumeSegments(ctx, n, every)
				if err != nil {
					return nil, err
				}
				fig := Figure{
					ID: fmt.Sprintf("7%c", 'f'+3*i+j), Unit: "ms", Better: "lower", Value: median(res), Samples: res,
					Floor: &Floor{Name: "clean run of one segment", Unit: "ms", Value: median(clean), Samples: clean,
						Measures: "host.Host.Run of the same agent for 1 000 iterations without checkpoints, from a clean start on the same store: the work of one segment."},
				}
				if every > 0 {
					fig.Name = fmt.Sprintf("resume, %d journaled steps, checkpoint every 1 000", n)
					fig.Measures = fmt.Sprintf("host.Host.Resume of a run of host/testdata/agents/segments (a Go agent: one run.introspect per iteration, run.checkpoint every 1 000 iterations) interrupted about 50 calls before its end, %d iterations in all: read the run's index, verify the start entry and the journal from the last checkpoint on, compile from the warm in-process cache, re-execute the last segment answering its recorded calls from the journal, then about 50 live calls and the end commit.", n)
					if n == 100_000 {
						fig.Goal = &Goal{Text: "bounded by the last segment: ratio to one segment's clean run <= 1.5", MaxRatio: ptr(1.5)}
					}
				} else {
					fig.Name = fmt.Sprintf("resume, %d journaled steps, no checkpoints", n)
					fig.Measures = fmt.Sprintf("as 7%c, for the same agent never checkpointing: the whole journal is verified and re-executed.", 'f'+j)
				}
				figs = append(figs, fig)
			}
		}
	}
	if h.cfg.GoAgent { // the full run: time the CLI, process start included
		res, clean, first, warm, err := h.resumeCLI(ctx, 1000, filler)
		if err != nil {
			return nil, err
		}
		figs = append(figs, Figure{
			ID: "7l", Name: "first open of a data directory after 100 000 entries were written, with the CLI", Unit: "ms", Better: "lower",
			Value: median(first), Samples: first,
			Measures: "wall time of `agentrt runs --json` on the data directory of 7e, the first process to open its store after the bench wrote it: the store's preflight verifies every block of each table it has not verified before (journal/badgerstore/preflight.go), once in the table's life.",
			Floor: &Floor{Name: "a later open", Unit: "ms", Value: median(warm), Samples: warm,
				Measures: "the same command again: every table verified, remembered by size and modification time."},
		})
		figs = append(figs, Figure{
			ID: "7e", Name: "resume with the CLI, 1 000 entries in a store of 100 000", Unit: "ms", Better: "lower",
			Value: median(res), Samples: res,
			Measures: "wall time of `agentrt resume RUN -q`, process start to exit, for an interrupted run of about 1 000 entries of testdata/loop.wat (plus about 100 live calls and the end) in a data directory whose store also holds a 100 000-entry run, compilation cache warm, the store's tables verified once before (7l): open the store (badger replays its memtable), load the key, verify, re-execute, finish.",
			Floor: &Floor{Name: "clean restart with the CLI", Unit: "ms", Value: median(clean), Samples: clean,
				Measures: "wall time of `agentrt run` of the same module making 101 live calls on the same data directory."},
			Goal: &Goal{Text: "<= 150 ms and ratio <= 1.5", MaxValue: ptr(150), MaxRatio: ptr(1.5)},
		})
	}
	return figs, nil
}

// resumeSegments measures Resume of a run of the segments agent for n
// iterations, checkpointing every every (0: never), interrupted about 50
// calls before its end, and a clean run of one segment (1 000 iterations).
func (h *harness) resumeSegments(ctx context.Context, n, every int) (resumed, clean []float64, err error) {
	input := func(n, every int) []byte { return fmt.Appendf(nil, `{"n":%d,"every":%d}`, n, every) }
	for r := range h.cfg.Reps {
		st, err := badgerstore.Open(dir(h.root, fmt.Sprintf("segments-%d-%d-%d", n, every, r)))
		if err != nil {
			return nil, nil, err
		}
		_, key, _ := ed25519.GenerateKey(nil)
		rctx, cancel := context.WithCancel(ctx)
		var entries atomic.Int64
		stop := int64(n - 50)
		now := func() time.Time {
			if entries.Add(1) == stop {
				cancel()
			}
			return time.Now()
		}
		hst, err := host.New(h.engine, host.Deps{Store: st, KV: st, Events: st, Key: key, Now: now}, host.Config{})
		if err != nil {
			cancel()
			st.Close()
			return nil, nil, err
		}
		res, err := hst.Run(rctx, host.RunSpec{Code: h.guests.Segments, Name: "segments", Input: input(n, every), Grant: host.DefaultGrant()})
		cancel()
		if !errors.Is(err, host.ErrInterrupted) {
			st.Close()
			return nil, nil, fmt.Errorf("bench: the segments run was not interrupted: %v", err)
		}
		hst, err = host.New(h.engine, host.Deps{Store: st, KV: st, Events: st, Key: key}, host.Config{})
		if err != nil {
			st.Close()
			return nil, nil, err
		}
		start := time.Now()
		got, err := hst.Resume(ctx, res.Run)
		d := time.Since(start)
		if err == nil && got.Status != journal.StatusCompleted {
			err = fmt.Errorf("bench: resumed segments run ended %s: %v", got.Status, got.Err)
		}
		if err != nil {
			st.Close()
			return nil, nil, err
		}
		start = time.Now()
		_, err = hst.Run(ctx, host.RunSpec{Code: h.guests.Segments, Name: "segments", Input: input(1000, 0), Grant: host.DefaultGrant()})
		dc := time.Since(start)
		st.Close()
		if err != nil {
			return nil, nil, err
		}
		resumed, clean = append(resumed, ms(d)), append(clean, ms(dc))
		h.logf("7 resume of segments n=%d every=%d rep %d: %.1f ms (%d calls from the journal), clean segment %.1f ms", n, every, r, ms(d), got.Replayed, ms(dc))
	}
	return resumed, clean, nil
}

// resumeCLI times `agentrt resume` and a clean `agentrt run` as processes.
func (h *harness) resumeCLI(ctx context.Context, n, filler int) (resumed, clean, first, warm []float64, err error) {
	bin := filepath.Join(h.root, "agentrt")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/agentrt")
	build.Dir = filepath.Dir(sourceDir())
	if out, err := build.CombinedOutput(); err != nil {
		return nil, nil, nil, nil, fmt.Errorf("bench: go build ./cmd/agentrt: %v\n%s", err, out)
	}
	module := filepath.Join(h.root, "loop.wasm")
	count := filepath.Join(h.root, "count-100")
	if err := os.WriteFile(module, h.guests.Loop, 0o600); err != nil {
		return nil, nil, nil, nil, err
	}
	if err := os.WriteFile(count, countInput(100), 0o600); err != nil {
		return nil, nil, nil, nil, err
	}
	cache := dir(h.root, "cli-cache")
	for r := range h.cfg.Reps {
		data := dir(h.root, fmt.Sprintf("cli-resume-%d", r))
		key, err := cellkey.LoadOrCreate(data)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		st, err := badgerstore.Open(agentcell.StoreDir(data))
		if err != nil {
			return nil, nil, nil, nil, err
		}
		hst, err := host.New(h.engine, host.Deps{Store: st, KV: st, Events: st, Key: key}, host.Config{})
		if err == nil {
			_, err = hst.Run(ctx, host.RunSpec{Code: h.guests.Loop, Input: countInput(filler), Grant: host.DefaultGrant()})
		}
		var run journal.RunID
		if err == nil {
			run, err = h.interrupted(ctx, st, key, n)
		}
		st.Close()
		if err != nil {
			return nil, nil, nil, nil, err
		}
		time1 := func(args ...string) (float64, error) {
			cmd := exec.CommandContext(ctx, bin, append([]string{"--data", data, "--cache", cache}, args...)...)
			start := time.Now()
			out, err := cmd.CombinedOutput()
			if err != nil {
				return 0, fmt.Errorf("bench: agentrt %v: %v\n%s", args, err, out)
			}
			return ms(time.Since(start)), nil
		}
		// The first process to open the store verifies its new tables
		// (7l); both timed commands after it find them verified.
		f, err := time1("runs", "--json")
		if err != nil {
			return nil, nil, nil, nil, err
		}
		w, err := time1("runs", "--json")
		if err != nil {
			return nil, nil, nil, nil, err
		}
		first, warm = append(first, f), append(warm, w)
		d, err := time1("resume", run.String(), "-q")
		if err != nil {
			return nil, nil, nil, nil, err
		}
		dc, err := time1("run", module, "-q", "--input-file", count)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		resumed, clean = append(resumed, d), append(clean, dc)
		h.logf("7 CLI resume rep %d: %.1f ms, clean run %.1f ms; first open %.1f ms, later %.1f ms", r, d, dc, f, w)
	}
	return resumed, clean, first, warm, nil
}

// resumeOnce measures, over the configured repetitions, Resume of an
// n-entry interrupted run on a store that holds a finished run of filler
// entries first, and a clean Run of the same tail.
func (h *harness) resumeOnce(ctx context.Context, n, filler int) (resumed, clean []float64, err error) {
	for r := range h.cfg.Reps {
		st, err := badgerstore.Open(dir(h.root, fmt.Sprintf("resume-%d-%d-%d", n, filler, r)))
		if err != nil {
			return nil, nil, err
		}
		_, key, _ := ed25519.GenerateKey(nil)
		hst, err := host.New(h.engine, host.Deps{Store: st, KV: st, Events: st, Key: key}, host.Config{})
		if err == nil && filler > 0 {
			_, err = hst.Run(ctx, host.RunSpec{Code: h.guests.Loop, Input: countInput(filler), Grant: host.DefaultGrant()})
		}
		var run journal.RunID
		if err == nil {
			run, err = h.interrupted(ctx, st, key, n)
		}
		if err != nil {
			st.Close()
			return nil, nil, err
		}
		start := time.Now()
		res, err := hst.Resume(ctx, run)
		d := time.Since(start)
		if err == nil && res.Status != journal.StatusCompleted {
			err = fmt.Errorf("bench: resumed run ended %s: %v", res.Status, res.Err)
		}
		if err != nil {
			st.Close()
			return nil, nil, err
		}
		start = time.Now()
		_, err = hst.Run(ctx, host.RunSpec{Code: h.guests.Loop, Input: countInput(100), Grant: host.DefaultGrant()})
		dc := time.Since(start)
		st.Close()
		if err != nil {
			return nil, nil, err
		}
		resumed, clean = append(resumed, ms(d)), append(clean, ms(dc))
		h.logf("7 resume of %d entries (store %d) rep %d: %.1f ms, clean %.1f ms", n, filler, r, ms(d), ms(dc))
	}
	return resumed, clean, nil
}
