package cell

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/cell/trigger"
	"github.com/agentrt/agentrt/journal"
)

// TriggerSpec is the body of POST /v1/triggers.
type TriggerSpec struct {
	Name string `json:"name"`
	// On is the SPEC: schedule:CRON, kv:NAMESPACE/PREFIX, file:DIR/GLOB
	// (DIR absolute), webhook or metric:EXPR.
	On string `json:"on"`
	// Module is the wasm module (base64 in JSON), stored in the cell once.
	Module     []byte `json:"module"`
	ModuleName string `json:"module_name,omitempty"`
	// Grant is a grant file's text; Token a capability token that
	// carries its key (base64). At least one is given.
	Grant string `json:"grant,omitempty"`
	Token []byte `json:"token,omitempty"`
	// Input is the input of a schedule's or a metric's runs (base64);
	// the other kinds' runs take their event as input.
	Input []byte `json:"input,omitempty"`
	// Misfire is skip, once (the default) or all:N; schedules only.
	Misfire string `json:"misfire,omitempty"`
	// Overlap is skip, queue or allow (default: skip for schedule and
	// metric, queue for the others).
	Overlap string `json:"overlap,omitempty"`
	// Priority is the priority of the trigger's runs in the cell's queue,
	// 1 (lowest) to 9 (highest); 0 or absent: DefaultPriority.
	Priority int `json:"priority,omitempty"`
}

// TriggerInfo is a trigger as the API shows it.
type TriggerInfo struct {
	Name         string `json:"name"`
	On           string `json:"on"`
	Kind         string `json:"kind"`
	Module       string `json:"module,omitempty"`
	ModuleSHA256 string `json:"module_sha256"`
	Authority    string `json:"authority"`
	Misfire      string `json:"misfire,omitempty"`
	Overlap      string `json:"overlap"`
	// Priority is the priority of its runs in the cell's queue (1..9).
	Priority     int       `json:"priority"`
	Created      time.Time `json:"created"`
	Paused       bool      `json:"paused"`
	PausedReason string    `json:"paused_reason,omitempty"`
	Refusals     int       `json:"refusals,omitempty"`
	// Holds says a metric trigger's threshold held at its last look (it
	// fires again only once it has stopped holding).
	Holds bool `json:"holds,omitempty"`
	// Next is a schedule's next moment.
	Next *time.Time `json:"next,omitempty"`
	// Active are the runs it started that have not ended; Queued the
	// firings waiting for them.
	Active []string `json:"active"`
	Queued int      `json:"queued,omitempty"`
	Last   *Firing  `json:"last,omitempty"`
	// Webhook is the path a webhook trigger takes its POSTs on.
	Webhook string `json:"webhook,omitempty"`
	// Secret is a webhook trigger's secret, in the answer to its add
	// only: the cell keeps it owner-only and never shows it again.
	Secret string `json:"secret,omitempty"`
}

// Fired answers POST /v1/hooks/{name}.
type Fired struct {
	Trigger string `json:"trigger"`
	Seq     uint64 `json:"seq"`
	State   string `json:"state"`
	Run     string `json:"run,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// triggerRoutes adds the trigger endpoints.
func (s *Server) triggerRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/triggers", s.addTrigger)
	mux.HandleFunc("GET /v1/triggers", s.listTriggers)
	mux.HandleFunc("GET /v1/triggers/{name}", s.getTrigger)
	mux.HandleFunc("DELETE /v1/triggers/{name}", s.removeTrigger)
	mux.HandleFunc("POST /v1/triggers/{name}/pause", s.pauseTrigger)
	mux.HandleFunc("POST /v1/triggers/{name}/resume", s.resumeTrigger)
	mux.HandleFunc("GET /v1/triggers/{name}/log", s.triggerLog)
	mux.HandleFunc("POST "+HookPrefix+"{name}", s.hook)
}

// HookPrefix is the path webhooks are POSTed under: HookPrefix + NAME.
// Only these requests reach the API without its credential: the trigger's
// signature is theirs (trigger.Verify).
const HookPrefix = "/v1/hooks/"

func (t *triggerSet) info(lt *liveTrigger) TriggerInfo {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	d := lt.def
	ti := TriggerInfo{Name: d.Name, On: d.On, Kind: string(lt.spec.Kind), Module: d.ModuleName, ModuleSHA256: d.ModuleSHA256,
		Authority: "grant", Overlap: string(lt.overlap), Priority: int(effectivePriority(uint8(d.Priority))), Created: d.Created, Paused: d.Paused, PausedReason: d.PausedReason,
		Refusals: d.Refusals, Active: []string{}, Queued: len(lt.queue), Holds: d.MetricHigh}
	if d.Token != nil {
		ti.Authority = "token"
	}
	if lt.spec.Kind == trigger.Schedule {
		ti.Misfire = lt.misfire.String()
		if !d.Paused {
			n := lt.spec.Cron.Next(lt.cursor)
			ti.Next = &n
		}
	}
	if lt.spec.Kind == trigger.Webhook {
		ti.Webhook = HookPrefix + d.Name
	}
	for run := range lt.active {
		ti.Active = append(ti.Active, run.String())
	}
	t.mu.Lock()
	if f, ok := t.last[d.Name]; ok {
		ti.Last = &f
	}
	t.mu.Unlock()
	return ti
}

// triggersReady answers 503 (control-only servers have no trigger routes
// at all) until StartTriggers.
func (s *Server) triggersReady(w http.ResponseWriter) bool {
	s.triggers.mu.Lock()
	ok := s.triggers.started && !s.triggers.closed
	s.triggers.mu.Unlock()
	if !ok {
		writeError(w, http.StatusServiceUnavailable, errTriggersLoading, "ask again in a moment, once the daemon has started")
	}
	return ok
}

func (s *Server) addTrigger(w http.ResponseWriter, r *http.Request) {
	if !s.triggersReady(w) {
		return
	}
	var ts TriggerSpec
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ts); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("trigger: %w", err), `send {"name": NAME, "on": SPEC, "module": BASE64, "grant": "YAML text"}`)
		return
	}
	ti, err := s.triggers.add(r.Context(), ts)
	if err != nil {
		code := triggerCode(err)
		if errors.Is(err, ErrModuleTooLarge) {
			code = http.StatusRequestEntityTooLarge
		}
		writeError(w, code, err, triggerHint(err))
		return
	}
	s.logf("trigger %s added (%s)", ti.Name, ti.On)
	writeJSON(w, http.StatusCreated, ti)
}

// triggerHint is the fix for an error of the trigger API.
func triggerHint(err error) string {
	switch {
	case errors.Is(err, trigger.ErrSpec):
		return "see agentrt trigger add --help for the kinds of SPEC"
	case errors.Is(err, ErrTriggerExists):
		return "pick another name, or remove the trigger first (agentrt trigger remove NAME)"
	case errors.Is(err, ErrNoTrigger):
		return "agentrt trigger list (GET /v1/triggers) lists the triggers"
	case errors.Is(err, ErrTriggerPaused):
		return "resume it: agentrt trigger resume NAME"
	}
	return Hint(err)
}

// add checks ts, stores its module and its definition, and starts it.
func (t *triggerSet) add(ctx context.Context, ts TriggerSpec) (TriggerInfo, error) {
	if !triggerName.MatchString(ts.Name) {
		return TriggerInfo{}, fmt.Errorf("trigger name %q: use 1 to 64 letters, digits, _ . - (not starting with . or -)", ts.Name)
	}
	sp, err := trigger.Parse(ts.On)
	if err != nil {
		return TriggerInfo{}, err
	}
	if sp.Kind == trigger.File {
		if fi, err := os.Stat(sp.Dir); err != nil || !fi.IsDir() {
			return TriggerInfo{}, fmt.Errorf("%w %q: the folder %s is not there to watch (create it first)", trigger.ErrSpec, ts.On, sp.Dir)
		}
	}
	if sp.Kind != trigger.Schedule && ts.Misfire != "" {
		return TriggerInfo{}, fmt.Errorf("misfire %q: only a schedule misses moments; leave it out for a %s trigger", ts.Misfire, sp.Kind)
	}
	if ts.Input != nil && sp.Kind != trigger.Schedule && sp.Kind != trigger.Metric {
		return TriggerInfo{}, fmt.Errorf("input: a %s trigger's run takes its event as input (see agentrt trigger add --help); leave the input out", sp.Kind)
	}
	if ts.Priority < 0 || ts.Priority > MaxPriority {
		return TriggerInfo{}, fmt.Errorf("priority %d: the priority of the trigger's runs is %d (lowest) to %d (highest); 0 or absent: %d", ts.Priority, MinPriority, MaxPriority, DefaultPriority)
	}
	if len(ts.Module) == 0 {
		return TriggerInfo{}, fmt.Errorf("trigger: no module")
	}
	if len(ts.Module) > MaxModule {
		return TriggerInfo{}, fmt.Errorf("trigger: %w (this one is %d bytes)", ErrModuleTooLarge, len(ts.Module))
	}
	if ts.Grant == "" && ts.Token == nil {
		return TriggerInfo{}, errors.New("trigger: give its runs a grant or a token (--grant FILE or --token FILE)")
	}
	if ts.Grant != "" {
		if _, err := host.ParseGrant([]byte(ts.Grant)); err != nil {
			return TriggerInfo{}, fmt.Errorf("grant: %w", err)
		}
	}
	if ts.Token != nil {
		pt, err := capability.Parse(ts.Token)
		if err != nil {
			return TriggerInfo{}, fmt.Errorf("token: %w", err)
		}
		if pt.Proof.Kind != capability.ProofKey {
			return TriggerInfo{}, fmt.Errorf("token: it is %s, and a trigger needs one that carries its key: each firing attenuates it to a link of its own, since the cell takes a token once", pt.Proof.Kind)
		}
		if exp := pt.Leaf().Claims.Expires; !exp.After(t.clk.Now()) {
			return TriggerInfo{}, fmt.Errorf("token: it expired at %s", exp.UTC().Format(time.RFC3339))
		}
	}
	sum := journal.Sum(ts.Module)
	if err := t.srv.cell.Journal.PutModule(ctx, sum, ts.Module); err != nil {
		return TriggerInfo{}, fmt.Errorf("store the module: %w", err)
	}
	now := t.clk.Now().UTC()
	d := triggerDef{Name: ts.Name, On: ts.On, ModuleSHA256: hex.EncodeToString(sum), ModuleName: ts.ModuleName, Grant: ts.Grant,
		Token: ts.Token, Input: ts.Input, Misfire: ts.Misfire, Overlap: ts.Overlap, Priority: ts.Priority, Created: now}
	lt, err := newLive(d)
	if err != nil {
		return TriggerInfo{}, err
	}
	lt.def.Misfire, lt.def.Overlap = "", string(lt.overlap)
	if sp.Kind == trigger.Schedule {
		lt.def.Misfire = lt.misfire.String()
	}
	var secret string
	if sp.Kind == trigger.Webhook {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return TriggerInfo{}, err
		}
		secret = hex.EncodeToString(b)
	}
	b, err := json.Marshal(lt.def)
	if err != nil {
		return TriggerInfo{}, err
	}
	t.mu.Lock()
	if t.all[ts.Name] != nil {
		t.mu.Unlock()
		return TriggerInfo{}, fmt.Errorf("%w: %q", ErrTriggerExists, ts.Name)
	}
	t.setLocked(ts.Name, lt) // reserved; released if the add fails
	t.mu.Unlock()
	fail := func(err error) (TriggerInfo, error) {
		t.mu.Lock()
		t.setLocked(ts.Name, nil)
		t.mu.Unlock()
		return TriggerInfo{}, err
	}
	ok, err := t.srv.cell.Store.CellCreate(tableTriggers, ts.Name, b)
	if err != nil {
		return fail(err)
	}
	if !ok {
		return fail(fmt.Errorf("%w: %q", ErrTriggerExists, ts.Name))
	}
	if secret != "" {
		err := os.MkdirAll(filepath.Dir(t.secretPath(ts.Name)), 0o700)
		if err == nil {
			err = os.WriteFile(t.secretPath(ts.Name), []byte(secret+"\n"), 0o600)
		}
		if err != nil {
			t.srv.cell.Store.CellDelete(tableTriggers, ts.Name)
			return fail(fmt.Errorf("write the webhook secret: %w", err))
		}
		lt.secret = secret
	}
	// A name used before starts a log of its own.
	t.deleteLog(ts.Name)
	t.begin(lt)
	ti := t.info(lt)
	ti.Secret = secret
	return ti, nil
}

// deleteLog removes the log and seen records of name.
func (t *triggerSet) deleteLog(name string) {
	t.mu.Lock()
	delete(t.last, name)
	t.mu.Unlock()
	for _, table := range []string{tableFirings, tableSeen} {
		var keys []string
		t.srv.cell.Store.CellList(table, name+"\x00", func(k string, _ []byte) error {
			keys = append(keys, k)
			return nil
		})
		for _, k := range keys {
			t.srv.cell.Store.CellDelete(table, k)
		}
	}
}

func (s *Server) listTriggers(w http.ResponseWriter, r *http.Request) {
	if !s.triggersReady(w) {
		return
	}
	out := []TriggerInfo{}
	for _, lt := range s.triggers.sortedTriggers() {
		out = append(out, s.triggers.info(lt))
	}
	writeJSON(w, http.StatusOK, out)
}

// findTrigger resolves {name}, answering the error itself.
func (s *Server) findTrigger(w http.ResponseWriter, r *http.Request) (*liveTrigger, bool) {
	if !s.triggersReady(w) {
		return nil, false
	}
	lt, err := s.triggers.lookup(r.PathValue("name"))
	if err != nil {
		writeError(w, triggerCode(err), err, triggerHint(err))
		return nil, false
	}
	return lt, true
}

func (s *Server) getTrigger(w http.ResponseWriter, r *http.Request) {
	if lt, ok := s.findTrigger(w, r); ok {
		writeJSON(w, http.StatusOK, s.triggers.info(lt))
	}
}

func (s *Server) removeTrigger(w http.ResponseWriter, r *http.Request) {
	lt, ok := s.findTrigger(w, r)
	if !ok {
		return
	}
	t := s.triggers
	lt.mu.Lock()
	lt.gone = true
	t.halt(lt)
	name := lt.def.Name
	lt.mu.Unlock()
	if err := s.cell.Store.CellDelete(tableTriggers, name); err != nil {
		writeError(w, http.StatusInternalServerError, err, "")
		return
	}
	t.mu.Lock()
	t.setLocked(name, nil)
	t.mu.Unlock()
	t.deleteLog(name)
	os.Remove(t.secretPath(name))
	s.logf("trigger %s removed", name)
	writeJSON(w, http.StatusOK, map[string]string{"removed": name})
}

func (s *Server) pauseTrigger(w http.ResponseWriter, r *http.Request) {
	lt, ok := s.findTrigger(w, r)
	if !ok || !noBody(w, r) {
		return
	}
	lt.mu.Lock()
	if !lt.def.Paused {
		s.triggers.pauseLocked(lt, "paused by "+identity(r.Context()))
	}
	lt.mu.Unlock()
	writeJSON(w, http.StatusOK, s.triggers.info(lt))
}

func (s *Server) resumeTrigger(w http.ResponseWriter, r *http.Request) {
	lt, ok := s.findTrigger(w, r)
	if !ok || !noBody(w, r) {
		return
	}
	t := s.triggers
	lt.mu.Lock()
	was := lt.def.Paused
	if was {
		// The moments while it was paused are not caught up.
		now := t.clk.Now().UTC()
		lt.def.Paused, lt.def.PausedReason, lt.def.Refusals, lt.def.Resumed = false, "", 0, now
		lt.cursor = laterOf(lt.cursor, now)
		if err := t.saveDef(lt.def); err != nil {
			lt.mu.Unlock()
			writeError(w, http.StatusInternalServerError, err, "")
			return
		}
	}
	lt.mu.Unlock()
	if was {
		t.begin(lt)
		s.logf("trigger %s resumed", lt.def.Name)
	}
	writeJSON(w, http.StatusOK, t.info(lt))
}

func (s *Server) triggerLog(w http.ResponseWriter, r *http.Request) {
	lt, ok := s.findTrigger(w, r)
	if !ok {
		return
	}
	limit := 0
	if l := r.URL.Query().Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 {
			writeError(w, http.StatusBadRequest, fmt.Errorf("limit %q is not a number of 1 or more", l), "")
			return
		}
		limit = n
	}
	log, err := s.triggers.Log(lt.def.Name, limit)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err, "")
		return
	}
	if log == nil {
		log = []Firing{}
	}
	writeJSON(w, http.StatusOK, log)
}

// hook takes a webhook: a POST signed with the trigger's secret over its
// timestamp and body (trigger.Verify), taken once; the body is the run's
// input.
func (s *Server) hook(w http.ResponseWriter, r *http.Request) {
	lt, ok := s.findTrigger(w, r)
	if !ok {
		return
	}
	if lt.spec.Kind != trigger.Webhook {
		writeError(w, http.StatusNotFound, fmt.Errorf("trigger %q is a %s trigger, not a webhook", lt.def.Name, lt.spec.Kind), "")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, trigger.MaxBody+1))
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("webhook: %w", err), "")
		return
	}
	if len(body) > trigger.MaxBody {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("webhook: the body is over %d KiB", trigger.MaxBody>>10), "the body is the run's input: send at most 1 MiB")
		return
	}
	t := s.triggers
	lt.mu.Lock()
	paused, reason, secret := lt.def.Paused, lt.def.PausedReason, lt.secret
	lt.mu.Unlock()
	if secret == "" {
		// Never an HMAC under an empty key, which anyone can compute.
		writeError(w, http.StatusConflict, errors.New("webhook: the trigger has no secret to check the request with"), "remove the trigger and add it again for a new secret")
		return
	}
	if paused {
		writeError(w, http.StatusConflict, fmt.Errorf("%w: %s", ErrTriggerPaused, reason), "resume it: agentrt trigger resume "+lt.def.Name)
		return
	}
	sig, err := trigger.Verify(secret, r.Header.Get(trigger.HeaderTimestamp), r.Header.Get(trigger.HeaderSignature), body, t.clk.Now())
	if err != nil {
		s.logf("trigger %s: webhook refused: %v", lt.def.Name, err)
		writeError(w, http.StatusUnauthorized, err, "sign the request with the trigger's secret: "+trigger.HeaderSignature+": v1=HEX(HMAC-SHA256(SECRET, \"v1:\" + TIMESTAMP + \":\" + BODY)) (see agentrt trigger add --help)")
		return
	}
	first, err := t.seen(lt.def.Name, "webhook", hex.EncodeToString(sig))
	if err != nil {
		writeError(w, http.StatusInternalServerError, err, "")
		return
	}
	if !first {
		s.logf("trigger %s: webhook refused: a replay", lt.def.Name)
		writeError(w, http.StatusConflict, errors.New("webhook: this request was taken before (a replay)"), "send each event once, with a fresh timestamp and signature")
		return
	}
	f, err := t.event(lt, body)
	if err != nil {
		writeError(w, triggerCode(err), err, triggerHint(err))
		return
	}
	writeJSON(w, http.StatusAccepted, Fired{Trigger: f.Trigger, Seq: f.Seq, State: f.State, Run: f.Run, Reason: f.Reason})
}
