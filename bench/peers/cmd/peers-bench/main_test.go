package main

import (
	"errors"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"testing"

	"github.com/agentrt/agentrt/host"
)

func TestPgMajorOrdersDebianFolders(t *testing.T) {
	dirs := []string{"/usr/lib/postgresql/15/bin/pg_ctl", "/usr/lib/postgresql/9.6/bin/pg_ctl", "/usr/lib/postgresql/16/bin/pg_ctl"}
	sort.Slice(dirs, func(i, j int) bool { return pgMajor(dirs[i]) < pgMajor(dirs[j]) })
	want := []string{"/usr/lib/postgresql/9.6/bin/pg_ctl", "/usr/lib/postgresql/15/bin/pg_ctl", "/usr/lib/postgresql/16/bin/pg_ctl"}
	if !slices.Equal(dirs, want) {
		t.Fatalf("ordered %v, want %v", dirs, want)
	}
}

func TestRepeatRunsEveryRunAndFailsWithOne(t *testing.T) {
	var calls [3][4]int
	s, err := repeat(3, 4, 100, func(r, i int) error { calls[r][i]++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	for r := range calls {
		for i := range calls[r] {
			if calls[r][i] != 1 {
				t.Fatalf("run %d of repetition %d ran %d times", i, r, calls[r][i])
			}
		}
	}
	if len(s.PerStepSamples) != 3 || len(s.StepsPerSSamples) != 3 || len(s.RunMSSamples) != 3 {
		t.Fatalf("samples %+v, want 3 of each", s)
	}
	bad := errors.New("step 7 failed")
	if _, err := repeat(2, 4, 100, func(r, i int) error {
		if r == 1 && i == 2 {
			return bad
		}
		return nil
	}); !errors.Is(err, bad) {
		t.Fatalf("repeat with a failed run: %v, want %v", err, bad)
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// The grant the daemon's submissions carry gives the agent kv in its own
// namespace and nothing else.
func TestGrantYAMLIsTheKVGrant(t *testing.T) {
	g, err := host.ParseGrant([]byte(grantYAML("seq-3")))
	if err != nil {
		t.Fatal(err)
	}
	if g.Run == nil || g.KV == nil || g.KV.Namespace != "seq-3" || g.HTTP != nil {
		t.Fatalf("grant %+v, want run and kv in namespace seq-3 alone", g)
	}
}

// The two sides take turns, a repetition each, so that the machine's
// other work falls on both.
func TestCompareTakesTurns(t *testing.T) {
	var order []string
	a := func(r, i int) error { order = append(order, "a"+strconv.Itoa(r)); return nil }
	d := func(r, i int) error { order = append(order, "d"+strconv.Itoa(r)); return nil }
	as, ds, err := compare(3, 1, 10, a, d)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a0", "d0", "a1", "d1", "a2", "d2"}; !slices.Equal(order, want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	if len(as.RunMSSamples) != 3 || len(ds.RunMSSamples) != 3 {
		t.Fatalf("samples: agentrt %d, DBOS %d, want 3 each", len(as.RunMSSamples), len(ds.RunMSSamples))
	}
}

func TestCPUTimes(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/stat is Linux's")
	}
	busy, total := cpuTimes()
	if total == 0 || busy > total {
		t.Fatalf("busy %d of %d jiffies, want a share of a positive total", busy, total)
	}
}
