package bench

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/fileread"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/badgerstore"
	"github.com/agentrt/agentrt/replay"
)

// Figure 9: an audit bundle of a long run, exported and verified. A run of
// testdata/loop.wat with Config.ScaleEntries journal entries (10 million
// in make bench) is recorded, exported from its store to a bundle file and
// verified from it, each step in a child process of its own (this binary,
// re-executed with scaleChildFlag), whose wall time and peak resident set
// size (getrusage of the child) are the figure: export and verification
// stream, so their memory must not grow with the run.

// scaleChildFlag, as the first argument, makes agentrt-bench one of the
// child processes of figure 11.
const scaleChildFlag = "-scale-child"

func (h *harness) scale(ctx context.Context) ([]Figure, error) {
	n := h.cfg.ScaleEntries
	dir := dir(h.root, "scale")
	module := filepath.Join(dir, "loop.wasm")
	if err := os.WriteFile(module, h.guests.Loop, 0o644); err != nil {
		return nil, err
	}
	bundle := filepath.Join(dir, "run.bundle")
	rec, err := child(ctx, "record", dir, strconv.Itoa(n))
	if err != nil {
		return nil, err
	}
	h.logf("11 recorded %d entries in %.1f s, peak RSS %.0f MB", n, rec.wall.Seconds(), rec.rssMB)
	exp, err := child(ctx, "export", dir, rec.out, bundle)
	if err != nil {
		return nil, err
	}
	info, err := os.Stat(bundle)
	if err != nil {
		return nil, err
	}
	h.logf("11a exported %d bytes in %.1f s, peak RSS %.0f MB", info.Size(), exp.wall.Seconds(), exp.rssMB)
	ver, err := child(ctx, "verify", dir, bundle)
	if err != nil {
		return nil, err
	}
	h.logf("11b verified in %.1f s, peak RSS %.0f MB", ver.wall.Seconds(), ver.rssMB)
	goal := &Goal{Text: "peak anonymous RSS <= 256 MB", MaxValue: ptr(256)}
	extra := func(r childRun) map[string]float64 {
		return map[string]float64{"wall s": r.wall.Seconds(), "entries/s": float64(n) / r.wall.Seconds(),
			"peak RSS MB (getrusage)": r.rssMB, "bundle MB": float64(info.Size()) / 1e6,
			"recording peak RSS MB (getrusage)": rec.rssMB, "recording peak anonymous RSS MB": rec.anonMB, "recording wall s": rec.wall.Seconds()}
	}
	return []Figure{{
		ID: "11a", Name: fmt.Sprintf("export a %s-entry run to a bundle: peak anonymous RSS", millions(n)), Unit: "MB", Better: "lower",
		Value: exp.anonMB, Samples: []float64{exp.anonMB}, Goal: goal, Extra: extra(exp),
		Measures: fmt.Sprintf("replay.ExportTo of a run of testdata/loop.wat with %d entries, from its badgerstore to a bundle file (%d bytes), "+
			"in a child process: the child's peak anonymous resident memory (RssAnon of /proc/self/status, sampled every 20 ms), the memory export "+
			"holds; its peak RSS by getrusage (ru_maxrss, which also counts the pages of the store's table files badger maps and reads: page "+
			"cache, not held) and its wall time in extra. The run is recorded by another child first (its figures in extra).", n, info.Size()),
	}, {
		ID: "11b", Name: fmt.Sprintf("verify the bundle of a %s-entry run offline: peak anonymous RSS", millions(n)), Unit: "MB", Better: "lower",
		Value: ver.anonMB, Samples: []float64{ver.anonMB}, Goal: goal, Extra: extra(ver),
		Measures: fmt.Sprintf("replay.VerifyBundleReader of the bundle file of 11a (%d entries, %d bytes) with the cell's key, in a child process: "+
			"format, journal verifier, checkpoint, signature and the re-execution of every call on wazero; the child's peak anonymous resident "+
			"memory as in 11a; its peak RSS by getrusage and its wall time in extra.", n, info.Size()),
	}}, nil
}

func millions(n int) string {
	if n >= 1_000_000 && n%1_000_000 == 0 {
		return fmt.Sprintf("%dM", n/1_000_000)
	}
	return strconv.Itoa(n)
}

// childRun is what a child process of figure 11 did.
type childRun struct {
	wall time.Duration
	// rssMB is the peak RSS by getrusage, anonMB the peak anonymous RSS
	// the child sampled of itself.
	rssMB, anonMB float64
	out           string
}

// child runs this binary as a child process of figure 11 and measures it.
func child(ctx context.Context, args ...string) (childRun, error) {
	exe, err := os.Executable()
	if err != nil {
		return childRun{}, err
	}
	cmd := exec.CommandContext(ctx, exe, append([]string{scaleChildFlag}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	out, err := cmd.Output()
	wall := time.Since(start)
	if err != nil {
		return childRun{}, fmt.Errorf("bench: figure 11 %s: %v\n%s", args[0], err, stderr.String())
	}
	r := childRun{wall: wall, rssMB: peakRSSMB(cmd.ProcessState)}
	// The child's last line is its peak anonymous RSS in KiB.
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if kib, err := strconv.ParseFloat(lines[len(lines)-1], 64); err == nil {
		r.anonMB = kib * 1024 / 1e6
		lines = lines[:len(lines)-1]
	}
	r.out = strings.Join(lines, "\n")
	return r, nil
}

// sampleAnon samples this process's anonymous resident memory every 20 ms
// until stop is closed, and returns the peak seen, in KiB (0 where the
// system does not say).
func sampleAnon(stop <-chan struct{}) <-chan float64 {
	peak := make(chan float64, 1)
	go func() {
		var max float64
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			max = math.Max(max, rssAnonKiB())
			select {
			case <-stop:
				peak <- math.Max(max, rssAnonKiB())
				return
			case <-t.C:
			}
		}
	}()
	return peak
}

// rssAnonKiB reads RssAnon from /proc/self/status.
func rssAnonKiB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "RssAnon:"); ok {
			f, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return f
		}
	}
	return 0
}

// scaleChild is a child process of figure 11: record DIR N, export DIR RUN
// BUNDLE, or verify DIR BUNDLE. The cell's key is DIR/key (its seed, hex).
func scaleChild(args []string, stdout, stderr io.Writer) int {
	stop := make(chan struct{})
	peak := sampleAnon(stop)
	err := runScaleChild(context.Background(), args, stdout)
	close(stop)
	if err != nil {
		fmt.Fprintf(stderr, "agentrt-bench %s: %v\n", scaleChildFlag, err)
		return 1
	}
	fmt.Fprintf(stdout, "%.0f\n", <-peak)
	return 0
}

func runScaleChild(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) < 2 {
		return errors.New("usage: record DIR N | export DIR RUN BUNDLE | verify DIR BUNDLE")
	}
	dir := args[1]
	keyFile := filepath.Join(dir, "key")
	switch {
	case args[0] == "record" && len(args) == 3:
		n, err := strconv.Atoi(args[2])
		if err != nil || n < 5 {
			return fmt.Errorf("entries %q", args[2])
		}
		_, key, err := ed25519.GenerateKey(nil)
		if err != nil {
			return err
		}
		if err := os.WriteFile(keyFile, []byte(hex.EncodeToString(key.Seed())), 0o600); err != nil {
			return err
		}
		code, err := fileread.Read(filepath.Join(dir, "loop.wasm"), fileread.Module)
		if err != nil {
			return err
		}
		engine, err := host.NewEngine(ctx, host.EngineConfig{})
		if err != nil {
			return err
		}
		defer engine.Close(ctx)
		st, err := badgerstore.Open(filepath.Join(dir, "store"))
		if err != nil {
			return err
		}
		defer st.Close()
		h, err := host.New(engine, host.Deps{Store: st, KV: st, Events: st, Key: key}, host.Config{})
		if err != nil {
			return err
		}
		// Entries: the start, the lease, the N+1 calls, the end.
		calls := n - 4
		res, err := h.Run(ctx, host.RunSpec{Code: code, Name: "loop", Input: countInput(calls)})
		if err != nil {
			return err
		}
		if res.Status != journal.StatusCompleted || res.Steps != uint64(calls)+1 {
			return fmt.Errorf("run %s ended %s after %d calls", res.Run, res.Status, res.Steps)
		}
		_, err = fmt.Fprintln(stdout, res.Run)
		return err
	case args[0] == "export" && len(args) == 4:
		key, err := scaleKey(keyFile)
		if err != nil {
			return err
		}
		run, err := journal.ParseRunID(args[2])
		if err != nil {
			return err
		}
		st, err := badgerstore.Open(filepath.Join(dir, "store"))
		if err != nil {
			return err
		}
		defer st.Close()
		f, err := os.Create(args[3])
		if err != nil {
			return err
		}
		rep, err := replay.ExportTo(ctx, st, run, key, replay.EngineSettings{}, f)
		if err == nil {
			err = f.Close()
		}
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(stdout, rep.Bytes)
		return err
	case args[0] == "verify" && len(args) == 3:
		key, err := scaleKey(keyFile)
		if err != nil {
			return err
		}
		f, size, err := fileread.Open(args[2], fileread.Bundle)
		if err != nil {
			return err
		}
		defer f.Close()
		rep, err := replay.VerifyBundleReader(ctx, f, size, replay.VerifyOptions{Trusted: []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}})
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(stdout, rep.EntriesChecked)
		return err
	}
	return fmt.Errorf("unknown child %q", args)
}

func scaleKey(file string) (ed25519.PrivateKey, error) {
	b, err := fileread.Read(file, fileread.Key)
	if err != nil {
		return nil, err
	}
	seed, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("%s: not a key seed", file)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}
