package host

import (
	"fmt"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host/caps"
	"github.com/agentrt/agentrt/host/caps/agent"
	"github.com/agentrt/agentrt/host/caps/approval"
	"github.com/agentrt/agentrt/host/caps/clock"
	"github.com/agentrt/agentrt/host/caps/http"
	"github.com/agentrt/agentrt/host/caps/kv"
	"github.com/agentrt/agentrt/host/caps/llm"
	"github.com/agentrt/agentrt/host/caps/mcp"
	"github.com/agentrt/agentrt/host/caps/random"
	"github.com/agentrt/agentrt/host/caps/run"
	"github.com/agentrt/agentrt/host/caps/timer"
	"github.com/agentrt/agentrt/host/caps/tool"
)

// registry holds the host's capabilities, in the order of abi.Capabilities
// (a capability's index is its position in both). Each is one line: the
// capability's package, the Grant field that holds its section and what
// it needs from the cell or the session. Adding a capability is a package
// under host/caps/, its ops in abi, a field in Grant and a line here.
var registry = [numCaps]capEntry{
	register(run.Capability{}, func(g *Grant) **RunGrant { return &g.Run }, func(s *session) run.Session { return s }),
	register(kv.Capability{}, func(g *Grant) **KVGrant { return &g.KV }, func(s *session) kv.Deps { return kv.Deps{Store: s.deps.KV} }),
	register(http.Capability{}, func(g *Grant) **HTTPGrant { return &g.HTTP },
		func(s *session) http.Deps { return http.Deps{Resolver: s.deps.Resolver, Listeners: s.deps.Listeners} }),
	register(clock.Capability{}, func(g *Grant) **ClockGrant { return &g.Clock }, func(s *session) clock.Deps { return clock.Deps{Now: s.deps.Now} }),
	register(random.Capability{}, func(g *Grant) **RandomGrant { return &g.Random }, func(s *session) random.Deps { return random.Deps{Rand: s.deps.Rand} }),
	register(tool.Capability{}, func(g *Grant) **ToolGrant { return &g.Tool }, func(s *session) tool.Deps { return s.deps.Tools }),
	register(llm.Capability{}, func(g *Grant) **LLMGrant { return &g.LLM }, func(s *session) llm.Deps {
		d := llm.Deps{Providers: s.deps.LLM}
		if s.header != nil && s.header.Fork != nil {
			f := s.header.Fork
			// A fork's override, from its header: its resumes send what
			// it sent.
			d.Override = llm.Override{Provider: f.Provider, Model: f.Model}
		}
		return d
	}),
	register(timer.Capability{}, func(g *Grant) **TimerGrant { return &g.Timer }, func(*session) struct{} { return struct{}{} }),
	register(approval.Capability{}, func(g *Grant) **ApprovalGrant { return &g.Approval }, func(*session) struct{} { return struct{}{} }),
	register(mcp.Capability{}, func(g *Grant) **MCPGrant { return &g.MCP }, func(s *session) mcp.Deps { return s.deps.MCP }),
	register(agent.Capability{}, func(g *Grant) **AgentGrant { return &g.Agent }, func(s *session) agent.Deps {
		d := agent.Deps{Spawner: s.deps.Agents}
		if s.header != nil {
			d.Token = s.header.Token
		}
		return d
	}),
}

// numCaps is the number of capabilities of the ABI.
const numCaps = 11

// maxOpCode bounds the op codes of every capability.
const maxOpCode = 13

func init() {
	if len(abi.Capabilities) != numCaps {
		panic("host: numCaps does not match abi.Capabilities")
	}
	for i, c := range abi.Capabilities {
		if registry[i].cap != c {
			panic(fmt.Sprintf("host: registry[%d] is %s, abi.Capabilities[%d] %s", i, registry[i].cap, i, c))
		}
	}
	for _, op := range abi.Ops {
		if op.Code >= maxOpCode {
			panic("host: maxOpCode is too small for " + op.Name)
		}
	}
}

// capEntry is a registered capability, with its type parameters erased:
// what the grant, the token and the session ask of it.
type capEntry struct {
	cap abi.Capability
	// section returns g's section, or nil when g lacks the capability.
	section func(g *Grant) caps.Section
	// fromToken sets g's section from a token's claims, when they name the
	// capability.
	fromToken func(c capability.Caps, g *Grant) error
	// open makes the capability's instance for session s, whose grant has
	// the section.
	open func(s *session, r *caps.Run) (caps.Instance, error)
}

// register erases the types of capability c, whose section is the Grant
// field that field points to and whose deps are made by deps.
func register[S any, P interface {
	*S
	caps.Section
}, D any](c caps.Capability[P, D], field func(*Grant) *P, deps func(*session) D) capEntry {
	return capEntry{
		cap: c.Cap(),
		section: func(g *Grant) caps.Section {
			if p := *field(g); p != nil {
				return p
			}
			return nil
		},
		fromToken: func(claims capability.Caps, g *Grant) error {
			p, err := c.FromToken(claims)
			if err != nil {
				return err
			}
			if p != nil {
				*field(g) = p
			}
			return nil
		},
		open: func(s *session, r *caps.Run) (caps.Instance, error) {
			return c.Open(*field(s.grant), deps(s), r)
		},
	}
}
