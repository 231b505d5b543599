package cell

import "time"

func init() { testCompileTimeout = 10 * time.Minute }

// StartErrorCode exposes the status mapping to the tests: some of the
// errors it maps (a lost race for a journal) cannot be caused on demand.
var StartErrorCode = startErrorCode
