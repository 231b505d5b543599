package cell

import (
	"context"
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
	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/budget"
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

// BurnDown is one dimension of a run's budget over its journal, as the
// budget page charts it: what is left under the ceiling (or, without
// one, what was used) after each entry that changed it.
type BurnDown struct {
	Dim string
	// Ceiling is the run's ceiling of the dimension; Limited says it has
	// one.
	Ceiling uint64
	Limited bool
	// Used is what was spent and is still reserved at the end; Left the
	// ceiling less Used (0 when over).
	Used, Left uint64
	// Points are (entry seq, value) pairs, at most uiMaxPoints of them:
	// Left when Limited, Used otherwise.
	Points [][2]uint64
}

// BurnDowns reads run's journal and returns the burn-down of every
// dimension that has a ceiling or was used: spent counts settles, used
// adds the open reservations, steps follow the call entries.
func BurnDowns(ctx context.Context, st journal.Store, run journal.RunID) ([]BurnDown, error) {
	var (
		ceil     budget.Ceilings
		spent    budget.Amounts
		reserved = map[uint64]budget.Amounts{}
		series   [budget.NumDims][][2]uint64
		steps    uint64
	)
	used := func() budget.Amounts {
		u := spent
		for _, a := range reserved {
			for d := range u {
				u[d] += a[d]
			}
		}
		u[budget.Steps] = max(u[budget.Steps], steps)
		return u
	}
	err := journal.ReadEntries(ctx, st, run, func(e *journal.Entry, _ *journal.Record) error {
		before := used()
		if e.Header != nil {
			g, err := host.DecodeGrant(e.Header.Grant)
			if err != nil {
				return fmt.Errorf("the run's grant: %w", err)
			}
			var b capability.Budget
			if g.Budget != nil {
				b = *g.Budget
			}
			ceil = budget.CeilingsOf(b, capability.Budget{})
		}
		steps = max(steps, e.Step)
		if len(e.Budget) > 0 {
			ops, err := budget.DecodeRecord(e.Budget)
			if err != nil {
				return fmt.Errorf("entry %d: %w", e.Seq, err)
			}
			for _, o := range ops {
				switch o.Kind {
				case budget.OpReserve:
					reserved[o.ID] = o.Amounts
				case budget.OpSettle:
					delete(reserved, o.ID)
					for d := range spent {
						spent[d] += o.Amounts[d]
					}
				case budget.OpRelease:
					delete(reserved, o.ID)
				}
			}
		}
		if after := used(); after != before || e.Seq == 0 {
			for d := range budget.NumDims {
				series[d] = append(series[d], [2]uint64{e.Seq, after[d]})
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	final := used()
	var out []BurnDown
	for d := range budget.NumDims {
		max, limited := ceil.Get(d)
		if !limited && final[d] == 0 {
			continue
		}
		b := BurnDown{Dim: d.String(), Ceiling: max, Limited: limited, Used: final[d]}
		if limited && final[d] < max {
			b.Left = max - final[d]
		}
		pts := series[d]
		if n := len(pts); n > uiMaxPoints {
			// Evenly spaced samples, the last one kept.
			kept := make([][2]uint64, 0, uiMaxPoints)
			for i := range uiMaxPoints - 1 {
				kept = append(kept, pts[i*n/(uiMaxPoints-1)])
			}
			pts = append(kept, pts[n-1])
		}
		for _, p := range pts {
			v := p[1]
			if limited {
				v = max - min(v, max)
			}
			b.Points = append(b.Points, [2]uint64{p[0], v})
		}
		out = append(out, b)
	}
	return out, nil
}

// chart is a burn-down drawn as inline SVG: a polyline in a box of
// chartW × chartH, its axes labelled with the last seq and the top value.
type chart struct {
	BurnDown
	Poly      string
	Top, Last uint64
	// W and H are the plot's size, VW and VH the picture's, with room
	// for the labels.
	W, H, VW, VH int
}

const chartW, chartH = 640, 160

func chartOf(b BurnDown) chart {
	c := chart{BurnDown: b, W: chartW, H: chartH, VW: chartW + 70, VH: chartH + 30}
	top := b.Ceiling
	for _, p := range b.Points {
		top = max(top, p[1])
		c.Last = max(c.Last, p[0])
	}
	c.Top = max(top, 1)
	var sb strings.Builder
	for i, p := range b.Points {
		x := float64(p[0]) / float64(max(c.Last, 1)) * chartW
		y := chartH - float64(p[1])/float64(c.Top)*chartH
		if i > 0 {
			sb.WriteByte(' ')
		}
		fmt.Fprintf(&sb, "%.1f,%.1f", x, y)
	}
	c.Poly = sb.String()
	return c
}

func (u *ui) budgetPage(w http.ResponseWriter, r *http.Request) {
	m, ok := u.uiRun(w, r)
	if !ok {
		return
	}
	bds, err := BurnDowns(r.Context(), u.s.cell.Journal, m.ID)
	if err != nil {
		u.fail(w, r, readErrorCode(err), err, "")
		return
	}
	var charts []chart
	for _, b := range bds {
		charts = append(charts, chartOf(b))
	}
	u.render(w, "budget", map[string]any{"Title": "Budget of " + m.ID.String(), "Run": m.ID.String(), "Charts": charts})
}

// header returns the header of run's journal, from its start entry.
func (u *ui) header(ctx context.Context, run journal.RunID) (*journal.Header, error) {
	var hdr *journal.Header
	err := u.s.cell.Journal.Records(ctx, run, 0, func(_ uint64, raw []byte) error {
		rec, err := journal.DecodeRecord(raw)
		if err == nil {
			var e *journal.Entry
			if e, err = journal.DecodeEntry(rec.Entry); err == nil {
				hdr = e.Header
			}
		}
		if err != nil {
			return err
		}
		return errPageFull
	})
	if err != nil && !errors.Is(err, errPageFull) {
		return nil, err
	}
	if hdr == nil {
		return nil, fmt.Errorf("run %s: its first entry carries no header", run)
	}
	return hdr, nil
}

// forkPage compares a fork with the run it was forked from, call by call
// after the fork point (replay.CompareFork, as agentrt fork prints it).
func (u *ui) forkPage(w http.ResponseWriter, r *http.Request) {
	m, ok := u.uiRun(w, r)
	if !ok {
		return
	}
	rep, err := replay.CompareFork(r.Context(), u.s.cell.Journal, m.ID)
	if errors.Is(err, replay.ErrNotFork) {
		u.fail(w, r, http.StatusNotFound, err, "agentrt fork RUN --at SEQ makes a fork; its page compares it with its parent")
		return
	}
	if err != nil {
		u.fail(w, r, readErrorCode(err), err, "")
		return
	}
	type row struct {
		replay.ForkCall
		Text string
	}
	var rows []row
	for _, c := range rep.Calls {
		rows = append(rows, row{c, forkCallText(c)})
	}
	u.render(w, "fork", map[string]any{"Title": "Fork " + m.ID.String(), "Report": rep, "Rows": rows})
}

// forkCallText says how a step of a fork compares with its parent's.
func forkCallText(c replay.ForkCall) string {
	switch {
	case c.Op == "":
		return "the fork made no call here"
	case c.ParentOp == "":
		return "the parent made no call here"
	case c.Op != c.ParentOp:
		return "another op"
	case !c.Match && len(c.Changes) > 0:
		var parts []string
		for _, ch := range c.Changes {
			parts = append(parts, ch.String())
		}
		return "request differs: " + strings.Join(parts, "; ")
	case !c.Match:
		return "request differs"
	case !c.SameOutput:
		return "same call, another answer"
	}
	return "same"
}
