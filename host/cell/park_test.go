package cell_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/approval"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/clock"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/replay"
	"golang.org/x/crypto/ssh"
)

// parkCell is a cell daemon in process on a fake clock, without listeners:
// the tests drive its server directly, and restart it on the same data
// directory and clock.
type parkCell struct {
	t     *testing.T
	dir   string
	clock *clock.Fake
	cell  *cell.Cell
	srv   *cell.Server
	ended chan *host.Result
}

func openParkCell(t *testing.T, dir string, clk *clock.Fake) *parkCell {
	t.Helper()
	p := &parkCell{t: t, dir: dir, clock: clk, ended: make(chan *host.Result, 16)}
	c, err := cell.Open(context.Background(), dir, cached(cell.Options{Clock: clk}))
	if err != nil {
		t.Fatal(err)
	}
	p.cell = c
	p.srv = cell.NewServer(c, cell.ServerOptions{Logf: t.Logf})
	p.srv.OnEnd(func(_ journal.RunID, res *host.Result, err error) {
		if err != nil && !errors.Is(err, host.ErrCancelled) {
			t.Errorf("run stopped: %v", err)
		}
		p.ended <- res
	})
	if _, err := p.srv.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	return p
}

// restart stops the daemon, as a shutdown does, and starts it again.
func (p *parkCell) restart() *parkCell {
	p.t.Helper()
	p.close()
	return openParkCell(p.t, p.dir, p.clock)
}

func (p *parkCell) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.srv.Shutdown(ctx); err != nil {
		p.t.Fatal(err)
	}
	if err := p.cell.Close(ctx); err != nil {
		p.t.Fatal(err)
	}
}

// next waits for the next run of this daemon to stop.
func (p *parkCell) next() *host.Result {
	p.t.Helper()
	select {
	case res := <-p.ended:
		return res
	case <-time.After(30 * time.Second):
		p.t.Fatal("no run stopped within 30 s")
		return nil
	}
}

func (p *parkCell) launch(input any, grant string) journal.RunID {
	p.t.Helper()
	g, err := host.ParseGrant([]byte(grant))
	if err != nil {
		p.t.Fatal(err)
	}
	in, _ := json.Marshal(input)
	run, err := p.srv.Launch(context.Background(), host.RunSpec{Code: testutil.BuildC(p.t, "host/testdata/agents/waiter"), Input: in, Grant: g}, "started")
	if err != nil {
		p.t.Fatal(err)
	}
	return run
}

func (p *parkCell) meta(run journal.RunID) journal.RunMeta {
	p.t.Helper()
	m, err := p.cell.Store.Meta(context.Background(), run)
	if err != nil {
		p.t.Fatal(err)
	}
	return m
}

// entries returns the run's journal entries of op, verified against the
// cell's key.
func (p *parkCell) entries(run journal.RunID, op string) []*journal.Entry {
	p.t.Helper()
	var out []*journal.Entry
	v := journal.NewVerifier(journal.TrustKeys(p.cell.Public()))
	ctx := context.Background()
	if err := p.cell.Store.Records(ctx, run, 0, func(_ uint64, raw []byte) error { return v.Add(raw) }); err != nil {
		p.t.Fatal(err)
	}
	if _, err := v.Finish(); err != nil {
		p.t.Fatalf("the journal does not verify: %v", err)
	}
	err := journal.ReadEntries(ctx, p.cell.Store, run, func(e *journal.Entry, _ *journal.Record) error {
		if e.Op == op {
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		p.t.Fatal(err)
	}
	return out
}

// waiterGrant grants what the waiter imports.
const waiterGrant = "capabilities:\n  run: {}\n  kv: {namespace: waiter}\n  http: {hosts: [\"127.0.0.1\"]}\n  timer: {}\n  approval: {groups: [release]}\n"

const timerGrant = waiterGrant

func TestTimerParksAcrossARestartAndFiresOnceAtItsTime(t *testing.T) {
	start := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	p := openParkCell(t, t.TempDir(), clk)
	run := p.launch(map[string]any{"sleep": int64(time.Hour), "counter": true}, timerGrant)
	res := p.next()
	if res.Status != journal.StatusParked || res.Wait == nil || res.Wait.Kind != journal.WaitTimer {
		t.Fatalf("the run did not park on its timer: %+v", res)
	}
	if m := p.meta(run); m.Status != journal.StatusParked || m.Wait == nil || time.Unix(0, m.Wait.Until).Sub(start) != time.Hour {
		t.Fatalf("index record %+v, wait %+v", m.Status, m.Wait)
	}
	if p.cell.Host.Live(run) {
		t.Fatal("a parked run is live")
	}

	// A restart keeps it parked; the clock moving short of the wake time
	// wakes nothing.
	p = p.restart()
	defer func() { p.close() }()
	clk.Advance(59 * time.Minute)
	select {
	case res := <-p.ended:
		t.Fatalf("the run went on before its time: %+v", res)
	case <-time.After(200 * time.Millisecond):
	}
	if m := p.meta(run); m.Status != journal.StatusParked {
		t.Fatalf("after the restart the run is %s", m.Status)
	}
	clk.Advance(2 * time.Minute)
	res = p.next()
	if res.Status != journal.StatusCompleted {
		t.Fatalf("after its time the run ended %s: %v", res.Status, res.Err)
	}
	var out struct{ Due, Woke int64 }
	if err := json.Unmarshal(p.meta(run).Output, &out); err != nil {
		t.Fatal(err)
	}
	if time.Unix(0, out.Due).Sub(start) != time.Hour || time.Unix(0, out.Woke).Sub(start) != time.Hour+time.Minute {
		t.Fatalf("due %v, woke %v", time.Unix(0, out.Due).Sub(start), time.Unix(0, out.Woke).Sub(start))
	}
	sleeps := p.entries(run, "timer.sleep")
	if len(sleeps) != 2 || sleeps[0].Phase != journal.PhaseIntent || sleeps[1].Phase != journal.PhaseCompleted {
		t.Fatalf("the sleep is journaled as %d entries, want intent then completed", len(sleeps))
	}
	if got := time.Unix(0, sleeps[1].Time).Sub(start); got != time.Hour+time.Minute {
		t.Fatalf("the wake is journaled at %v after the start, want the real time it fired", got)
	}
	if v, _, _ := p.cell.Store.KVGet("waiter", "effects"); string(v) != "2" {
		t.Fatalf("effects counter %q, want 2: an effect was made twice or not at all", v)
	}
	// Once fired, nothing more: no timer is left armed and the run stays ended.
	clk.Advance(24 * time.Hour)
	select {
	case res := <-p.ended:
		t.Fatalf("the run went on again: %+v", res)
	case <-time.After(200 * time.Millisecond):
	}
}

func TestSleepUntilAPastTimeAnswersAtOnce(t *testing.T) {
	start := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	p := openParkCell(t, t.TempDir(), clock.NewFake(start))
	defer p.close()
	run := p.launch(map[string]any{"until": start.Add(-time.Minute).UnixNano()}, timerGrant)
	if res := p.next(); res.Status != journal.StatusCompleted {
		t.Fatalf("a sleep to a past time parked the run: %+v", res)
	}
	if es := p.entries(run, "timer.sleep"); len(es) != 2 {
		t.Fatalf("%d entries for the sleep, want 2", len(es))
	}
}

// approverKey is one approver's SSH key.
type approverKey struct {
	name   string
	signer ssh.Signer
}

func newApprover(t *testing.T, name string) approverKey {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return approverKey{name, s}
}

func (a approverKey) line() string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(a.signer.PublicKey()))) + " " + a.name + "\n"
}

// writeApprovers writes the group's file and the rules of the cell in dir.
func writeApprovers(t *testing.T, dir, group, rules string, members ...approverKey) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, cell.ApproversDir), 0o700); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, m := range members {
		b.WriteString(m.line())
	}
	if err := os.WriteFile(filepath.Join(dir, cell.ApproversDir, group), []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if rules != "" {
		if err := os.WriteFile(filepath.Join(dir, "approvals.yaml"), []byte(rules), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// vote signs the statement of the run's pending approval with a's key and
// submits it.
func (p *parkCell) vote(run journal.RunID, step uint64, a approverKey, approve bool) (approval.Tally, error) {
	p.t.Helper()
	pend, err := p.cell.Book.Get(run, step)
	if err != nil {
		p.t.Fatal(err)
	}
	st := pend.Statement(approve)
	msg := st.Marshal()
	sig, err := approval.Sign(a.signer, msg)
	if err != nil {
		p.t.Fatal(err)
	}
	return p.cell.Book.Vote(run, step, msg, sig)
}

const approvalGrant = waiterGrant

func TestQuorumApprovalParksAndResumes(t *testing.T) {
	dir := t.TempDir()
	alice, bob, carol := newApprover(t, "alice"), newApprover(t, "bob"), newApprover(t, "carol")
	writeApprovers(t, dir, "release", "groups:\n  release: {quorum: 2, expires: 1h}\n", alice, bob, carol)
	start := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	p := openParkCell(t, dir, clk)
	run := p.launch(map[string]any{"action": "deploy v2", "group": "release", "counter": true}, approvalGrant)
	res := p.next()
	if res.Status != journal.StatusParked || res.Wait.Kind != journal.WaitApproval || res.Wait.Group != "release" || len(res.Wait.Digest) != 32 {
		t.Fatalf("the run did not park for its approval: %+v %+v", res, res.Wait)
	}
	step := res.Wait.Step
	pend, err := p.cell.Book.List([]journal.RunMeta{p.meta(run)})
	if err != nil || len(pend) != 1 || pend[0].Action != "deploy v2" {
		t.Fatalf("pending approvals %v, %v", pend, err)
	}

	// One vote counts, the same approver's second is a duplicate; a key
	// outside the group is unknown; neither changes anything.
	if tl, err := p.vote(run, step, alice, true); err != nil || tl.State != approval.Pending {
		t.Fatalf("alice's vote: %v %v", tl.State, err)
	}
	var ve *cell.VoteError
	if _, err := p.vote(run, step, alice, true); !errors.As(err, &ve) || ve.Verdict != approval.Duplicate {
		t.Fatalf("alice's second vote: %v", err)
	}
	if _, err := p.vote(run, step, newApprover(t, "mallory"), true); !errors.As(err, &ve) || ve.Verdict != approval.UnknownKey {
		t.Fatalf("an outsider's vote: %v", err)
	}
	// The daemon restarts with one vote stored: still parked.
	p = p.restart()
	defer func() { p.close() }()
	if m := p.meta(run); m.Status != journal.StatusParked {
		t.Fatalf("after the restart the run is %s", m.Status)
	}
	// Bob's vote makes the quorum: the run resumes and completes.
	if tl, err := p.vote(run, step, bob, true); err != nil || tl.State != approval.Approved {
		t.Fatalf("bob's vote: %v %v", tl.State, err)
	}
	res = p.next()
	if res.Status != journal.StatusCompleted {
		t.Fatalf("the approved run ended %s: %v", res.Status, res.Err)
	}
	var out struct {
		Approved  bool
		Approvers []string
	}
	if err := json.Unmarshal(p.meta(run).Output, &out); err != nil {
		t.Fatal(err)
	}
	if !out.Approved || fmt.Sprint(out.Approvers) != "[alice bob]" {
		t.Fatalf("the agent got %+v", out)
	}
	// A vote after the decision changes nothing.
	if _, err := p.vote(run, step, carol, false); !errors.As(err, &ve) || ve.Verdict != approval.Decided {
		t.Fatalf("a late vote: %v", err)
	}
	es := p.entries(run, "approval.request")
	if len(es) != 2 || es[0].Approval == nil || es[1].Approval == nil {
		t.Fatalf("the approval's entries carry no records: %d entries", len(es))
	}
	rec, err := approval.DecodeRecord(es[1].Approval)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Votes) != 2 || rec.Decision == nil || !rec.Decision.Approved {
		t.Fatalf("the journaled record: %d votes, decision %+v", len(rec.Votes), rec.Decision)
	}
	trust, err := approval.ParseTrust([]byte(alice.line() + bob.line() + carol.line()))
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.Verify(trust); err != nil {
		t.Fatalf("the journaled record does not verify: %v", err)
	}
	if v, _, _ := p.cell.Store.KVGet("waiter", "effects"); string(v) != "2" {
		t.Fatalf("effects counter %q, want 2", v)
	}
}

func TestApprovalExpiresToADenial(t *testing.T) {
	dir := t.TempDir()
	alice, bob := newApprover(t, "alice"), newApprover(t, "bob")
	writeApprovers(t, dir, "release", "groups:\n  release: {quorum: 2, expires: 1h}\n", alice, bob)
	clk := clock.NewFake(time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC))
	p := openParkCell(t, dir, clk)
	defer func() { p.close() }()
	run := p.launch(map[string]any{"action": "deploy v2", "group": "release"}, approvalGrant)
	res := p.next()
	if res.Status != journal.StatusParked {
		t.Fatalf("%+v", res)
	}
	if _, err := p.vote(run, res.Wait.Step, alice, true); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	res = p.next()
	if res.Status != journal.StatusCompleted {
		t.Fatalf("ended %s: %v", res.Status, res.Err)
	}
	var out struct {
		Approved bool
		Reason   string
	}
	_ = json.Unmarshal(p.meta(run).Output, &out)
	if out.Approved || !strings.Contains(out.Reason, "expired") {
		t.Fatalf("after its expiry the agent got %+v", out)
	}
}

// TestAuditOfAnApprovedRun exports the bundle of a run approved by a 2 of 3
// quorum and verifies it offline, votes included; then changes one byte of
// a vote: in the journal as stored (a chain failure at that entry), and
// re-sealed by the cell's own key, as an insider could (the approval check
// names the entry and the vote).
func TestAuditOfAnApprovedRun(t *testing.T) {
	dir := t.TempDir()
	alice, bob, carol := newApprover(t, "alice"), newApprover(t, "bob"), newApprover(t, "carol")
	writeApprovers(t, dir, "release", "groups:\n  release: {quorum: 2}\n", alice, bob, carol)
	p := openParkCell(t, dir, clock.NewFake(time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)))
	defer func() { p.close() }()
	run := p.launch(map[string]any{"action": "deploy v2", "group": "release"}, waiterGrant)
	res := p.next()
	for _, a := range []approverKey{carol, alice} {
		if _, err := p.vote(run, res.Wait.Step, a, true); err != nil {
			t.Fatal(err)
		}
	}
	if res := p.next(); res.Status != journal.StatusCompleted {
		t.Fatalf("ended %s", res.Status)
	}
	ctx := context.Background()
	var buf bytes.Buffer
	if _, err := replay.ExportTo(ctx, p.cell.Store, run, p.cell.Key, replay.EngineSettings{}, &buf); err != nil {
		t.Fatal(err)
	}
	trusted := []ed25519.PublicKey{p.cell.Public()}
	all, err := approval.ParseTrust([]byte(alice.line() + bob.line() + carol.line()))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := replay.VerifyBundle(ctx, buf.Bytes(), replay.VerifyOptions{Engine: testutil.SharedEngine(t), Trusted: trusted, Approvers: all})
	if err != nil || !rep.OK || rep.Approvals == nil || rep.Approvals.Votes != 2 || !rep.Approvals.ApproversTrusted {
		t.Fatalf("verify: %v %+v", err, rep.Approvals)
	}
	// An auditor who trusts only bob and carol: alice's vote is not theirs.
	some, _ := approval.ParseTrust([]byte(bob.line() + carol.line()))
	_, err = replay.VerifyBundle(ctx, buf.Bytes(), replay.VerifyOptions{Engine: testutil.SharedEngine(t), Trusted: trusted, Approvers: some})
	if replay.Class(err) != "approval" || !strings.Contains(err.Error(), "alice") {
		t.Fatalf("with alice untrusted: %v", err)
	}

	b, err := replay.DecodeBundle(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	seq := -1
	for i, raw := range b.Records {
		rec, _ := journal.DecodeRecord(raw)
		e, _ := journal.DecodeEntry(rec.Entry)
		if e.Phase == journal.PhaseCompleted && len(e.Approval) > 0 {
			seq = i
		}
	}
	if seq < 0 {
		t.Fatal("no decision entry in the bundle")
	}
	// One byte of the first vote's signature, in the journal as stored.
	changed := tamperVote(t, b, seq)
	data, _ := changed.Marshal()
	_, err = replay.VerifyBundle(ctx, data, replay.VerifyOptions{Engine: testutil.SharedEngine(t), Trusted: trusted, Approvers: all})
	var ae *replay.AuditError
	if !errors.As(err, &ae) || (replay.Class(err) != "chain" && replay.Class(err) != "hash") || !ae.HasSeq || ae.Seq != uint64(seq+1) && ae.Seq != uint64(seq) {
		t.Fatalf("a changed vote byte: %v", err)
	}
	// The same change, re-linked and re-sealed by the cell's key.
	changed = tamperVote(t, b, seq)
	relink(t, changed, seq, p.cell.Key)
	data, _ = changed.Marshal()
	_, err = replay.VerifyBundle(ctx, data, replay.VerifyOptions{Engine: testutil.SharedEngine(t), Trusted: trusted, Approvers: all})
	if !errors.As(err, &ae) || replay.Class(err) != "approval" || ae.Seq != uint64(seq) || !strings.Contains(err.Error(), "vote 0") {
		t.Fatalf("a forged vote under the cell's seals: %v", err)
	}
}

// tamperVote returns a copy of b with one byte of the first vote's
// signature changed in the approval record of entry seq.
func tamperVote(t *testing.T, b *replay.Bundle, seq int) *replay.Bundle {
	t.Helper()
	c := *b
	c.Records = slices.Clone(b.Records)
	rec, _ := journal.DecodeRecord(c.Records[seq])
	e, _ := journal.DecodeEntry(rec.Entry)
	ar, err := approval.DecodeRecord(e.Approval)
	if err != nil {
		t.Fatal(err)
	}
	sig := bytes.Clone(ar.Votes[0].Signature)
	i := bytes.LastIndexByte(sig[:len(sig)-40], 'A') // a base64 digit inside the armor
	if i < 40 {
		i = 60
	}
	sig[i] ^= 'A' ^ 'B'
	ar.Votes[0].Signature = sig
	if e.Approval, err = approval.EncodeRecord(ar); err != nil {
		t.Fatal(err)
	}
	rec.Entry, _ = journal.EncodeEntry(e)
	c.Records[seq], _ = journal.EncodeRecord(rec)
	return &c
}

// relink re-chains b's records from seq from on, resealing the sealed ones
// and re-signing the checkpoint and the bundle with key: what an insider
// holding the cell's key could do.
func relink(t *testing.T, b *replay.Bundle, from int, key ed25519.PrivateKey) {
	t.Helper()
	var prev []byte
	for i := from; i < len(b.Records); i++ {
		rec, _ := journal.DecodeRecord(b.Records[i])
		e, _ := journal.DecodeEntry(rec.Entry)
		if prev != nil {
			e.Prev = prev
		}
		rec.Entry, _ = journal.EncodeEntry(e)
		prev = journal.Sum(rec.Entry)
		if rec.Seal != nil {
			rec.Seal = &journal.Seal{Cell: key.Public().(ed25519.PublicKey), Sig: ed25519.Sign(key, journal.SealMessage(e.Run, e.Seq, prev))}
		}
		b.Records[i], _ = journal.EncodeRecord(rec)
	}
	tree, err := b.Tree()
	if err != nil {
		t.Fatal(err)
	}
	root, _ := tree.Root(tree.Size())
	if b.Checkpoint, err = journal.SignCheckpoint(&journal.Checkpoint{Origin: journal.CheckpointOrigin(b.Run()), Size: tree.Size(), Root: root}, key); err != nil {
		t.Fatal(err)
	}
	if err := b.Sign(key); err != nil {
		t.Fatal(err)
	}
}

// TestModeAskParksTheCallForItsApprovers: a permission mode that asks
// about an HTTP POST, in a cell with approvers, parks the call before it is
// sent; an approval lets it through once, a deny refuses it. The effect is
// made once per approval, never before.
func TestModeAskParksTheCallForItsApprovers(t *testing.T) {
	dir := t.TempDir()
	alice := newApprover(t, "alice")
	writeApprovers(t, dir, "ops", "", alice)
	if err := os.WriteFile(filepath.Join(dir, cell.ModesFile), []byte("rules:\n  - {name: ask-post, op: http.request, method: POST, effect: ask, group: ops}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	posts := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		posts[string(b)]++
		mu.Unlock()
	}))
	defer srv.Close()
	p := openParkCell(t, dir, clock.NewFake(time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)))
	defer func() { p.close() }()
	sent := func() string { mu.Lock(); defer mu.Unlock(); return fmt.Sprint(posts) }

	run := p.launch(map[string]any{"hits": srv.URL}, waiterGrant)
	res := p.next()
	if res.Status != journal.StatusParked || res.Wait.Kind != journal.WaitApproval || res.Wait.Op != "http.request" || res.Wait.Group != "ops" {
		t.Fatalf("the POST did not park for its approval: %+v %+v", res, res.Wait)
	}
	if s := sent(); s != "map[]" {
		t.Fatalf("the POST was sent before its approval: %s", s)
	}
	pend, err := p.cell.Book.Get(run, res.Wait.Step)
	if err != nil || !strings.Contains(pend.Action, "http.request") || pend.Rule != "ask-post" {
		t.Fatalf("the request: %+v %v", pend, err)
	}
	if _, err := p.vote(run, res.Wait.Step, alice, true); err != nil {
		t.Fatal(err)
	}
	// The first POST goes, and the second parks in its turn; alice
	// denies it.
	res = p.next()
	if res.Status != journal.StatusParked || res.Wait.Op != "http.request" {
		t.Fatalf("the second POST did not park: %+v", res)
	}
	if s := sent(); s != "map[before:1]" {
		t.Fatalf("after one approval: %s", s)
	}
	if _, err := p.vote(run, res.Wait.Step, alice, false); err != nil {
		t.Fatal(err)
	}
	res = p.next()
	if res.Status != journal.StatusFailed {
		t.Fatalf("after the deny the run ended %s: %v", res.Status, res.Err)
	}
	if s := sent(); s != "map[before:1]" {
		t.Fatalf("a denied POST was sent: %s", s)
	}
	posts2 := p.entries(run, "http.request")
	var phases []string
	for _, e := range posts2 {
		phases = append(phases, e.Phase.String())
	}
	if strings.Join(phases, " ") != "intent executing completed intent failed" {
		t.Fatalf("the POSTs are journaled as %v", phases)
	}
	if posts2[1].Approval == nil || posts2[4].Approval == nil {
		t.Fatal("the decisions are not journaled with the entries that ended the waits")
	}
	if posts2[4].Status != uint32(abi.StatusDenied) || !strings.Contains(string(posts2[4].Response), "not approved: denied by alice") {
		t.Fatalf("the denied POST's answer: status %d, %q", posts2[4].Status, posts2[4].Response)
	}
}

// TestCancelledParkedRunKeepsItsWait: cancelling a parked run keeps what it
// waits for; its timer does not wake it, and a resume parks it again until
// its time.
func TestCancelledParkedRunKeepsItsWait(t *testing.T) {
	start := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	p := openParkCell(t, t.TempDir(), clk)
	defer func() { p.close() }()
	run := p.launch(map[string]any{"sleep": int64(time.Hour)}, waiterGrant)
	if res := p.next(); res.Status != journal.StatusParked {
		t.Fatalf("%+v", res)
	}
	if err := p.cell.Host.Cancel(context.Background(), run); err != nil {
		t.Fatal(err)
	}
	m := p.meta(run)
	if m.Status != journal.StatusCancelled || m.Wait == nil || m.Wait.Kind != journal.WaitTimer {
		t.Fatalf("cancelled: %s, wait %+v", m.Status, m.Wait)
	}
	clk.Advance(2 * time.Hour)
	select {
	case res := <-p.ended:
		t.Fatalf("a cancelled run woke on its timer: %+v", res)
	case <-time.After(200 * time.Millisecond):
	}
	if p.meta(run).Status != journal.StatusCancelled {
		t.Fatal("the timer woke the cancelled run")
	}
	// Resumed by hand after its time: it goes on at once.
	st, err := p.cell.Host.Reopen(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	res, err := st.Execute(context.Background())
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("resume: %v %+v", err, res)
	}
}

// TestModeRuleTightensItsGroupsRule: an ask rule's quorum raises its
// group's (1 of 2 in approvals.yaml, 2 of 2 for this rule), and a quorum the
// group cannot reach denies the call with the reason, sending nothing.
func TestModeRuleTightensItsGroupsRule(t *testing.T) {
	for _, tc := range []struct {
		quorum int
		denied bool
	}{{2, false}, {3, true}} {
		t.Run(fmt.Sprint("quorum-", tc.quorum), func(t *testing.T) {
			dir := t.TempDir()
			alice, bob := newApprover(t, "alice"), newApprover(t, "bob")
			writeApprovers(t, dir, "ops", "groups:\n  ops: {quorum: 1}\n", alice, bob)
			modes := fmt.Sprintf("rules:\n  - {name: ask-post, op: http.request, method: POST, effect: ask, group: ops, quorum: %d, expires: 1h}\n", tc.quorum)
			if err := os.WriteFile(filepath.Join(dir, cell.ModesFile), []byte(modes), 0o600); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			sent := 0
			srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { mu.Lock(); sent++; mu.Unlock() }))
			defer srv.Close()
			p := openParkCell(t, dir, clock.NewFake(time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)))
			defer func() { p.close() }()
			run := p.launch(map[string]any{"hits": srv.URL}, waiterGrant)
			res := p.next()
			if tc.denied {
				if res.Status != journal.StatusFailed {
					t.Fatalf("an unreachable quorum: the run ended %s", res.Status)
				}
				es := p.entries(run, "http.request")
				if len(es) != 1 || es[0].Status != uint32(abi.StatusDenied) || !strings.Contains(string(es[0].Response), "quorum 3") {
					t.Fatalf("the POST's answer: %d entries, %q", len(es), es[0].Response)
				}
				if sent != 0 {
					t.Fatal("a POST was sent")
				}
				return
			}
			if res.Status != journal.StatusParked {
				t.Fatalf("%+v", res)
			}
			pend, _ := p.cell.Book.Get(run, res.Wait.Step)
			if r := pend.Record.Request.Rule; r.Quorum != 2 || r.Expires != time.Hour {
				t.Fatalf("the request's rule %+v, want the mode rule's quorum 2 and expiry 1h", r)
			}
			if tl, err := p.vote(run, res.Wait.Step, alice, true); err != nil || tl.State != approval.Pending {
				t.Fatalf("one vote of two: %v %v", tl.State, err)
			}
			if tl, err := p.vote(run, res.Wait.Step, bob, true); err != nil || tl.State != approval.Approved {
				t.Fatalf("two votes: %v %v", tl.State, err)
			}
			if res := p.next(); res.Status != journal.StatusParked || res.Wait.Op != "http.request" {
				t.Fatalf("after the first POST: %+v", res)
			}
			mu.Lock()
			defer mu.Unlock()
			if sent != 1 {
				t.Fatalf("%d POSTs sent, want 1", sent)
			}
		})
	}
}

// TestCancelAsARunParksCancelsIt: a Cancel that reaches a run while it
// parks (its wait being committed, past the point where the run looks
// for a stop) still cancels it: once Cancel returns, the run is
// cancelled, keeping its wait, never left parked for its timer to wake.
// The cancels land at spread moments of the runs' starts and parks.
func TestCancelAsARunParksCancelsIt(t *testing.T) {
	start := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	p := openParkCell(t, t.TempDir(), clk)
	defer func() { p.close() }()
	p.launch(map[string]any{"sleep": int64(time.Hour)}, waiterGrant) // compiles the waiter once
	p.next()
	for i := range 40 {
		run := p.launch(map[string]any{"sleep": int64(time.Hour)}, waiterGrant)
		time.Sleep(time.Duration(i%20) * time.Millisecond / 2)
		if err := p.srv.Cancel(context.Background(), run); err != nil {
			t.Fatalf("cancel %d: %v", i, err)
		}
		if m := p.meta(run); m.Status != journal.StatusCancelled {
			t.Fatalf("cancel %d, %v after its launch: the run is %s (wait %+v), want cancelled", i, time.Duration(i%20)*time.Millisecond/2, m.Status, m.Wait)
		}
		p.next()
	}
}
