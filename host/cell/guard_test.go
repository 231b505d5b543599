package cell_test

import (
	"context"
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/jetstore/jstest"
	"github.com/agentrt/agentrt/placement"
	"github.com/nats-io/nats-server/v2/server"
)

// TestServerThatJoinsLaterIsUnreachableByAgent: a NATS server that joins
// the cluster after the cell connected (the cell learns of it from the
// servers' gossip) is guarded as the ones known at start are: an agent
// granted http to 127.0.0.1 (any port) asks for the new server's client
// port and is denied before a byte is sent, the NATS server named.
func TestServerThatJoinsLaterIsUnreachableByAgent(t *testing.T) {
	first := jstest.Cluster(t, 3)[0]
	a := openClusterCell(t, t.TempDir(), first.ClientURL(), 5*time.Second, placement.Cell{Name: "a"})

	late, err := server.NewServer(&server.Options{
		ServerName: "late", Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
		Cluster: server.ClusterOpts{Name: "agentrt-test", Host: "127.0.0.1", Port: -1},
		Routes:  server.RoutesFromStr("nats://" + first.ClusterAddr().String()),
	})
	if err != nil {
		t.Fatal(err)
	}
	go late.Start()
	t.Cleanup(func() { late.Shutdown(); late.WaitForShutdown() })
	if !late.ReadyForConnections(30 * time.Second) {
		t.Fatal("the late server did not take connections")
	}
	port := late.Addr().(*net.TCPAddr).Port
	waitFor(t, "the cell to guard the late server", func() bool {
		for _, l := range a.cell.Listeners.Listening() {
			if int(l.Addr.Port()) == port {
				return true
			}
		}
		return false
	})
	in, _ := json.Marshal([]map[string]any{{"url": "http://127.0.0.1:" + strconv.Itoa(port) + "/"}})
	g := &host.Grant{Run: &host.RunGrant{}, HTTP: &host.HTTPGrant{Hosts: []string{"127.0.0.1"}}}
	res, err := a.cell.Host.Run(context.Background(), host.RunSpec{Code: testutil.BuildGo(t, "host/testdata/agents/egress"), Grant: g, Input: in})
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("run: %v %+v", err, res)
	}
	var lines []string
	if err := json.Unmarshal(res.Output, &lines); err != nil || len(lines) != 1 {
		t.Fatalf("output %s: %v", res.Output, err)
	}
	want := "(the cluster's NATS server on 127.0.0.1:" + strconv.Itoa(port) + ")"
	if !strings.HasPrefix(lines[0], "denied: ") || !strings.Contains(lines[0], want) {
		t.Fatalf("the agent got %q from the late server's port, want a denial naming the NATS server", lines[0])
	}
}
