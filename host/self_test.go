package host_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/budget"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/policy"
)

// selfProbe is the agent that asks the run.self ops (testdata/agents/selfprobe).
const selfProbe = "host/testdata/agents/selfprobe"

// countingApprover answers every ask with yes or no and remembers them.
type countingApprover struct {
	mu  sync.Mutex
	yes bool
	got []host.Approval
}

func (a *countingApprover) Approve(_ context.Context, ap host.Approval) (bool, string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.got = append(a.got, ap)
	return a.yes, "tester", nil
}

func (a *countingApprover) asked() []host.Approval {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]host.Approval(nil), a.got...)
}

// selfRun runs the self probe with steps and returns its lines.
func selfRun(t *testing.T, env *testutil.Env, spec host.RunSpec, steps any) ([]string, *host.Result) {
	t.Helper()
	in, err := json.Marshal(steps)
	if err != nil {
		t.Fatal(err)
	}
	spec.Code, spec.Input = testutil.BuildGo(t, selfProbe), in
	res, err := env.Host.Run(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != journal.StatusCompleted {
		t.Fatalf("run %s ended %s: %s\n%s", res.Run, res.Status, res.Err, env.Stderr(t, res.Run))
	}
	var lines []string
	if err := json.Unmarshal(res.Output, &lines); err != nil {
		t.Fatalf("output %q: %v", res.Output, err)
	}
	return lines, res
}

type step = map[string]any

// checkParity checks a "may+do" line: what run.self_may said equals what
// the gate did with the call. An allowed call is not refused by the gate
// (it may still fail on its own: a missing key); a denied one is refused
// with the status and reason the dry run gave; an ask is a call the
// permission modes asked about (and went through, or was not approved).
func checkParity(t *testing.T, what, line string) (decision string) {
	t.Helper()
	may, did, ok := strings.Cut(line, " | ")
	if !ok || !strings.HasPrefix(may, "may ") || !strings.HasPrefix(did, "do ") {
		t.Fatalf("%s: line %q is not may | do", what, line)
	}
	may, did = strings.TrimPrefix(may, "may "), strings.TrimPrefix(did, "do ")
	decision, rest, _ := strings.Cut(may, " ")
	gateStatus := strings.HasPrefix(did, "denied ") || strings.HasPrefix(did, "budget ")
	switch decision {
	case "allow":
		if gateStatus {
			t.Errorf("%s: run.self_may said allow, the call was refused: %q", what, did)
		}
	case "ask":
		// What happens then is the approver's to say.
		if gateStatus && !strings.Contains(did, " was not approved ") {
			t.Errorf("%s: run.self_may said ask, the call was refused without asking: %q", what, did)
		}
	case "deny":
		// rest is "<stage> <status> <reason>", did is "<status> <reason>".
		_, statusReason, _ := strings.Cut(rest, " ")
		if did != statusReason {
			t.Errorf("%s: run.self_may said deny %q, the call got %q", what, statusReason, did)
		}
	default:
		t.Errorf("%s: run.self_may answered %q", what, may)
	}
	return decision
}

// parityDir is the policy engine's parity corpus.
var parityDir = filepath.Join(testutil.RepoRoot(), "policy", "testdata", "parity")

type paritySource struct {
	File string `json:"file"`
	Name string `json:"name"`
	Text string `json:"text"`
}

type parityFixture struct {
	Context struct {
		Clearance int64 `json:"clearance"`
	} `json:"context"`
	Platform  []paritySource  `json:"platform"`
	Customer  []paritySource  `json:"customer"`
	Modes     *string         `json:"modes"`
	LoadError json.RawMessage `json:"load_error"`
}

func paritySources(t *testing.T, ss []paritySource) []policy.Source {
	t.Helper()
	var out []policy.Source
	for _, s := range ss {
		if s.File != "" {
			b, err := os.ReadFile(filepath.Join(parityDir, s.File))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, policy.Source{Name: filepath.Base(s.File), Text: b})
			continue
		}
		out = append(out, policy.Source{Name: s.Name, Text: []byte(s.Text)})
	}
	return out
}

// The issue's acceptance: on every policy set and permission modes of the
// policy parity corpus, run.self_may answers what the gate then does when
// the agent makes the same call. The agent asks, then calls, a spread of
// calls: HTTP by method and path, to a granted and an ungranted host, kv
// reads and writes of plain and secret keys, clock, random and log.
func TestSelfMayEqualsTheGateOnTheParityFixtures(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") }))
	defer srv.Close()
	hostport := strings.TrimPrefix(srv.URL, "http://")
	var steps []step
	for _, c := range []step{
		{"call": "http.request", "method": "GET", "url": srv.URL + "/"},
		{"call": "http.request", "method": "POST", "url": srv.URL + "/admin"},
		{"call": "http.request", "method": "DELETE", "url": srv.URL + "/x"},
		{"call": "http.request", "method": "GET", "url": "https://api.example.com/v1"},
		{"call": "http.request", "method": "GET", "url": "http://169.254.169.254/latest/meta-data"},
		{"call": "kv.put", "key": "a"},
		{"call": "kv.put", "key": "secret/a"},
		{"call": "kv.get", "key": "a"},
		{"call": "kv.get", "key": "secret/a"},
		{"call": "clock.now"},
		{"call": "random.bytes"},
		{"call": "run.log", "key": "hello"},
	} {
		c["op"] = "may+do"
		steps = append(steps, c)
	}
	files, err := filepath.Glob(filepath.Join(parityDir, "*.json"))
	if err != nil || len(files) < 20 {
		t.Fatalf("parity fixtures: %d (%v)", len(files), err)
	}
	decisions := map[string]int{}
	ran := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var fx parityFixture
		if err := json.Unmarshal(b, &fx); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		platform := policy.Platform()
		if fx.Platform != nil {
			platform = paritySources(t, fx.Platform)
		}
		customer := paritySources(t, fx.Customer)
		if len(customer) > 0 {
			// The probe needs its run ops (its input, its output, the
			// questions it asks): a customer set that permits nothing
			// gets them permitted, which decides nothing else. Forbids
			// still apply.
			customer = append(customer, policy.Source{Name: "probe-runs.cedar", Text: []byte(`permit (principal, action in Action::"run", resource);`)})
		}
		eng, err := policy.NewEngine(platform, customer)
		if fx.LoadError != nil {
			// The set does not load: no cell runs it, so there is no gate
			// to compare with.
			if err == nil {
				t.Errorf("%s: the set loads, and the fixture says it does not", filepath.Base(f))
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", filepath.Base(f), err)
		}
		// The cell's clearance is the fixture's context's, which its
		// policies were written for.
		deps := host.Deps{Policy: eng, Clearance: fx.Context.Clearance}
		approver := &countingApprover{yes: true}
		if fx.Modes != nil {
			if deps.Modes, err = policy.ParseModes([]byte(*fx.Modes)); err != nil {
				t.Fatalf("%s: modes: %v", filepath.Base(f), err)
			}
			deps.Approver = approver
		}
		t.Run(strings.TrimSuffix(filepath.Base(f), ".json"), func(t *testing.T) {
			env := testutil.NewEnv(t, deps, host.Config{})
			grant := &host.Grant{Run: &host.RunGrant{}, KV: &host.KVGrant{Namespace: "crawler"}, HTTP: &host.HTTPGrant{Hosts: []string{hostport}},
				Clock: &host.ClockGrant{}, Random: &host.RandomGrant{}}
			lines, res := selfRun(t, env, host.RunSpec{Grant: grant}, steps)
			if len(lines) != len(steps) {
				t.Fatalf("%d lines for %d steps: %q", len(lines), len(steps), lines)
			}
			asks := 0
			for i, l := range lines {
				d := checkParity(t, fmt.Sprintf("step %v", steps[i]), l)
				decisions[d]++
				if d == "ask" {
					asks++
				}
			}
			// The dry runs asked no one: every approval of a probed op was
			// a call's. (Under a default ask, the run ops the probe makes
			// ask too, run.self_may included, as the calls they are.)
			probed := 0
			for _, a := range approver.asked() {
				if a.Op != "run.input" && a.Op != "run.set_output" && a.Op != "run.self_may" {
					probed++
				}
			}
			if probed != asks {
				t.Errorf("the approver was asked about %d probed calls, run.self_may said ask %d times", probed, asks)
			}
			replaysTo(t, env, res.Run, testutil.BuildGo(t, selfProbe), res.Output)
		})
		ran++
	}
	if ran < 10 || decisions["allow"] == 0 || decisions["deny"] == 0 || decisions["ask"] == 0 {
		t.Fatalf("compared on %d fixtures with decisions %v: want allow, deny and ask all seen", ran, decisions)
	}
}

// run.self_may names each layer of the gate that refuses, with the status
// and reason the call then gets, and has no effect: it reserves no budget,
// parks nothing, asks no approver and writes nothing.
func TestSelfMayAtEveryStageHasNoEffect(t *testing.T) {
	srv, served := countingServer(t)
	hostport := strings.TrimPrefix(srv.URL, "http://")
	_, root, _ := ed25519.GenerateKey(nil)
	modes, err := policy.ParseModes([]byte(`rules:
  - {name: no-secrets, op: "kv.put", resource: "p", effect: deny}
  - {name: ask-delete, op: "http.request", method: DELETE, effect: ask}
`))
	if err != nil {
		t.Fatal(err)
	}
	approver := &countingApprover{yes: false}
	env := testutil.NewEnv(t, host.Deps{TokenRoots: []ed25519.PublicKey{root.Public().(ed25519.PublicKey)}, Nonces: capability.NewMemoryNonces(0),
		Policy: platformPolicy(t, `permit (principal, action, resource);
forbid (principal, action == Action::"http.request", resource) when { context.method == "POST" };`),
		Modes: modes, Approver: approver}, host.Config{})
	tok, err := capability.Issue(root, capability.Claims{Audience: env.Key.Public().(ed25519.PublicKey), Caps: probeCaps(hostport),
		Budget: capability.Budget{HTTPRequests: capability.Limit(2)}, NotBefore: time.Now().Add(-time.Minute), Expires: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	get := step{"call": "http.request", "method": "GET", "url": srv.URL + "/a"}
	with := func(s step, op string) step {
		c := step{"op": op}
		for k, v := range s {
			c[k] = v
		}
		return c
	}
	steps := []step{
		{"op": "budget"},
		with(get, "may"),
		with(step{"call": "kv.put", "key": "fresh"}, "may"),
		with(step{"call": "http.request", "method": "DELETE", "url": srv.URL + "/d"}, "may"),
		{"op": "budget"},
		with(step{"call": "kv.get", "key": "fresh"}, "do"),
		with(get, "may+do"),
		with(step{"call": "http.request", "method": "POST", "url": srv.URL + "/p"}, "may+do"),
		with(step{"call": "kv.put", "key": "k"}, "may+do"),
		with(step{"call": "http.request", "method": "DELETE", "url": srv.URL + "/d"}, "may+do"),
		with(step{"call": "http.request", "method": "GET", "url": "https://elsewhere.example/"}, "may+do"),
		with(step{"call": "llm.complete", "key": "fake-model"}, "may"),
		with(get, "may+do"),
		with(get, "may+do"),
		{"op": "budget"},
		{"op": "mode"},
		{"op": "caps"},
	}
	lines, res := selfRun(t, env, host.RunSpec{Token: tok, Grant: probeGrant(hostport)}, steps)
	want := []string{
		"budget steps=2/0/0/0 http_requests=0/0/2/2",
		"may allow",
		"may deny mode denied kv.put is denied by permission mode rule \"no-secrets\"",
		"may ask mode http.request would park for approval (permission mode rule \"ask-delete\" asks)",
		"budget steps=6/0/0/0 http_requests=0/0/2/2",
		"do not_found",
		"may allow | do ok",
		"may deny policy denied policy: denied by customer:customer0.cedar#1 (customer set) | do denied policy: denied by customer:customer0.cedar#1 (customer set)",
		"may deny mode denied kv.put is denied by permission mode rule \"no-secrets\" | do denied kv.put is denied by permission mode rule \"no-secrets\"",
		"may ask mode http.request would park for approval (permission mode rule \"ask-delete\" asks) | do denied http.request was not approved (permission mode rule \"ask-delete\" asked; tester answered no)",
		"", // the capability layer's denial: checked below
		"may deny capability denied capability llm is not granted",
		"may allow | do ok",
		"", // the budget layer's denial: checked below
		"budget steps=23/0/0/0 http_requests=2/0/0/2",
		"mode interactive modes=true default=allow rules=no-secrets:deny,ask-delete:ask",
		"", // caps: checked below
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines for %d steps:\n%s", len(lines), len(want), strings.Join(lines, "\n"))
	}
	for i, w := range want {
		if w != "" && !strings.HasPrefix(lines[i], w) {
			t.Errorf("step %d (%v):\n got %q\nwant %q", i+1, steps[i], lines[i], w)
		}
		if strings.Contains(lines[i], " | ") {
			checkParity(t, fmt.Sprintf("step %d", i+1), lines[i])
		}
	}
	if !strings.HasPrefix(lines[10], "may deny capability denied http.request: host elsewhere.example") {
		t.Errorf("an ungranted host: %q, want the capability layer's denial", lines[10])
	}
	if !strings.HasPrefix(lines[13], "may deny budget budget http.request: budget exceeded: http_requests: asked 1, 0 left of 2 (2 spent, 0 reserved) | do budget http.request: budget exceeded: http_requests: asked 1, 0 left of 2 (2 spent, 0 reserved)") {
		t.Errorf("past the ceiling: %q, want the budget layer's denial", lines[13])
	}
	if !strings.HasPrefix(lines[16], "caps run,kv,http,clock,random budget=http_requests=2 claims={") || !strings.Contains(lines[16], hostport) {
		t.Errorf("caps: %q", lines[16])
	}
	// Only the calls made reached the server and the approver.
	if n := served.Load(); n != 2 {
		t.Errorf("the server saw %d requests, want the 2 made", n)
	}
	if got := approver.asked(); len(got) != 1 || got[0].Op != "http.request" || got[0].Method != "DELETE" {
		t.Errorf("the approver was asked %+v, want the one DELETE made", got)
	}
	// The dry runs are pure entries with no gate-layer effect: no budget
	// record on any run.self_may entry.
	for _, e := range entries(t, env, res.Run) {
		if e.Op == "run.self_may" && (e.Phase != journal.PhaseCompleted || len(e.Budget) != 0) {
			t.Errorf("run.self_may entry %d: phase %s, budget record %x", e.Seq, e.Phase, e.Budget)
		}
	}
	replaysTo(t, env, res.Run, testutil.BuildGo(t, selfProbe), res.Output)
}

// run.self_journal pages through the run's own journal, filters by op and
// phase, and refuses a page above the host's cap naming it; its pages
// match the stored journal, and the run replays with them.
func TestSelfJournalPages(t *testing.T) {
	env := testutil.NewEnv(t, host.Deps{}, host.Config{})
	var steps []step
	for i := range 3 {
		steps = append(steps, step{"op": "do", "call": "kv.put", "key": fmt.Sprint("k", i)})
	}
	steps = append(steps,
		step{"op": "journal", "limit": 2},
		step{"op": "journal", "from": 2, "limit": 2},
		step{"op": "journal", "jop": "kv.put", "phase": "completed"},
		step{"op": "journal", "limit": 101},
		step{"op": "journal", "phase": "done"},
		step{"op": "journal", "from": 1000},
		step{"op": "whoami"},
	)
	lines, res := selfRun(t, env, host.RunSpec{Grant: probeGrant()}, steps)
	// The pages the agent got are the stored journal's: its entries
	// before the query (the queries' own entries come after).
	es := entries(t, env, res.Run)
	page := func(from uint64, limit int, op string, phase journal.Phase, before uint64) string {
		var got []string
		next := uint64(0)
		for _, e := range es {
			if e.Seq < from || e.Seq >= before || (op != "" && e.Op != op) || (phase != 0 && e.Phase != phase) {
				continue
			}
			if len(got) == limit {
				next = e.Seq
				break
			}
			got = append(got, fmt.Sprintf("%d:%s:%s:%d", e.Seq, e.Phase, e.Op, e.Step))
		}
		if next == 0 && uint64(len(es)) > before && len(got) == limit {
			next = before
		}
		return fmt.Sprintf("journal next=%d n=%d %s", next, len(got), strings.Join(got, " "))
	}
	// before returns the seq of the entry of step n: what a query made at
	// that step sees is everything before it.
	before := func(n uint64) uint64 {
		for _, e := range es {
			if e.Step == n {
				return e.Seq
			}
		}
		t.Fatalf("no entry of step %d", n)
		return 0
	}
	// Steps: 1 run.input, 2-4 the puts, 5-10 the queries.
	want := []string{
		page(0, 2, "", 0, before(5)),
		page(2, 2, "", 0, before(6)),
		page(0, 100, "kv.put", journal.PhaseCompleted, before(7)),
		"journal bad_request run.self_journal: limit 101 is above the host's cap of 100 entries a page; ask for at most 100 and follow next to page on",
		"journal bad_request run.self_journal: unknown phase \"done\" (one of: start, intent, executing, completed, failed, end, lease)",
		"journal next=0 n=0 ",
	}
	for i, w := range want {
		if got := lines[3+i]; got != w {
			t.Errorf("query %v:\n got %q\nwant %q", steps[3+i], got, w)
		}
	}
	if !strings.Contains(lines[5], ":completed:kv.put:2 ") || !strings.HasSuffix(lines[5], ":completed:kv.put:4") || !strings.Contains(lines[5], " n=3 ") {
		t.Errorf("the completed puts: %q", lines[5])
	}
	if w := "whoami run=" + res.Run.String() + " task= attempt=0 parent= step=0 depth=0 cell=" + fmt.Sprintf("%x", env.Key.Public().(ed25519.PublicKey)[:8]); !strings.HasPrefix(lines[9], w) {
		t.Errorf("whoami:\n got %q\nwant %q...", lines[9], w)
	}
	replaysTo(t, env, res.Run, testutil.BuildGo(t, selfProbe), res.Output)
}

// A C guest asks run.self through agentrt_self_call and gets the host's
// CBOR answer; a journal page above the cap is refused naming it. The run
// replays.
func TestSelfFromC(t *testing.T) {
	env := testutil.NewEnv(t, host.Deps{}, host.Config{})
	code := testutil.BuildC(t, "host/testdata/agents/cself")
	res, err := env.Host.Run(context.Background(), host.RunSpec{Code: code, Grant: host.DefaultGrant()})
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("run: %v %+v\n%s", err, res, env.Stderr(t, res.Run))
	}
	var who abi.SelfResponse
	if err := abi.Unmarshal(res.Output, &who); err != nil {
		t.Fatalf("output %x: %v", res.Output, err)
	}
	if who.RunID != res.Run.String() || who.Depth != 0 || who.Parent != "" || who.Cell != fmt.Sprintf("%x", env.Key.Public().(ed25519.PublicKey)[:8]) {
		t.Errorf("run.self from C: %+v", who)
	}
	var logged string
	if err := host.ReadEvents(context.Background(), env.Store, res.Run, func(e host.Event) error {
		if e.Kind == host.EventRunLog {
			logged += string(e.Data)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logged, "journal over the cap: bad_request: run.self_journal: limit 101 is above the host's cap of 100") {
		t.Errorf("the C guest logged %q", logged)
	}
	// The typed answers, decoded in C, say what the CBOR one says: the
	// run.self_budget call is the run's fifth step (its log line is one), and kv.get is
	// denied by the capability layer, as the gate would deny it.
	typed := fmt.Sprintf("typed whoami run=%s depth=0 cell=%s parent= sha=32 | budget dims=%d first=steps steps=5 limited=0 | may kv.get decision=deny stage=capability status=denied",
		who.RunID, who.Cell, len(budget.DimNames()))
	if !strings.Contains(logged, typed) {
		t.Errorf("the C guest's typed answers:\n got %q\nwant %q", logged, typed)
	}
	replaysTo(t, env, res.Run, code, res.Output)
}
