package bench

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"time"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/replay"
)

// auditEntries is the size of the bundle figure 5c verifies.
const auditEntries = 10000

// auditVerify is figure 5c: replay.VerifyBundle of a bundle of about
// 10 000 entries (a run of testdata/loop.wat recorded on figure 2's cell):
// decoding the bundle, the journal verifier, the Merkle checkpoint, the
// bundle signature and the re-execution, all offline.
func (h *harness) auditVerify(ctx context.Context) (Figure, error) {
	c := h.recorded
	calls := auditEntries - 3 // the start, lease and end entries
	res, err := c.run(ctx, h.guests.Loop, countInput(calls), host.DefaultGrant(), uint64(calls)+1)
	if err != nil {
		return Figure{}, err
	}
	b, err := replay.Export(ctx, c.store, res.Run, c.key, replay.EngineSettings{})
	if err != nil {
		return Figure{}, err
	}
	data, err := b.Marshal()
	if err != nil {
		return Figure{}, err
	}
	opts := replay.VerifyOptions{Trusted: []ed25519.PublicKey{c.key.Public().(ed25519.PublicKey)}, Engine: h.engine}
	var rate []float64
	for r := range h.cfg.Reps {
		start := time.Now()
		rep, err := replay.VerifyBundle(ctx, data, opts)
		d := time.Since(start)
		if err != nil {
			return Figure{}, err
		}
		rate = append(rate, float64(rep.EntriesChecked)/d.Seconds())
		h.logf("5c audit verify rep %d: %.0f entries/s", r, rate[r])
	}
	return Figure{
		ID: "5c", Name: "audit: verify a bundle offline", Unit: "entries/s", Better: "higher",
		Value: median(rate), Samples: rate,
		Measures: fmt.Sprintf("replay.VerifyBundle of the audit bundle (%d bytes) of a run of testdata/loop.wat with %d entries: canonical decoding of the file, the journal verifier with the trusted key, the Merkle tree and its signed checkpoint, the bundle signature and the re-execution on the engine: entries / wall time.", len(data), len(b.Records)),
	}, nil
}
