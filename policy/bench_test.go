package policy

import (
	"path/filepath"
	"testing"

	"github.com/cedar-policy/cedar-go/types"
)

// benchEngine returns a typical gate question: an HTTP GET by a run,
// carrying the entities a host knows for it (the run, its agent, cell and
// user, the host), decided by the platform defaults and a customer set of a
// dozen policies.
func benchEngine(b *testing.B) (*Engine, Request) {
	f := readFixture(b, filepath.Join(parityDir, "10-customer-every-op.json"))
	e, err := NewEngine(Platform(), sources(b, parityDir, f.Customer))
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range f.Requests {
		if r.Description == "http.request, https, ordinary path" {
			req := f.request(b, r)
			keep := types.EntityMap{}
			for _, uid := range []types.EntityUID{
				types.NewEntityUID("Run", "r1"), types.NewEntityUID("Agent", "crawler"), types.NewEntityUID("Cell", "c1"),
				types.NewEntityUID("User", "alice"), types.NewEntityUID("Host", "api.example.com"),
			} {
				keep[uid] = req.Entities[uid]
			}
			req.Entities = keep
			if d := e.Decide(req); !d.Allowed {
				b.Fatalf("the benchmark request is denied: %s", d.Explain())
			}
			return e, req
		}
	}
	b.Fatal("benchmark request not found in the fixture")
	return nil, Request{}
}

func BenchmarkDecide(b *testing.B) {
	e, req := benchEngine(b)
	b.ReportAllocs()
	for b.Loop() {
		e.Decide(req)
	}
}

func BenchmarkDecideParallel(b *testing.B) {
	e, req := benchEngine(b)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			e.Decide(req)
		}
	})
}
