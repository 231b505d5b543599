package cell

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/host/budget"
	"github.com/agentrt/agentrt/journal"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are a cell's Prometheus metrics. Labels take only bounded
// values: an op of the ABI (or "unknown"), a call class, an ABI status
// name, a run status, a wait kind, "true"/"false"; never a run id, a
// resource or anything an agent chooses.
//
// What the cell measures: the calls journaled (by op, class and status),
// the journal commits' latency (durable ones include the disk's sync) and
// the syncs' own (the badger store times its fsync apart; a cluster
// cell's JetStream store has no fsync of its own, the NATS servers sync,
// so there the histogram stays empty), what the calls were charged by
// budget dimension (tokens, micro-USD, calls) and the runs' headroom as
// they settle, the calls a budget refused, the leases acquired (taken
// over from another cell or not), the highest epoch and the leases lost,
// the journals a resume, takeover or fork refused because they do not
// verify (by failure class), the depth of the daemon's queues (Queues);
// and, read from the store at each scrape, the runs by status, the parked
// runs by what they wait for and the oldest wait, and the approvals
// pending by age.
type Metrics struct {
	reg      *prometheus.Registry
	calls    *prometheus.CounterVec
	commits  *prometheus.HistogramVec
	fsync    prometheus.Histogram
	charged  *prometheus.CounterVec
	headroom *prometheus.HistogramVec
	refused  *prometheus.CounterVec
	leases   *prometheus.CounterVec
	epoch    prometheus.Gauge
	lost     prometheus.Counter
	verify   *prometheus.CounterVec
	store    journal.Store
	stopSync func()

	// callChild caches calls' children by callKey, and commitChild
	// commits' by durable (0 false, 1 true): a call's metrics then cost a
	// lookup of a small key and an atomic add, not a hash of its label
	// values and the vector's lock. A child is made on first use, so the
	// series a scrape shows are those seen.
	callChild   sync.Map // callKey -> prometheus.Counter
	commitChild [2]atomic.Pointer[prometheus.Observer]

	mu     sync.Mutex
	queues func() map[string]int
	maxEp  uint64
}

// NewMetrics returns a cell's metrics, with no store to read yet:
// give it to Open as Options.Observer, then set its store with Watch.
func NewMetrics() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.calls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentrt_calls_total",
		Help: "Import calls journaled, by op, class (pure, effect, ...) and ABI status.",
	}, []string{"op", "class", "status"})
	m.commits = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "agentrt_journal_commit_seconds",
		Help:    "Latency of the journal commits of live runs; durable commits include the store's fsync.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
	}, []string{"durable"})
	m.fsync = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "agentrt_journal_fsync_seconds",
		Help:    "Latency of the store's syncs to disk (the fsync of a commit round holding a durable batch); empty on a cluster cell, whose NATS servers sync.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
	})
	dim := []string{"dimension"}
	m.charged = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentrt_budget_charged_total",
		Help: "What the runs' calls were charged as they settled, by budget dimension: input_tokens, output_tokens, micro_usd (spend), model_calls, tool_calls, http_requests.",
	}, dim)
	m.headroom = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "agentrt_budget_headroom_ratio",
		Help:    "A run's headroom as a call settles, by budget dimension with a ceiling: the share of the ceiling neither spent nor reserved.",
		Buckets: []float64{0, 0.05, 0.1, 0.25, 0.5, 0.75, 1},
	}, dim)
	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentrt_budget_refusals_total",
		Help: "Calls a run's budget refused, by the dimension that ran out.",
	}, dim)
	m.leases = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentrt_leases_acquired_total",
		Help: "Run leases this cell acquired: takeover=true when it took a run over from another cell.",
	}, []string{"takeover"})
	m.epoch = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "agentrt_lease_epoch_max",
		Help: "The highest lease epoch this cell has acquired (each takeover or resume of a run raises its epoch).",
	})
	m.lost = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "agentrt_leases_lost_total",
		Help: "Leases lost while their run went on (another holder took the run).",
	})
	m.verify = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentrt_verification_failures_total",
		Help: "Journals a resume, takeover or fork refused because they do not verify, by failure class (journal/SPEC.md section 9).",
	}, []string{"class"})
	for _, d := range budget.DimNames() {
		m.charged.WithLabelValues(d)
		m.refused.WithLabelValues(d)
	}
	m.leases.WithLabelValues("true")
	m.leases.WithLabelValues("false")
	m.reg.MustRegister(m.calls, m.commits, m.fsync, m.charged, m.headroom, m.refused, m.leases, m.epoch, m.lost, m.verify,
		(*runsCollector)(m), (*queueCollector)(m))
	return m
}

// Watch makes the metrics read the runs' index of store at each scrape,
// and time its syncs when it can.
func (m *Metrics) Watch(store journal.Store) {
	m.store = store
	if m.stopSync != nil {
		m.stopSync()
		m.stopSync = nil
	}
	if s, ok := store.(interface {
		ObserveSyncs(func(time.Duration)) func()
	}); ok {
		m.stopSync = s.ObserveSyncs(func(d time.Duration) { m.fsync.Observe(d.Seconds()) })
	}
}

// Queues makes the metrics read the depth of the daemon's queues at each
// scrape (Server.QueueDepths).
func (m *Metrics) Queues(fn func() map[string]int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.queues = fn
}

// Charged implements host.RunObserver.
func (m *Metrics) Charged(used budget.Amounts, headroom [budget.NumDims]float64) {
	for d := budget.Dim(0); d < budget.NumDims; d++ {
		if used[d] > 0 {
			m.charged.WithLabelValues(d.String()).Add(float64(used[d]))
		}
		if headroom[d] >= 0 && used[d] > 0 {
			m.headroom.WithLabelValues(d.String()).Observe(headroom[d])
		}
	}
}

// BudgetRefused implements host.RunObserver.
func (m *Metrics) BudgetRefused(d budget.Dim) {
	if d < budget.NumDims {
		m.refused.WithLabelValues(d.String()).Inc()
	}
}

// Lease implements host.RunObserver.
func (m *Metrics) Lease(epoch uint64, takeover bool) {
	m.leases.WithLabelValues(strconv.FormatBool(takeover)).Inc()
	m.mu.Lock()
	defer m.mu.Unlock()
	if epoch > m.maxEp {
		m.maxEp = epoch
		m.epoch.Set(float64(epoch))
	}
}

// LeaseLost implements host.RunObserver.
func (m *Metrics) LeaseLost() { m.lost.Inc() }

// verifyClasses are the failure classes of journal/SPEC.md §9: a class
// outside them counts as "other", so the label stays bounded.
var verifyClasses = map[string]bool{"decode": true, "sequence": true, "chain": true, "hash": true,
	"signature": true, "untrusted": true, "uncovered": true, "blob": true}

// VerifyFailed implements host.RunObserver.
func (m *Metrics) VerifyFailed(class string) {
	if !verifyClasses[class] {
		class = "other"
	}
	m.verify.WithLabelValues(class).Inc()
}

// queueCollector reads the depth of the daemon's queues at each scrape.
type queueCollector Metrics

var queueDesc = prometheus.NewDesc("agentrt_queue_depth", "Work the daemon holds back, by queue: trigger_firings (firings queued behind a trigger's runs, overlap queue), task_retries (tasks waiting for their next attempt).", []string{"queue"}, nil)

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) { ch <- queueDesc }

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	fn := c.queues
	c.mu.Unlock()
	if fn == nil {
		return
	}
	for q, n := range fn() {
		ch <- prometheus.MustNewConstMetric(queueDesc, prometheus.GaugeValue, float64(n), q)
	}
}

// callKey names a child of the calls' counter: the op's capability and
// code, and the status.
type callKey struct {
	cap    abi.Capability
	code   uint32
	status abi.Status
}

// Call implements host.Observer.
func (m *Metrics) Call(op abi.Op, status abi.Status) {
	k := callKey{op.Cap, op.Code, status}
	if c, ok := m.callChild.Load(k); ok {
		c.(prometheus.Counter).Inc()
		return
	}
	name, class := "unknown", "unknown"
	if known, ok := abi.LookupOp(op.Cap, op.Code); ok {
		name, class = known.Name, known.Class.String()
	}
	c := m.calls.WithLabelValues(name, class, status.String())
	// Op codes and statuses are numbers a guest may choose: only the
	// known ones are kept, so the cache stays bounded as the labels do.
	if name != "unknown" && !strings.HasPrefix(status.String(), "status(") {
		m.callChild.Store(k, c)
	}
	c.Inc()
}

// Commit implements host.Observer.
func (m *Metrics) Commit(d time.Duration, durable bool) {
	i := 0
	if durable {
		i = 1
	}
	o := m.commitChild[i].Load()
	if o == nil {
		c := m.commits.WithLabelValues(strconv.FormatBool(durable))
		o = &c
		m.commitChild[i].Store(o)
	}
	(*o).Observe(d.Seconds())
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// runsCollector reads the runs' index at each scrape.
type runsCollector Metrics

var (
	runsDesc   = prometheus.NewDesc("agentrt_runs", "Runs in the cell's store, by status.", []string{"status"}, nil)
	parkedDesc = prometheus.NewDesc("agentrt_parked_runs", "Parked runs, by what they wait for (timer, approval).", []string{"wait"}, nil)
	oldestDesc = prometheus.NewDesc("agentrt_parked_oldest_seconds", "How long the longest-parked run has waited, by what it waits for.", []string{"wait"}, nil)
	errorDesc  = prometheus.NewDesc("agentrt_store_read_errors", "1 when the last scrape could not read the runs' index.", nil, nil)
	approvDesc = prometheus.NewDesc("agentrt_approvals_pending", "Approvals pending (runs parked until their approvers decide), by how long they have waited: under_1m, under_10m, under_1h, under_1d, 1d_or_more.", []string{"age"}, nil)
)

// approvalAges are the age classes of pending approvals, by upper bound.
var approvalAges = []struct {
	name  string
	under time.Duration
}{{"under_1m", time.Minute}, {"under_10m", 10 * time.Minute}, {"under_1h", time.Hour}, {"under_1d", 24 * time.Hour}, {"1d_or_more", 1 << 62}}

func (c *runsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- runsDesc
	ch <- parkedDesc
	ch <- oldestDesc
	ch <- errorDesc
	ch <- approvDesc
}

func (c *runsCollector) Collect(ch chan<- prometheus.Metric) {
	if c.store == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	runs, err := c.store.Runs(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(errorDesc, prometheus.GaugeValue, 1)
		return
	}
	ch <- prometheus.MustNewConstMetric(errorDesc, prometheus.GaugeValue, 0)
	status := map[journal.RunStatus]int{}
	for _, s := range []journal.RunStatus{journal.StatusRunning, journal.StatusCompleted, journal.StatusFailed,
		journal.StatusCancelled, journal.StatusHeld, journal.StatusParked} {
		status[s] = 0
	}
	parked := map[string]int{journal.WaitTimer: 0, journal.WaitApproval: 0}
	oldest := map[string]int64{}
	now := time.Now().UnixNano()
	ages := make([]int, len(approvalAges))
	for _, r := range runs {
		if r.Status == journal.StatusParked && r.Wait != nil && r.Wait.Kind == journal.WaitApproval {
			age := time.Duration(now - r.Wait.Since)
			for i, a := range approvalAges {
				if age < a.under {
					ages[i]++
					break
				}
			}
		}
		if _, ok := status[r.Status]; ok {
			status[r.Status]++
		}
		if r.Wait != nil {
			if _, ok := parked[r.Wait.Kind]; ok {
				parked[r.Wait.Kind]++
				if r.Wait.Since > 0 && (oldest[r.Wait.Kind] == 0 || r.Wait.Since < oldest[r.Wait.Kind]) {
					oldest[r.Wait.Kind] = r.Wait.Since
				}
			}
		}
	}
	for s, n := range status {
		ch <- prometheus.MustNewConstMetric(runsDesc, prometheus.GaugeValue, float64(n), string(s))
	}
	for i, a := range approvalAges {
		ch <- prometheus.MustNewConstMetric(approvDesc, prometheus.GaugeValue, float64(ages[i]), a.name)
	}
	for k, n := range parked {
		ch <- prometheus.MustNewConstMetric(parkedDesc, prometheus.GaugeValue, float64(n), k)
		age := 0.0
		if since := oldest[k]; since > 0 {
			age = time.Duration(now - since).Seconds()
		}
		ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, age, k)
	}
}

// Scheduler makes the metrics read srv's scheduler (sched.go) at each
// scrape: the workers and how many are busy, the runs queued by priority
// (1..9), the oldest one's wait, the admissions by outcome (admitted, or
// the refusal's reason), and the histogram of the runs' queue waits.
func (m *Metrics) Scheduler(srv *Server) {
	m.reg.MustRegister(&schedCollector{srv: srv})
}

var (
	schedWorkersDesc = prometheus.NewDesc("agentrt_sched_workers", "The scheduler's workers: runs that may execute at once (agentrt cell serve --workers).", nil, nil)
	schedBusyDesc    = prometheus.NewDesc("agentrt_sched_workers_busy", "Workers executing a run now; a parked run holds none.", nil, nil)
	schedQueuedDesc  = prometheus.NewDesc("agentrt_sched_queued", "Runs waiting for a worker, by priority (1 lowest .. 9 highest).", []string{"priority"}, nil)
	schedOldestDesc  = prometheus.NewDesc("agentrt_sched_oldest_wait_seconds", "How long the longest-queued run has waited for a worker (0 for an empty queue).", nil, nil)
	schedAdmitDesc   = prometheus.NewDesc("agentrt_sched_admissions_total", "Admission decisions on new runs (submissions, task attempts, trigger firings, spawns), by outcome: admitted, or the refusal's reason (policy, budget, queue_full).", []string{"outcome"}, nil)
)

type schedCollector struct{ srv *Server }

func (c *schedCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- schedWorkersDesc
	ch <- schedBusyDesc
	ch <- schedQueuedDesc
	ch <- schedOldestDesc
	ch <- schedAdmitDesc
	c.srv.sched.wait.Describe(ch)
}

func (c *schedCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.srv.sched.stats()
	ch <- prometheus.MustNewConstMetric(schedWorkersDesc, prometheus.GaugeValue, float64(st.Workers))
	ch <- prometheus.MustNewConstMetric(schedBusyDesc, prometheus.GaugeValue, float64(st.Busy))
	for p := MinPriority; p <= MaxPriority; p++ {
		ch <- prometheus.MustNewConstMetric(schedQueuedDesc, prometheus.GaugeValue, float64(st.QueuedByPriority[p]), strconv.Itoa(p))
	}
	ch <- prometheus.MustNewConstMetric(schedOldestDesc, prometheus.GaugeValue, st.OldestWait.Seconds())
	ch <- prometheus.MustNewConstMetric(schedAdmitDesc, prometheus.CounterValue, float64(st.Admitted), "admitted")
	for _, r := range []string{RefusedPolicy, RefusedBudget, RefusedFull, RefusedCellBudget} {
		ch <- prometheus.MustNewConstMetric(schedAdmitDesc, prometheus.CounterValue, float64(st.Refused[r]), r)
	}
	c.srv.sched.wait.Collect(ch)
}
