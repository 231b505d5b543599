package cell_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	stdhtml "html"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/approval"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/internal/uibench"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/replay"
	"github.com/dgraph-io/badger/v4"
)

// uiCellOptions are the options of the dashboard tests' cells: the
// shared compilation cache (cached), as every cell of these tests has.
func uiCellOptions(testing.TB) cell.Options { return cached(cell.Options{}) }

// serveUIAPI is serveAPI on a cell that uses the shared compilation cache.
func serveUIAPI(t testing.TB, dir string, opts cell.ServerOptions) *api {
	t.Helper()
	return serveAPIWith(t, dir, opts, uiCellOptions(t))
}

// dashboard is a cell's API (serveAPI) with its dashboard on a loopback
// listener of its own.
type dashboard struct {
	*api
	base   string // http://127.0.0.1:PORT
	cookie string // the session cookie's name
}

func serveDashboard(t testing.TB, a *api) *dashboard {
	t.Helper()
	ln, err := cell.ListenUI("127.0.0.1:0", false)
	if err != nil {
		t.Fatal(err)
	}
	hs, err := a.srv.UI(ln, cell.UIOptions{Token: a.token})
	if err != nil {
		t.Fatal(err)
	}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	return &dashboard{api: a, base: "http://" + ln.Addr().String(), cookie: fmt.Sprintf("%s_%d", cell.UICookie, ln.Addr().(*net.TCPAddr).Port)}
}

// get sends one request to the dashboard with the token (unless header
// names an Authorization of its own, "" for none) and returns the status,
// the header and the body.
func (d *dashboard) req(t testing.TB, method, path string, header map[string]string, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, d.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+d.token)
	if body != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		switch {
		case k == "Host":
			req.Host = v
		case v == "":
			req.Header.Del(k)
		default:
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

func (d *dashboard) get(t testing.TB, path string) string {
	t.Helper()
	code, _, body := d.req(t, "GET", path, map[string]string{"Accept": "text/html"}, "")
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, code, body)
	}
	return body
}

// smokeRun runs the smoke agent to its end in a's cell, with input.
func smokeRun(t *testing.T, a *api, input string) journal.RunID {
	t.Helper()
	res, err := a.cell.Host.Run(context.Background(), host.RunSpec{Code: testutil.BuildGo(t, "host/testdata/agents/smoke"), Name: "smoke.wasm", Input: []byte(input), Grant: mustGrant(t, smokeGrant)})
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("smoke run: %v %+v", err, res)
	}
	return res.Run
}

// TestUIRefusesWithoutTheToken: the dashboard answers nothing of the cell
// without the API token, with a wrong one, with a forged session cookie,
// or with the token in the URL; a login with a wrong token sets no
// cookie, one with the token sets a session cookie that is not the token
// and that lets the browser in; a request another site makes, or one
// naming another Host (DNS rebinding), is refused even with the cookie.
func TestUIRefusesWithoutTheToken(t *testing.T) {
	a := serveUIAPI(t, t.TempDir(), cell.ServerOptions{})
	d := serveDashboard(t, a)
	run := smokeRun(t, a, "hello")
	id := run.String()
	wrong := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		name   string
		header map[string]string
		path   string
	}{
		{"no token", map[string]string{"Authorization": ""}, "/"},
		{"no token, a browser", map[string]string{"Authorization": "", "Accept": "text/html"}, "/runs/" + id},
		{"a wrong token", map[string]string{"Authorization": "Bearer " + wrong}, "/runs/" + id},
		{"another scheme", map[string]string{"Authorization": "Basic " + d.token}, "/"},
		{"a forged cookie", map[string]string{"Authorization": "", "Cookie": d.cookie + "=" + wrong + wrong}, "/runs/" + id + "/entries/0/input"},
		{"the token as the cookie", map[string]string{"Authorization": "", "Cookie": d.cookie + "=" + d.token}, "/"},
		{"no token, the stream", map[string]string{"Authorization": ""}, "/runs/" + id + "/stream"},
	} {
		code, hdr, body := d.req(t, "GET", tc.path, tc.header, "")
		if code != http.StatusUnauthorized {
			t.Errorf("%s: %d, want 401", tc.name, code)
		}
		if strings.Contains(body, id) || strings.Contains(body, "hello") {
			t.Errorf("%s: the answer names the run or its input: %s", tc.name, body)
		}
		if tc.header["Accept"] == "" && hdr.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: no WWW-Authenticate", tc.name)
		}
	}
	// The token in a URL is refused, not taken.
	if code, _, body := d.req(t, "GET", "/?token="+d.token, map[string]string{"Authorization": ""}, ""); code != http.StatusBadRequest || strings.Contains(body, id) {
		t.Errorf("the token in the URL: %d %s, want 400", code, body)
	}

	login := func(token string, header map[string]string) (int, string) {
		h := map[string]string{"Authorization": "", "Origin": d.base}
		for k, v := range header {
			h[k] = v
		}
		code, hdr, _ := d.req(t, "POST", "/login", h, url.Values{"token": {token}}.Encode())
		var cookie string
		for _, c := range (&http.Response{Header: hdr}).Cookies() {
			if c.Name == d.cookie {
				cookie = c.Value
				if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
					t.Errorf("the session cookie is not HttpOnly and SameSite=Strict: %+v", c)
				}
			}
		}
		return code, cookie
	}
	if code, cookie := login(wrong, nil); code != http.StatusUnauthorized || cookie != "" {
		t.Fatalf("a login with a wrong token: %d, cookie %q", code, cookie)
	}
	if code, cookie := login(d.token, map[string]string{"Origin": "http://evil.example"}); code != http.StatusForbidden || cookie != "" {
		t.Fatalf("a login posted from another origin: %d, cookie %q", code, cookie)
	}
	code, cookie := login(d.token, nil)
	if code != http.StatusSeeOther || cookie == "" || strings.Contains(cookie, d.token) {
		t.Fatalf("the login: %d, cookie %q", code, cookie)
	}
	withCookie := map[string]string{"Authorization": "", "Cookie": d.cookie + "=" + cookie, "Accept": "text/html"}
	if code, _, body := d.req(t, "GET", "/", withCookie, ""); code != http.StatusOK || !strings.Contains(body, id) {
		t.Fatalf("the runs list with the session cookie: %d", code)
	}
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(d.base, "http://"))
	for name, extra := range map[string]map[string]string{
		"another site":         {"Sec-Fetch-Site": "cross-site"},
		"a rebound name":       {"Host": "attacker.example:" + port},
		"another origin":       {"Origin": "http://attacker.example:" + port},
		"a token and the site": {"Sec-Fetch-Site": "same-site", "Authorization": "Bearer " + d.token},
	} {
		h := map[string]string{}
		for k, v := range withCookie {
			h[k] = v
		}
		for k, v := range extra {
			h[k] = v
		}
		if code, _, body := d.req(t, "GET", "/runs/"+id, h, ""); code != http.StatusForbidden || strings.Contains(body, "hello") {
			t.Errorf("%s: %d, want 403", name, code)
		}
	}
	// A POST with the cookie must come from a page of the dashboard.
	if code, _, _ := d.req(t, "POST", "/logout", map[string]string{"Authorization": "", "Cookie": d.cookie + "=" + cookie}, ""); code != http.StatusForbidden {
		t.Errorf("a cookie POST without Origin: %d, want 403", code)
	}
}

// TestUIListensOnLoopbackOnly: an address that is not loopback is refused
// by ListenUI and by Server.UI unless AnyAddress allows it, and the
// dashboard refuses a UIOptions without a token.
func TestUIListensOnLoopbackOnly(t *testing.T) {
	a := serveUIAPI(t, t.TempDir(), cell.ServerOptions{})
	if _, err := cell.ListenUI("0.0.0.0:0", false); !errors.Is(err, cell.ErrUIAddress) {
		t.Fatalf("ListenUI on 0.0.0.0: %v", err)
	}
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := a.srv.UI(ln, cell.UIOptions{Token: a.token}); !errors.Is(err, cell.ErrUIAddress) {
		t.Fatalf("UI on 0.0.0.0 without AnyAddress: %v", err)
	}
	if _, err := a.srv.UI(ln, cell.UIOptions{Token: a.token, AnyAddress: true}); err != nil {
		t.Fatalf("UI on 0.0.0.0 with AnyAddress: %v", err)
	}
	lo, err := cell.ListenUI("127.0.0.1:0", false)
	if err != nil {
		t.Fatal(err)
	}
	defer lo.Close()
	if _, err := a.srv.UI(lo, cell.UIOptions{}); !errors.Is(err, cell.ErrNoAPIToken) {
		t.Fatalf("UI without a token: %v", err)
	}
}

// TestAgentCannotReachTheDashboard: an agent of the cell granted http to
// 127.0.0.1 and localhost is refused the dashboard's port, by address and
// by name, for a page, the login and a vote, before anything is sent.
func TestAgentCannotReachTheDashboard(t *testing.T) {
	a := serveUIAPI(t, t.TempDir(), cell.ServerOptions{})
	d := serveDashboard(t, a)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(d.base, "http://"))
	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	reqs := []map[string]any{
		{"url": d.base + "/", "headers": map[string]string{"Authorization": "Bearer " + strings.Repeat("0", 64)}},
		{"method": "POST", "url": d.base + "/login", "headers": form, "body": "token=x"},
		{"method": "POST", "url": "http://localhost:" + port + "/runs/last/votes", "headers": form, "body": "step=1"},
	}
	in, _ := json.Marshal(reqs)
	g := &host.Grant{Run: &host.RunGrant{}, HTTP: &host.HTTPGrant{Hosts: []string{"127.0.0.1", "localhost"}}}
	res, err := a.cell.Host.Run(context.Background(), host.RunSpec{Code: testutil.BuildGo(t, "host/testdata/agents/egress"), Grant: g, Input: in})
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("run: %v %+v", err, res)
	}
	var lines []string
	if err := json.Unmarshal(res.Output, &lines); err != nil || len(lines) != len(reqs) {
		t.Fatalf("output %s: %v", res.Output, err)
	}
	for i, l := range lines {
		if !strings.HasPrefix(l, "denied: ") || !strings.Contains(l, "is the cell's own listener (the cell's dashboard on 127.0.0.1:"+port+")") {
			t.Errorf("request %d: the agent got %q, want a denial naming the dashboard", i+1, l)
		}
	}
}

// TestUIRedactsPayloads: the run page names each payload by its hash and
// size and carries none of them; each opens alone, checked against its
// hash.
func TestUIRedactsPayloads(t *testing.T) {
	a := serveUIAPI(t, t.TempDir(), cell.ServerOptions{})
	d := serveDashboard(t, a)
	const secret = "s3cret-input-7f3a"
	run := smokeRun(t, a, secret)
	page := d.get(t, "/runs/"+run.String())
	hexSecret := hex.EncodeToString([]byte(secret))
	// The smoke agent stores k2 = "vvv"; the run's output repeats its input.
	for _, leak := range []string{secret, hexSecret, "vvv"} {
		if strings.Contains(page, leak) {
			t.Fatalf("the run page carries a payload (%q)", leak)
		}
	}
	var kvPut *journal.Entry
	var seq uint64
	journal.ReadEntries(context.Background(), a.cell.Store, run, func(e *journal.Entry, _ *journal.Record) error {
		if kvPut == nil && e.Op == "kv.put" && e.Phase == journal.PhaseIntent && len(e.Request) > 0 && strings.Contains(string(e.Request), "vvv") {
			kvPut, seq = e, e.Seq
		}
		return nil
	})
	if kvPut == nil {
		t.Fatal("no kv.put of k2 in the journal")
	}
	if !strings.Contains(page, hex.EncodeToString(kvPut.InputHash)) {
		t.Fatalf("the run page does not name the request's hash %x", kvPut.InputHash)
	}
	open := func(path string) cell.Payload {
		code, _, body := d.req(t, "GET", path, nil, "")
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, code, body)
		}
		var p cell.Payload
		if err := json.Unmarshal([]byte(body), &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := open(fmt.Sprintf("/runs/%s/entries/%d/request", run, seq))
	if p.Hash != hex.EncodeToString(kvPut.InputHash) || !strings.Contains(p.CBOR, `"vvv"`) && !strings.Contains(p.CBOR, "h'767676'") {
		t.Fatalf("the opened request: %+v", p)
	}
	if in := open("/runs/" + run.String() + "/entries/0/input"); in.Text != secret {
		t.Fatalf("the opened input: %+v", in)
	}
	if code, _, _ := d.req(t, "GET", "/runs/"+run.String()+"/entries/0/response", nil, ""); code != http.StatusNotFound {
		t.Fatalf("a payload the entry lacks: %d, want 404", code)
	}
	// The event stream the live view follows names calls by their hashes
	// too, and ends with the run's status.
	code, hdr, stream := d.req(t, "GET", "/runs/"+run.String()+"/stream", nil, "")
	if code != http.StatusOK || hdr.Get("Content-Type") != "text/event-stream" || !strings.Contains(stream, "event: call\n") ||
		!strings.Contains(stream, `event: done`+"\n"+`data: {"status":"completed"`) || !strings.Contains(stream, hex.EncodeToString(kvPut.InputHash)) {
		t.Fatalf("the stream: %d %s\n%s", code, hdr.Get("Content-Type"), stream)
	}
	for _, leak := range []string{secret, hexSecret, "vvv"} {
		if strings.Contains(stream, leak) {
			t.Fatalf("the stream carries a payload (%q)", leak)
		}
	}
}

var timelineRow = regexp.MustCompile(`<tr class="ph-[a-z]+[^"]*" id="e(\d+)">`)

// pageSeqs returns the seqs of the timeline rows of a run page.
func pageSeqs(page string) []string {
	var out []string
	for _, m := range timelineRow.FindAllStringSubmatch(page, -1) {
		out = append(out, m[1])
	}
	return out
}

// loopRun runs bench/testdata/loop.wat for n calls in a's cell.
func loopRun(tb testing.TB, a *api, n uint64) journal.RunID {
	tb.Helper()
	in := binary.LittleEndian.AppendUint64(nil, n)
	res, err := a.cell.Host.Run(context.Background(), host.RunSpec{Code: testutil.BuildWAT(tb, "bench/testdata/loop.wat"), Name: "loop.wasm", Input: in, Grant: &host.Grant{Run: &host.RunGrant{}}})
	if err != nil || res.Status != journal.StatusCompleted {
		tb.Fatalf("loop run: %v %+v", err, res)
	}
	return res.Run
}

// TestUIPagesALargeJournal: a journal of thousands of entries is shown a
// page at a time; the pages follow each other without a gap or a repeat
// to the last entry, which says no page follows; a limit out of range is
// refused.
func TestUIPagesALargeJournal(t *testing.T) {
	a := serveUIAPI(t, t.TempDir(), cell.ServerOptions{})
	d := serveDashboard(t, a)
	run := loopRun(t, a, 3000)
	var total uint64
	journal.ReadEntries(context.Background(), a.cell.Store, run, func(e *journal.Entry, _ *journal.Record) error { total = e.Seq + 1; return nil })
	if total < 3000 {
		t.Fatalf("the journal has %d entries", total)
	}
	next := uint64(0)
	pages := 0
	for {
		page := d.get(t, fmt.Sprintf("/runs/%s?from=%d&limit=1000", run, next))
		seqs := pageSeqs(page)
		if len(seqs) == 0 || len(seqs) > 1000 {
			t.Fatalf("page from %d: %d rows", next, len(seqs))
		}
		for i, s := range seqs {
			if s != fmt.Sprint(next+uint64(i)) {
				t.Fatalf("page from %d: row %d is entry %s", next, i, s)
			}
		}
		next += uint64(len(seqs))
		pages++
		more := strings.Contains(page, `rel="next"`)
		if more != (next < total) {
			t.Fatalf("page %d ends at %d of %d entries and says more=%v", pages, next, total, more)
		}
		if !more {
			break
		}
	}
	if next != total || pages != int((total+999)/1000) {
		t.Fatalf("%d pages reached entry %d, the journal has %d", pages, next, total)
	}
	if !strings.Contains(d.get(t, "/runs/"+run.String()+"?from="+fmt.Sprint(total-1)), "end") {
		t.Fatal("the last page does not show the run's end")
	}
	for _, bad := range []string{"?limit=0", "?limit=1001", "?from=x"} {
		if code, _, _ := d.req(t, "GET", "/runs/"+run.String()+bad, nil, ""); code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", bad, code)
		}
	}
}

// TestUIRunsListFilters: the runs list filters by status, module and start
// time, and refuses a filter it cannot apply.
func TestUIRunsListFilters(t *testing.T) {
	a := serveUIAPI(t, t.TempDir(), cell.ServerOptions{})
	d := serveDashboard(t, a)
	smoke := smokeRun(t, a, "x")
	loop := loopRun(t, a, 3)
	for _, tc := range []struct {
		query      string
		smoke, lop bool
	}{
		{"", true, true},
		{"?module=smoke", true, false},
		{"?module=LOOP", false, true},
		{"?status=completed", true, true},
		{"?status=failed", false, false},
		{"?since=2000-01-01T00:00", true, true},
		{"?until=2000-01-01", false, false},
	} {
		page := d.get(t, "/"+tc.query)
		if strings.Contains(page, smoke.String()) != tc.smoke || strings.Contains(page, loop.String()) != tc.lop {
			t.Errorf("%q: smoke listed %v, loop listed %v; want %v, %v", tc.query, !tc.smoke, !tc.lop, tc.smoke, tc.lop)
		}
	}
	for _, bad := range []string{"?status=done", "?since=yesterday"} {
		if code, _, _ := d.req(t, "GET", "/"+bad, nil, ""); code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", bad, code)
		}
	}
}

// waitStatus waits for run to reach status in a's cell.
func waitStatus(t *testing.T, a *api, run journal.RunID, status journal.RunStatus) journal.RunMeta {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		m, err := a.cell.Store.Meta(context.Background(), run)
		if err == nil && m.Status == status && !a.cell.Host.Live(run) {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %s (%v), want %s", run, m.Status, err, status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var hiddenStatement = regexp.MustCompile(`<form method="post" action="/runs/([0-9a-f]{32})/votes">\s*<h3>(Approve|Deny): sign this statement</h3>\s*<pre class="statement">[^<]*</pre>\s*<input type="hidden" name="step" value="(\d+)">\s*<input type="hidden" name="statement" value="([^"]*)">`)

// TestUIVoteReachesQuorum: the approvals page shows the statement the
// book asks its approvers to sign, exactly; signed votes posted through
// its form (as a browser signed in posts them: the session cookie, its
// Origin, CRLF line ends) are counted by the API's vote path, which
// refuses a duplicate and an outsider, and the second approver's vote
// makes the quorum: the run resumes and completes with both approvers.
func TestUIVoteReachesQuorum(t *testing.T) {
	dir := t.TempDir()
	alice, bob := newApprover(t, "alice"), newApprover(t, "bob")
	writeApprovers(t, dir, "release", "groups:\n  release: {quorum: 2, expires: 1h}\n", alice, bob, newApprover(t, "carol"))
	a := serveUIAPI(t, dir, cell.ServerOptions{})
	d := serveDashboard(t, a)
	in, _ := json.Marshal(map[string]any{"action": "deploy v2", "group": "release", "counter": true})
	run, err := a.srv.Launch(context.Background(), host.RunSpec{Code: testutil.BuildC(t, "host/testdata/agents/waiter"), Input: in, Grant: mustGrant(t, waiterGrant)}, "started")
	if err != nil {
		t.Fatal(err)
	}
	m := waitStatus(t, a, run, journal.StatusParked)
	pend, err := a.cell.Book.Get(run, m.Wait.Step)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.get(t, "/runs/"+run.String()), `<ol id="live" data-stream="/runs/`+run.String()+`/stream">`) {
		t.Fatal("the parked run's page does not follow its event stream")
	}
	page := d.get(t, "/approvals")
	forms := hiddenStatement.FindAllStringSubmatch(page, -1)
	if len(forms) != 2 || forms[0][1] != run.String() || forms[0][3] != fmt.Sprint(m.Wait.Step) {
		t.Fatalf("the approvals page has %d vote forms: %q", len(forms), forms)
	}
	shown := stdhtml.UnescapeString(forms[0][4])
	st := pend.Statement(true)
	if want := string(st.Marshal()); shown != want || !strings.Contains(page, "deploy v2") {
		t.Fatalf("the page asks to sign %q, the book %q", shown, want)
	}
	// A browser signed in: the session cookie, and the page's Origin.
	code, hdr, _ := d.req(t, "POST", "/login", map[string]string{"Authorization": "", "Origin": d.base}, url.Values{"token": {d.token}}.Encode())
	cookies := (&http.Response{Header: hdr}).Cookies()
	if code != http.StatusSeeOther || len(cookies) != 1 {
		t.Fatalf("login: %d %v", code, cookies)
	}
	browser := map[string]string{"Authorization": "", "Cookie": cookies[0].Name + "=" + cookies[0].Value, "Origin": d.base, "Accept": "text/html"}
	vote := func(who approverKey) (int, string) {
		sig, err := approval.Sign(who.signer, []byte(shown))
		if err != nil {
			t.Fatal(err)
		}
		crlf := func(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }
		form := url.Values{"step": {forms[0][3]}, "statement": {crlf(shown)}, "signature": {crlf(string(sig))}}
		code, _, body := d.req(t, "POST", "/runs/"+run.String()+"/votes", browser, form.Encode())
		return code, body
	}
	if code, body := vote(alice); code != http.StatusOK || !strings.Contains(body, `<strong id="state">pending</strong>`) {
		t.Fatalf("alice's vote: %d %s", code, body)
	}
	if code, body := vote(alice); code != http.StatusConflict || !strings.Contains(body, "duplicate") {
		t.Fatalf("alice's second vote: %d %s", code, body)
	}
	if code, body := vote(newApprover(t, "mallory")); code != http.StatusConflict {
		t.Fatalf("an outsider's vote: %d %s", code, body)
	}
	if code, body := vote(bob); code != http.StatusOK || !strings.Contains(body, `<strong id="state">approved</strong>`) {
		t.Fatalf("bob's vote: %d %s", code, body)
	}
	m = waitStatus(t, a, run, journal.StatusCompleted)
	if strings.Contains(d.get(t, "/runs/"+run.String()), `id="live"`) {
		t.Fatal("the completed run's page still follows its stream")
	}
	var out struct {
		Approved  bool
		Approvers []string
	}
	if err := json.Unmarshal(m.Output, &out); err != nil || !out.Approved || fmt.Sprint(out.Approvers) != "[alice bob]" {
		t.Fatalf("the agent got %s (%v)", m.Output, err)
	}
}

// copyTree copies the directory tree at from to a new temporary directory.
func copyTree(t *testing.T, from string) string {
	t.Helper()
	to := t.TempDir()
	err := filepath.WalkDir(from, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if e.IsDir() {
			return os.MkdirAll(dst, 0o700)
		}
		if !e.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	return to
}

// tamperedCopy copies the cell in dir (closed) and changes one byte of a
// recorded request of run in the copy's store: the "vvv" the smoke agent
// writes becomes "vvw". It returns the copy's directory.
func tamperedCopy(t *testing.T, dir string, run journal.RunID) string {
	t.Helper()
	tampered := copyTree(t, dir)
	db, err := badger.Open(badger.DefaultOptions(cell.StoreDir(tampered)).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	changed := false
	err = db.Update(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: append([]byte("j/"), run[:]...)})
		defer it.Close()
		for it.Rewind(); it.Valid() && !changed; it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			if i := bytes.Index(v, []byte("vvv")); i >= 0 {
				v[i+2] = 'w'
				changed = true
				return txn.Set(it.Item().KeyCopy(nil), v)
			}
		}
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil || !changed {
		t.Fatalf("tampering: %v (changed %v)", err, changed)
	}
	return tampered
}

// TestUIVerifyNamesTheFailure: the verify button of a run reports OK; in
// a copy of the cell whose stored journal had one byte of a recorded
// request changed, it reports the failure and names its class and entry.
func TestUIVerifyNamesTheFailure(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c, err := cell.Open(ctx, dir, uiCellOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Host.Run(ctx, host.RunSpec{Code: testutil.BuildGo(t, "host/testdata/agents/smoke"), Name: "smoke.wasm", Input: []byte("x"), Grant: mustGrant(t, smokeGrant)})
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("smoke run: %v %+v", err, res)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	run := res.Run
	tampered := tamperedCopy(t, dir, run)

	for _, tc := range []struct {
		dir  string
		want string
	}{
		{dir, `<p class="ok" id="verdict">OK</p>`},
		{tampered, `<p class="bad" id="verdict">FAILED: hash</p>`},
	} {
		d := serveDashboard(t, serveUIAPI(t, tc.dir, cell.ServerOptions{}))
		if !strings.Contains(d.get(t, "/runs/"+run.String()), `action="/runs/`+run.String()+`/verify"`) {
			t.Fatal("the run page has no verify button")
		}
		code, _, body := d.req(t, "POST", "/runs/"+run.String()+"/verify", map[string]string{"Accept": "text/html"}, "")
		if code != http.StatusOK || !strings.Contains(body, tc.want) || tc.dir == tampered && !regexp.MustCompile(`entry \d+ \(step \d+, kv.put\): hash`).MatchString(body) {
			t.Fatalf("verify in %s: %d, want %q in\n%s", tc.dir, code, tc.want, body)
		}
	}
}

var polyline = regexp.MustCompile(`<section class="chart" id="dim-([a-z_]+)">\s*<h2>[a-z_]+</h2>\s*<p>([^<]*)</p>[\s\S]*?<polyline [^>]*points="([^"]*)"/>`)

// TestUIBudgetAndSubRuns: a parent that spawns a child with a budget of
// 50 steps lists it among its sub-runs, the child names its parent, and
// the child's burn-down charts the steps left under its ceiling, from 50
// down to what its journal says it has left, one point per change.
func TestUIBudgetAndSubRuns(t *testing.T) {
	a := serveUIAPI(t, t.TempDir(), cell.ServerOptions{})
	d := serveDashboard(t, a)
	code := testutil.BuildGo(t, "host/testdata/agents/family")
	sum := journal.Sum(code)
	if err := a.cell.Store.PutModule(context.Background(), sum, code); err != nil {
		t.Fatal(err)
	}
	plan, _ := json.Marshal(map[string]any{"spawn": []spawnOf{{Module: hex.EncodeToString(sum), Caps: leafCaps, Budget: "steps=50", Input: map[string]any{"output": "done"}}}, "await": true})
	parent, err := a.srv.Launch(context.Background(), host.RunSpec{Code: code, Input: plan, Grant: mustGrant(t, parentGrant)}, "started")
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, a, parent, journal.StatusCompleted)
	var child journal.RunMeta
	runs, _ := a.cell.Store.Runs(context.Background())
	for _, m := range runs {
		if m.Origin != nil && m.Origin.ID == parent.String() {
			child = m
		}
	}
	if child.Status != journal.StatusCompleted {
		t.Fatalf("the child: %+v", child)
	}
	page := d.get(t, "/runs/"+parent.String())
	if _, subs, ok := strings.Cut(page, "<h2>Sub-runs</h2>"); !ok || !strings.Contains(subs, `<a href="/runs/`+child.ID.String()+`">`) {
		t.Fatal("the parent's page does not list its child among its sub-runs")
	}
	if !strings.Contains(d.get(t, "/runs/"+child.ID.String()), `spawn <a href="/runs/`+parent.String()+`">`) {
		t.Fatal("the child's page does not name its parent")
	}
	charts := polyline.FindAllStringSubmatch(d.get(t, "/runs/"+child.ID.String()+"/budget"), -1)
	var steps []string
	for _, c := range charts {
		if c[1] == "steps" {
			steps = c
		}
	}
	left := 50 - child.Steps
	if steps == nil || steps[2] != fmt.Sprintf("ceiling 50, used %d, left %d", child.Steps, left) {
		t.Fatalf("the child's steps chart: %q (the child made %d steps)", steps, child.Steps)
	}
	pts := strings.Fields(steps[3])
	if len(pts) < 2 || !strings.HasSuffix(pts[0], ",0.0") || !strings.HasPrefix(pts[len(pts)-1], "640.0,") {
		t.Fatalf("the steps line %q does not start at the ceiling and end at the last entry", pts)
	}
	y := strings.Split(pts[len(pts)-1], ",")[1]
	if want := fmt.Sprintf("%.1f", 160-float64(left)/50*160); y != want {
		t.Fatalf("the line ends at y=%s, want %s (%d steps left of 50)", y, want, left)
	}
}

// BenchmarkUIJournalPage100k times a page of the run page's timeline (200
// entries, the default) of a 100 000-call journal, through HTTP with the
// token, at offsets spread over the journal; it reports the p95 in ms
// (goal: under 200).
//
//	go test -run '^$' -bench UIJournalPage100k ./host/cell/
func BenchmarkUIJournalPage100k(b *testing.B) {
	ctx := context.Background()
	j, err := uibench.Open(ctx, b.TempDir(), uiCellOptions(b))
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close(ctx)
	run, err := j.LoopRun(ctx, testutil.BuildWAT(b, "bench/testdata/loop.wat"), 100_000)
	if err != nil {
		b.Fatal(err)
	}
	m, err := j.Cell.Store.Meta(ctx, run)
	if err != nil || m.Steps < 100_000 {
		b.Fatalf("the run made %d calls: %v", m.Steps, err)
	}
	var took []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		from := uibench.Offset(i, 100_000)
		d, page, err := j.Page(ctx, from)
		if err != nil {
			b.Fatal(err)
		}
		took = append(took, d)
		if n := len(uibench.Rows(page)); n != cell.UIPageSize {
			b.Fatalf("page from %d: %d rows", from, n)
		}
	}
	slices.Sort(took)
	p95 := took[(len(took)*95)/100]
	b.ReportMetric(float64(p95.Microseconds())/1000, "p95-ms")
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
}

// TestUIForkDiff: a fork of a probe run by a build that writes a bigger
// value after the fork point shows, on its page, its parent and the diff;
// the diff names the first step that diverges (the put of the bigger
// value) as replay.CompareFork does, and the calls before it as the same.
// A run that is not a fork has no diff (404).
//
// The probe reads no virtual clock before the fork point: a rebuilt
// module's runtime may read the clock a different number of times (its
// garbage collector runs at other moments), and a guest that prints the
// virtual time would then diverge there, as abi/SPEC.md §10.3 says.
func TestUIForkDiff(t *testing.T) {
	ctx := context.Background()
	a := serveUIAPI(t, t.TempDir(), cell.ServerOptions{})
	d := serveDashboard(t, a)
	steps := []byte(`[{"op":"kv.put","key":"a","size":3},{"op":"kv.put","key":"b","size":3},{"op":"kv.put","key":"c","size":3},{"op":"kv.get","key":"a"}]`)
	res, err := a.cell.Host.Run(ctx, host.RunSpec{Code: testutil.BuildGo(t, "host/testdata/agents/probe"), Name: "probe.wasm", Input: steps,
		Grant: mustGrant(t, "capabilities:\n  run: {}\n  kv: {namespace: probe}\n  http: {hosts: [\"127.0.0.1:1\"]}\n  clock: {}\n  random: {}\n")})
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("probe run: %v %+v", err, res)
	}
	parent := res.Run
	var at uint64
	journal.ReadEntries(ctx, a.cell.Store, parent, func(e *journal.Entry, _ *journal.Record) error {
		if at == 0 && e.Op == "kv.put" && e.Phase == journal.PhaseCompleted {
			at = e.Seq
		}
		return nil
	})
	// The variant's third call puts a bigger value.
	variant := testutil.BuildVariant(t, "host/testdata/agents/probe", "out = append(out, do(s))",
		"if len(out) == 2 {\n\t\t\t\ts.Size++\n\t\t\t}\n\t\t\tout = append(out, do(s))")
	st, err := a.cell.Host.Fork(ctx, host.ForkSpec{Parent: parent, At: at, Code: variant, Name: "probe-variant.wasm"})
	if err != nil {
		t.Fatal(err)
	}
	res, err = st.Execute(ctx)
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("the fork: %v %+v", err, res)
	}
	rep, err := replay.CompareFork(ctx, a.cell.Store, st.Run)
	if err != nil || rep.Diverged == 0 {
		t.Fatalf("CompareFork: %+v %v", rep, err)
	}
	if !strings.Contains(d.get(t, "/runs/"+st.Run.String()), `<a href="/runs/`+st.Run.String()+`/fork">diff against the parent</a>`) {
		t.Fatal("the fork's page does not link its diff")
	}
	page := d.get(t, "/runs/"+st.Run.String()+"/fork")
	if !strings.Contains(page, fmt.Sprintf("First diverges at step %d.", rep.Diverged)) || !strings.Contains(page, `<a href="/runs/`+parent.String()+`">`) {
		t.Fatalf("the diff page does not name the divergence at step %d or the parent:\n%s", rep.Diverged, page)
	}
	row := regexp.MustCompile(fmt.Sprintf(`<tr class="denied" id="step%d"><td>%d</td><td>kv.put</td><td>kv.put</td><td>request differs[^<]*</td></tr>`, rep.Diverged, rep.Diverged))
	if !row.MatchString(page) {
		t.Fatalf("the diverging step's row is not there:\n%s", page)
	}
	if code, _, _ := d.req(t, "GET", "/runs/"+parent.String()+"/fork", nil, ""); code != http.StatusNotFound {
		t.Fatalf("the diff of a run that is not a fork: %d, want 404", code)
	}
}
