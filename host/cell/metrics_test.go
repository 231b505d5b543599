package cell_test

import (
	"context"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
)

// sample is one line of the Prometheus text format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$`)
var labelPair = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// scrape reads m's /metrics.
func scrape(t *testing.T, m *cell.Metrics) []sample {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	var out []sample
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("not a sample: %q", line)
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Fatalf("sample %q: %v", line, err)
		}
		s := sample{name: m[1], labels: map[string]string{}, value: v}
		for _, p := range labelPair.FindAllStringSubmatch(m[2], -1) {
			s.labels[p[1]] = p[2]
		}
		out = append(out, s)
	}
	return out
}

// value returns the value of the sample of name with exactly labels.
func value(t *testing.T, ss []sample, name string, labels map[string]string) float64 {
	t.Helper()
	for _, s := range ss {
		if s.name != name || len(s.labels) != len(labels) {
			continue
		}
		match := true
		for k, v := range labels {
			match = match && s.labels[k] == v
		}
		if match {
			return s.value
		}
	}
	t.Fatalf("no sample %s%v", name, labels)
	return 0
}

// TestMetricsCountRealRunsWithBoundedLabels: after real runs in a cell,
// /metrics counts their calls by op, class and status (a denied call
// too), their commits, and the runs by status; every label is one of a
// known set, with a value from a bounded set, and no run id shows.
func TestMetricsCountRealRunsWithBoundedLabels(t *testing.T) {
	ctx := context.Background()
	mx := cell.NewMetrics()
	c, err := cell.Open(ctx, t.TempDir(), cell.Options{NoCache: true, Observer: mx})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(ctx) })
	mx.Watch(c.Store)
	code := testutil.BuildGo(t, "host/testdata/agents/probe")
	grant := &host.Grant{Run: &host.RunGrant{}, KV: &host.KVGrant{Namespace: "p"}, HTTP: &host.HTTPGrant{Hosts: []string{"127.0.0.1:1"}},
		Clock: &host.ClockGrant{}, Random: &host.RandomGrant{}}
	var runs []string
	for range 2 {
		res, err := c.Host.Run(ctx, host.RunSpec{Code: code, Grant: grant,
			Input: []byte(`[{"op":"kv.put","key":"k","size":3},{"op":"kv.get","key":"k"},{"op":"http","url":"http://other.example/"}]`)})
		if err != nil || res.Status != journal.StatusCompleted {
			t.Fatalf("run: %v %+v", err, res)
		}
		runs = append(runs, res.Run.String())
	}
	ss := scrape(t, mx)
	for _, w := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"agentrt_calls_total", map[string]string{"op": "kv.put", "class": "effect", "status": "ok"}, 2},
		{"agentrt_calls_total", map[string]string{"op": "kv.get", "class": "pure", "status": "ok"}, 2},
		{"agentrt_calls_total", map[string]string{"op": "http.request", "class": "effect", "status": "denied"}, 2},
		{"agentrt_runs", map[string]string{"status": "completed"}, 2},
		{"agentrt_runs", map[string]string{"status": "running"}, 0},
		{"agentrt_parked_runs", map[string]string{"wait": "approval"}, 0},
		{"agentrt_store_read_errors", map[string]string{}, 0},
	} {
		if got := value(t, ss, w.name, w.labels); got != w.want {
			t.Errorf("%s%v = %v, want %v", w.name, w.labels, got, w.want)
		}
	}
	// Each kv.put commits durably before it returns.
	if n := value(t, ss, "agentrt_journal_commit_seconds_count", map[string]string{"durable": "true"}); n < 2 {
		t.Errorf("durable commits counted: %v, want at least 2", n)
	}
	ops := map[string]bool{"unknown": true}
	for _, op := range abi.Ops {
		ops[op.Name] = true
	}
	statuses := map[string]bool{}
	for s := abi.Status(0); s < 64; s++ {
		if n := s.String(); !strings.Contains(n, "(") {
			statuses[n] = true
		}
	}
	for _, s := range []journal.RunStatus{journal.StatusRunning, journal.StatusCompleted, journal.StatusFailed, journal.StatusCancelled, journal.StatusHeld, journal.StatusParked} {
		statuses[string(s)] = true
	}
	allowed := map[string]func(string) bool{
		"op":      func(v string) bool { return ops[v] },
		"class":   func(v string) bool { return v == "pure" || v == "effect" || v == "unknown" },
		"status":  func(v string) bool { return statuses[v] },
		"durable": func(v string) bool { return v == "true" || v == "false" },
		"wait":    func(v string) bool { return v == journal.WaitTimer || v == journal.WaitApproval },
		"le":      func(v string) bool { _, err := strconv.ParseFloat(v, 64); return err == nil || v == "+Inf" },
	}
	for _, s := range ss {
		if !strings.HasPrefix(s.name, "agentrt_") && !strings.HasPrefix(s.name, "go_") && !strings.HasPrefix(s.name, "process_") && !strings.HasPrefix(s.name, "promhttp_") {
			t.Errorf("metric %s is not agentrt's", s.name)
		}
		for k, v := range s.labels {
			ok := allowed[k]
			if ok == nil || !ok(v) {
				t.Errorf("%s has label %s=%q, outside the allowlist", s.name, k, v)
			}
			for _, r := range runs {
				if strings.Contains(v, r[:8]) {
					t.Errorf("%s has the run id %s in label %s", s.name, r, k)
				}
			}
		}
	}
}
