package host

import "github.com/agentrt/agentrt/journal"

// Halting reports whether run was asked to stop, for tests that must know
// a stop landed before they let the run go on.
func Halting(h *Host, run journal.RunID) bool {
	r := h.live.get(run)
	return r != nil && r.why() != nil
}
