package cell

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"mime"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/approval"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/budget"
	"github.com/agentrt/agentrt/journal"
	"github.com/fxamacker/cbor/v2"
)

// The dashboard (`agentrt cell serve --ui ADDR`): server-rendered pages
// over the cell's runs, on a listener of its own, behind the API token.
// It reads what the API reads and writes only through the paths the API
// writes through (a vote goes through castVote, with the book's checks);
// it never shows a payload unless asked for that one payload, and never
// puts the token in a URL. Its templates, script and style are embedded
// (ui/), so the binary needs nothing at run time and the build nothing
// from the network.

//go:embed ui
var uiFiles embed.FS

// UI limits.
const (
	// UIPageSize is how many journal entries a timeline page shows unless
	// ?limit= says otherwise; UIMaxPage the most it shows.
	UIPageSize = 200
	UIMaxPage  = 1000
	// uiMaxRuns is the most runs the runs list shows (the newest that
	// match its filters).
	uiMaxRuns = 500
	// uiMaxPayload is the largest payload the dashboard opens.
	uiMaxPayload = 4 << 20
	// uiMaxPoints is the most points a burn-down line has.
	uiMaxPoints = 400
	// UICookie, then "_" and the listener's port, names the cookie that
	// carries the dashboard's session: an HMAC of the token, never the
	// token itself. Browsers keep cookies by host, not by port: the port
	// keeps the sessions of two dashboards on one machine apart.
	UICookie = "agentrt_ui"
)

// UIOptions tune the dashboard (Server.UI).
type UIOptions struct {
	// Token is the credential: the API token (LoadOrCreateAPIToken). A
	// browser presents it once, on the login page, and gets a session
	// cookie derived from it; a program sends "Authorization: Bearer".
	Token string
	// AnyAddress allows a listener that is not a loopback one. Without
	// it such a listener is refused: the dashboard answers votes and
	// shows payloads, and plain HTTP beyond this machine is readable by
	// anyone on the path.
	AnyAddress bool
}

// ErrUIAddress is returned by ListenUI and Server.UI for a listener that
// is not loopback, without UIOptions.AnyAddress.
var ErrUIAddress = errors.New("cell: the dashboard listens on a loopback address unless told otherwise")

// ListenUI listens on addr for the dashboard: a loopback address, or any
// address when anyAddress is set.
func ListenUI(addr string, anyAddress bool) (net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("cell: dashboard address %q: %w", addr, err)
	}
	if host == "localhost" {
		addr = net.JoinHostPort("127.0.0.1", port)
	} else if ip := net.ParseIP(host); !anyAddress && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("%w: %q is not a loopback address (127.0.0.1, ::1)", ErrUIAddress, addr)
	}
	return net.Listen("tcp", addr)
}

// UI returns an HTTP server for the dashboard on ln; serve it with
// Serve(ln). The listener is added to the cell's own listeners, which no
// agent's http grant reaches, for the cell's lifetime.
func (s *Server) UI(ln net.Listener, opts UIOptions) (*http.Server, error) {
	a, ok := ln.Addr().(*net.TCPAddr)
	if !ok {
		return nil, fmt.Errorf("cell: the dashboard is served on TCP, not %s", ln.Addr().Network())
	}
	if !a.IP.IsLoopback() && !opts.AnyAddress {
		return nil, fmt.Errorf("%w: %s", ErrUIAddress, a)
	}
	if _, err := parseAPIToken(opts.Token); err != nil {
		return nil, fmt.Errorf("%w: the dashboard needs the API token: %v", ErrNoAPIToken, err)
	}
	u := &ui{s: s, token: opts.Token, session: uiSession(opts.Token), cookie: UICookie + "_" + strconv.Itoa(a.Port)}
	if a.IP.IsLoopback() {
		port := strconv.Itoa(a.Port)
		u.hosts = map[string]bool{}
		for _, h := range []string{a.IP.String(), "localhost"} {
			u.hosts[net.JoinHostPort(h, port)] = true
		}
	}
	var err error
	if u.pages, err = parsePages(); err != nil {
		return nil, err
	}
	static, _ := fs.Sub(uiFiles, "ui/static")
	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /login", u.loginPage)
	mux.HandleFunc("POST /login", u.login)
	mux.HandleFunc("POST /logout", u.logout)
	mux.HandleFunc("GET /{$}", u.runsPage)
	mux.HandleFunc("GET /runs/{run}", u.runPage)
	mux.HandleFunc("GET /runs/{run}/entries/{seq}/{part}", u.payload)
	mux.HandleFunc("GET /runs/{run}/stream", s.stream)
	mux.HandleFunc("POST /runs/{run}/verify", u.verify)
	mux.HandleFunc("GET /runs/{run}/budget", u.budgetPage)
	mux.HandleFunc("GET /runs/{run}/fork", u.forkPage)
	mux.HandleFunc("GET /approvals", u.approvalsPage)
	mux.HandleFunc("POST /runs/{run}/votes", u.vote)
	u.next = mux
	s.cell.Listeners.Add("the cell's dashboard", ln.Addr())
	return &http.Server{Handler: u, ReadHeaderTimeout: 10 * time.Second}, nil
}

// uiSession is the session cookie's value for token: an HMAC, so that the
// cookie reveals nothing of the token and rotating the token ends every
// session.
func uiSession(token string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("agentrt dashboard session v1"))
	return hex.EncodeToString(m.Sum(nil))
}

type ui struct {
	s     *Server
	next  http.Handler
	pages map[string]*template.Template
	// hosts are the Host values a loopback listener answers; nil on
	// another address.
	hosts map[string]bool
	// token is the credential, session the cookie's value, cookie its
	// name.
	token, session, cookie string
	// verifying holds one verification at a time: each re-executes a run.
	verifying sync.Mutex
}

// ServeHTTP checks every request before it reaches a page: the method,
// the Host (DNS rebinding), where a browser says it came from, a token in
// the URL, the credential, and a POST's origin and body.
func (u *ui) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	// same-origin, not no-referrer: under no-referrer a browser sends
	// "Origin: null" with the dashboard's own forms, which the checks
	// below need to tell from another site's.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodPost {
		h.Set("Allow", "GET, HEAD, POST")
		u.fail(w, r, http.StatusMethodNotAllowed, fmt.Errorf("method %s is not served", r.Method), "")
		return
	}
	if u.hosts != nil && !u.hosts[strings.ToLower(r.Host)] {
		u.fail(w, r, http.StatusForbidden, fmt.Errorf("host %q is not this dashboard's", r.Host), "open the dashboard at its own address, http://127.0.0.1:PORT/")
		return
	}
	if p := r.URL.EscapedPath(); cleanPath(p) != p {
		u.fail(w, r, http.StatusBadRequest, fmt.Errorf("path %q is not in canonical form", p), "")
		return
	}
	if r.URL.Query().Has("token") {
		// A URL ends up in histories, logs and Referer headers: the
		// token never travels in one, and a URL that carries it is
		// refused rather than taken.
		u.fail(w, r, http.StatusBadRequest, errors.New("the token is never taken from a URL"), "sign in on the login page, or send Authorization: Bearer TOKEN")
		return
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "none", "same-origin":
	default:
		u.fail(w, r, http.StatusForbidden, fmt.Errorf("a request from another site (Sec-Fetch-Site %q) is refused", r.Header.Get("Sec-Fetch-Site")), "open the dashboard directly")
		return
	}
	if o, ok := r.Header["Origin"]; ok && (len(o) != 1 || !u.sameOrigin(r, o[0])) {
		u.fail(w, r, http.StatusForbidden, fmt.Errorf("a request from origin %q is refused", strings.Join(o, " ")), "open the dashboard directly")
		return
	}
	public := r.URL.Path == "/login" || strings.HasPrefix(r.URL.Path, "/static/")
	bearer, cookie := u.credential(r)
	if !public && !bearer && !cookie {
		h.Set("WWW-Authenticate", `Bearer realm="agentrt dashboard"`)
		u.fail(w, r, http.StatusUnauthorized, errors.New("the dashboard needs the cell's API token"), "sign in with the token in DATA/"+APITokenFile)
		return
	}
	if r.Method == http.MethodPost {
		// A browser sends Origin on every POST; one that comes with the
		// session cookie and without it is not a page of this dashboard.
		if cookie && !bearer && r.Header.Get("Origin") == "" {
			u.fail(w, r, http.StatusForbidden, errors.New("a POST without an Origin header is refused"), "use the dashboard's own forms")
			return
		}
		if r.ContentLength != 0 {
			mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
			if err != nil || mt != "application/x-www-form-urlencoded" {
				u.fail(w, r, http.StatusUnsupportedMediaType, fmt.Errorf("a POST body must be a form, not %q", r.Header.Get("Content-Type")), "")
				return
			}
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxVote)
	}
	ctx := context.WithValue(r.Context(), identityKey{}, tokenIdentity(u.token))
	u.next.ServeHTTP(w, r.WithContext(ctx))
}

// sameOrigin reports whether origin is this dashboard's own.
func (u *ui) sameOrigin(r *http.Request, origin string) bool {
	return strings.EqualFold(origin, "http://"+r.Host) || strings.EqualFold(origin, "https://"+r.Host)
}

// credential reports whether r carries the token (Authorization: Bearer)
// or the session cookie, each compared in constant time.
func (u *ui) credential(r *http.Request) (bearer, cookie bool) {
	if scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		bearer = subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), []byte(u.token)) == 1
	}
	if c, err := r.Cookie(u.cookie); err == nil {
		cookie = subtle.ConstantTimeCompare([]byte(c.Value), []byte(u.session)) == 1
	}
	return bearer, cookie
}

func (u *ui) loginPage(w http.ResponseWriter, r *http.Request) {
	u.render(w, "login", map[string]any{"Title": "Sign in"})
}

// login takes the token from a form (a POST body, never a URL) and sets
// the session cookie: HttpOnly, SameSite=Strict, for this host only.
func (u *ui) login(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		u.fail(w, r, http.StatusBadRequest, err, "")
		return
	}
	tok := strings.ToLower(strings.TrimSpace(r.PostForm.Get("token")))
	if subtle.ConstantTimeCompare([]byte(tok), []byte(u.token)) != 1 {
		w.WriteHeader(http.StatusUnauthorized)
		u.render(w, "login", map[string]any{"Title": "Sign in", "Error": "That is not this cell's token."})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: u.cookie, Value: u.session, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (u *ui) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: u.cookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// fail answers an error: JSON to a program (Accept without text/html, or a
// payload or stream request), a page to a browser.
func (u *ui) fail(w http.ResponseWriter, r *http.Request, code int, err error, hint string) {
	if !strings.Contains(r.Header.Get("Accept"), "text/html") {
		writeError(w, code, err, hint)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	if code == http.StatusUnauthorized {
		u.render(w, "login", map[string]any{"Title": "Sign in"})
		return
	}
	u.render(w, "error", map[string]any{"Code": code, "Status": http.StatusText(code), "Error": err.Error(), "Hint": hint})
}

// render writes page with data; the status, when not 200, is written
// before.
func (u *ui) render(w http.ResponseWriter, page string, data map[string]any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := u.pages[page].ExecuteTemplate(w, "layout", data); err != nil {
		u.s.logf("dashboard: page %s: %v", page, err)
	}
}

var uiFuncs = template.FuncMap{
	"short": func(s string) string {
		if len(s) > 12 {
			return s[:12]
		}
		return s
	},
	"time": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05.000")
	},
	"timep": func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05")
	},
	"add": func(a, b uint64) uint64 { return a + b },
}

// parsePages parses each page of ui/ with the layout.
func parsePages() (map[string]*template.Template, error) {
	pages := map[string]*template.Template{}
	for _, p := range []string{"login", "error", "runs", "run", "verify", "approvals", "voted", "budget", "fork"} {
		t, err := template.New(p).Funcs(uiFuncs).ParseFS(uiFiles, "ui/layout.html", "ui/"+p+".html")
		if err != nil {
			return nil, fmt.Errorf("cell: dashboard page %s: %w", p, err)
		}
		pages[p] = t
	}
	return pages, nil
}

// uiRun resolves the {run} of a page's path, or answers why not.
func (u *ui) uiRun(w http.ResponseWriter, r *http.Request) (journal.RunMeta, bool) {
	run, err := FindRun(r.Context(), u.s.cell.Journal, r.PathValue("run"))
	if err == nil {
		var m journal.RunMeta
		if m, err = u.s.cell.Journal.Meta(r.Context(), run); err == nil {
			return m, true
		}
	}
	code := http.StatusBadRequest
	if errors.Is(err, journal.ErrNotFound) {
		code = http.StatusNotFound
	}
	u.fail(w, r, code, err, "the runs list names them")
	return journal.RunMeta{}, false
}

// runFilter is the runs list's filters, from its query.
type runFilter struct {
	Status, Module, Since, Until string
	since, until                 time.Time
}

var runStatuses = []journal.RunStatus{journal.StatusRunning, journal.StatusParked, journal.StatusHeld, journal.StatusCancelled, journal.StatusCompleted, journal.StatusFailed}

// uiTime parses a filter's time: RFC 3339, or the "2006-01-02T15:04" of
// a datetime-local input (UTC), or a date.
func uiTime(v string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time (2026-12-05T18:00, RFC 3339, or a date)", v)
}

func parseRunFilter(r *http.Request) (runFilter, error) {
	q := r.URL.Query()
	f := runFilter{Status: q.Get("status"), Module: strings.TrimSpace(q.Get("module")), Since: q.Get("since"), Until: q.Get("until")}
	if f.Status != "" && !slices.Contains(runStatuses, journal.RunStatus(f.Status)) {
		return f, fmt.Errorf("status %q is not a run status (%v)", f.Status, runStatuses)
	}
	var err error
	if f.Since != "" {
		if f.since, err = uiTime(f.Since); err != nil {
			return f, fmt.Errorf("since: %w", err)
		}
	}
	if f.Until != "" {
		if f.until, err = uiTime(f.Until); err != nil {
			return f, fmt.Errorf("until: %w", err)
		}
	}
	return f, nil
}

// match reports whether m passes the filters: its status, its module's
// name or hash containing Module, its start within [since, until).
func (f runFilter) match(m journal.RunMeta) bool {
	if f.Status != "" && string(m.Status) != f.Status {
		return false
	}
	if f.Module != "" {
		mod := strings.ToLower(f.Module)
		if !strings.Contains(strings.ToLower(m.ModuleName), mod) && !strings.HasPrefix(hex.EncodeToString(m.ModuleSHA256), mod) {
			return false
		}
	}
	started := time.Unix(0, m.Started)
	if !f.since.IsZero() && started.Before(f.since) {
		return false
	}
	if !f.until.IsZero() && !started.Before(f.until) {
		return false
	}
	return true
}

func (u *ui) runsPage(w http.ResponseWriter, r *http.Request) {
	f, err := parseRunFilter(r)
	if err != nil {
		u.fail(w, r, http.StatusBadRequest, err, "")
		return
	}
	all, err := u.s.cell.Journal.Runs(r.Context())
	if err != nil {
		u.fail(w, r, http.StatusInternalServerError, err, "")
		return
	}
	var runs []RunInfo
	matched := 0
	for _, m := range all {
		if !f.match(m) {
			continue
		}
		if matched++; len(runs) < uiMaxRuns {
			runs = append(runs, u.s.info(m))
		}
	}
	u.render(w, "runs", map[string]any{"Title": "Runs", "Runs": runs, "Matched": matched, "Total": len(all), "Cut": matched > len(runs),
		"Filter": f, "Statuses": runStatuses})
}

// TimelineEntry is one journal entry as the run page shows it: what it
// records, its hashes and sizes, never its payloads.
type TimelineEntry struct {
	Seq   uint64
	Time  time.Time
	Phase string
	Step  uint64
	Op    string
	// Status is a call's ABI status on its outcome, a run's on its end.
	Status string
	// Took is the call's duration on its outcome (from its first entry on
	// the same page).
	Took string
	// Input and Output are hex hashes; Request and Response the sizes of
	// the stored payloads (0: none).
	Input, Output     string
	Request, Response int
	// Gate, Denied, Approval and Budget are what the entry's records say.
	Gate     string
	Denied   bool
	Approval string
	Budget   []string
	Epoch    uint64
	// Cell is the writing cell's key (hex); Sealed says the entry was the
	// head of a commit, SealedBy the key that signed it (hex).
	Cell     string
	Sealed   bool
	SealedBy string
	// Chunks counts a streamed model call's chunks.
	Chunks int
}

// errPageFull stops a read once a page is full.
var errPageFull = errors.New("page full")

// Timeline reads the page of run's journal that starts at seq from: at
// most limit entries, and whether more follow. It reads only those
// entries (and the one after, for more), however long the journal.
func Timeline(ctx context.Context, st journal.Store, run journal.RunID, from uint64, limit int) ([]TimelineEntry, bool, error) {
	var out []TimelineEntry
	more := false
	first := map[uint64]int64{}
	err := st.Records(ctx, run, from, func(seq uint64, raw []byte) error {
		if len(out) == limit {
			more = true
			return errPageFull
		}
		rec, err := journal.DecodeRecord(raw)
		if err != nil {
			return fmt.Errorf("entry %d: %w", seq, err)
		}
		e, err := journal.DecodeEntry(rec.Entry)
		if err != nil {
			return fmt.Errorf("entry %d: %w", seq, err)
		}
		out = append(out, timelineEntry(e, rec, first))
		return nil
	})
	if err != nil && !errors.Is(err, errPageFull) {
		return out, more, err
	}
	return out, more, nil
}

func timelineEntry(e *journal.Entry, rec *journal.Record, first map[uint64]int64) TimelineEntry {
	t := TimelineEntry{Seq: e.Seq, Time: time.Unix(0, e.Time).UTC(), Phase: e.Phase.String(), Step: e.Step, Op: e.Op,
		Input: hex.EncodeToString(e.InputHash), Output: hex.EncodeToString(e.OutputHash), Request: len(e.Request), Response: len(e.Response),
		Epoch: e.Epoch, Cell: hex.EncodeToString(e.Cell)}
	if rec.Seal != nil {
		t.Sealed, t.SealedBy = true, hex.EncodeToString(rec.Seal.Cell)
	}
	switch e.Phase {
	case journal.PhaseStart:
		if e.Header != nil {
			t.Op, t.Request = e.Header.ModuleName, len(e.Header.Input)
		}
	case journal.PhaseEnd:
		if e.End != nil {
			t.Status = string(e.End.Status)
		}
	case journal.PhaseIntent, journal.PhaseExecuting:
		if _, ok := first[e.Step]; !ok && e.Step > 0 {
			first[e.Step] = e.Time
		}
	case journal.PhaseCompleted, journal.PhaseFailed:
		t.Status = abi.Status(e.Status).String()
		if at, ok := first[e.Step]; ok {
			t.Took = time.Duration(e.Time - at).String()
			delete(first, e.Step)
		}
	}
	if len(e.Gate) > 0 {
		var g host.GateRecord
		if abi.Unmarshal(e.Gate, &g) == nil {
			switch {
			case !g.Allow:
				t.Gate, t.Denied = "denied by "+g.Layer+": "+g.Reason, true
			case g.Approved:
				t.Gate = "allowed, approved by " + g.Approver
			case g.Rule != "":
				t.Gate = "allowed by rule " + g.Rule
			default:
				t.Gate = "allowed"
			}
		}
	} else if e.Phase == journal.PhaseFailed {
		switch abi.Status(e.Status) {
		case abi.StatusDenied, abi.StatusBudget:
			t.Gate, t.Denied = "denied ("+abi.Status(e.Status).String()+")", true
		}
	}
	if len(e.Approval) > 0 {
		if a, err := approval.DecodeRecord(e.Approval); err == nil {
			t.Approval = fmt.Sprintf("requested of %s, %d vote(s)", a.Request.Group, len(a.Votes))
			if d := a.Decision; d != nil {
				t.Approval = fmt.Sprintf("decided: %s, %d vote(s)", map[bool]string{true: "approved", false: "denied"}[d.Approved], len(a.Votes))
			}
		}
	}
	if len(e.Budget) > 0 {
		if ops, err := budget.DecodeRecord(e.Budget); err == nil {
			for _, o := range ops {
				t.Budget = append(t.Budget, o.String())
			}
		}
	}
	if e.Phase == journal.PhaseCompleted && (e.Op == "llm.complete" || e.Op == "llm.next") {
		var b abi.LLMBatch
		if abi.Unmarshal(e.Response, &b) == nil {
			t.Chunks = len(b.Chunks)
		}
	}
	return t
}

// pageArgs reads a timeline page's ?from= and ?limit=.
func pageArgs(r *http.Request) (from uint64, limit int, err error) {
	q := r.URL.Query()
	limit = UIPageSize
	if v := q.Get("from"); v != "" {
		if from, err = strconv.ParseUint(v, 10, 64); err != nil {
			return 0, 0, fmt.Errorf("from=%q is not an entry's seq", v)
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > UIMaxPage {
			return 0, 0, fmt.Errorf("limit=%q: a page shows 1 to %d entries", v, UIMaxPage)
		}
		limit = n
	}
	return from, limit, nil
}

func (u *ui) runPage(w http.ResponseWriter, r *http.Request) {
	m, ok := u.uiRun(w, r)
	if !ok {
		return
	}
	from, limit, err := pageArgs(r)
	if err != nil {
		u.fail(w, r, http.StatusBadRequest, err, "")
		return
	}
	entries, more, err := Timeline(r.Context(), u.s.cell.Journal, m.ID, from, limit)
	if err != nil {
		u.fail(w, r, readErrorCode(err), err, "")
		return
	}
	kids, err := agents{u.s}.children(r.Context(), m.ID)
	if err != nil {
		u.fail(w, r, http.StatusInternalServerError, err, "")
		return
	}
	var subs []RunInfo
	for _, k := range kids {
		subs = append(subs, u.s.info(k.meta))
	}
	info := u.s.info(m)
	data := map[string]any{"Title": "Run " + info.RunID, "Run": info, "Entries": entries, "From": from, "Limit": limit,
		"More": more, "Next": from + uint64(len(entries)), "Subs": subs, "Self": hex.EncodeToString(u.s.cell.Public()),
		"Live": info.Live || !(m.Status.Finished() || m.Status == journal.StatusCancelled)}
	if from > 0 {
		data["Prev"] = from - min(from, uint64(limit))
		data["HasPrev"] = true
	}
	if m.Origin != nil {
		data["Origin"] = m.Origin
	}
	hdr, err := u.header(r.Context(), m.ID)
	if err != nil {
		u.fail(w, r, readErrorCode(err), err, "")
		return
	}
	if hdr.Fork != nil {
		data["Fork"] = hdr.Fork
	}
	u.render(w, "run", data)
}

// Payload is one payload of an entry, opened on the run page.
type Payload struct {
	Seq  uint64 `json:"seq"`
	Part string `json:"part"`
	// Hash is the hash the entry records for it (hex), Size its size.
	Hash string `json:"hash,omitempty"`
	Size int    `json:"size"`
	// CBOR is its CBOR diagnostic notation, when it is CBOR; Text the
	// payload itself, when it is UTF-8 text; Base64 its bytes otherwise.
	CBOR   string `json:"cbor,omitempty"`
	Text   string `json:"text,omitempty"`
	Base64 string `json:"base64,omitempty"`
}

// payload answers one payload of one entry: its request, its response, or
// the run's input (on the start entry), resolved from the blob area and
// checked against the entry's hash.
func (u *ui) payload(w http.ResponseWriter, r *http.Request) {
	m, ok := u.uiRun(w, r)
	if !ok {
		return
	}
	seq, err := strconv.ParseUint(r.PathValue("seq"), 10, 64)
	if err != nil {
		u.fail(w, r, http.StatusBadRequest, fmt.Errorf("%q is not an entry's seq", r.PathValue("seq")), "")
		return
	}
	part := r.PathValue("part")
	var e *journal.Entry
	err = u.s.cell.Journal.Records(r.Context(), m.ID, seq, func(got uint64, raw []byte) error {
		if got == seq {
			rec, err := journal.DecodeRecord(raw)
			if err == nil {
				e, err = journal.DecodeEntry(rec.Entry)
			}
			if err != nil {
				return err
			}
		}
		return errPageFull
	})
	if err != nil && !errors.Is(err, errPageFull) {
		u.fail(w, r, readErrorCode(err), err, "")
		return
	}
	if e == nil {
		u.fail(w, r, http.StatusNotFound, fmt.Errorf("run %s has no entry %d", m.ID, seq), "")
		return
	}
	var stored, sum []byte
	switch {
	case part == "request" && len(e.Request) > 0:
		stored, sum = e.Request, e.InputHash
	case part == "response" && len(e.Response) > 0:
		stored, sum = e.Response, e.OutputHash
	case part == "input" && e.Header != nil:
		stored = e.Header.Input
	default:
		u.fail(w, r, http.StatusNotFound, fmt.Errorf("entry %d has no %s payload", seq, part), "request, response (a call's entries) or input (the start entry)")
		return
	}
	data := stored
	if sum != nil {
		if data, err = journal.ResolvePayload(r.Context(), u.s.cell.Journal, stored, sum, uiMaxPayload); err != nil {
			u.fail(w, r, http.StatusInternalServerError, err, "agentrt journal show reads payloads of any size")
			return
		}
	}
	p := Payload{Seq: seq, Part: part, Hash: hex.EncodeToString(sum), Size: len(data)}
	// A call's payloads are CBOR (the ABI's); a run's input is the
	// caller's bytes.
	if d, err := cbor.Diagnose(data); err == nil && len(data) > 0 && part != "input" {
		p.CBOR = d
	} else if utf8.Valid(data) {
		p.Text = string(data)
	} else {
		p.Base64 = base64.StdEncoding.EncodeToString(data)
	}
	writeJSON(w, http.StatusOK, p)
}
