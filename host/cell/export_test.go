package cell

import (
	"crypto/ed25519"
	"net/http"
	"time"

	"github.com/agentrt/agentrt/host/cell/handoff"
	"github.com/agentrt/agentrt/journal"
)

func init() { testCompileTimeout = 10 * time.Minute }

// StartErrorCode exposes the status mapping to the tests: some of the
// errors it maps (a lost race for a journal) cannot be caused on demand.
var StartErrorCode = startErrorCode

// SetTriggerLaunchHook sets the hook a firing's start calls between the
// launch of its run and the noting of the run as active.
func SetTriggerLaunchHook(fn func(journal.RunID)) { testHookLaunched = fn }

// Handler exposes the API's routes to the tests, without the guard.
func (s *Server) Handler() http.Handler { return s.handler() }

// SetHandoffSeal makes s seal its handoff envelopes with fn: the tests
// send what an attacker or a faulty source would.
func SetHandoffSeal(s *Server, fn func(ed25519.PrivateKey, handoff.Payload) ([]byte, error)) {
	if fn == nil {
		s.sealHandoff.Store(nil)
		return
	}
	s.sealHandoff.Store(&fn)
}
