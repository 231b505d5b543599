package host

// canZeroTouched is false on macOS: x/sys/unix has no mincore there, so
// the host cannot tell which pages of a memory were touched; no memory is
// kept (memoryPool) and each instance's is unmapped when it ends.
const canZeroTouched = false

func touchedPages(*mmapMemory) ([]byte, uint64, bool) { return nil, 0, false }

func zeroTouched(*mmapMemory, []byte) bool { return false }
