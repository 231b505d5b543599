package journal_test

import (
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/journal"
)

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := abi.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestResourcePerOp(t *testing.T) {
	for _, tc := range []struct {
		op   string
		req  []byte
		want string
	}{
		{"kv.get", mustMarshal(t, &abi.KVGetRequest{Key: "user/1"}), "ns/user/1"},
		{"kv.put", mustMarshal(t, &abi.KVPutRequest{Key: "k", Value: []byte("v")}), "ns/k"},
		{"kv.delete", mustMarshal(t, &abi.KVDeleteRequest{Key: "k"}), "ns/k"},
		{"kv.list", mustMarshal(t, &abi.KVListRequest{Prefix: "user/", Limit: 3}), "ns/user/*"},
		{"http.request", mustMarshal(t, &abi.HTTPRequest{Method: "POST", URL: "https://API.Example.com:8443/v1?x=1"}), "api.example.com:8443"},
		{"http.request", mustMarshal(t, &abi.HTTPRequest{Method: "GET", URL: "/relative"}), ""},
		// A request the host refused as bad_request names nothing.
		{"kv.get", []byte{0xff}, ""},
		{"kv.get", mustMarshal(t, &abi.HTTPRequest{URL: "http://x/"}), ""},
		// Ops that act on the run itself, or on nothing outside it.
		{"run.log", mustMarshal(t, &abi.LogRequest{Message: "m"}), ""},
		{"clock.now", nil, ""},
		{"tool.call", []byte{0xa0}, ""},
	} {
		if got := journal.Resource(tc.op, "ns", tc.req); got != tc.want {
			t.Errorf("Resource(%s, %x) = %q, want %q", tc.op, tc.req, got, tc.want)
		}
	}
}

// TestTracerCallsOfAJournal: a start entry whose grant names a namespace
// (and a capability this package does not know), a pure call, an effect
// split over two commits and sealed by two cells.
func TestTracerCallsOfAJournal(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(nil)
	_, key2, _ := ed25519.GenerateKey(nil)
	run := journal.NewRunID(time.Now())
	parent := journal.NewRunID(time.Now())
	c := journal.NewChain(run, key)
	grant := mustMarshal(t, map[string]any{"kv": map[string]any{"namespace": "shop"}, "tool": map[string]any{"names": []string{"x"}}})
	var raws [][]byte
	link := func(e *journal.Entry, seal bool) {
		t.Helper()
		r, err := c.Link(e)
		if err != nil {
			t.Fatal(err)
		}
		if seal {
			r.Seal = c.Seal()
		}
		b, _ := journal.EncodeRecord(&r)
		raws = append(raws, b)
	}
	get := mustMarshal(t, &abi.KVGetRequest{Key: "cart"})
	put := mustMarshal(t, &abi.KVPutRequest{Key: "cart", Value: []byte{1}})
	link(&journal.Entry{Phase: journal.PhaseStart, Time: 10, Header: &journal.Header{Input: []byte("in"), Grant: grant, Parent: parent[:]}}, false)
	link(&journal.Entry{Phase: journal.PhaseCompleted, Step: 1, Op: "kv.get", Request: get, InputHash: journal.Sum(get),
		Response: []byte("v"), OutputHash: journal.Sum([]byte("v")), Time: 11}, false)
	link(&journal.Entry{Phase: journal.PhaseIntent, Step: 2, Op: "kv.put", Request: put, InputHash: journal.Sum(put), Time: 12}, false)
	link(&journal.Entry{Phase: journal.PhaseExecuting, Step: 2, Op: "kv.put", InputHash: journal.Sum(put), Time: 13, Key: "k"}, true)
	c = journal.ResumeChain(run, key2, c.Next()-1, c.Head())
	link(&journal.Entry{Phase: journal.PhaseCompleted, Step: 2, Op: "kv.put", InputHash: journal.Sum(put), OutputHash: journal.Sum(nil), Time: 14}, true)

	tr := journal.NewTracer(run)
	var settled [][]journal.Call
	for seq, raw := range raws {
		calls, err := tr.Add(uint64(seq), raw)
		if err != nil {
			t.Fatal(err)
		}
		settled = append(settled, calls)
	}
	for i, n := range []int{0, 0, 0, 2, 1} {
		if len(settled[i]) != n {
			t.Fatalf("record %d settled %d calls, want %d", i, len(settled[i]), n)
		}
	}
	first := settled[3]
	if g := first[0]; g.Op != "kv.get" || g.Resource != "shop/cart" || g.Outcome != journal.OutcomeCompleted || g.Parent != parent || string(g.Cell) != string(key.Public().(ed25519.PublicKey)) {
		t.Fatalf("pure call %+v", g)
	}
	if o := first[1]; o.Step != 2 || o.Outcome != journal.OutcomeOpen || o.OutputHash != nil || o.Seq != 2 || o.Time != 12 {
		t.Fatalf("open effect %+v", o)
	}
	if d := settled[4][0]; d.Step != 2 || d.Outcome != journal.OutcomeCompleted || d.Resource != "shop/cart" || d.Seq != 2 ||
		string(d.Cell) != string(key2.Public().(ed25519.PublicKey)) {
		t.Fatalf("closed effect %+v", d)
	}
	info, ok := tr.Info()
	if !ok || info.Namespace != "shop" || info.Parent != parent || string(info.InputHash) != string(journal.Sum([]byte("in"))) || info.Started != 10 {
		t.Fatalf("run info %+v %v", info, ok)
	}

	// Resumed after the executing entry's seal, the tracer reads from the
	// intent again, so the outcome still finds its request's resource.
	st := journal.NewTracer(run)
	for seq := range 4 {
		if _, err := st.Add(uint64(seq), raws[seq]); err != nil {
			t.Fatal(err)
		}
	}
	state := st.State()
	if state.Seen != 4 || state.Next != 2 {
		t.Fatalf("state with an open effect: %+v", state)
	}
	again := journal.ResumeTracer(run, state)
	var last []journal.Call
	for seq := state.Next; seq < uint64(len(raws)); seq++ {
		calls, err := again.Add(seq, raws[seq])
		if err != nil {
			t.Fatal(err)
		}
		last = calls
	}
	if len(last) != 1 || last[0].Resource != "shop/cart" || last[0].Outcome != journal.OutcomeCompleted {
		t.Fatalf("after resuming: %+v", last)
	}
}

func TestFilterMatch(t *testing.T) {
	c := &journal.Call{Op: "kv.put", Resource: "ns/a/b", Cell: []byte{0xab, 0xcd}, Time: 100, InputHash: journal.Sum([]byte("i")), OutputHash: journal.Sum(nil)}
	for _, tc := range []struct {
		f    journal.Filter
		want bool
	}{
		{journal.Filter{}, true},
		{journal.Filter{Op: "kv.put"}, true},
		{journal.Filter{Op: "kv."}, true},
		{journal.Filter{Op: "kv.*"}, true},
		{journal.Filter{Op: "kv"}, false},
		{journal.Filter{Op: "kv.p"}, false},
		{journal.Filter{Resource: "ns/a/b"}, true},
		{journal.Filter{Resource: "ns/a*"}, true},
		{journal.Filter{Resource: "ns/a"}, false},
		{journal.Filter{Cell: "abc"}, true},
		{journal.Filter{Cell: "abd"}, false},
		{journal.Filter{Since: time.Unix(0, 100)}, true},
		{journal.Filter{Since: time.Unix(0, 101)}, false},
		{journal.Filter{Until: time.Unix(0, 100)}, false},
		{journal.Filter{Until: time.Unix(0, 101)}, true},
		{journal.Filter{InputHash: journal.Sum([]byte("i"))}, true},
		{journal.Filter{OutputHash: journal.Sum([]byte("i"))}, false},
	} {
		if got := tc.f.Match(c); got != tc.want {
			t.Errorf("%+v matches: %v, want %v", tc.f, got, tc.want)
		}
	}
}
