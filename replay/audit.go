package replay

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/approval"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/journal"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
)

// ErrDiverged is the failure class of a bundle whose module, re-executed
// against the recorded responses, does not make the recorded calls or
// does not reach the recorded outcome. The *DivergenceError says where.
var ErrDiverged = errors.New("divergence")

// ErrBudget is the failure class of budget records that no ledger writes
// (a settle of a reservation never made, one settled twice, ids out of
// order): the journal's hashes and seals may hold, yet its ledger does not.
var ErrBudget = errors.New("budget")

// Class returns the name of the failure class of err, as BUNDLE.md and
// journal/SPEC.md name them ("decode", "chain", ...), or "" when err is of
// none.
func Class(err error) string {
	for _, c := range []struct {
		err  error
		name string
	}{
		{ErrBundleFormat, "bundle-format"},
		{journal.ErrCheckpoint, "checkpoint"},
		{ErrDiverged, "divergence"},
		{ErrToken, "token"},
		{journal.ErrDecode, "decode"},
		{journal.ErrSequence, "sequence"},
		{journal.ErrChain, "chain"},
		{journal.ErrHash, "hash"},
		{journal.ErrSignature, "signature"},
		{journal.ErrUntrusted, "untrusted"},
		{journal.ErrUncovered, "uncovered"},
		{journal.ErrBlob, "blob"},
		{ErrBudget, "budget"},
		{ErrApproval, "approval"},
	} {
		if errors.Is(err, c.err) {
			return c.name
		}
	}
	return ""
}

// AuditError is the first failure VerifyBundle finds.
type AuditError struct {
	// Class is one of the failure classes (Class names it).
	Class error
	// Seq is the first bad entry, when HasSeq; a failure of the bundle as a
	// whole (its format, key list, checkpoint, signature) names none.
	Seq    uint64
	HasSeq bool
	// Step and Op name the import call the entry records, if any.
	Step uint64
	Op   string
	Err  error
}

func (e *AuditError) Error() string {
	where := "bundle"
	if e.HasSeq {
		where = fmt.Sprintf("entry %d", e.Seq)
		if e.Step > 0 {
			where += fmt.Sprintf(" (step %d, %s)", e.Step, e.Op)
		}
	}
	return fmt.Sprintf("audit: %s: %s: %v", where, Class(e.Class), e.Err)
}

// Unwrap returns the class and the underlying error.
func (e *AuditError) Unwrap() []error { return []error{e.Class, e.Err} }

// AuditReport is what VerifyBundle established. Each boolean is true only
// when its check ran and held; a failure stops the checks after it.
type AuditReport struct {
	OK     bool   `json:"ok"`
	Format string `json:"format,omitempty"`
	Run    string `json:"run,omitempty"`
	// ModuleSHA256 is the SHA-256 of the bundle's module, hex.
	ModuleSHA256 string          `json:"module_sha256,omitempty"`
	ModuleBytes  int             `json:"module_bytes"`
	Engine       *EngineSettings `json:"engine,omitempty"`
	// Entries is the number of records in the bundle; EntriesChecked the
	// number that passed every check of the journal verifier.
	Entries        int          `json:"entries"`
	EntriesChecked uint64       `json:"entries_checked"`
	Cells          []CellReport `json:"cells"`
	ChainIntact    bool         `json:"chain_intact"`
	Head           string       `json:"head,omitempty"`
	// InputHashes and OutputHashes count the hashes checked against their
	// payloads; OutputsMatched says every output hash matched.
	InputHashes    uint64 `json:"input_hashes_matched"`
	OutputHashes   uint64 `json:"output_hashes_matched"`
	OutputsMatched bool   `json:"outputs_matched"`
	// Blobs is the number of blobs the bundle carries and BlobRefs the
	// references to them the journal's payloads make, each resolved and
	// checked against its hash (journal/SPEC.md section 15).
	Blobs                int               `json:"blobs"`
	BlobRefs             uint64            `json:"blob_refs_checked"`
	ModuleMatched        bool              `json:"module_matched"`
	Checkpoint           *CheckpointReport `json:"checkpoint,omitempty"`
	CheckpointValid      bool              `json:"checkpoint_valid"`
	BundleSignatureValid bool              `json:"bundle_signature_valid"`
	// TokenValid says the run header's capability token verified offline,
	// sealed, and covers the header's grant (replay/token.go).
	TokenValid bool `json:"token_valid"`
	// ReplayIdentical says the module, re-executed against the recorded
	// responses, made every recorded call with the recorded request and
	// reached the recorded end; for a run that has not finished
	// (Finished false), every recorded call.
	ReplayIdentical bool `json:"replay_identical"`
	Finished        bool `json:"finished"`
	Calls           int  `json:"calls"`
	// Approvals is what the audit established of the run's approvals,
	// when it has any (step 2b).
	Approvals *ApprovalReport `json:"approvals,omitempty"`
	Failure   *Failure        `json:"failure,omitempty"`
}

// CellReport is one key of the bundle's key list.
type CellReport struct {
	Key     string `json:"key"`
	Name    string `json:"name"`
	Trusted bool   `json:"trusted"`
	// Seals counts the journal seals by this key that verified.
	Seals uint64 `json:"seals_valid"`
}

// CheckpointReport describes the bundle's checkpoint.
type CheckpointReport struct {
	Origin string `json:"origin"`
	Size   uint64 `json:"size"`
	Root   string `json:"root"`
	// Signer names the first trusted key that signed it; Signers every
	// trusted key that did (a checkpoint cosigned by two trusted cells has
	// two).
	Signer  string   `json:"signer,omitempty"`
	Signers []string `json:"signers,omitempty"`
}

// Failure is the first failure, for people and tools.
type Failure struct {
	Class      string            `json:"class"`
	Entry      *uint64           `json:"entry"`
	Step       uint64            `json:"step,omitempty"`
	Op         string            `json:"op,omitempty"`
	Message    string            `json:"message"`
	Divergence *DivergenceReport `json:"divergence,omitempty"`
}

// DivergenceReport is a divergence, with the field-level differences of
// the requests when the guest sent another request at a recorded step.
type DivergenceReport struct {
	Step     uint64   `json:"step"`
	Op       string   `json:"op"`
	ActualOp string   `json:"actual_op,omitempty"`
	Reason   string   `json:"reason"`
	Func     string   `json:"func,omitempty"`
	Stack    []string `json:"stack,omitempty"`
	Changes  []Change `json:"changes,omitempty"`
}

// VerifyOptions configure VerifyBundle.
type VerifyOptions struct {
	// Trusted are the cell keys the auditor trusts. Nothing else is: a
	// key the bundle lists but Trusted lacks fails as untrusted.
	Trusted []ed25519.PublicKey
	// TokenRoots are the keys, besides Trusted, that the recording cell
	// trusted to issue capability tokens (its DATA/token_roots).
	TokenRoots []ed25519.PublicKey
	// Approvers are the approver keys the auditor trusts (agentrt audit
	// verify --trust-approvers): every counted vote of the run's
	// approvals must be signed by one. Nil: the votes are checked against
	// the keys each request names, which only the cell vouches for.
	Approvers []approval.Member
	// Engine re-executes the module; nil: a fresh wazero engine with no
	// compilation cache (nothing on disk), closed before VerifyBundle
	// returns.
	Engine *host.Engine
	// Progress, when set, is told of the re-execution's progress, as
	// Options.Progress.
	Progress func(served, total int)
}

// VerifyBundle verifies the bundle in data, offline, in the order
// BUNDLE.md section 4 fixes, and returns what it established. On the first
// failure it stops and returns the report so far and an *AuditError.
func VerifyBundle(ctx context.Context, data []byte, opts VerifyOptions) (*AuditReport, error) {
	return VerifyBundleReader(ctx, bytes.NewReader(data), int64(len(data)), opts)
}

// VerifyBundleReader is VerifyBundle for a bundle of size bytes read from
// r (a file), in memory bounded by the bundle's module and its largest
// record, whatever its number of records: the file is read three times,
// for its format, its journal and the re-execution, and no pass keeps the
// records. A file that changes between the passes fails.
func VerifyBundleReader(ctx context.Context, r io.ReaderAt, size int64, opts VerifyOptions) (*AuditReport, error) {
	a := &auditor{rep: &AuditReport{Cells: []CellReport{}}, trusted: opts.Trusted, tokenRoots: opts.TokenRoots, approvers: opts.Approvers, progress: opts.Progress}
	err := a.verify(ctx, r, size, opts.Engine)
	if err != nil {
		var ae *AuditError
		if !errors.As(err, &ae) {
			ae = &AuditError{Class: ErrBundleFormat, Err: err}
			err = ae
		}
		f := &Failure{Class: Class(ae.Class), Step: ae.Step, Op: ae.Op, Message: ae.Err.Error()}
		if ae.HasSeq {
			seq := ae.Seq
			f.Entry = &seq
		}
		var div *DivergenceError
		if errors.As(ae.Err, &div) {
			f.Divergence = &DivergenceReport{Step: div.Step, Op: div.Op, ActualOp: div.ActualOp, Reason: div.Reason,
				Func: div.Func, Stack: div.Stack, Changes: a.changes}
		}
		a.rep.Failure = f
		return a.rep, err
	}
	a.rep.OK = true
	return a.rep, nil
}

type auditor struct {
	rep        *AuditReport
	trusted    []ed25519.PublicKey
	tokenRoots []ed25519.PublicKey
	approvers  []approval.Member
	changes    []Change
	progress   func(served, total int)
}

func (a *auditor) isTrusted(k []byte) bool {
	for _, t := range a.trusted {
		if bytes.Equal(t, k) {
			return true
		}
	}
	return false
}

func bundleErr(class error, format string, args ...any) error {
	return &AuditError{Class: class, Err: fmt.Errorf(format, args...)}
}

func (a *auditor) verify(ctx context.Context, r io.ReaderAt, size int64, engine *host.Engine) error {
	rep := a.rep
	// 1. The file is a bundle: one pass over it, records framed and
	// hashed, not kept.
	l, err := scanBundle(r, size, nil)
	if err != nil {
		return &AuditError{Class: ErrBundleFormat, Err: err}
	}
	rep.Format, rep.Entries, rep.ModuleBytes = l.format, int(l.records), len(l.module)
	rep.Engine = &l.engine

	// 2. Every record: decoding, sequence, chain, payload hashes, seals by
	// trusted keys only, coverage, by the journal's own verifier
	// (journal/SPEC.md section 9), the records read again as a stream.
	// Beside it: the Merkle tree's compact range (step 6) and the calls
	// counted as re-execution will serve them.
	v := journal.NewVerifier(journal.TrustKeys(a.trusted...))
	// Payloads in blob form are resolved from the bundle's blobs, each
	// read from the file and checked against its hash as an entry
	// references it.
	blobs := &fileBlobs{r: r, locs: l.blobs}
	v.Blobs = blobs
	referenced := blobSet{}
	v.OnBlob = referenced.add
	rep.Blobs = len(l.blobs)
	tree := (&compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}).NewEmptyRange(0)
	var inputs, outputs uint64
	calls := 0
	open := false // an intent whose outcome is to come
	// What step 9 needs of the journal: when the run started (when the
	// cell verified its token) and the cell that sealed first (the
	// audience it verified as).
	var started time.Time
	var firstSeal ed25519.PublicKey
	// The budget records rebuild the run's ledger: a record no ledger
	// writes (a settle of a reservation never made, one settled twice)
	// fails the audit, even under the cell's seals.
	// Its first error is reported once the journal has verified: an entry
	// is handed over before the next one's link checks its hash, and a
	// changed entry is a chain failure, not a budget one.
	var ledger host.BudgetReader
	var ledgerErr error
	approvals := newApprovalAudit(a.approvers)
	v.OnEntry = func(e *journal.Entry, rec *journal.Record) error {
		if e.Seq == 0 {
			started = time.Unix(0, e.Time)
		}
		approvals.add(e)
		if err := ledger.Add(e); err != nil && ledgerErr == nil {
			ledgerErr = err
		}
		if firstSeal == nil && rec.Seal != nil {
			firstSeal = bytes.Clone(rec.Seal.Cell)
		}
		switch e.Phase {
		case journal.PhaseIntent:
			calls, open = calls+1, true
			inputs++
		case journal.PhaseCompleted, journal.PhaseFailed:
			if open {
				open = false
			} else {
				calls++
				if !(e.Request == nil && e.Phase == journal.PhaseFailed && abi.Status(e.Status) == abi.StatusTooLarge) {
					inputs++
				}
			}
		}
		if e.OutputHash != nil {
			outputs++
		}
		rep.EntriesChecked++
		return tree.Append(journal.LeafHash(rec.Entry), nil)
	}
	rr := newRecordReader(r, size, l)
	err = journal.VerifyStream(ctx, v, func(fn func([]byte) error) error {
		for {
			raw, err := rr.next()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if err := fn(raw); err != nil {
				return err
			}
		}
	})
	var sum *journal.Summary
	if err == nil {
		sum, err = v.Finish()
	}
	if err != nil {
		var ve *journal.VerifyError
		if errors.As(err, &ve) {
			return &AuditError{Class: ve.Class, Seq: ve.Seq, HasSeq: true, Step: ve.Step, Op: ve.Op, Err: ve.Err}
		}
		return &AuditError{Class: ErrBundleFormat, Err: err}
	}
	if ledgerErr == nil {
		_, ledgerErr = ledger.Report()
	}
	if err := ledgerErr; err != nil {
		return &AuditError{Class: ErrBudget, Err: fmt.Errorf("the budget records do not rebuild a ledger: %w", err)}
	}
	if approvals.err != nil {
		return approvals.err
	}
	if approvals.rep.Requests > 0 {
		rep.Approvals = &approvals.rep
	}
	rep.Run = sum.Run.String()
	rep.ChainIntact, rep.Head = true, hex.EncodeToString(sum.Head)
	rep.InputHashes, rep.OutputHashes, rep.OutputsMatched = inputs, outputs, true
	rep.BlobRefs = sum.BlobRefs
	rep.Finished = sum.End != nil

	// 3. Every key the bundle lists is trusted.
	for _, k := range l.keys {
		rep.Cells = append(rep.Cells, CellReport{Key: keyHex(k), Name: journal.CheckpointKeyName(k),
			Trusted: a.isTrusted(k), Seals: sum.Cells[keyHex(k)]})
	}
	for _, k := range l.keys {
		if !a.isTrusted(k) {
			return bundleErr(journal.ErrUntrusted, "the bundle lists cell key %s, which is not trusted", keyHex(k))
		}
	}

	// 4. The module is the one the run header names.
	modSum := journal.Sum(l.module)
	rep.ModuleSHA256 = hex.EncodeToString(modSum)
	if !bytes.Equal(modSum, sum.Header.ModuleSHA256) {
		return &AuditError{Class: journal.ErrHash, HasSeq: true, Err: fmt.Errorf("the module hashes to %x; the run header records %x",
			modSum, sum.Header.ModuleSHA256)}
	}
	rep.ModuleMatched = true

	// 5. The engine settings agree with the header and this verifier.
	if l.engine.ABI != sum.Header.ABI || l.engine.ABI != abi.Version {
		return bundleErr(ErrBundleFormat, "engine settings name ABI %d; the run header records %d and this verifier knows %d",
			l.engine.ABI, sum.Header.ABI, abi.Version)
	}

	// 6. The checkpoint is signed by trusted keys and describes exactly
	// the bundle's entries.
	cp, signers, err := journal.OpenCheckpoint(l.checkpoint, a.trusted)
	if err != nil {
		if errors.Is(err, journal.ErrUntrusted) {
			return bundleErr(journal.ErrUntrusted, "%v", err)
		}
		return bundleErr(journal.ErrCheckpoint, "%v", err)
	}
	rep.Checkpoint = &CheckpointReport{Origin: cp.Origin, Size: cp.Size, Root: hex.EncodeToString(cp.Root), Signer: journal.CheckpointKeyName(signers[0])}
	for _, k := range signers {
		rep.Checkpoint.Signers = append(rep.Checkpoint.Signers, journal.CheckpointKeyName(k))
	}
	root, err := tree.GetRootHash(nil)
	if err != nil {
		return err
	}
	switch {
	case cp.Origin != journal.CheckpointOrigin(sum.Run):
		return bundleErr(journal.ErrCheckpoint, "checkpoint origin %q, want %q", cp.Origin, journal.CheckpointOrigin(sum.Run))
	case cp.Size != l.records:
		return bundleErr(journal.ErrCheckpoint, "checkpoint covers %d entries; the bundle holds %d", cp.Size, l.records)
	case !bytes.Equal(cp.Root, root):
		return bundleErr(journal.ErrCheckpoint, "checkpoint root %x is not the root %x of the bundle's entries", cp.Root, root)
	}
	rep.CheckpointValid = true

	// 7. The exporting cell signed the bundle, and is trusted.
	if !a.isTrusted(l.signature.Cell) {
		return bundleErr(journal.ErrUntrusted, "the bundle is signed by cell key %s, which is not trusted", keyHex(l.signature.Cell))
	}
	if !ed25519.Verify(l.signature.Cell, l.message, l.signature.Sig) {
		return bundleErr(journal.ErrSignature, "the bundle signature by cell key %s does not verify", keyHex(l.signature.Cell))
	}
	rep.BundleSignatureValid = true

	// 8. The key list is exactly the keys that signed: every trusted key
	// whose signature on the checkpoint verified, not only the first.
	used := map[string]bool{string(l.signature.Cell): true}
	for _, k := range signers {
		used[string(k)] = true
	}
	for k := range sum.Cells {
		kb, _ := hex.DecodeString(k)
		used[string(kb)] = true
	}
	for _, k := range l.keys {
		if !used[string(k)] {
			return bundleErr(ErrBundleFormat, "the bundle lists cell key %s, which signed nothing in it", keyHex(k))
		}
		delete(used, string(k))
	}
	for k := range used {
		return bundleErr(ErrBundleFormat, "cell key %s signed but is not in the bundle's key list", keyHex([]byte(k)))
	}
	// ... and the blob list is exactly the blobs the journal references
	// (step 2 found every one it references).
	for _, b := range l.blobs {
		if _, ok := referenced[string(b.sum)]; !ok {
			return bundleErr(ErrBundleFormat, "the bundle carries blob %x, which no entry references", b.sum)
		}
	}

	// 9. The header's capability token grants what the header records.
	if err := a.checkToken(sum, started, firstSeal); err != nil {
		return err
	}

	// 10. Re-execution against the recorded responses, read from the
	// file a third time as the guest asks for them.
	if engine == nil {
		if engine, err = host.NewEngine(ctx, host.EngineConfig{}); err != nil {
			return err
		}
		defer engine.Close(ctx)
	}
	src := newStreamSource(newRecordReader(r, size, l), sum, calls)
	src.blobs, src.ctx = blobs, ctx
	j := &Journal{Summary: sum}
	res, err := j.execute(ctx, engine, l.module, Options{MaxRequest: int(l.engine.MaxRequest), Progress: a.progress}, src)
	a.changes = src.changes
	switch {
	case errors.Is(err, ErrUnfinished):
		rep.ReplayIdentical, rep.Calls = true, src.Len()
		return nil
	case err != nil:
		var div *DivergenceError
		if !errors.As(err, &div) {
			return &AuditError{Class: ErrDiverged, Err: fmt.Errorf("the module did not run to its recorded end: %w", err)}
		}
		return &AuditError{Class: ErrDiverged, HasSeq: true, Seq: src.seqOf(div.Step), Step: div.Step, Op: div.Op, Err: div}
	}
	rep.ReplayIdentical, rep.Calls = true, res.Calls
	return nil
}
