package host

import (
	"testing"
	"time"

	"github.com/agentrt/agentrt/abi"
)

type noKV struct{}

func (noKV) KVGet(string, string) ([]byte, bool, error) { return nil, false, nil }
func (noKV) KVList(string, string, string, int) ([]string, bool, error) {
	return nil, false, nil
}

// TestEveryOpHasAHandler: an op of the ABI without a handler would reach
// guests as "unknown op". A run granted every capability binds a handler
// to every op, from the capability's package.
func TestEveryOpHasAHandler(t *testing.T) {
	g := &Grant{Run: &RunGrant{}, KV: &KVGrant{Namespace: "n"}, HTTP: &HTTPGrant{Hosts: []string{"example.com"}},
		Clock: &ClockGrant{}, Random: &RandomGrant{}, Tool: &ToolGrant{},
		LLM:   &LLMGrant{Providers: []string{"p"}, Models: []string{"m"}, MaxOutputTokens: 1},
		Timer: &TimerGrant{}, Approval: &ApprovalGrant{Groups: []string{"g"}}, MCP: &MCPGrant{},
		Agent: &AgentGrant{MaxChildren: 1, MaxDepth: 1}}
	if got := len(g.Capabilities()); got != len(abi.Capabilities) {
		t.Fatalf("the grant has %d capabilities; want all %d", got, len(abi.Capabilities))
	}
	s := &session{grant: g, deps: &Deps{KV: noKV{}, Now: time.Now}, slots: &opSlots}
	if err := s.open(); err != nil {
		t.Fatal(err)
	}
	defer s.close()
	for _, op := range abi.Ops {
		sl := s.lookup(capIndex(op.Cap), op.Code)
		if !sl.known || sl.op != op || (sl.h.Serve == nil && sl.h.Stage == nil && sl.h.Wait == nil) {
			t.Errorf("%s has no handler", op.Name)
		}
	}
	if sl := s.lookup(capIndex(abi.CapKV), 7); sl.known || sl.op.Name != "kv.#7" {
		t.Errorf("an unknown kv op code gives %+v", sl.op)
	}
}
