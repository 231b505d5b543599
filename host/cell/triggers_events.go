package cell

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/budget"
	"github.com/agentrt/agentrt/host/cell/trigger"
	"github.com/agentrt/agentrt/internal/clock"
	"github.com/agentrt/agentrt/journal"
	"github.com/fsnotify/fsnotify"
)

// kvEvent is a committed kv write an agent made.
type kvEvent struct {
	run       journal.RunID
	namespace string
	key       string
	size      int
}

// observe is the store's commit observer: it queues the batch's kv writes
// (not deletes) for the worker, and never blocks. While the cell has no
// kv trigger it does nothing: a write committed before a kv trigger
// exists does not fire it.
func (t *triggerSet) observe(b *journal.Batch) {
	if len(b.KV) == 0 {
		return
	}
	t.mu.Lock()
	if t.kvTriggers == 0 {
		t.mu.Unlock()
		return
	}
	if b.Meta != nil && b.Meta.Origin != nil && b.Meta.Origin.Kind == OriginTrigger {
		t.origins[b.Run] = b.Meta.Origin.ID
	}
	for _, w := range b.KV {
		if !w.Delete {
			t.kvq = append(t.kvq, kvEvent{run: b.Run, namespace: w.Namespace, key: w.Key, size: len(w.Value)})
		}
	}
	t.mu.Unlock()
	select {
	case t.kvWake <- struct{}{}:
	default:
	}
}

// kvWorker fires the kv triggers whose prefix each queued write falls
// under, one firing per write, in commit order. A write by a run of the
// trigger itself does not fire it (a run answering its trigger would
// otherwise fire it again, without end).
func (t *triggerSet) kvWorker() {
	defer t.wg.Done()
	for {
		select {
		case <-t.done:
			return
		case <-t.kvWake:
		}
		for {
			t.mu.Lock()
			q := t.kvq
			t.kvq = nil
			t.mu.Unlock()
			if len(q) == 0 {
				break
			}
			for _, e := range q {
				for _, lt := range t.sortedTriggers() {
					if lt.spec.Kind != trigger.KV || lt.spec.Namespace != e.namespace || !strings.HasPrefix(e.key, lt.spec.Prefix) {
						continue
					}
					if t.originOf(e.run) == lt.def.Name {
						continue
					}
					in, _ := json.Marshal(map[string]any{"trigger": lt.def.Name, "kind": trigger.KV, "namespace": e.namespace,
						"key": e.key, "size": e.size, "run": e.run.String()})
					if _, err := t.event(lt, in); err != nil && !isQuiet(err) {
						t.logf("trigger %s: %v", lt.def.Name, err)
					}
				}
			}
		}
	}
}

// setLocked puts lt in t.all under name, or removes name's trigger for a
// nil lt, keeping t.kvTriggers. The caller holds t.mu.
func (t *triggerSet) setLocked(name string, lt *liveTrigger) {
	if old := t.all[name]; old != nil && old.spec.Kind == trigger.KV {
		t.kvTriggers--
	}
	if lt == nil {
		delete(t.all, name)
		return
	}
	if lt.spec.Kind == trigger.KV {
		t.kvTriggers++
	}
	t.all[name] = lt
}

// isQuiet says whether an event's error is one not worth a log line (the
// trigger is paused or gone).
func isQuiet(err error) bool {
	return err == ErrTriggerPaused || err == ErrNoTrigger
}

// originOf names the trigger that started run, "" for none.
func (t *triggerSet) originOf(run journal.RunID) string {
	t.mu.Lock()
	name, ok := t.origins[run]
	t.mu.Unlock()
	if ok {
		return name
	}
	m, err := t.srv.cell.Journal.Meta(context.Background(), run)
	if err == nil && m.Origin != nil && m.Origin.Kind == OriginTrigger {
		name = m.Origin.ID
	}
	t.mu.Lock()
	t.origins[run] = name
	t.mu.Unlock()
	return name
}

// armMetric sets the metric triggers' periodic look.
func (t *triggerSet) armMetric() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	t.metric = t.clk.AfterFunc(MetricTick, func() {
		t.lookMetrics()
		t.armMetric()
	})
}

// counters returns the cell's counters at now, from its run index: each
// event counter named in windows counts its events (run starts,
// completions, failures, cancellations) within its window up to now; the
// gauges (runs parked, runs live) are as they are now.
func (t *triggerSet) counters(now time.Time, windows map[string]time.Duration) (map[string]float64, error) {
	runs, err := t.srv.cell.Journal.Runs(context.Background())
	if err != nil {
		return nil, err
	}
	v := map[string]float64{}
	in := func(counter string, at int64) bool {
		w, ok := windows[counter]
		return ok && at != 0 && !time.Unix(0, at).Before(now.Add(-w)) && !time.Unix(0, at).After(now)
	}
	for _, m := range runs {
		if in("runs_started", m.Started) {
			v["runs_started"]++
		}
		switch m.Status {
		case journal.StatusCompleted:
			if in("runs_completed", m.Ended) {
				v["runs_completed"]++
			}
		case journal.StatusFailed:
			if in("runs_failed", m.Ended) {
				v["runs_failed"]++
			}
		case journal.StatusCancelled:
			if in("runs_cancelled", m.Ended) {
				v["runs_cancelled"]++
			}
		case journal.StatusParked:
			v["runs_parked"]++
		}
		if in("spend_usd", m.Ended) {
			usd, err := t.spendOf(m.ID)
			if err != nil {
				return nil, err
			}
			v["spend_usd"] += usd
		}
		if t.srv.cell.Host.Live(m.ID) {
			v["runs_live"]++
		}
	}
	return v, nil
}

// lookMetrics evaluates every metric trigger; each fires when its
// threshold comes to hold (trigger.Edge), and the edge is kept with the
// trigger, so a restart does not fire a threshold that held before it.
func (t *triggerSet) lookMetrics() {
	var metrics []*liveTrigger
	for _, lt := range t.sortedTriggers() {
		if lt.spec.Kind == trigger.Metric && !lt.def.Paused {
			metrics = append(metrics, lt)
		}
	}
	if len(metrics) == 0 || t.isClosed() {
		return
	}
	t.looking.Lock()
	defer t.looking.Unlock()
	now := t.clk.Now()
	for _, lt := range metrics {
		e := lt.spec.Expr
		v, err := t.counters(now, map[string]time.Duration{e.Counter: e.Window})
		if err != nil {
			t.logf("trigger %s: counters: %v", lt.def.Name, err)
			return
		}
		val := v[e.Counter]
		lt.mu.Lock()
		edge := trigger.Edge{High: lt.def.MetricHigh}
		fire := edge.Look(e.Holds(val))
		changed := edge.High != lt.def.MetricHigh
		lt.def.MetricHigh = edge.High
		if changed {
			if err := t.saveDef(lt.def); err != nil {
				t.logf("trigger %s: %v", lt.def.Name, err)
			}
		}
		lt.mu.Unlock()
		if fire {
			in, _ := json.Marshal(map[string]any{"trigger": lt.def.Name, "kind": trigger.Metric, "expr": e.Text, "value": val, "at": now.UTC()})
			if lt.def.Input != nil {
				in = nil
			}
			if _, err := t.event(lt, in); err != nil && !isQuiet(err) {
				t.logf("trigger %s: %v", lt.def.Name, err)
			}
		}
	}
}

// fileWatch is a file trigger's watch of its folder: each file arriving
// under the glob waits until it has stayed unchanged for FileSettle on
// the cell's clock, then fires once.
type fileWatch struct {
	w       *fsnotify.Watcher
	mu      sync.Mutex
	pending map[string]*arrival
	closed  bool
	done    chan struct{}
}

// arrival is a file seen arriving, not yet complete.
type arrival struct {
	size  int64
	mtime time.Time
	timer clock.Timer
}

func (fw *fileWatch) close() {
	fw.mu.Lock()
	if fw.closed {
		fw.mu.Unlock()
		return
	}
	fw.closed = true
	for _, a := range fw.pending {
		a.timer.Stop()
	}
	fw.mu.Unlock()
	fw.w.Close()
	<-fw.done
}

// watch starts lt's file watch. Its caller holds lt.mu.
func (t *triggerSet) watch(lt *liveTrigger) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	fw := &fileWatch{w: w, pending: map[string]*arrival{}, done: make(chan struct{})}
	if err := t.addDirs(lt, fw, lt.spec.Dir); err != nil {
		w.Close()
		return err
	}
	lt.files = fw
	go func() {
		defer close(fw.done)
		for {
			select {
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				t.fileEvent(lt, fw, ev)
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				t.logf("trigger %s: watching %s: %v", lt.def.Name, lt.spec.Dir, err)
			}
		}
	}()
	return nil
}

// addDirs watches dir, and its subfolders when lt's glob reaches them.
func (t *triggerSet) addDirs(lt *liveTrigger, fw *fileWatch, dir string) error {
	if !lt.spec.Recursive() {
		return fw.w.Add(dir)
	}
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return fw.w.Add(p)
		}
		return nil
	})
}

// fileEvent takes a file created, moved in or written: it (re)starts the
// file's settle timer. A folder created under a recursive glob is watched.
func (t *triggerSet) fileEvent(lt *liveTrigger, fw *fileWatch, ev fsnotify.Event) {
	if !ev.Has(fsnotify.Create) && !ev.Has(fsnotify.Write) {
		return
	}
	info, err := os.Lstat(ev.Name)
	if err != nil {
		return
	}
	if info.IsDir() {
		if ev.Has(fsnotify.Create) && lt.spec.Recursive() {
			// Files may arrive in the folder before its watch is in
			// place: those already there are taken as arriving now.
			if err := t.addDirs(lt, fw, ev.Name); err != nil {
				t.logf("trigger %s: watching %s: %v", lt.def.Name, ev.Name, err)
			}
			filepath.WalkDir(ev.Name, func(p string, d fs.DirEntry, err error) error {
				if err == nil && d.Type().IsRegular() {
					t.fileEvent(lt, fw, fsnotify.Event{Name: p, Op: fsnotify.Create})
				}
				return nil
			})
		}
		return
	}
	if !info.Mode().IsRegular() {
		return
	}
	rel, err := filepath.Rel(lt.spec.Dir, ev.Name)
	if err != nil || !lt.spec.Match(rel) {
		return
	}
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if fw.closed {
		return
	}
	if a := fw.pending[ev.Name]; a != nil {
		a.timer.Stop()
	}
	a := &arrival{size: info.Size(), mtime: info.ModTime()}
	fw.pending[ev.Name] = a
	path := ev.Name
	a.timer = t.clk.AfterFunc(FileSettle, func() { t.settled(lt, fw, path, a) })
}

// settled fires for path when it is as it was when its timer was set (no
// write since has changed its size or time); else it waits again.
func (t *triggerSet) settled(lt *liveTrigger, fw *fileWatch, path string, a *arrival) {
	fw.mu.Lock()
	if fw.closed || fw.pending[path] != a {
		fw.mu.Unlock()
		return
	}
	info, err := os.Lstat(path)
	if err != nil || !info.Mode().IsRegular() {
		delete(fw.pending, path)
		fw.mu.Unlock()
		return
	}
	if info.Size() != a.size || !info.ModTime().Equal(a.mtime) {
		a.size, a.mtime = info.Size(), info.ModTime()
		a.timer = t.clk.AfterFunc(FileSettle, func() { t.settled(lt, fw, path, a) })
		fw.mu.Unlock()
		return
	}
	delete(fw.pending, path)
	fw.mu.Unlock()
	// The same arrival (path, size, time) fires once, whatever events it
	// made.
	id := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%d", path, a.size, a.mtime.UnixNano()))
	first, err := t.seen(lt.def.Name, "file", hex.EncodeToString(id[:]))
	if err != nil {
		t.logf("trigger %s: %v", lt.def.Name, err)
		return
	}
	if !first {
		return
	}
	in, _ := json.Marshal(map[string]any{"trigger": lt.def.Name, "kind": trigger.File, "path": path, "size": a.size, "mtime": a.mtime.UTC()})
	if _, err := t.event(lt, in); err != nil && !isQuiet(err) {
		t.logf("trigger %s: %v", lt.def.Name, err)
	}
}

// spendOf returns the dollars an ended run spent, from the budget records
// of its journal (host.BudgetReport), once per run: an ended run spends no
// more.
func (t *triggerSet) spendOf(run journal.RunID) (float64, error) {
	t.mu.Lock()
	usd, ok := t.spend[run]
	t.mu.Unlock()
	if ok {
		return usd, nil
	}
	var entries []*journal.Entry
	if err := journal.ReadEntries(context.Background(), t.srv.cell.Journal, run, func(e *journal.Entry, _ *journal.Record) error {
		entries = append(entries, e)
		return nil
	}); err != nil {
		return 0, fmt.Errorf("the spend of run %s: %w", run, err)
	}
	rep, err := host.BudgetReport(entries)
	if err != nil {
		return 0, fmt.Errorf("the spend of run %s: %w", run, err)
	}
	for _, r := range rep.Rows {
		if r.Dim == budget.MicroUSD {
			usd = float64(r.Spent) / 1e6
		}
	}
	t.mu.Lock()
	t.spend[run] = usd
	t.mu.Unlock()
	return usd, nil
}
