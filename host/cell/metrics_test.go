package cell_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/budget"
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
	c, err := cell.Open(ctx, t.TempDir(), cached(cell.Options{Observer: mx}))
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
	checkLabels(t, ss, runs)
}

// TestMetricsDuringARun scrapes /metrics while a run's http request is in
// flight, then after it, and after a resume refused because the run's
// journal was damaged: the run counts as running with what its settled
// calls were charged and its headroom, then as completed with a call its
// budget refused; the store's syncs are timed; the lease, and the failure
// to verify by class; every label set is bounded.
func TestMetricsDuringARun(t *testing.T) {
	ctx := context.Background()
	mx := cell.NewMetrics()
	c, err := cell.Open(ctx, t.TempDir(), cached(cell.Options{Observer: mx}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(ctx) })
	mx.Watch(c.Store)
	mx.Queues(func() map[string]int { return map[string]int{"trigger_firings": 0, "task_retries": 0} })
	var during []sample
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/slow":
			during = scrape(t, mx) // the run waits for this answer
		case "/cut":
			cancel()
			<-r.Context().Done()
			return
		}
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(srv.Close)
	code := testutil.BuildGo(t, "host/testdata/agents/probe")
	grant := &host.Grant{Run: &host.RunGrant{}, KV: &host.KVGrant{Namespace: "p"},
		HTTP: &host.HTTPGrant{Hosts: []string{strings.TrimPrefix(srv.URL, "http://")}}, Clock: &host.ClockGrant{}, Random: &host.RandomGrant{}}
	// A budget comes with a token: the cell's own key issues one of 3
	// http requests.
	caps, err := grant.TokenCaps()
	if err != nil {
		t.Fatal(err)
	}
	token := func() []byte {
		tok, err := capability.Issue(c.Key, capability.Claims{Audience: c.Key.Public().(ed25519.PublicKey), Caps: caps,
			Budget: capability.Budget{HTTPRequests: capability.Limit(3)}, NotBefore: time.Now().Add(-time.Minute), Expires: time.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	steps := fmt.Sprintf(`[{"op":"http","url":"%[1]s/a"},{"op":"http","url":"%[1]s/b"},{"op":"http","url":"%[1]s/slow"},{"op":"http","url":"%[1]s/d"},{"op":"kv.put","key":"k","size":3}]`, srv.URL)
	res, err := c.Host.Run(ctx, host.RunSpec{Code: code, Token: token(), Grant: grant, Input: []byte(steps)})
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("run: %v %+v", err, res)
	}
	if during == nil {
		t.Fatal("the run never reached /slow")
	}
	for _, w := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"agentrt_runs", map[string]string{"status": "running"}, 1},
		{"agentrt_runs", map[string]string{"status": "completed"}, 0},
		{"agentrt_budget_charged_total", map[string]string{"dimension": "http_requests"}, 2},
		{"agentrt_budget_headroom_ratio_count", map[string]string{"dimension": "http_requests"}, 2},
		// 2/3 left after /a, 1/3 after /b.
		{"agentrt_budget_headroom_ratio_sum", map[string]string{"dimension": "http_requests"}, 1},
		{"agentrt_budget_refusals_total", map[string]string{"dimension": "http_requests"}, 0},
		{"agentrt_leases_acquired_total", map[string]string{"takeover": "false"}, 1},
		{"agentrt_lease_epoch_max", map[string]string{}, 1},
		{"agentrt_queue_depth", map[string]string{"queue": "trigger_firings"}, 0},
		{"agentrt_approvals_pending", map[string]string{"age": "under_1m"}, 0},
	} {
		if got := value(t, during, w.name, w.labels); got < w.want-1e-9 || got > w.want+1e-9 {
			t.Errorf("during the run: %s%v = %v, want %v", w.name, w.labels, got, w.want)
		}
	}
	if n := value(t, during, "agentrt_journal_fsync_seconds_count", map[string]string{}); n < 1 {
		t.Errorf("during the run: %v syncs timed; the intents of /a and /b were synced", n)
	}

	// A second run is cut during an effect, its journal damaged: its
	// resume is refused, and counted by failure class.
	cut := fmt.Sprintf(`[{"op":"kv.put","key":"k","size":3},{"op":"http","url":"%[1]s/cut"}]`, srv.URL)
	if _, err := c.Host.Run(runCtx, host.RunSpec{Code: code, Token: token(), Grant: grant, Input: []byte(cut)}); !errors.Is(err, host.ErrInterrupted) {
		t.Fatalf("run: %v, want it interrupted", err)
	}
	runs, err := c.Store.Runs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var damaged journal.RunID
	for _, r := range runs {
		if r.Status == journal.StatusRunning {
			damaged = r.ID
		}
	}
	if err := c.Store.RewriteJournal(damaged, func(recs [][]byte) [][]byte {
		recs[2] = recs[2][:len(recs[2])-3]
		return recs
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Host.Resume(ctx, damaged); err == nil {
		t.Fatal("a damaged journal resumed")
	}

	after := scrape(t, mx)
	for _, w := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"agentrt_runs", map[string]string{"status": "completed"}, 1},
		{"agentrt_runs", map[string]string{"status": "running"}, 1},
		{"agentrt_budget_charged_total", map[string]string{"dimension": "http_requests"}, 3},
		{"agentrt_budget_refusals_total", map[string]string{"dimension": "http_requests"}, 1},
		{"agentrt_calls_total", map[string]string{"op": "http.request", "class": "effect", "status": "budget"}, 1},
		{"agentrt_leases_acquired_total", map[string]string{"takeover": "false"}, 2},
		{"agentrt_leases_acquired_total", map[string]string{"takeover": "true"}, 0},
		{"agentrt_verification_failures_total", map[string]string{"class": "decode"}, 1},
	} {
		if got := value(t, after, w.name, w.labels); got != w.want {
			t.Errorf("after the runs: %s%v = %v, want %v", w.name, w.labels, got, w.want)
		}
	}
	checkLabels(t, append(during, after...), []string{res.Run.String(), damaged.String()})
}

// checkLabels fails on a sample whose label is outside the allowlist or
// holds a run id.
func checkLabels(t *testing.T, ss []sample, runs []string) {
	t.Helper()
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
	in := func(vals ...string) func(string) bool {
		return func(v string) bool { return slices.Contains(vals, v) }
	}
	allowed := map[string]func(string) bool{
		"op":        func(v string) bool { return ops[v] },
		"class":     in("pure", "effect", "unknown", "decode", "sequence", "chain", "hash", "signature", "untrusted", "uncovered", "blob", "other"),
		"status":    func(v string) bool { return statuses[v] },
		"durable":   in("true", "false"),
		"takeover":  in("true", "false"),
		"wait":      in(journal.WaitTimer, journal.WaitApproval),
		"dimension": in(budget.DimNames()...),
		"queue":     in("trigger_firings", "task_retries"),
		"age":       in("under_1m", "under_10m", "under_1h", "under_1d", "1d_or_more"),
		"le":        func(v string) bool { _, err := strconv.ParseFloat(v, 64); return err == nil || v == "+Inf" },
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
