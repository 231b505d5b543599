package host

import "runtime"

// platformCompiles reports whether wazero's compiler supports this platform;
// elsewhere the interpreter runs the same modules, slower.
func platformCompiles() bool {
	return runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64"
}
