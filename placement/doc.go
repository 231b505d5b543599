// Package placement will decide which cell runs a run: cell descriptors,
// hard filters (topology, clearance), then scores (GPU, model availability,
// data locality, cost) penalised by load.
//
// Nothing lives here yet: placement arrives with the cluster, when there is
// more than one cell to choose from.
package placement
