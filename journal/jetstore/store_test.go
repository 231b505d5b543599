package jetstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/jetstore"
	"github.com/agentrt/agentrt/journal/jetstore/jstest"
	"github.com/agentrt/agentrt/journal/storetest"
	"github.com/nats-io/nats.go"
)

// opener returns a function that opens a store on a stream and a lease
// bucket of their own on the servers nc reaches: a fresh, empty store
// for each test, without starting servers for each (a 3-server cluster
// takes seconds to form).
func opener(nc *nats.Conn, replicas int) func(t testing.TB) *jetstore.Store {
	n := 0
	return func(t testing.TB) *jetstore.Store {
		t.Helper()
		n++
		st, err := jetstore.Open(context.Background(), nc, jetstore.Options{
			Stream:      fmt.Sprintf("J%d", n),
			Prefix:      fmt.Sprintf("j%d", n),
			LeaseBucket: fmt.Sprintf("L%d", n),
			Replicas:    replicas,
			// A replicated stream or bucket forms a raft group of its
			// own: on a loaded 2-core machine (the whole suite beside
			// it) that took over the default 10 s.
			Timeout: time.Minute,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
}

func conformance(t *testing.T, nc *nats.Conn, replicas int) {
	open := opener(nc, replicas)
	storetest.Run(t, func(t *testing.T) journal.Store { return open(t) })
	storetest.RunLeases(t, func(t *testing.T) journal.Leases { return open(t) })
}

// TestConformanceR1 runs the store conformance suite on one server.
func TestConformanceR1(t *testing.T) {
	conformance(t, jstest.Connect(t, jstest.Server(t)), 1)
}

// TestConformanceR3 runs it on a stream replicated on three servers.
func TestConformanceR3(t *testing.T) {
	conformance(t, jstest.Connect(t, jstest.Cluster(t, 3)...), 3)
}
