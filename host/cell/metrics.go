package cell

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/agentrt/agentrt/abi"
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
// the journal commits' latency (durable ones wait for the disk's sync:
// their latency is the commit's plus the fsync's, which the store does
// not time apart), and, read from the store at each scrape, the runs by
// status, the parked runs by what they wait for and the oldest wait.
type Metrics struct {
	reg     *prometheus.Registry
	calls   *prometheus.CounterVec
	commits *prometheus.HistogramVec
	store   journal.Store
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
	m.reg.MustRegister(m.calls, m.commits, (*runsCollector)(m))
	return m
}

// Watch makes the metrics read the runs' index of store at each scrape.
func (m *Metrics) Watch(store journal.Store) { m.store = store }

// Call implements host.Observer.
func (m *Metrics) Call(op abi.Op, status abi.Status) {
	name, class := "unknown", "unknown"
	if known, ok := abi.LookupOp(op.Cap, op.Code); ok {
		name, class = known.Name, known.Class.String()
	}
	m.calls.WithLabelValues(name, class, status.String()).Inc()
}

// Commit implements host.Observer.
func (m *Metrics) Commit(d time.Duration, durable bool) {
	m.commits.WithLabelValues(strconv.FormatBool(durable)).Observe(d.Seconds())
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
)

func (c *runsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- runsDesc
	ch <- parkedDesc
	ch <- oldestDesc
	ch <- errorDesc
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
	for _, r := range runs {
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
	for k, n := range parked {
		ch <- prometheus.MustNewConstMetric(parkedDesc, prometheus.GaugeValue, float64(n), k)
		age := 0.0
		if since := oldest[k]; since > 0 {
			age = time.Duration(now - since).Seconds()
		}
		ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, age, k)
	}
}
