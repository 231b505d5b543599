package cell_test

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
)

// dashboard is a cell's API (serveAPI) with its dashboard on a loopback
// listener of its own.
type dashboard struct {
	*api
	base string // http://127.0.0.1:PORT
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
	return &dashboard{api: a, base: "http://" + ln.Addr().String()}
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
	a := serveAPI(t, t.TempDir(), cell.ServerOptions{})
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
		{"a forged cookie", map[string]string{"Authorization": "", "Cookie": "agentrt_ui=" + wrong + wrong}, "/runs/" + id + "/entries/0/input"},
		{"the token as the cookie", map[string]string{"Authorization": "", "Cookie": "agentrt_ui=" + d.token}, "/"},
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
			if c.Name == "agentrt_ui" {
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
	withCookie := map[string]string{"Authorization": "", "Cookie": "agentrt_ui=" + cookie, "Accept": "text/html"}
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
	if code, _, _ := d.req(t, "POST", "/logout", map[string]string{"Authorization": "", "Cookie": "agentrt_ui=" + cookie}, ""); code != http.StatusForbidden {
		t.Errorf("a cookie POST without Origin: %d, want 403", code)
	}
}

// TestUIListensOnLoopbackOnly: an address that is not loopback is refused
// by ListenUI and by Server.UI unless AnyAddress allows it, and the
// dashboard refuses a UIOptions without a token.
func TestUIListensOnLoopbackOnly(t *testing.T) {
	a := serveAPI(t, t.TempDir(), cell.ServerOptions{})
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
	a := serveAPI(t, t.TempDir(), cell.ServerOptions{})
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
	a := serveAPI(t, t.TempDir(), cell.ServerOptions{})
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
	a := serveAPI(t, t.TempDir(), cell.ServerOptions{})
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
	a := serveAPI(t, t.TempDir(), cell.ServerOptions{})
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
