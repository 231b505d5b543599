package main_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/agentrt/agentrt/examples/crawler/site"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/replay"
)

// countingSite serves the example site and records the idempotency key of
// every request it gets.
type countingSite struct {
	mu   sync.Mutex
	keys map[string]int
}

func (c *countingSite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	c.keys[r.Header.Get(host.IdempotencyHeader)]++
	c.mu.Unlock()
	site.Handler().ServeHTTP(w, r)
}

func startSite(t *testing.T) (*httptest.Server, *countingSite) {
	cs := &countingSite{keys: map[string]int{}}
	srv := httptest.NewServer(cs)
	t.Cleanup(srv.Close)
	return srv, cs
}

func grant(t *testing.T) *host.Grant {
	g, err := host.LoadGrant("grant.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return g
}

type report struct {
	Pages, Fetched, Words int
	FromState             int `json:"from_state"`
	Broken, Titles        []string
	NotAllowed            []string `json:"not_allowed"`
	TopWords              []struct {
		Word  string
		Count int
	} `json:"top_words"`
}

func TestCrawlerRunsReplaysAndKeepsState(t *testing.T) {
	code := testutil.BuildGo(t, "examples/crawler")
	srv, cs := startSite(t)
	env := testutil.NewEnv(t, host.Deps{}, host.Config{})
	ctx := context.Background()
	input := []byte(`{"start":"` + srv.URL + `/"}`)
	trust := journal.TrustKeys(env.Key.Public().(ed25519.PublicKey))

	var reports [2]report
	for i := range reports {
		res, err := env.Host.Run(ctx, host.RunSpec{Code: code, Input: input, Grant: grant(t)})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != journal.StatusCompleted {
			t.Fatalf("run %d: %v", i, res.Err)
		}
		if err := json.Unmarshal(res.Output, &reports[i]); err != nil {
			t.Fatal(err)
		}
		j, err := replay.Load(ctx, env.Store, res.Run, trust)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := j.Replay(ctx, env.Engine, code, replay.Options{})
		if err != nil {
			t.Fatalf("replay of run %d: %v", i, err)
		}
		if i == 0 && rep.Calls < 20 {
			t.Fatalf("the first crawl made %d journaled calls, want 20+", rep.Calls)
		}
	}
	first, second := reports[0], reports[1]
	if first.Pages != site.Pages()+1 || first.Fetched != first.Pages || first.FromState != 0 {
		t.Fatalf("first crawl: %+v; want %d pages (the site and one broken link), all fetched", first, site.Pages()+1)
	}
	if len(first.Broken) != 1 || len(first.NotAllowed) != 1 || first.NotAllowed[0] != "http://example.com/durable" {
		t.Fatalf("broken %v, not allowed %v", first.Broken, first.NotAllowed)
	}
	if first.TopWords[0].Word != "journal" || first.Words < 150 {
		t.Fatalf("word counts: %d words, top %+v", first.Words, first.TopWords)
	}
	if second.Fetched != 0 || second.FromState != first.Pages || second.Words != first.Words {
		t.Fatalf("second crawl %+v should come from durable state and match the first", second)
	}
	// Every request carried a distinct idempotency key: none was sent twice.
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if len(cs.keys) != first.Fetched {
		t.Fatalf("site saw %d distinct idempotency keys for %d fetches: %v", len(cs.keys), first.Fetched, cs.keys)
	}
	for k, n := range cs.keys {
		if k == "" || n != 1 {
			t.Fatalf("idempotency key %q used %d times", k, n)
		}
	}
}

// trace returns a run's (op, input hash, output hash) sequence.
func trace(t *testing.T, env *testutil.Env, run journal.RunID) []string {
	var out []string
	err := journal.ReadEntries(context.Background(), env.Store, run, func(e *journal.Entry, _ *journal.Record) error {
		out = append(out, fmt.Sprintf("%s %s %x %x", e.Phase, e.Op, e.InputHash, e.OutputHash))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCrawlerIsDeterministic(t *testing.T) {
	code := testutil.BuildGo(t, "examples/crawler")
	srv, _ := startSite(t)
	seed := bytes.Repeat([]byte{7}, 32)
	var traces [2][]string
	for i := range traces {
		env := testutil.NewEnv(t, host.Deps{}, host.Config{})
		res, err := env.Host.Run(context.Background(), host.RunSpec{Code: code, Seed: seed, WallBase: 1e18,
			Input: []byte(`{"start":"` + srv.URL + `/"}`), Grant: grant(t)})
		if err != nil || res.Status != journal.StatusCompleted {
			t.Fatalf("run %d: %v %v", i, err, res)
		}
		traces[i] = trace(t, env, res.Run)
	}
	if len(traces[0]) < 40 || !slices.Equal(traces[0], traces[1]) {
		t.Fatalf("two runs with the same module, input and seed differ:\n%q\n%q", traces[0], traces[1])
	}
}
