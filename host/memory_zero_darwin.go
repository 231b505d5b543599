package host

// canZeroTouched is false on macOS: the host does not tell which pages of
// a memory were touched there, so no memory is kept (memoryPool) and each
// instance's is unmapped when it ends.
const canZeroTouched = false

func zeroTouched(*mmapMemory) (uint64, bool) { return 0, false }
