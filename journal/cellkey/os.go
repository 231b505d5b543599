package cellkey

import "runtime"

// isWindows: file modes carry no owner-only meaning there; ACLs do.
func isWindows() bool { return runtime.GOOS == "windows" }
