package cell

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agentrt/agentrt/approval"
	"github.com/agentrt/agentrt/internal/fileread"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/cellkey"
	"github.com/agentrt/agentrt/replay"
)

// The dashboard's actions: the approvals queue and its signed votes, and
// the audit of a run.

// approvalsPage lists what waits for an answer: in a cell with approvers,
// each signed approval with the exact statements to sign and a form that
// takes the signature; in a cell without, the calls a permission mode
// parked, which `agentrt approve` answers.
func (u *ui) approvalsPage(w http.ResponseWriter, r *http.Request) {
	data := map[string]any{"Title": "Approvals", "Namespace": approval.Namespace, "Signed": u.s.cell.Book != nil}
	if u.s.cell.Book != nil {
		runs, err := u.s.cell.Journal.Runs(r.Context())
		if err != nil {
			u.fail(w, r, http.StatusInternalServerError, err, "")
			return
		}
		ps, err := u.s.cell.Book.List(runs)
		if err != nil {
			u.fail(w, r, http.StatusInternalServerError, err, "")
			return
		}
		var out []SignedApproval
		for _, p := range ps {
			out = append(out, SignedApprovalOf(p))
		}
		data["Approvals"] = out
	} else if u.s.approvals != nil {
		var out []ApprovalInfo
		for _, a := range u.s.approvals.Pending(journal.RunID{}) {
			out = append(out, approvalInfo(a))
		}
		data["Asks"] = out
	}
	u.render(w, "approvals", data)
}

// vote takes a signed vote from the approvals page's form (step,
// statement, signature) and counts it through the API's vote path, with
// every check of the book.
func (u *ui) vote(w http.ResponseWriter, r *http.Request) {
	m, ok := u.uiRun(w, r)
	if !ok {
		return
	}
	if err := r.ParseForm(); err != nil {
		u.fail(w, r, http.StatusBadRequest, err, "")
		return
	}
	step, err := strconv.ParseUint(r.PostForm.Get("step"), 10, 64)
	if err != nil || step == 0 {
		u.fail(w, r, http.StatusBadRequest, fmt.Errorf("step %q is not a step number", r.PostForm.Get("step")), "vote from the approvals page")
		return
	}
	// A browser's textarea sends CRLF line ends; the statement signed
	// and the armor have LF.
	lf := func(s string) string { return strings.ReplaceAll(s, "\r\n", "\n") }
	sub := VoteSubmission{Step: step, Statement: lf(r.PostForm.Get("statement")), Signature: strings.TrimSpace(lf(r.PostForm.Get("signature"))) + "\n"}
	ans, code, hint, err := u.s.castVote(r.Context(), m.ID, sub)
	if err != nil {
		u.fail(w, r, code, err, hint)
		return
	}
	u.render(w, "voted", map[string]any{"Title": "Vote counted", "Run": m.ID.String(), "Answer": ans})
}

// verify exports the run's audit bundle, signed with the cell's key, and
// verifies it as `agentrt audit verify` does, trusting the keys the cell
// trusts (its own, DATA/trusted_cells; DATA/token_roots for tokens): the
// chain, every seal, every hash, the checkpoint, the token, the
// approvals, and the re-execution of the module against the journal.
// One verification runs at a time.
func (u *ui) verify(w http.ResponseWriter, r *http.Request) {
	m, ok := u.uiRun(w, r)
	if !ok {
		return
	}
	if !u.verifying.TryLock() {
		u.fail(w, r, http.StatusConflict, errors.New("a verification is under way"), "wait for it to finish, then press verify again")
		return
	}
	defer u.verifying.Unlock()
	opts, err := u.verifyOptions()
	if err != nil {
		u.fail(w, r, http.StatusInternalServerError, err, "")
		return
	}
	f, err := os.CreateTemp("", "agentrt-verify-*.bundle")
	if err != nil {
		u.fail(w, r, http.StatusInternalServerError, err, "")
		return
	}
	defer os.Remove(f.Name())
	defer f.Close()
	data := map[string]any{"Title": "Verify " + m.ID.String(), "Run": m.ID.String()}
	if _, err := replay.ExportTo(r.Context(), u.s.cell.Journal, m.ID, u.s.cell.Key, replay.EngineSettings{}, f); err != nil {
		// Export verifies the journal as it reads it: a damaged one is
		// refused there, with the same failure classes.
		data["ExportError"], data["Class"] = err.Error(), replay.Class(err)
		u.render(w, "verify", data)
		return
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		u.fail(w, r, http.StatusInternalServerError, err, "")
		return
	}
	rep, err := replay.VerifyBundleReader(r.Context(), f, size, opts)
	data["Report"] = rep
	if err != nil {
		data["Error"] = err.Error()
	}
	u.s.logf("dashboard: verify run %s: ok=%v", m.ID, err == nil)
	u.render(w, "verify", data)
}

// verifyOptions are the keys the cell trusts, as an auditor of its runs
// would be given them.
func (u *ui) verifyOptions() (replay.VerifyOptions, error) {
	opts := replay.VerifyOptions{Trusted: []ed25519.PublicKey{u.s.cell.Public()}, Engine: u.s.cell.Engine}
	if b, err := os.ReadFile(filepath.Join(u.s.cell.Dir, TrustedCellsFile)); err == nil {
		keys, err := cellkey.ParseTrustFile(b)
		if err != nil {
			return opts, fmt.Errorf("%s: %w", TrustedCellsFile, err)
		}
		opts.Trusted = append(opts.Trusted, keys...)
	} else if !errors.Is(err, os.ErrNotExist) {
		return opts, err
	}
	if b, err := fileread.Read(filepath.Join(u.s.cell.Dir, TokenRootsFile), fileread.Trust); err == nil {
		if opts.TokenRoots, err = cellkey.ParseTrustFile(b); err != nil {
			return opts, fmt.Errorf("%s: %w", TokenRootsFile, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return opts, err
	}
	return opts, nil
}
