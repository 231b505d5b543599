package cell

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/cell/trigger"
	"github.com/agentrt/agentrt/internal/clock"
	"github.com/agentrt/agentrt/journal"
)

// triggerSet is a cell daemon's triggers, which start runs on their own:
// at the moments of a schedule, on a kv write, a file arriving, a signed
// webhook, a metric threshold (trigger.Spec). Definitions and the trigger log live in the
// cell's own records (journal.CellRecords), so both survive restarts.
//
// Each firing is taken once, also across a SIGKILL, in three steps:
//
//  1. claim: the firing's record (trigger, seq) is created, durably, in
//     state claimed (CellCreate: insert if absent, so a seq is claimed
//     once);
//  2. start: the run is started with journal.Origin{Kind: "trigger", ID:
//     name, Seq: seq} in its header and index record;
//  3. mark: the record becomes started, naming the run (or refused, with
//     the reason).
//
// On start, a daemon resolves every record left claimed: it starts the
// firing only when no run's origin names it. A schedule's seq is its
// moment in Unix seconds; an event's is its ordinal, from 1.
type triggerSet struct {
	srv  *Server
	clk  clock.Clock
	logf func(string, ...any)

	// looking serializes the metric triggers' looks (the periodic one and
	// the one after each run's end): each reads the clock and the counters
	// and moves the edges under it, so that a slow look with older counters
	// cannot lower an edge a newer one raised, and fire it twice.
	looking sync.Mutex

	mu      sync.Mutex
	all     map[string]*liveTrigger
	started bool
	closed  bool
	stopObs func()
	metric  clock.Timer
	// kvq holds the kv writes seen by the commit observer, for the
	// worker to match (the observer must not block the store).
	kvq    []kvEvent
	kvWake chan struct{}
	// kvTriggers counts the kv triggers in all: with none, the observer
	// queues nothing and wakes no one, so that a cell without kv triggers
	// pays nothing on each commit (setLocked keeps it).
	kvTriggers int
	// origins caches which trigger started each run (kv writes of a
	// trigger's own runs do not fire it).
	origins map[journal.RunID]string
	// last is each trigger's newest log entry, for its info (the log is
	// listed oldest first).
	last map[string]Firing
	// spend caches the dollars each ended run spent (metric spend_usd).
	spend map[journal.RunID]float64
	// roomWaiters names the triggers whose first queued firing waits for
	// room in the cell (liveTrigger.roomWait); roomWake wakes roomWorker
	// to try them when room is made.
	roomWaiters map[string]bool
	roomWake    chan struct{}
	wg          sync.WaitGroup
	done        chan struct{}
}

// Tables of the cell's records that triggers keep.
const (
	tableTriggers = "triggers"
	tableFirings  = "trigger-firings"
	tableSeen     = "trigger-seen"
)

// OriginTrigger is the journal.Origin kind of a triggered run.
const OriginTrigger = "trigger"

// MaxRefusals is how many starts in a row a trigger's token, grant or
// module may have refused before the trigger pauses itself: a refusal is
// recorded, never retried, and one that keeps coming needs a person.
const MaxRefusals = 3

// MetricTick is how often metric triggers look at the cell's counters,
// besides at the end of every run.
const MetricTick = 15 * time.Second

// FileSettle is how long a file arriving must stay unchanged (its size
// and modification time) before a file trigger takes it as complete.
const FileSettle = time.Second

// Errors of the trigger API.
var (
	// ErrNoTrigger is returned for a name no trigger has.
	ErrNoTrigger = errors.New("no such trigger")
	// ErrTriggerExists is returned by add for a name taken.
	ErrTriggerExists = errors.New("a trigger of that name exists")
	// ErrTriggerPaused is returned to a webhook of a paused trigger.
	ErrTriggerPaused = errors.New("the trigger is paused")
)

// triggerDef is a trigger as the cell keeps it (table "triggers", JSON).
type triggerDef struct {
	Name         string `json:"name"`
	On           string `json:"on"`
	ModuleSHA256 string `json:"module_sha256"`
	ModuleName   string `json:"module_name,omitempty"`
	Grant        string `json:"grant,omitempty"`
	Token        []byte `json:"token,omitempty"`
	Input        []byte `json:"input,omitempty"`
	Misfire      string `json:"misfire"`
	Overlap      string `json:"overlap"`
	// Priority is the priority of the trigger's runs (0: DefaultPriority).
	Priority int       `json:"priority,omitempty"`
	Created  time.Time `json:"created"`
	// Resumed is when the trigger was last resumed: a schedule's moments
	// while it was paused are not caught up.
	Resumed      time.Time `json:"resumed,omitzero"`
	Paused       bool      `json:"paused,omitempty"`
	PausedReason string    `json:"paused_reason,omitempty"`
	Refusals     int       `json:"refusals,omitempty"`
	// MetricHigh is a metric trigger's edge state (trigger.Edge).
	MetricHigh bool `json:"metric_high,omitempty"`
}

// States of a firing in the trigger log.
const (
	FiringClaimed = "claimed"
	FiringQueued  = "queued"
	FiringPending = "pending"
	FiringStarted = "started"
	FiringRefused = "refused"
	FiringSkipped = "skipped"
)

// Firing is one entry of a trigger's log.
type Firing struct {
	Trigger string `json:"trigger"`
	Seq     uint64 `json:"seq"`
	// Moment is the scheduled moment, or when the event was seen.
	Moment time.Time `json:"moment"`
	// State is claimed (about to start), queued (waiting for the
	// trigger's runs to end, overlap queue, or for room in the cell:
	// Reason says so), pending (a catch-up moment
	// waiting its turn), started, refused (the start was refused: Reason
	// says why) or skipped (by the misfire or overlap policy).
	State  string `json:"state"`
	Run    string `json:"run,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Catchup marks a firing of a moment missed.
	Catchup bool `json:"catchup,omitempty"`
	// Skipped counts the moments a skipped entry stands for, the oldest
	// being From.
	Skipped int        `json:"skipped,omitempty"`
	From    *time.Time `json:"from,omitempty"`
	// Input is an event's input, kept until its run starts.
	Input    []byte    `json:"input,omitempty"`
	Recorded time.Time `json:"recorded"`
}

// liveTrigger is a loaded trigger. Its mu serializes its firings.
type liveTrigger struct {
	mu      sync.Mutex
	def     triggerDef
	spec    trigger.Spec
	misfire trigger.Misfire
	overlap trigger.Overlap
	// cursor is the newest moment a schedule has decided.
	cursor time.Time
	timer  clock.Timer
	// catchup is the timer of the next pending catch-up moment.
	catchup clock.Timer
	// nextSeq is the next event ordinal.
	nextSeq uint64
	// active are the runs it started that have not ended; queue the seqs
	// of its queued firings, oldest first.
	active map[journal.RunID]bool
	queue  []uint64
	// secret is a webhook's.
	secret string
	// files is a file trigger's watch (triggers_file.go).
	files *fileWatch
	gone  bool
	// restart are the firings load found claimed and not started, for
	// begin to start once the trigger is in the set (so that the end of
	// their runs is heard).
	restart []Firing
	// roomWait says the first firing of queue was refused for want of
	// room in the cell: it starts when room is made, whatever the
	// overlap policy, and the firings after it wait behind it. roomFor is
	// the refusal's reason (RefusedFull: not tried while the queue stays
	// full; RefusedCellBudget: not before a share is given back, the
	// budget's generation having been budgetAt). Each attempt refused is
	// journaled.
	roomWait bool
	roomFor  string
	budgetAt uint64
}

// newTriggers returns the triggers of s, not started.
func newTriggers(s *Server) *triggerSet {
	return &triggerSet{srv: s, clk: s.cell.Clock, logf: s.logf, all: map[string]*liveTrigger{},
		kvWake: make(chan struct{}, 1), origins: map[journal.RunID]string{}, last: map[string]Firing{}, spend: map[journal.RunID]float64{},
		roomWaiters: map[string]bool{}, roomWake: make(chan struct{}, 1), done: make(chan struct{})}
}

func firingKey(name string, seq uint64) string { return fmt.Sprintf("%s\x00%020d", name, seq) }

var triggerName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$`)

// secretPath is where a webhook trigger's secret is kept, owner-only.
func (t *triggerSet) secretPath(name string) string {
	return filepath.Join(t.srv.cell.Dir, "triggers", name+".secret")
}

// StartTriggers loads the cell's triggers and starts them: records left
// claimed are resolved, queued and pending firings are taken up again,
// schedules armed, folders watched, kv writes observed. The daemon calls it
// once its runs are recovered; the API's trigger endpoints answer 503
// until then.
func (s *Server) StartTriggers(ctx context.Context) error {
	t := s.triggers
	if t == nil {
		return errors.New("cell: this server has no triggers (ServerOptions.Triggers)")
	}
	t.mu.Lock()
	again, closed := t.started, t.closed
	t.mu.Unlock()
	if again || closed {
		return errors.New("cell: the triggers were started already, or the server is shutting down")
	}
	var defs []triggerDef
	err := s.cell.Store.CellList(tableTriggers, "", func(_ string, v []byte) error {
		var d triggerDef
		if err := json.Unmarshal(v, &d); err != nil {
			return fmt.Errorf("cell: a trigger record does not decode: %w", err)
		}
		defs = append(defs, d)
		return nil
	})
	if err != nil {
		return err
	}
	runs, err := s.cell.Journal.Runs(ctx)
	if err != nil {
		return err
	}
	byOrigin := map[string]journal.RunMeta{}
	for _, m := range runs {
		if o := m.Origin; o != nil && o.Kind == OriginTrigger {
			byOrigin[firingKey(o.ID, o.Seq)] = m
		}
	}
	t.pruneSeen()
	t.mu.Lock()
	t.started = true
	t.mu.Unlock()
	// Heard before anything starts: a run a trigger starts as it loads
	// (a claimed firing, the first catch-up) can end at once.
	s.OnEnd(t.ended)
	var errs []error
	for _, d := range defs {
		lt, err := t.load(d, byOrigin)
		if err != nil {
			errs = append(errs, fmt.Errorf("trigger %s: %w", d.Name, err))
			continue
		}
		t.mu.Lock()
		t.setLocked(d.Name, lt)
		t.mu.Unlock()
		t.begin(lt)
	}
	stopObs := s.cell.Store.ObserveCommits(t.observe)
	t.mu.Lock()
	t.stopObs = stopObs
	t.mu.Unlock()
	t.wg.Add(2)
	go t.kvWorker()
	go t.roomWorker()
	t.armMetric()
	t.logf("triggers: %d loaded", len(defs))
	return errors.Join(errs...)
}

// load makes a loaded trigger of d from its log: the schedule's cursor, the
// next ordinal, the queue, the runs still going; a claimed firing whose run
// exists is marked started.
func (t *triggerSet) load(d triggerDef, byOrigin map[string]journal.RunMeta) (*liveTrigger, error) {
	lt, err := newLive(d)
	if err != nil {
		return nil, err
	}
	if lt.spec.Kind == trigger.Webhook {
		b, err := os.ReadFile(t.secretPath(d.Name))
		lt.secret = strings.TrimSpace(string(b))
		if err != nil || len(lt.secret) != 64 {
			// Kept, and listed, so that it can be removed; it takes no
			// webhook without its secret.
			lt.def.Paused = true
			lt.def.PausedReason = fmt.Sprintf("its webhook secret %s cannot be read (%v): remove the trigger and add it again for a new one", t.secretPath(d.Name), err)
			lt.secret = ""
		}
	}
	var claimed []Firing
	err = t.srv.cell.Store.CellList(tableFirings, d.Name+"\x00", func(_ string, v []byte) error {
		var f Firing
		if err := json.Unmarshal(v, &f); err != nil {
			return fmt.Errorf("a firing record does not decode: %w", err)
		}
		lt.nextSeq = max(lt.nextSeq, f.Seq+1)
		t.noteLast(f)
		if lt.spec.Kind == trigger.Schedule {
			lt.cursor = laterOf(lt.cursor, time.Unix(int64(f.Seq), 0))
		}
		switch f.State {
		case FiringClaimed:
			claimed = append(claimed, f)
		case FiringQueued:
			lt.queue = append(lt.queue, f.Seq)
		}
		if m, ok := byOrigin[firingKey(d.Name, f.Seq)]; ok && runGoing(m.Status) {
			// Recovered or parked: its end, when it comes, is this
			// trigger's to hear of.
			lt.active[m.ID] = true
			t.mu.Lock()
			t.origins[m.ID] = d.Name
			t.mu.Unlock()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, f := range claimed {
		if m, ok := byOrigin[firingKey(d.Name, f.Seq)]; ok {
			// Started before the daemon stopped, and not marked: mark it.
			f.State, f.Run, f.Reason, f.Input = FiringStarted, m.ID.String(), "", nil
			if err := t.put(f); err != nil {
				return nil, err
			}
			t.logf("trigger %s: firing %d had started run %s before the restart", d.Name, f.Seq, m.ID)
			continue
		}
		// Claimed and never started: begin starts it, once.
		lt.restart = append(lt.restart, f)
	}
	return lt, nil
}

// runGoing says whether a run of status s counts as going for overlap: it
// has not ended (a parked run has not either).
func runGoing(s journal.RunStatus) bool {
	return s == journal.StatusRunning || s == journal.StatusParked
}

func laterOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// newLive parses d's spec and policies.
func newLive(d triggerDef) (*liveTrigger, error) {
	sp, err := trigger.Parse(d.On)
	if err != nil {
		return nil, err
	}
	mf, err := trigger.ParseMisfire(d.Misfire)
	if err != nil {
		return nil, err
	}
	ov, err := trigger.ParseOverlap(d.Overlap, sp.Kind)
	if err != nil {
		return nil, err
	}
	lt := &liveTrigger{def: d, spec: sp, misfire: mf, overlap: ov, active: map[journal.RunID]bool{}, nextSeq: 1}
	lt.cursor = laterOf(d.Created, d.Resumed)
	return lt, nil
}

// begin arms lt: its schedule, its pending catch-up, its folder watch.
// Loaded, it first lets go of the runs that ended since the cell's runs
// were read (their end came before lt was in the set), then starts the
// firings load found claimed and not started.
func (t *triggerSet) begin(lt *liveTrigger) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	for run := range lt.active {
		m, err := t.srv.cell.Journal.Meta(context.Background(), run)
		if err == nil && !runGoing(m.Status) || errors.Is(err, journal.ErrNotFound) {
			delete(lt.active, run)
		}
	}
	restart := lt.restart
	lt.restart = nil
	for _, f := range restart {
		t.logf("trigger %s: firing %d was claimed and not started before the restart: starting it", lt.def.Name, f.Seq)
		t.start(lt, f)
	}
	if lt.def.Paused || lt.gone {
		return
	}
	switch lt.spec.Kind {
	case trigger.Schedule:
		t.look(lt)
	case trigger.File:
		if err := t.watch(lt); err != nil {
			t.pauseLocked(lt, fmt.Sprintf("cannot watch %s: %v", lt.spec.Dir, err))
		}
	}
	t.drainQueue(lt)
}

// halt disarms lt. Its caller holds lt.mu.
func (t *triggerSet) halt(lt *liveTrigger) {
	if lt.timer != nil {
		lt.timer.Stop()
		lt.timer = nil
	}
	if lt.catchup != nil {
		lt.catchup.Stop()
		lt.catchup = nil
	}
	if lt.files != nil {
		lt.files.close()
		lt.files = nil
	}
}

// stop disarms every trigger and stops observing: a server shutting down
// starts nothing more.
func (t *triggerSet) stop() {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	t.closed = true
	all := make([]*liveTrigger, 0, len(t.all))
	for _, lt := range t.all {
		all = append(all, lt)
	}
	stopObs := t.stopObs
	if t.metric != nil {
		t.metric.Stop()
	}
	close(t.done)
	t.mu.Unlock()
	// Not under t.mu: the observer takes it, within the store's lock of
	// its observers.
	if stopObs != nil {
		stopObs()
	}
	for _, lt := range all {
		lt.mu.Lock()
		t.halt(lt)
		lt.mu.Unlock()
	}
	t.wg.Wait()
}

// isClosed says whether the triggers were stopped.
func (t *triggerSet) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

// look decides the moments of lt's schedule due now (trigger.Due): the
// skipped ones are logged as one entry, the first to fire fires now, the
// other catch-up moments are logged pending and fire CatchupSpacing
// apart; then it arms the next look. Its caller holds lt.mu.
func (t *triggerSet) look(lt *liveTrigger) {
	if lt.def.Paused || lt.gone || t.isClosed() {
		return
	}
	now := t.clk.Now()
	plan := trigger.Due(lt.spec.Cron, lt.cursor, now, lt.misfire)
	if n := len(plan.Skipped); n > 0 {
		last := plan.Skipped[n-1]
		from := plan.Skipped[0]
		f := Firing{Trigger: lt.def.Name, Seq: uint64(last.Unix()), Moment: last, State: FiringSkipped, Skipped: n, From: &from,
			Catchup: true, Reason: fmt.Sprintf("missed (misfire %s): %d moments from %s", lt.misfire, n, from.UTC().Format(time.RFC3339))}
		if err := t.put(f); err != nil {
			t.logf("trigger %s: log: %v", lt.def.Name, err)
			t.arm(lt)
			return
		}
		lt.cursor = last
	}
	for i, m := range plan.Fire {
		if i == 0 {
			continue
		}
		f := Firing{Trigger: lt.def.Name, Seq: uint64(m.Unix()), Moment: m, State: FiringPending, Catchup: true}
		if ok, err := t.create(f); err != nil {
			t.logf("trigger %s: log: %v", lt.def.Name, err)
		} else if !ok {
			continue
		}
	}
	if len(plan.Fire) > 0 {
		lt.cursor = plan.Fire[len(plan.Fire)-1]
		m := plan.Fire[0]
		t.fire(lt, Firing{Trigger: lt.def.Name, Seq: uint64(m.Unix()), Moment: m, Catchup: plan.Catchup})
	}
	t.armCatchup(lt)
	t.arm(lt)
}

// arm sets lt's timer for its schedule's next moment after its cursor; a
// moment already come (the clock moved while lt looked) is looked at at
// once. Its caller holds lt.mu.
func (t *triggerSet) arm(lt *liveTrigger) {
	if lt.timer != nil {
		lt.timer.Stop()
	}
	next := lt.spec.Cron.Next(lt.cursor)
	if next.IsZero() {
		return
	}
	// The clock is read again: it may have moved while lt looked.
	lt.timer = t.clk.AfterFunc(next.Sub(t.clk.Now()), func() {
		lt.mu.Lock()
		defer lt.mu.Unlock()
		t.look(lt)
	})
}

// armCatchup sets the timer of lt's oldest pending catch-up moment, if it
// has one and none is set. Its caller holds lt.mu.
func (t *triggerSet) armCatchup(lt *liveTrigger) {
	if lt.catchup != nil {
		return
	}
	f, ok := t.oldest(lt.def.Name, FiringPending)
	if !ok {
		return
	}
	lt.catchup = t.clk.AfterFunc(trigger.CatchupSpacing, func() {
		lt.mu.Lock()
		defer lt.mu.Unlock()
		lt.catchup = nil
		if lt.def.Paused || lt.gone || t.isClosed() {
			return
		}
		t.fire(lt, f)
		t.armCatchup(lt)
	})
}

// oldest returns the oldest firing of name in state.
func (t *triggerSet) oldest(name, state string) (Firing, bool) {
	var out Firing
	found := false
	stop := errors.New("found")
	t.srv.cell.Store.CellList(tableFirings, name+"\x00", func(_ string, v []byte) error {
		var f Firing
		if json.Unmarshal(v, &f) == nil && f.State == state {
			out, found = f, true
			return stop
		}
		return nil
	})
	return out, found
}

// fire takes one firing of lt (f.State empty for a new one, pending for a
// catch-up moment): the overlap policy skips or queues it while a run of
// lt is going; else it is claimed and started. Its caller holds lt.mu.
func (t *triggerSet) fire(lt *liveTrigger, f Firing) {
	fresh := f.State == ""
	busy := len(lt.active) > 0 || len(lt.queue) > 0
	switch {
	case busy && lt.overlap == trigger.OverlapSkip:
		f.State, f.Reason, f.Input = FiringSkipped, "a run of the trigger is still going (overlap skip)", nil
		if lt.roomWait {
			f.Reason = "a firing of the trigger waits for room in the cell (overlap skip)"
		}
		t.record(lt, f, fresh)
		return
	case busy && lt.overlap == trigger.OverlapQueue, lt.roomWait:
		// A firing after one waiting for room waits behind it, in order,
		// whatever the overlap policy.
		if len(lt.queue) >= trigger.MaxQueued {
			f.State, f.Reason, f.Input = FiringSkipped, fmt.Sprintf("the queue holds %d firings already (overlap queue)", trigger.MaxQueued), nil
			if lt.roomWait {
				f.Reason = fmt.Sprintf("%d firings wait for room in the cell already", trigger.MaxQueued)
			}
			t.record(lt, f, fresh)
			return
		}
		f.State = FiringQueued
		if t.record(lt, f, fresh) {
			lt.queue = append(lt.queue, f.Seq)
		}
		return
	}
	f.State = FiringClaimed
	if !t.record(lt, f, fresh) {
		return
	}
	t.start(lt, f)
}

// record writes f: a fresh firing is created (and not written again when
// its seq was taken: false), a pending one overwritten.
func (t *triggerSet) record(lt *liveTrigger, f Firing, fresh bool) bool {
	if !fresh {
		if err := t.put(f); err != nil {
			t.logf("trigger %s: log: %v", lt.def.Name, err)
			return false
		}
		return true
	}
	ok, err := t.create(f)
	if err != nil {
		t.logf("trigger %s: log: %v", lt.def.Name, err)
	}
	return ok
}

func (t *triggerSet) create(f Firing) (bool, error) {
	f.Recorded = t.clk.Now().UTC()
	b, err := json.Marshal(f)
	if err != nil {
		return false, err
	}
	ok, err := t.srv.cell.Store.CellCreate(tableFirings, firingKey(f.Trigger, f.Seq), b)
	if ok {
		t.noteLast(f)
	}
	return ok, err
}

func (t *triggerSet) put(f Firing) error {
	f.Recorded = t.clk.Now().UTC()
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	if err := t.srv.cell.Store.CellPut(tableFirings, firingKey(f.Trigger, f.Seq), b); err != nil {
		return err
	}
	t.noteLast(f)
	return nil
}

// noteLast keeps f as its trigger's newest entry when it is.
func (t *triggerSet) noteLast(f Firing) {
	f.Input = nil
	t.mu.Lock()
	defer t.mu.Unlock()
	if l, ok := t.last[f.Trigger]; !ok || f.Seq >= l.Seq {
		t.last[f.Trigger] = f
	}
}

func (t *triggerSet) saveDef(d triggerDef) error {
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return t.srv.cell.Store.CellPut(tableTriggers, d.Name, b)
}

// start starts the run of f, claimed, and marks it started or refused. A
// refusal (the token, the grant, the module, the link check) is recorded
// and not retried; MaxRefusals in a row pause the trigger. A refusal for
// want of room in the cell queues f to start when there is (waitForRoom).
// A failure of
// the cell itself (it is shutting down, its store failed) leaves f
// claimed, for the next daemon to resolve. Its caller holds lt.mu.
func (t *triggerSet) start(lt *liveTrigger, f Firing) {
	spec, err := t.runSpec(lt, f)
	var run journal.RunID
	if err == nil {
		// Read before the start, so that a share given back while it is
		// refused counts as room made since.
		gen := t.srv.sched.cell.generation()
		run, err = t.srv.Launch(context.Background(), spec, "triggered ("+lt.def.Name+" #"+strconv.FormatUint(f.Seq, 10)+")")
		if why := roomRefusal(err); why != "" {
			t.waitForRoom(lt, f, err, why, gen)
			return
		}
		if err != nil && startErrorCode(err) >= 500 {
			t.logf("trigger %s: firing %d not started: %v (it stays claimed, and starts when the cell starts again)", lt.def.Name, f.Seq, err)
			return
		}
	}
	if err != nil {
		f.State, f.Reason, f.Input = FiringRefused, err.Error(), nil
		if perr := t.put(f); perr != nil {
			t.logf("trigger %s: log: %v", lt.def.Name, perr)
		}
		lt.def.Refusals++
		t.logf("trigger %s: firing %d refused: %v", lt.def.Name, f.Seq, err)
		if lt.def.Refusals >= MaxRefusals {
			t.pauseLocked(lt, fmt.Sprintf("%d starts in a row refused, the last: %v", lt.def.Refusals, err))
			return
		}
		if serr := t.saveDef(lt.def); serr != nil {
			t.logf("trigger %s: %v", lt.def.Name, serr)
		}
		return
	}
	if testHookLaunched != nil {
		testHookLaunched(run)
	}
	lt.active[run] = true
	t.mu.Lock()
	t.origins[run] = lt.def.Name
	t.mu.Unlock()
	f.State, f.Run, f.Reason, f.Input = FiringStarted, run.String(), "", nil
	if err := t.put(f); err != nil {
		t.logf("trigger %s: log: %v", lt.def.Name, err)
	}
	if lt.def.Refusals != 0 {
		lt.def.Refusals = 0
		if err := t.saveDef(lt.def); err != nil {
			t.logf("trigger %s: %v", lt.def.Name, err)
		}
	}
}

// roomRefusal returns the reason of err when it is an admission refusal
// for want of room in the cell (RefusedFull: its scheduler's queue full;
// RefusedCellBudget: its budget held by the runs going), the cell's state
// and not the trigger's fault; "" otherwise.
func roomRefusal(err error) string {
	var ae *AdmissionError
	if errors.As(err, &ae) && (ae.Reason == RefusedFull || ae.Reason == RefusedCellBudget) {
		return ae.Reason
	}
	return ""
}

// waitForRoom queues f, whose start was refused for want of room in the
// cell (err, for reason why; gen the cell budget's generation before the
// start), first in lt's queue: it starts when room is made (roomFreed).
// It is not counted as a refusal of the trigger (MaxRefusals). Should its
// record not be written, it stays claimed, for the next daemon to start.
// Its caller holds lt.mu.
func (t *triggerSet) waitForRoom(lt *liveTrigger, f Firing, err error, why string, gen uint64) {
	f.State, f.Reason = FiringQueued, "waiting for room in the cell: "+err.Error()
	if err := t.put(f); err != nil {
		t.logf("trigger %s: log: %v (firing %d stays claimed, and starts when the cell starts again)", lt.def.Name, err, f.Seq)
		return
	}
	lt.queue = append([]uint64{f.Seq}, lt.queue...)
	lt.roomWait, lt.roomFor, lt.budgetAt = true, why, gen
	t.mu.Lock()
	t.roomWaiters[lt.def.Name] = true
	t.mu.Unlock()
	t.logf("trigger %s: firing %d waits for room in the cell: %v", lt.def.Name, f.Seq, err)
}

// wakeRoom tells roomWorker that room was made in the cell: runs left the
// scheduler's queue, or a share of the cell budget was given back. It
// never blocks (the scheduler and the cell budget call it under their
// locks).
func (t *triggerSet) wakeRoom() {
	select {
	case t.roomWake <- struct{}{}:
	default:
	}
}

// roomWorker tries the firings waiting for room each time room is made,
// until the triggers stop.
func (t *triggerSet) roomWorker() {
	defer t.wg.Done()
	for {
		select {
		case <-t.done:
			return
		case <-t.roomWake:
			t.roomFreed()
		}
	}
}

// roomFreed tries the first firing of every trigger waiting for room in
// the cell.
func (t *triggerSet) roomFreed() {
	t.mu.Lock()
	var waiting []*liveTrigger
	for name := range t.roomWaiters {
		if lt := t.all[name]; lt != nil {
			waiting = append(waiting, lt)
		} else {
			delete(t.roomWaiters, name)
		}
	}
	t.mu.Unlock()
	for _, lt := range waiting {
		lt.mu.Lock()
		t.drainQueue(lt)
		lt.mu.Unlock()
	}
}

// testHookLaunched, set by tests, is called between a firing's launch and
// the noting of its run as active: a test holds it there until the run has
// ended, the order a short run on a busy machine can take.
var testHookLaunched func(journal.RunID)

// runSpec is the run of firing f: lt's module, its input (the event's, or
// the trigger's), and its authority: a grant is issued as a token by the
// cell for each run, as a submission's is; a token is attenuated to a
// fresh link for each firing (same capabilities, a new nonce and subject
// key), since the cell refuses a token presented twice.
func (t *triggerSet) runSpec(lt *liveTrigger, f Firing) (host.RunSpec, error) {
	sum, err := hex.DecodeString(lt.def.ModuleSHA256)
	if err != nil || len(sum) != 32 {
		return host.RunSpec{}, fmt.Errorf("%w: the trigger's module hash %q", host.ErrBadModule, lt.def.ModuleSHA256)
	}
	// By hash: a firing of a module the daemon keeps compiled reads
	// nothing back from the store.
	spec := host.RunSpec{ModuleSHA256: sum, Name: lt.def.ModuleName, Input: f.Input,
		Origin: &journal.Origin{Kind: OriginTrigger, ID: lt.def.Name, Seq: f.Seq}, Priority: uint8(lt.def.Priority)}
	if spec.Input == nil {
		spec.Input = lt.def.Input
	}
	if spec.Input == nil {
		spec.Input, _ = json.Marshal(map[string]any{"trigger": lt.def.Name, "kind": lt.spec.Kind, "seq": f.Seq, "moment": f.Moment.UTC()})
	}
	if lt.def.Grant != "" {
		g, err := host.ParseGrant([]byte(lt.def.Grant))
		if err != nil {
			return host.RunSpec{}, fmt.Errorf("the trigger's grant: %w", err)
		}
		spec.Grant = g
	}
	if lt.def.Token != nil {
		if spec.Token, err = firingToken(lt.def.Token); err != nil {
			return host.RunSpec{}, fmt.Errorf("the trigger's token: %w", err)
		}
	}
	return spec, nil
}

// firingToken attenuates tok to a link of its own leaf's capabilities,
// with a fresh nonce and subject key: a token each firing presents once.
func firingToken(tok []byte) ([]byte, error) {
	pt, err := capability.Parse(tok)
	if err != nil {
		return nil, err
	}
	return capability.Attenuate(tok, nil, capability.Claims{Caps: pt.Leaf().Claims.Caps})
}

// pauseLocked pauses lt with reason. Its caller holds lt.mu.
func (t *triggerSet) pauseLocked(lt *liveTrigger, reason string) {
	lt.def.Paused, lt.def.PausedReason = true, reason
	t.halt(lt)
	if err := t.saveDef(lt.def); err != nil {
		t.logf("trigger %s: %v", lt.def.Name, err)
	}
	t.logf("trigger %s paused: %s", lt.def.Name, reason)
}

// ended learns of the end of a run (Server.OnEnd): a run of a trigger
// that has ended (not parked, not interrupted) leaves its active runs, and
// a queued firing may start. Metric triggers look again.
//
// The trigger is looked up through the run's origin (originOf reads the
// run's meta when the cache lacks it): a short run can end before start,
// which holds lt.mu across the launch, has noted it as active. Its end
// then waits for lt.mu, and finds it active.
func (t *triggerSet) ended(run journal.RunID, _ *host.Result, _ error) {
	name := t.originOf(run)
	t.mu.Lock()
	lt := t.all[name]
	t.mu.Unlock()
	if name != "" && lt != nil {
		lt.mu.Lock()
		m, err := t.srv.cell.Journal.Meta(context.Background(), run)
		if err == nil && !runGoing(m.Status) || errors.Is(err, journal.ErrNotFound) {
			delete(lt.active, run)
			t.drainQueue(lt)
		}
		lt.mu.Unlock()
	}
	// The cache keeps runs that go on; one that stopped is read again
	// from its meta should it be asked about (a kv write still queued).
	t.mu.Lock()
	delete(t.origins, run)
	t.mu.Unlock()
	t.lookMetrics()
}

// drainQueue starts lt's oldest queued firing when none of its runs is
// going, or when it waits for room in the cell (then the firings behind
// it under overlap allow too), until one is refused for want of room
// again. Its caller holds lt.mu.
func (t *triggerSet) drainQueue(lt *liveTrigger) {
	defer func() {
		if !lt.roomWait || lt.gone {
			t.mu.Lock()
			delete(t.roomWaiters, lt.def.Name)
			t.mu.Unlock()
		}
	}()
	if lt.roomWait && (lt.roomFor == RefusedFull && t.srv.sched.full() || lt.roomFor == RefusedCellBudget && t.srv.sched.cell.generation() == lt.budgetAt) {
		// No room made since the refusal (each attempt refused is
		// journaled).
		return
	}
	for (len(lt.active) == 0 || lt.roomWait || lt.overlap == trigger.OverlapAllow) && len(lt.queue) > 0 && !lt.def.Paused && !lt.gone && !t.isClosed() {
		lt.roomWait = false
		seq := lt.queue[0]
		lt.queue = lt.queue[1:]
		b, ok, err := t.srv.cell.Store.CellGet(tableFirings, firingKey(lt.def.Name, seq))
		var f Firing
		if err != nil || !ok || json.Unmarshal(b, &f) != nil || f.State != FiringQueued {
			continue
		}
		f.State, f.Reason = FiringClaimed, ""
		if err := t.put(f); err != nil {
			t.logf("trigger %s: log: %v", lt.def.Name, err)
			return
		}
		t.start(lt, f)
		if lt.roomWait {
			return // refused for want of room again: the next run's end tries it
		}
	}
}

// event fires an event trigger (kv, file, webhook, metric) with input,
// under the next ordinal. It returns the firing as logged.
func (t *triggerSet) event(lt *liveTrigger, input []byte) (Firing, error) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if lt.gone {
		return Firing{}, ErrNoTrigger
	}
	if lt.def.Paused {
		return Firing{}, ErrTriggerPaused
	}
	f := Firing{Trigger: lt.def.Name, Seq: lt.nextSeq, Moment: t.clk.Now().UTC(), Input: input}
	lt.nextSeq++
	t.fire(lt, f)
	b, ok, err := t.srv.cell.Store.CellGet(tableFirings, firingKey(f.Trigger, f.Seq))
	if err != nil || !ok {
		return f, errors.Join(err, errors.New("the firing was not logged"))
	}
	err = json.Unmarshal(b, &f)
	f.Input = nil
	return f, err
}

// lookup returns the loaded trigger name.
func (t *triggerSet) lookup(name string) (*liveTrigger, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.started {
		return nil, errTriggersLoading
	}
	lt := t.all[name]
	if lt == nil {
		return nil, fmt.Errorf("%w %q", ErrNoTrigger, name)
	}
	return lt, nil
}

var errTriggersLoading = errors.New("the cell's triggers are loading")

// Log returns the firings of name, oldest first, at most limit (the
// newest) when limit > 0.
func (t *triggerSet) Log(name string, limit int) ([]Firing, error) {
	var out []Firing
	err := t.srv.cell.Store.CellList(tableFirings, name+"\x00", func(_ string, v []byte) error {
		var f Firing
		if err := json.Unmarshal(v, &f); err != nil {
			return err
		}
		f.Input = nil
		out = append(out, f)
		return nil
	})
	if limit > 0 && len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out, err
}

// pruneSeen forgets the webhook signatures and file arrivals older than
// the replay window twice over: a replayed request that old is refused by
// its timestamp.
func (t *triggerSet) pruneSeen() {
	cut := t.clk.Now().Add(-2 * trigger.ReplayWindow)
	var old []string
	t.srv.cell.Store.CellList(tableSeen, "", func(k string, v []byte) error {
		var s struct {
			At   time.Time `json:"at"`
			Kind string    `json:"kind"`
		}
		if json.Unmarshal(v, &s) == nil && s.Kind == "webhook" && s.At.Before(cut) {
			old = append(old, k)
		}
		return nil
	})
	for _, k := range old {
		t.srv.cell.Store.CellDelete(tableSeen, k)
	}
}

// seen records key (a webhook signature, a file arrival) of trigger name
// once; false when it was recorded before.
func (t *triggerSet) seen(name, kind, key string) (bool, error) {
	b, _ := json.Marshal(map[string]any{"at": t.clk.Now().UTC(), "kind": kind})
	return t.srv.cell.Store.CellCreate(tableSeen, name+"\x00"+kind+"\x00"+key, b)
}

// triggerCode maps a trigger error to a status.
func triggerCode(err error) int {
	switch {
	case errors.Is(err, ErrNoTrigger):
		return http.StatusNotFound
	case errors.Is(err, ErrTriggerExists), errors.Is(err, ErrTriggerPaused):
		return http.StatusConflict
	case errors.Is(err, errTriggersLoading):
		return http.StatusServiceUnavailable
	}
	return http.StatusBadRequest
}

// sortedTriggers returns the loaded triggers by name.
func (t *triggerSet) sortedTriggers() []*liveTrigger {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*liveTrigger, 0, len(t.all))
	for _, lt := range t.all {
		out = append(out, lt)
	}
	slices.SortFunc(out, func(a, b *liveTrigger) int { return strings.Compare(a.def.Name, b.def.Name) })
	return out
}

// queued counts the firings queued behind the triggers' runs.
func (t *triggerSet) queued() int {
	t.mu.Lock()
	all := make([]*liveTrigger, 0, len(t.all))
	for _, lt := range t.all {
		all = append(all, lt)
	}
	t.mu.Unlock()
	n := 0
	for _, lt := range all {
		lt.mu.Lock()
		n += len(lt.queue)
		lt.mu.Unlock()
	}
	return n
}
