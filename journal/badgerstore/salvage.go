package badgerstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/journal"
	badger "github.com/dgraph-io/badger/v4"
)

// SalvageReport says what Salvage copied into the new store.
type SalvageReport struct {
	From, To string
	// Problems are the defects of the files of the store salvaged.
	Problems []Problem     `json:"problems"`
	Runs     []SalvagedRun `json:"runs"`
	// Modules, KV, Events, Leases, Nonces and CellRecords (approval
	// votes, triggers, tasks) count what else was copied.
	Modules, KV, Events, Leases, Nonces, CellRecords int
	// MissingModules are the modules that runs name and the store cannot
	// give back whole.
	MissingModules []string `json:"missing_modules,omitempty"`
}

// SalvagedRun is one run of a salvage.
type SalvagedRun struct {
	Run string `json:"run"`
	// Copied is the number of entries copied: the journal's longest
	// prefix that verifies and is covered by a seal. Length is the
	// number its head record names (0 when it is lost).
	Copied, Length uint64
	// Complete says the whole journal was copied, to its head.
	Complete bool `json:"complete"`
	// Problem says why it is not, and where it stops.
	Problem string `json:"problem,omitempty"`
}

// Salvage copies what still verifies of the store in src into a new store
// in dst, which must not exist or be empty; src is not changed (a damaged
// one is read from a readable copy, see Check). Every journal is copied up
// to the end of its longest prefix that verifies (journal/SPEC.md section
// 9, seals by keys opts.Trust approves) and is covered by a seal. A
// journal copied short keeps its original head record in the new store,
// so that every read of it there still fails naming the missing entries,
// as it did in src; a journal whose head record was lost has none in the
// new store unless it reached its end entry. The modules, the agents'
// state, the event logs, the leases (at least the last epoch the journal
// records, so that epochs never repeat) and the presented tokens' nonces
// are copied as they are; the lineage index is not (it is rebuilt from
// the journals on the next query).
func Salvage(ctx context.Context, src, dst string, opts CheckOptions) (*SalvageReport, error) {
	if entries, err := os.ReadDir(dst); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("badgerstore: salvage into %s: the directory is not empty (a salvage writes a new store)", dst)
	} else if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	lock, err := lockDir(src)
	if err != nil {
		return nil, err
	}
	defer lock.release()
	in, err := inspect(src, true)
	if err != nil {
		return nil, err
	}
	v, err := openView(ctx, in, opts.Scratch)
	if err != nil {
		return nil, err
	}
	defer v.close()
	out, err := Open(dst)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	rep := &SalvageReport{From: src, To: dst, Problems: append(append([]Problem{}, in.problems...), v.problems...), Runs: []SalvagedRun{}}
	trust := opts.Trust
	if trust == nil {
		trust = journal.TrustAny
	}
	runs, err := v.runs(ctx)
	if err != nil {
		return nil, err
	}
	modules := map[string]bool{}
	epochs := map[journal.RunID]uint64{}
	for _, run := range runs {
		sr, module, epoch, err := salvageRun(ctx, v.st, out, run, trust)
		if err != nil {
			return nil, err
		}
		rep.Runs = append(rep.Runs, sr)
		if module != nil {
			modules[string(module)] = true
		}
		epochs[run] = epoch
	}
	for sum := range modules {
		code, err := v.st.Module(ctx, []byte(sum))
		if err != nil {
			rep.MissingModules = append(rep.MissingModules, fmt.Sprintf("%x: %v", sum, err))
			continue
		}
		if err := out.PutModule(ctx, []byte(sum), code); err != nil {
			return nil, err
		}
		rep.Modules++
	}
	if err := copyState(v.st, out, epochs, rep); err != nil {
		return nil, err
	}
	return rep, out.Close()
}

// salvageRun copies one run's journal and index record from st to out. It
// returns the run's module hash (from its header) and the last lease epoch
// its journal records.
func salvageRun(ctx context.Context, st, out *Store, run journal.RunID, trust journal.TrustFunc) (SalvagedRun, []byte, uint64, error) {
	sr := SalvagedRun{Run: run.String()}
	var h head
	if err := st.db.View(func(txn *badger.Txn) error {
		var err error
		h, err = readHead(txn, run)
		return err
	}); err != nil {
		sr.Problem = err.Error()
	}
	sr.Length = h.Len
	meta, metaErr := st.Meta(ctx, run)
	ver := journal.NewVerifier(trust)
	// The blobs the entries reference are copied with them, checked as
	// the verifier reads them: a salvaged journal never names a blob its
	// new store lacks.
	var blobs []journal.Blob
	ver.Blobs = st
	ver.OnBlob = func(ref journal.BlobRef, data []byte) error {
		blobs = append(blobs, journal.Blob{Sum: bytes.Clone(ref.Sum), Data: bytes.Clone(data)})
		return nil
	}
	var module []byte
	var epoch uint64
	var ended bool
	var start *journal.Entry
	ver.OnEntry = func(e *journal.Entry, _ *journal.Record) error {
		switch e.Phase {
		case journal.PhaseStart:
			start, module = e, e.Header.ModuleSHA256
		case journal.PhaseLease:
			epoch = max(epoch, e.Epoch)
		case journal.PhaseEnd:
			ended = true
		}
		return nil
	}
	// pending are the records since the last seal: they are copied once a
	// seal covers them.
	var pending []journal.Record
	var copyErr error
	stop := errors.New("stop")
	readErr := st.Records(ctx, run, 0, func(seq uint64, raw []byte) error {
		if err := ver.Add(raw); err != nil {
			sr.Problem = joinText(sr.Problem, err.Error())
			return stop
		}
		rec, err := journal.DecodeRecord(raw)
		if err != nil {
			return err // the verifier decoded it
		}
		pending = append(pending, *rec)
		if rec.Seal == nil {
			return nil
		}
		b := &journal.Batch{Run: run, Next: sr.Copied, Records: pending, Blobs: blobs}
		if sr.Copied == 0 {
			m := meta
			if metaErr != nil {
				m = metaFromStart(run, start)
			}
			b.Meta = &m
		}
		if copyErr = out.Commit(ctx, b); copyErr != nil {
			return copyErr
		}
		sr.Copied += uint64(len(pending))
		pending, blobs = nil, nil
		return nil
	})
	switch {
	case copyErr != nil:
		return sr, nil, 0, copyErr
	case readErr != nil && readErr != stop:
		sr.Problem = joinText(sr.Problem, readErr.Error())
	}
	if len(pending) > 0 && sr.Problem == "" {
		sr.Problem = fmt.Sprintf("entries %d..%d are covered by no seal", sr.Copied, sr.Copied+uint64(len(pending))-1)
	}
	if metaErr != nil && !errors.Is(metaErr, journal.ErrNotFound) {
		sr.Problem = joinText(sr.Problem, metaErr.Error())
	}
	sr.Complete = sr.Problem == "" && sr.Copied > 0 && (h.ok && sr.Copied == h.Len || !h.ok && ended)
	if sr.Complete {
		return sr, module, epoch, nil
	}
	// Short: keep the original head, so that the journal reads as
	// incomplete in the new store too, never as a shorter one.
	err := out.c.exclusive(run, func() error {
		return out.db.Update(func(txn *badger.Txn) error {
			if h.ok {
				return txn.Set(runKey(prefixLength, run), journal.EncodeHead(h.Len, h.Last))
			}
			return txn.Delete(runKey(prefixLength, run))
		})
	})
	if sr.Copied == 0 && metaErr == nil {
		// Nothing verified, not even the start: the index record says
		// the run was there.
		m, _ := abi.Marshal(&meta)
		err = errors.Join(err, out.db.Update(func(txn *badger.Txn) error { return txn.Set(runKey(prefixMeta, run), m) }))
	}
	return sr, module, epoch, err
}

// metaFromStart is the index record of a run whose record was lost,
// rebuilt from its start entry.
func metaFromStart(run journal.RunID, start *journal.Entry) journal.RunMeta {
	m := journal.RunMeta{ID: run, Status: journal.StatusRunning}
	if start != nil {
		m.ModuleSHA256, m.ModuleName, m.Started, m.Cell = start.Header.ModuleSHA256, start.Header.ModuleName, start.Time, start.Cell
	}
	return m
}

// copyState copies the agents' state, the event logs, the leases and the
// nonces and the cell's own records of st into out, key by key.
func copyState(st, out *Store, epochs map[journal.RunID]uint64, rep *SalvageReport) error {
	wb := out.db.NewWriteBatch()
	defer wb.Cancel()
	err := st.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		for _, prefix := range []string{prefixKV, prefixEvents, prefixLease, prefixNonce, prefixCell} {
			opts.Prefix = []byte(prefix)
			it := txn.NewIterator(opts)
			for it.Rewind(); it.Valid(); it.Next() {
				item := it.Item()
				v, err := item.ValueCopy(nil)
				if err != nil {
					it.Close()
					return err
				}
				k := item.KeyCopy(nil)
				if prefix == prefixLease {
					var run journal.RunID
					copy(run[:], k[len(prefix):])
					var l journal.Lease
					if abi.Unmarshal(v, &l) == nil && l.Epoch < epochs[run] {
						l.Epoch, l.Expires = epochs[run], 0
						v, _ = abi.Marshal(&l)
					}
					delete(epochs, run)
				}
				e := badger.NewEntry(k, v)
				e.ExpiresAt = item.ExpiresAt()
				if err := wb.SetEntry(e); err != nil {
					it.Close()
					return err
				}
				switch prefix {
				case prefixKV:
					rep.KV++
				case prefixEvents:
					rep.Events++
				case prefixLease:
					rep.Leases++
				case prefixNonce:
					rep.Nonces++
				case prefixCell:
					rep.CellRecords++
				}
			}
			it.Close()
		}
		return nil
	})
	if err != nil {
		return err
	}
	// A run whose lease record was lost gets one at its last epoch, free.
	for run, epoch := range epochs {
		if epoch == 0 {
			continue
		}
		v, err := abi.Marshal(&journal.Lease{Run: run, Epoch: epoch})
		if err != nil {
			return err
		}
		if err := wb.Set(runKey(prefixLease, run), v); err != nil {
			return err
		}
		rep.Leases++
	}
	return wb.Flush()
}
