package main_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/internal/fakellm"
	"github.com/agentrt/agentrt/internal/testutil"
)

// The APIs the agent is run against, as llm.yaml's kind and the fake's
// name for them.
var apis = []struct{ kind, api string }{
	{"openai-chat", fakellm.APIChat},
	{"openai-responses", fakellm.APIResponses},
	{"anthropic", fakellm.APIMessages},
}

// TestResearchAgent runs the agent through agentrt run against the fake
// provider speaking each API, streamed and not: the model asks for a
// note, four pages (one outside the grant) and a note written, and then
// answers. It checks the answer and its sources, that each tool result
// was fed back (every turn of the script expects the last one's text, so
// a wrong conversation gets a 400, not the next turn), that the fake got
// each call once and its usage is the agent's, what the site was asked,
// and that the run replays and its bundle verifies.
func TestResearchAgent(t *testing.T) {
	mod := module(t)
	cache := testutil.CompileCache()
	for _, a := range apis {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", a.kind, stream), func(t *testing.T) {
				site := startSite(t)
				sc := loadScript(t, site.URL, nil)
				fake := startFake(t, sc)
				c := newCell(t, fake, a.kind, sc.APIKey, cache)
				res, out := parseRun(t, c.run("run", mod, "--grant", exampleFile("grant.yaml"), "-q", "--json", "--input", input(site.URL, stream)))
				if res.Status != "completed" {
					t.Fatalf("run %s: %s", res.Status, res.Error)
				}
				last := sc.Turns[len(sc.Turns)-1].Reply.Text
				if out.Answer != last {
					t.Fatalf("answer %q, want the last turn's text %q", out.Answer, last)
				}
				if want := []string{site.URL + "/", site.URL + "/effects", site.URL + "/journal"}; !slices.Equal(out.Sources, want) {
					t.Fatalf("sources %q, want %q", out.Sources, want)
				}
				if !slices.Equal(out.Notes, []string{"effects"}) || out.Calls != len(sc.Turns) || out.ToolCalls != 6 {
					t.Fatalf("notes %q, %d model calls, %d tool calls; want [effects], %d, 6", out.Notes, out.Calls, out.ToolCalls, len(sc.Turns))
				}

				st := fake.settledStats(t)
				if len(st.Requests) != len(sc.Turns) {
					t.Fatalf("the fake got %d requests, want one per turn (%d): %+v", len(st.Requests), len(sc.Turns), st.Requests)
				}
				for i, r := range st.Requests {
					if r.API != a.api || r.Stream != stream || r.Turn != i || r.Attempt != 1 || r.Outcome != fakellm.OutcomeCompleted {
						t.Fatalf("request %d: api %s stream %v turn %d attempt %d outcome %s %s; want %s stream %v turn %d, completed at once",
							i, r.API, r.Stream, r.Turn, r.Attempt, r.Outcome, r.Error, a.api, stream, i)
					}
				}
				if again := st.ResentAfterCompletion(); len(again) > 0 {
					t.Fatalf("calls sent again after a complete answer: %+v", again)
				}
				var want fakellm.Usage
				for _, turn := range sc.Turns {
					want.InputTokens += turn.Usage.InputTokens
					want.OutputTokens += turn.Usage.OutputTokens
					want.CacheReadTokens += turn.Usage.CacheReadTokens
				}
				if st.Usage != want {
					t.Fatalf("the fake counted usage %+v, the script's sum is %+v", st.Usage, want)
				}
				if u := out.Usage; u.Input != uint64(want.InputTokens) || u.Output != uint64(want.OutputTokens) || u.CacheRead != uint64(want.CacheReadTokens) || u.CacheWrite != 0 {
					t.Fatalf("the agent saw usage %+v, the fake sent %+v", u, want)
				}
				site.mu.Lock()
				hits := fmt.Sprint(site.hits)
				site.mu.Unlock()
				if hits != "map[/:1 /effects:1 /journal:1]" {
					t.Fatalf("the site was asked %s; want each page the model asked for once", hits)
				}

				// The journal holds every model call once, completed;
				// the run replays and an exported bundle verifies.
				calls := 0
				for _, line := range strings.Split(strings.TrimSpace(string(c.run("journal", "show", res.Run, "--json"))), "\n") {
					var e struct{ Op, Phase string }
					if err := json.Unmarshal([]byte(line), &e); err != nil {
						t.Fatalf("journal show --json: %q: %v", line, err)
					}
					if e.Op == "llm.complete" && e.Phase == "completed" {
						calls++
					}
				}
				if calls != len(sc.Turns) {
					t.Fatalf("the journal has %d completed llm.complete entries, want %d", calls, len(sc.Turns))
				}
				if rep := string(c.run("replay", res.Run)); !strings.Contains(rep, "verified") {
					t.Fatalf("replay: %s", rep)
				}
				bundle := filepath.Join(t.TempDir(), "run.bundle")
				keys := filepath.Join(t.TempDir(), "cell.pub")
				c.run("audit", "export", res.Run, "-o", bundle)
				writeFile(t, keys, c.run("keys"))
				if v := string(c.run("audit", "verify", bundle, "--trust", keys)); !strings.Contains(v, "verified") {
					t.Fatalf("audit verify: %s", v)
				}
			})
		}
	}
}

// TestResearchAgentStaysInItsGrant asks for a model the grant's llm
// section does not list: the call is denied before anything is sent, and
// the run fails naming it.
func TestResearchAgentStaysInItsGrant(t *testing.T) {
	mod := module(t)
	site := startSite(t)
	sc := loadScript(t, site.URL, nil)
	fake := startFake(t, sc)
	c := newCell(t, fake, "openai-chat", sc.APIKey, testutil.CompileCache())
	in := strings.Replace(input(site.URL, false), `"model":"fake-mini"`, `"model":"fake-large"`, 1)
	cmd := c.cmd("run", mod, "--grant", exampleFile("grant.yaml"), "-q", "--json", "--input", in)
	b, err := cmd.Output()
	if err == nil {
		t.Fatalf("a run asking for a model outside its grant succeeded: %s", b)
	}
	res, _ := parseRun(t, b)
	if res.Status != "failed" {
		t.Fatalf("run %s, want failed", res.Status)
	}
	// The agent's error is its last log line: the host's denial, naming
	// the model.
	if logs := string(c.run("logs", res.Run)); !strings.Contains(logs, "model call 1: denied") || !strings.Contains(logs, "fake-large") {
		t.Fatalf("the run's log does not say the model was denied:\n%s", logs)
	}
	if st := fake.Fake.Stats(); len(st.Requests) != 0 {
		t.Fatalf("the fake got %d requests for a model the grant does not allow", len(st.Requests))
	}
}
