package bench

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/journal"
)

// journalCommits is the work of one recorded run as its host committed it:
// the entries in order, and after which of them the host committed (and
// with what), so that the journal can be driven through the same commits
// without the host. It is figure 4's signed group-commit floor.
type journalCommits struct {
	entries []*journal.Entry
	// commit[i] says what follows entries[i]: 0 nothing (buffered), or a
	// commit (commitStart, commitKV, commitEnd).
	commit []int
	// kv[i] is the state change committed with entries[i] (commitKV).
	kv []journal.KVWrite
}

const (
	commitStart = 1 + iota
	commitKV
	commitEnd
)

// recordCommits reads run's entries and notes where the host committed:
// after the start entry (with the index record), after each kv.put's
// completed entry (durably, with its write) and after the end entry
// (durably, with the index record).
func recordCommits(ctx context.Context, st journal.Store, run journal.RunID) (*journalCommits, error) {
	jc := &journalCommits{}
	err := journal.ReadEntries(ctx, st, run, func(e *journal.Entry, _ *journal.Record) error {
		c, kv := 0, journal.KVWrite{}
		switch {
		case e.Phase == journal.PhaseStart:
			c = commitStart
		case e.Phase == journal.PhaseEnd:
			c = commitEnd
		case e.Phase == journal.PhaseCompleted && e.Op == "kv.put":
			// The request is on the call's intent entry.
			var req abi.KVPutRequest
			for i := len(jc.entries) - 1; i >= 0; i-- {
				if p := jc.entries[i]; p.Step == e.Step && p.Phase == journal.PhaseIntent {
					if err := abi.Unmarshal(p.Request, &req); err != nil {
						return err
					}
					break
				}
			}
			c, kv = commitKV, journal.KVWrite{Key: req.Key, Value: req.Value}
		}
		jc.entries, jc.commit, jc.kv = append(jc.entries, e), append(jc.commit, c), append(jc.kv, kv)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(jc.entries) == 0 || jc.commit[0] != commitStart || jc.commit[len(jc.commit)-1] != commitEnd {
		return nil, fmt.Errorf("bench: run %s does not start and end as a run does", run)
	}
	return jc, nil
}

// replayCommits writes jc again as a new run of key on st, in namespace ns:
// each entry linked into a new chain (encoded, checked, hashed), stamped
// with the time, and committed where the host committed, through the
// store's group commit and its round seals. It returns the latency of each
// kv commit, from its intent entry's link to the commit's return.
func (jc *journalCommits) replayCommits(ctx context.Context, st journal.Store, key ed25519.PrivateKey, ns string) ([]time.Duration, error) {
	run := journal.NewRunID(time.Now())
	w := journal.NewWriter(st, journal.NewChain(run, key))
	meta := &journal.RunMeta{ID: run, Status: journal.StatusRunning, Started: time.Now().UnixNano(), Cell: key.Public().(ed25519.PublicKey)}
	lat := make([]time.Duration, 0, len(jc.entries)/3)
	var intent time.Time
	for i, tmpl := range jc.entries {
		e := *tmpl
		now := time.Now()
		e.Time = now.UnixNano()
		if e.Phase == journal.PhaseIntent {
			intent = now
		}
		if err := w.Add(&e); err != nil {
			return nil, err
		}
		var err error
		switch jc.commit[i] {
		case commitStart:
			err = w.Commit(ctx, meta, false)
		case commitKV:
			kv := jc.kv[i]
			kv.Namespace = ns
			w.AddKV(kv)
			err = w.Commit(ctx, nil, true)
			lat = append(lat, time.Since(intent))
		case commitEnd:
			meta.Status, meta.Ended = journal.StatusCompleted, e.Time
			err = w.Commit(ctx, meta, true)
		}
		if err != nil {
			return nil, err
		}
	}
	return lat, nil
}
