// Package edge will hold the on-device runtime (agentrt-edge): the operator
// loop, the four-layer permission gate, offline policy decisions and journal
// sync, with parity fixtures shared with the core.
//
// Nothing lives here yet: the edge runtime comes with its own change, on top
// of the policy engine it shares with the core.
package edge
