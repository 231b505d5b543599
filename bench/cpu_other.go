//go:build !unix

package bench

import "time"

// processCPU is unknown here; figures report no CPU time.
func processCPU() time.Duration { return 0 }
