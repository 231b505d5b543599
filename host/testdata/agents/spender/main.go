//go:build wasip1

// Command spender is the budget bridge's test agent: the family agent's
// spawn, cancel and await, plus HTTP requests that spend the run's
// http_requests. Its input, JSON, says which children to spawn (spender
// agents too), whether to cancel or await them, how many GETs of a URL to
// make (before the children, or after them) and whether to sleep an hour
// at the end. Its output, JSON, reports every answer it got.
package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/agentrt/agentrt/guest-sdk/abi"
	"github.com/agentrt/agentrt/guest-sdk/agent"
)

type plan struct {
	Spawn []struct {
		Module string          `json:"module"`
		Caps   string          `json:"caps"`
		Budget string          `json:"budget"`
		Input  json.RawMessage `json:"input"`
	} `json:"spawn"`
	Cancel   bool `json:"cancel"`
	Await    bool `json:"await"`
	Children bool `json:"children"`
	// Fetch GETs URL N times, after the children (before them when
	// FetchFirst), counting those answered.
	Fetch struct {
		URL string `json:"url"`
		N   int    `json:"n"`
	} `json:"fetch"`
	FetchFirst bool `json:"fetch_first"`
	// Then GETs its URL N times after the children, whether or not
	// FetchFirst fetched before them.
	Then struct {
		URL string `json:"url"`
		N   int    `json:"n"`
	} `json:"then"`
	Sleep bool `json:"sleep"`
}

type report struct {
	Spawned  []*agent.Child   `json:"spawned,omitempty"`
	Outcomes []*agent.Outcome `json:"outcomes,omitempty"`
	Children []abi.Child      `json:"children,omitempty"`
	Errors   []string         `json:"errors,omitempty"`
	Fetched  int              `json:"fetched,omitempty"`
}

func main() {
	agent.Main(func(ctx context.Context, input []byte) ([]byte, error) {
		var p plan
		if err := json.Unmarshal(input, &p); err != nil {
			return nil, err
		}
		var r report
		fail := func(err error) { r.Errors = append(r.Errors, err.Error()) }
		fetchN := func(url string, n int) {
			for range n {
				if _, err := agent.HTTPGet(url); err != nil {
					fail(err)
					continue
				}
				r.Fetched++
			}
		}
		fetch := func() { fetchN(p.Fetch.URL, p.Fetch.N) }
		if p.FetchFirst {
			fetch()
		}
		for _, s := range p.Spawn {
			mod, err := hex.DecodeString(s.Module)
			if err != nil {
				return nil, err
			}
			c, err := agent.Spawn(mod, s.Input, agent.SpawnOptions{Caps: s.Caps, Budget: s.Budget})
			if err != nil {
				fail(err)
				continue
			}
			r.Spawned = append(r.Spawned, c)
		}
		for _, c := range r.Spawned {
			if p.Cancel {
				if err := agent.Cancel(c.Run); err != nil {
					fail(err)
				}
			}
			if p.Await {
				o, err := agent.Await(c.Run)
				if err != nil {
					fail(err)
					continue
				}
				r.Outcomes = append(r.Outcomes, o)
			}
		}
		if p.Children {
			kids, err := agent.Children()
			if err != nil {
				fail(err)
			}
			r.Children = kids
		}
		if !p.FetchFirst {
			fetch()
		}
		fetchN(p.Then.URL, p.Then.N)
		if p.Sleep {
			if _, _, err := agent.Sleep(time.Hour); err != nil {
				fail(err)
			}
		}
		return json.Marshal(&r)
	})
}
