// Command team is an example planner: it writes a short report on a page
// of the crawler's site with a team of three sub-agents, each with powers
// of its own (the children in fetch/, count/ and write/):
//
//   - fetch has http to loopback and nothing else: it reads the page;
//   - count has one native tool, count-words (wc -w under the cell's
//     sandbox), which the team's grant may delegate but not run: it counts
//     the page's words;
//   - write has the llm capability (the model fake-mini of the provider
//     "fake"): it summarises the page, in a style the team chooses.
//
// The plan (guest-sdk/plan) is a DAG: fetch; then count and write at once
// (both spawned before either is awaited); then the local steps assemble
// (the report), stage (the report as a draft in kv, compensated by deleting
// it) and publish, which fails on purpose: the announcement channel is
// closed. The failure goes to the replanner as a signal; it has no other
// channel and gives up, so the plan rolls back: the draft is removed.
//
// The summary's style ("brief" or "detailed") is chosen by a bandit that
// learns from earlier runs in kv, and a reflection of the plan is written
// to kv after it. The output is the report, with what the plan did.
package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentrt/agentrt/guest-sdk/agent"
	"github.com/agentrt/agentrt/guest-sdk/plan"
)

// Input names the site, the model, and the children's modules by the
// SHA-256 the cell holds them under (agentrt module push prints it).
type Input struct {
	Site    string `json:"site"`
	Model   string `json:"model"`
	Modules struct {
		Fetch string `json:"fetch"`
		Count string `json:"count"`
		Write string `json:"write"`
	} `json:"modules"`
}

// The children's powers, each within the team's grant (grant.yaml); the
// tool is declared exactly as the grant's delegable entry.
const (
	fetchCaps = `{run: {}, http: {hosts: ["127.0.0.1"]}}`
	countCaps = `{run: {}, tool: {tools: [{name: count-words, exec: /usr/bin/wc, args: {fixed: [-w]}, read: [/usr, /lib, /lib64], idempotent: true}]}}`
	writeCaps = `{run: {}, llm: {providers: [fake], models: [fake-mini], max_output_tokens: 256}}`
)

// Report is the team's output.
type Report struct {
	Title    string `json:"title"`
	URL      string `json:"url"`
	Words    int    `json:"words"`
	Summary  string `json:"summary"`
	Strategy string `json:"strategy"`
	// Refused are the powers the children tried and were refused.
	Refused []string `json:"refused"`
	// Children are the team's sub-agents, as agent.children lists them.
	Children []Child    `json:"children"`
	Plan     PlanReport `json:"plan"`
	// Effects counts, per local step, the times its effect was made
	// (kv "effects/<step>"): once each, even across a crash.
	Effects map[string]int `json:"effects"`
	// Draft is "removed" when the rollback deleted the staged draft.
	Draft      string `json:"draft"`
	Reflection string `json:"reflection"`
}

// Child is one of the team's sub-agents: its run, the step of the team
// that spawned it, and its state.
type Child struct {
	Run    string `json:"run"`
	Step   uint64 `json:"step"`
	Status string `json:"status"`
}

// PlanReport is what the plan did.
type PlanReport struct {
	Done    []string          `json:"done"`
	Runs    map[string]string `json:"runs"`
	Signals []plan.Signal     `json:"signals"`
	Undone  []string          `json:"undone"`
	Outcome string            `json:"outcome"`
}

type page struct {
	URL     string   `json:"url"`
	Title   string   `json:"title"`
	Text    string   `json:"text"`
	Refused []string `json:"refused"`
}

type count struct {
	Words   int      `json:"words"`
	Refused []string `json:"refused"`
}

type summary struct {
	Summary string `json:"summary"`
}

// effect counts one making of step's effect in kv.
func effect(step string) error {
	n := 0
	if v, err := agent.KVGet("effects/" + step); err == nil {
		n = int(v[0])
	} else if !errors.Is(err, agent.ErrNotFound) {
		return err
	}
	return agent.KVPut("effects/"+step, []byte{byte(n + 1)})
}

func module(name, hexsum string) ([]byte, error) {
	b, err := hex.DecodeString(hexsum)
	if err != nil || len(b) != 32 {
		return nil, fmt.Errorf("input: modules.%s is %q, not a module's SHA-256 in hex (hint: agentrt module push %s.wasm prints it)", name, hexsum, name)
	}
	return b, nil
}

func main() {
	agent.MainJSON(func(ctx context.Context, in Input) (*Report, error) {
		fetchMod, err := module("fetch", in.Modules.Fetch)
		if err != nil {
			return nil, err
		}
		countMod, err := module("count", in.Modules.Count)
		if err != nil {
			return nil, err
		}
		writeMod, err := module("write", in.Modules.Write)
		if err != nil {
			return nil, err
		}
		site, model := strings.TrimSuffix(in.Site, "/"), in.Model
		if site == "" || model == "" {
			return nil, errors.New(`input: want {"site": URL, "model": NAME, "modules": {...}}`)
		}

		bandit := &plan.Bandit{Name: "summary-style", Arms: []string{"brief", "detailed"}}
		style, err := bandit.Choose()
		if err != nil {
			return nil, err
		}
		var rep Report
		steps := []plan.Step{
			{ID: "fetch", Child: &plan.Child{Module: fetchMod, Caps: fetchCaps, Budget: "http_requests=4",
				// The page links to example.com, outside every grant here:
				// the child is told to follow it, and is refused.
				Input: jsonInput(map[string]string{"url": site + "/effects", "follow": "http://example.com/durable"})}},
			{ID: "count", Deps: []string{"fetch"}, Child: &plan.Child{Module: countMod, Caps: countCaps, Budget: "tool_calls=3",
				Input: func(in plan.Inputs) ([]byte, error) {
					var p page
					if err := json.Unmarshal(in["fetch"], &p); err != nil {
						return nil, err
					}
					// cat is not among the child's tools.
					return json.Marshal(map[string]string{"text": p.Text, "try": "cat"})
				}}},
			{ID: "write", Deps: []string{"fetch"}, Child: &plan.Child{Module: writeMod, Caps: writeCaps, Budget: "model_calls=2",
				Input: func(in plan.Inputs) ([]byte, error) {
					var p page
					if err := json.Unmarshal(in["fetch"], &p); err != nil {
						return nil, err
					}
					return json.Marshal(map[string]string{"text": p.Text, "model": model, "style": style})
				}}},
			{ID: "assemble", Deps: []string{"fetch", "count", "write"}, Do: func(in plan.Inputs) ([]byte, error) {
				var p page
				var c count
				var s summary
				for _, x := range []struct {
					id string
					v  any
				}{{"fetch", &p}, {"count", &c}, {"write", &s}} {
					if err := json.Unmarshal(in[x.id], x.v); err != nil {
						return nil, fmt.Errorf("the output of %s: %w", x.id, err)
					}
				}
				rep.Title, rep.URL, rep.Words, rep.Summary, rep.Strategy = p.Title, p.URL, c.Words, s.Summary, style
				rep.Refused = append(append([]string{}, p.Refused...), c.Refused...)
				text := fmt.Sprintf("# %s\n\n%s (%d words, %s)\n\n%s\n", p.Title, p.URL, c.Words, style, s.Summary)
				return []byte(text), effect("assemble")
			}},
			{ID: "stage", Deps: []string{"assemble"},
				Do: func(in plan.Inputs) ([]byte, error) {
					if err := agent.KVPut("draft", in["assemble"]); err != nil {
						return nil, err
					}
					return []byte("draft"), effect("stage")
				},
				Undo: func(key []byte) error {
					_, err := agent.KVDelete(string(key))
					return err
				}},
			{ID: "publish", Deps: []string{"stage"}, Do: func(plan.Inputs) ([]byte, error) {
				return nil, errors.New("the announcement channel #team is closed (this step fails on purpose)")
			}},
		}
		replan := func(sig plan.Signal, st *plan.State) ([]plan.Step, error) {
			if sig.Kind == plan.StepFailed && sig.Step == "publish" {
				return nil, errors.New("there is no other channel to announce on: withdraw the draft")
			}
			return nil, fmt.Errorf("no revision for %s at %q", sig.Kind, sig.Step)
		}
		r, perr := plan.Execute(steps, plan.Options{Name: "team", Replan: replan})
		if r == nil {
			return nil, perr
		}
		rep.Plan = PlanReport{Done: r.Done, Runs: r.Runs, Signals: r.Signals, Undone: r.Undone, Outcome: "completed"}
		if perr != nil {
			rep.Plan.Outcome = "rolled back: " + perr.Error()
		}
		if rep.Title == "" {
			return nil, fmt.Errorf("the team did not assemble a report: %v", perr)
		}

		if _, err := agent.KVGet("draft"); errors.Is(err, agent.ErrNotFound) {
			rep.Draft = "removed"
		} else if err != nil {
			return nil, err
		} else {
			rep.Draft = "still staged"
		}
		rep.Effects = map[string]int{}
		for _, s := range []string{"assemble", "stage"} {
			v, err := agent.KVGet("effects/" + s)
			if err != nil {
				return nil, fmt.Errorf("effects/%s: %w", s, err)
			}
			rep.Effects[s] = int(v[0])
		}
		kids, err := agent.Children()
		if err != nil {
			return nil, err
		}
		for _, k := range kids {
			rep.Children = append(rep.Children, Child{Run: k.Run, Step: k.Step, Status: k.Status})
		}
		// The report was assembled: the style served.
		if err := bandit.Record(style, 1); err != nil {
			return nil, err
		}
		if _, rep.Reflection, err = plan.Reflect(nil, "team-report", style, r, perr); err != nil {
			return nil, err
		}
		agent.Logf("team: report on %s: %d words, summary (%s): %s", rep.URL, rep.Words, style, rep.Summary)
		for _, r := range rep.Refused {
			agent.Logf("team: a child tried a power it was not given: %s", r)
		}
		agent.Logf("team: %s; the draft is %s; reflection %s", rep.Plan.Outcome, rep.Draft, rep.Reflection)
		return &rep, nil
	})
}

// jsonInput is a child's input fixed in advance.
func jsonInput(v any) func(plan.Inputs) ([]byte, error) {
	return func(plan.Inputs) ([]byte, error) { return json.Marshal(v) }
}
