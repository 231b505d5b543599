package host

import (
	"context"
	"io"

	"github.com/agentrt/agentrt/abi"
)

// maxRandom is the most bytes one random.bytes call returns.
const maxRandom = 64 << 10

// The random capability: real random bytes, on explicit request.
//
//	random.bytes (RandomBytesRequest) -> RandomBytesResponse   pure, journaled
//
// WASI random_get is a stream seeded by the run seed; this op is how an
// agent asks for entropy the seed does not determine (a key, a nonce).
// Errors: StatusTooLarge above 64 KiB.
func init() {
	register("random.bytes", handler{serve: func(_ context.Context, s *session, c *Call) (abi.Status, []byte) {
		var r abi.RandomBytesRequest
		if st, b, ok := decodeRequest(c, &r); !ok {
			return st, b
		}
		if r.N > maxRandom {
			return errorResponse(abi.StatusTooLarge, "random.bytes: %d bytes asked, at most %d", r.N, maxRandom)
		}
		buf := make([]byte, r.N)
		if _, err := io.ReadFull(s.deps.Rand, buf); err != nil {
			return errorResponse(abi.StatusFailed, "random.bytes: %v", err)
		}
		return okResponse(&abi.RandomBytesResponse{Bytes: buf})
	}})
}
