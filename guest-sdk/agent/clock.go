package agent

import (
	"time"

	"github.com/agentrt/agentrt/guest-sdk/abi"
)

// Now returns the host's real wall time (clock.now), journaled so replay
// returns the same instant. time.Now, by contrast, reads the run's virtual
// clock: deterministic, and needing no capability.
func Now() (time.Time, error) {
	var r abi.ClockNowResponse
	if err := call(clockTransport, abi.CapClock, abi.OpClockNow, nil, &r); err != nil {
		return time.Time{}, err
	}
	return time.Unix(0, r.UnixNano), nil
}

// RandomBytes returns n real random bytes (random.bytes), journaled.
// math/rand and crypto/rand, by contrast, read the run's seeded stream.
func RandomBytes(n uint32) ([]byte, error) {
	var r abi.RandomBytesResponse
	err := call(randomTransport, abi.CapRandom, abi.OpRandomBytes, &abi.RandomBytesRequest{N: n}, &r)
	return r.Bytes, err
}
