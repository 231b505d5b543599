package cell_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/examples/crawler/site"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/host/cell/handoff"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/jetstore/jstest"
	"github.com/agentrt/agentrt/placement"
	"github.com/agentrt/agentrt/replay"
	"github.com/nats-io/nats.go"
	"github.com/veraison/go-cose"
)

// handoffCluster is three cells, a, b and c, each trusting the others, on
// one real JetStream server.
type handoffCluster struct {
	cells   []*clusterCell
	pubs    []ed25519.PublicKey
	nc      *nats.Conn
	natsURL string
	untrust ed25519.PrivateKey
}

func newHandoffCluster(t *testing.T) *handoffCluster {
	t.Helper()
	return newHandoffClusterSched(t, nil)
}

// newHandoffClusterSched is newHandoffCluster with the scheduler options
// of each cell named in sched ("a", "b" or "c").
func newHandoffClusterSched(t *testing.T, sched map[string]cell.SchedulerOptions) *handoffCluster {
	t.Helper()
	srv := jstest.Server(t)
	dirs, keys := testutil.TrustingCells(t, 3)
	hc := &handoffCluster{pubs: testutil.PublicKeys(keys), natsURL: srv.ClientURL()}
	for i, name := range []string{"a", "b", "c"} {
		// Envelopes last a minute: long enough for a test to replay one
		// before it expires.
		hc.cells = append(hc.cells, openClusterCellSched(t, dirs[i], cell.ClusterOptions{URLs: []string{srv.ClientURL()},
			Heartbeat: 100 * time.Millisecond, Self: placement.Cell{Name: name}, HandoffExpiry: time.Minute}, 5*time.Second, sched[name]))
	}
	var err error
	if hc.nc, err = nats.Connect(srv.ClientURL()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hc.nc.Close)
	if _, hc.untrust, err = ed25519.GenerateKey(nil); err != nil {
		t.Fatal(err)
	}
	// Each cell sees the others live before a handoff names them.
	waitFor(t, "the three cells in the registry", func() bool {
		hbs, err := hc.cells[0].cell.Cluster.Registry.Cells(context.Background())
		return err == nil && len(cell.Live(hbs, time.Now())) == 3
	})
	return hc
}

// gatedSite is the crawler's site, whose first fetch of /replay waits
// until release is closed, so that a crawl is live, inside an effect,
// when a test hands it off. It counts the fetches of each idempotency key.
type gatedSite struct {
	*httptest.Server
	reached, release chan struct{}
	opened           sync.Once
	mu               sync.Mutex
	keys             map[string]int
}

// open lets the fetch of /replay complete.
func (g *gatedSite) open() { g.opened.Do(func() { close(g.release) }) }

func newGatedSite(t *testing.T) *gatedSite {
	g := &gatedSite{reached: make(chan struct{}), release: make(chan struct{}), keys: map[string]int{}}
	var once sync.Once
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		g.keys[r.Header.Get("Idempotency-Key")]++
		g.mu.Unlock()
		if r.URL.Path == "/replay" {
			first := false
			once.Do(func() { first = true })
			if first {
				close(g.reached)
				select {
				case <-g.release:
				case <-r.Context().Done():
				}
			}
		}
		site.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(g.Close)
	t.Cleanup(g.open) // before Close, which waits for the fetch
	return g
}

// exactlyOnce fails t unless every fetch carried an idempotency key, and
// none was fetched twice.
func (g *gatedSite) exactlyOnce(t *testing.T) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.keys) == 0 {
		t.Fatal("the site saw no fetch")
	}
	for k, n := range g.keys {
		if k == "" || n != 1 {
			t.Errorf("idempotency key %q sent %d times", k, n)
		}
	}
}

// crawlInFlight starts a crawl of g on cell a and returns its id once the
// crawl is inside its fetch of /replay.
func (hc *handoffCluster) crawlInFlight(t *testing.T, g *gatedSite) journal.RunID {
	t.Helper()
	return crawlInFlight(t, hc.cells[0], g)
}

// handOff asks cell a, through its API, to hand run to the cell named to,
// and lets the crawl's fetch under way complete once a has asked the run
// to stop: the handoff waits for the step boundary.
func (hc *handoffCluster) handOff(t *testing.T, g *gatedSite, run journal.RunID, to string) (cell.HandoffInfo, error) {
	t.Helper()
	type result struct {
		info cell.HandoffInfo
		err  error
	}
	out := make(chan result, 1)
	go func() {
		info, err := hc.cells[0].client.Handoff(context.Background(), run.String(), to)
		out <- result{info, err}
	}()
	waitFor(t, "cell a to stop the run for the handoff", func() bool { return hc.cells[0].cell.Host.Stopping(run) })
	g.open()
	select {
	case r := <-out:
		return r.info, r.err
	case <-time.After(2 * time.Minute):
		t.Fatal("the handoff did not return")
	}
	panic("unreachable")
}

// completed waits for run to complete, as the journal store says.
func (hc *handoffCluster) completed(t *testing.T, run journal.RunID) {
	t.Helper()
	waitFor(t, "the run to complete", func() bool {
		m, err := hc.cells[0].cell.Journal.Meta(context.Background(), run)
		return err == nil && m.Status == journal.StatusCompleted
	})
}

// leaseEntries verifies run's journal with the keys trusted and returns
// its lease entries and the hash of the entry before each.
func leaseEntries(t *testing.T, st journal.Store, run journal.RunID, trusted ...ed25519.PublicKey) (*journal.Summary, []*journal.Entry, [][]byte) {
	t.Helper()
	v := journal.NewVerifier(journal.TrustKeys(trusted...))
	var leases []*journal.Entry
	var before [][]byte
	var prev []byte
	v.OnEntry = func(e *journal.Entry, r *journal.Record) error {
		if e.Phase == journal.PhaseLease {
			leases = append(leases, e)
			before = append(before, prev)
		}
		prev = journal.Sum(r.Entry)
		return nil
	}
	sum, err := journal.VerifyStoreWith(context.Background(), st, run, v)
	if err != nil {
		t.Fatal(err)
	}
	return sum, leases, before
}

// TestHandoffMovesALiveCrawl hands a crawl from cell a to cell b while a
// is inside a page fetch, through a's API (agentrt cell handoff): the
// fetch completes on a, b verifies the envelope and takes the lease with
// the next epoch, journals the envelope in its lease entry and finishes
// the crawl; no page is fetched twice under one key. The journal verifies
// with the seals of both cells, and the bundle offline. The envelope names
// a, b, a's epoch, the journal's head at the handoff and the run's token,
// and is the run's chain in the cluster's bucket. Sent to b again, the
// same envelope is refused as replayed, and changes nothing.
func TestHandoffMovesALiveCrawl(t *testing.T) {
	ctx := context.Background()
	hc := newHandoffCluster(t)
	a, b := hc.cells[0], hc.cells[1]
	g := newGatedSite(t)
	run := hc.crawlInFlight(t, g)
	info, err := hc.handOff(t, g, run, "b")
	if err != nil {
		t.Fatal(err)
	}
	if info.From != hex.EncodeToString(hc.pubs[0]) || info.To != hex.EncodeToString(hc.pubs[1]) || info.Epoch != 1 {
		t.Fatalf("handoff answer %+v", info)
	}
	hc.completed(t, run)
	if a.cell.Host.Live(run) {
		t.Fatal("cell a still executes the run")
	}
	g.exactlyOnce(t)

	sum, leases, before := leaseEntries(t, b.cell.Journal, run, hc.pubs[:2]...)
	if sum.Cells[hex.EncodeToString(hc.pubs[0])] == 0 || sum.Cells[hex.EncodeToString(hc.pubs[1])] == 0 {
		t.Fatalf("seals by cell: %v, want both a and b", sum.Cells)
	}
	if len(leases) != 2 || !bytes.Equal(leases[0].Cell, hc.pubs[0]) || !bytes.Equal(leases[1].Cell, hc.pubs[1]) || leases[1].Epoch != 2 {
		t.Fatalf("lease entries: %d", len(leases))
	}
	env := leases[1].Request
	if hex.EncodeToString(handoff.Sum(env)) != info.Envelope {
		t.Fatalf("b's lease entry carries envelope %x, a sent %s", handoff.Sum(env), info.Envelope)
	}
	// The envelope, as an auditor reads it from the journal.
	var msg cose.Sign1Message
	if err := msg.UnmarshalCBOR(env); err != nil {
		t.Fatal(err)
	}
	verifier, err := cose.NewVerifier(cose.AlgorithmEdDSA, hc.pubs[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := msg.Verify(nil, verifier); err != nil {
		t.Fatalf("the journaled envelope does not verify with a's key: %v", err)
	}
	var p handoff.Payload
	if err := abi.Unmarshal(msg.Payload, &p); err != nil {
		t.Fatal(err)
	}
	if p.Run != run || !bytes.Equal(p.From, hc.pubs[0]) || !bytes.Equal(p.To, hc.pubs[1]) || p.Epoch != 1 || p.Prev != nil {
		t.Fatalf("envelope payload %+v", p)
	}
	if !bytes.Equal(p.Head, before[1]) {
		t.Fatalf("the envelope's head %x, the journal's entry before b's lease %x", p.Head, before[1])
	}
	if !bytes.Equal(p.Token, sum.Header.Token) {
		t.Fatal("the envelope's token is not the run's")
	}
	chain, err := handoff.ChainOn(b.cell.Cluster.Handoffs()).Envelopes(ctx, run)
	if err != nil || len(chain) != 1 || !bytes.Equal(chain[0], env) {
		t.Fatalf("the run's envelope chain: %d envelopes, %v", len(chain), err)
	}
	if l, ok, err := b.cell.Cluster.Store.Lease(ctx, run); err != nil || !ok || !bytes.Equal(l.Owner, hc.pubs[1]) || l.Epoch != 2 {
		t.Fatalf("lease after the run: %+v %v %v", l, ok, err)
	}

	var bundle bytes.Buffer
	if _, err := replay.ExportTo(ctx, b.cell.Journal, run, b.cell.Key, replay.EngineSettings{}, &bundle); err != nil {
		t.Fatal(err)
	}
	if _, err := replay.VerifyBundle(ctx, bundle.Bytes(), replay.VerifyOptions{Engine: testutil.SharedEngine(t), Trusted: hc.pubs[:2]}); err != nil {
		t.Fatal(err)
	}

	// The same envelope again, as an eavesdropper on the cluster's bus
	// would send it: refused for its spent nonce; nothing moves.
	rep := sendEnvelope(t, hc.nc, hc.pubs[1], env)
	if rep.Accepted || rep.Reason != "replayed" {
		t.Fatalf("the replayed envelope: %+v, want refused as replayed", rep)
	}
	after, leasesAfter, _ := leaseEntries(t, b.cell.Journal, run, hc.pubs[:2]...)
	if after.Entries != sum.Entries || len(leasesAfter) != 2 {
		t.Fatalf("the replayed envelope changed the journal: %d entries, was %d", after.Entries, sum.Entries)
	}
	waitFor(t, "cell b to log the refusal", func() bool {
		return b.logged("handoff: refused an envelope for run " + run.String() + " (replayed)")
	})
}

type envelopeReply struct {
	Run      string `json:"run"`
	Accepted bool   `json:"accepted"`
	Reason   string `json:"reason"`
	Error    string `json:"error"`
}

// sendEnvelope sends raw to the cell to on its handoff subject.
func sendEnvelope(t *testing.T, nc *nats.Conn, to ed25519.PublicKey, raw []byte) envelopeReply {
	t.Helper()
	msg, err := nc.Request(cell.HandoffSubject(to), raw, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var rep envelopeReply
	if err := json.Unmarshal(msg.Data, &rep); err != nil {
		t.Fatalf("reply %q: %v", msg.Data, err)
	}
	return rep
}

// sealTyped seals p as handoff.Seal does, but under the protected typ
// given.
func sealTyped(key ed25519.PrivateKey, p handoff.Payload, typ string) ([]byte, error) {
	p.From = key.Public().(ed25519.PublicKey)
	p.Audience = handoff.AudiencePrefix + hex.EncodeToString(p.To)
	p.Nonce = make([]byte, handoff.NonceSize)
	rand.Read(p.Nonce)
	payload, err := abi.Marshal(&p)
	if err != nil {
		return nil, err
	}
	signer, err := cose.NewSigner(cose.AlgorithmEdDSA, key)
	if err != nil {
		return nil, err
	}
	msg := cose.Sign1Message{Headers: cose.Headers{Protected: cose.ProtectedHeader{
		cose.HeaderLabelAlgorithm: cose.AlgorithmEdDSA,
		cose.HeaderLabelType:      typ,
		cose.HeaderLabelKeyID:     []byte(p.From),
	}}, Payload: payload}
	if err := msg.Sign(rand.Reader, nil, signer); err != nil {
		return nil, err
	}
	return msg.MarshalCBOR()
}

// TestHandoffRefusals hands a live crawl from a to b with an envelope
// that is wrong in one way each, sealed in place of a's own (as a faulty
// or hostile source would): b refuses it for that reason, before it
// touches the lease, and says so; a takes its lease back and finishes the
// crawl itself, each page fetched once. Nothing of b is in the journal,
// which verifies with a's key alone, and the lease is a's.
func TestHandoffRefusals(t *testing.T) {
	ctx := context.Background()
	hc := newHandoffCluster(t)
	a, b := hc.cells[0], hc.cells[1]
	otherHead := sha256.Sum256([]byte("another head"))
	for _, c := range []struct {
		name string
		seal func(key ed25519.PrivateKey, p handoff.Payload) ([]byte, error)
		want error
	}{
		{"Expired", func(key ed25519.PrivateKey, p handoff.Payload) ([]byte, error) {
			p.Expires = time.Now().Add(-time.Second).UnixNano()
			return handoff.Seal(key, p)
		}, handoff.ErrExpired},
		{"ForAnotherCell", func(key ed25519.PrivateKey, p handoff.Payload) ([]byte, error) {
			p.To = hc.pubs[2] // addressed to c, sent to b
			return handoff.Seal(key, p)
		}, handoff.ErrAudience},
		{"ConfusedPayloadType", func(key ed25519.PrivateKey, p handoff.Payload) ([]byte, error) {
			return sealTyped(key, p, capability.ContentType)
		}, handoff.ErrPayloadType},
		{"UntrustedKey", func(_ ed25519.PrivateKey, p handoff.Payload) ([]byte, error) {
			return handoff.Seal(hc.untrust, p)
		}, handoff.ErrUntrusted},
		{"StaleEpoch", func(key ed25519.PrivateKey, p handoff.Payload) ([]byte, error) {
			p.Epoch--
			return handoff.Seal(key, p)
		}, handoff.ErrEpoch},
		{"WrongJournalHead", func(key ed25519.PrivateKey, p handoff.Payload) ([]byte, error) {
			p.Head = otherHead[:]
			return handoff.Seal(key, p)
		}, handoff.ErrHead},
		{"AnotherToken", func(key ed25519.PrivateKey, p handoff.Payload) ([]byte, error) {
			tok, err := capability.Issue(key, capability.Claims{Caps: capability.Caps{Run: &capability.Unit{}},
				NotBefore: time.Now().Add(-time.Minute), Expires: time.Now().Add(time.Hour)})
			if err != nil {
				return nil, err
			}
			p.Token = tok
			return handoff.Seal(key, p)
		}, handoff.ErrToken},
		{"NotInTheRunsChain", func(key ed25519.PrivateKey, p handoff.Payload) ([]byte, error) {
			p.Prev = otherHead[:] // names an envelope the run never had
			return handoff.Seal(key, p)
		}, handoff.ErrReplayed},
	} {
		t.Run(c.name, func(t *testing.T) {
			cell.SetHandoffSeal(a.srv, c.seal)
			defer cell.SetHandoffSeal(a.srv, nil)
			g := newGatedSite(t)
			run := hc.crawlInFlight(t, g)
			_, err := hc.handOff(t, g, run, hex.EncodeToString(hc.pubs[1]))
			if !errors.Is(err, cell.ErrHandoffRefused) || !errors.Is(err, c.want) {
				t.Fatalf("handoff: %v, want refused with %v", err, c.want)
			}
			waitFor(t, "cell b to log the refusal", func() bool {
				return b.logged(fmt.Sprintf("(%s): %s", handoff.Reason(c.want), c.want.Error()))
			})
			// The run is intact: a finishes it.
			hc.completed(t, run)
			g.exactlyOnce(t)
			sum, leases, _ := leaseEntries(t, a.cell.Journal, run, hc.pubs[0])
			if len(sum.Cells) != 1 || len(leases) != 2 || leases[1].Epoch != 2 || leases[1].Request != nil {
				t.Fatalf("seals %v, %d lease entries: want a's alone, its resume after the refusal the second", sum.Cells, len(leases))
			}
			if l, ok, err := a.cell.Cluster.Store.Lease(ctx, run); err != nil || !ok || !bytes.Equal(l.Owner, hc.pubs[0]) || l.Epoch != 2 {
				t.Fatalf("lease after the run: %+v %v %v", l, ok, err)
			}
			if b.cell.Host.Live(run) {
				t.Fatal("cell b executes the run")
			}
		})
	}
}

// TestHandoffRefusedByAdmission hands a live crawl from a to b, whose
// scheduler admits only runs with a model_calls ceiling (the crawl's grant
// sets none): b's admission refuses the run as it would refuse its
// submission, before it takes the lease, and says why; a takes its lease
// back and finishes the crawl, each page fetched once. Nothing of b is in
// the journal, and b counts the refusal.
func TestHandoffRefusedByAdmission(t *testing.T) {
	ctx := context.Background()
	hc := newHandoffClusterSched(t, map[string]cell.SchedulerOptions{"b": {RunBudget: "model_calls=10"}})
	a, b := hc.cells[0], hc.cells[1]
	g := newGatedSite(t)
	run := hc.crawlInFlight(t, g)
	_, err := hc.handOff(t, g, run, "b")
	if !errors.Is(err, cell.ErrHandoffRefused) || !errors.Is(err, handoff.ErrAdmission) {
		t.Fatalf("handoff to a cell that does not admit the run: %v, want refused for admission", err)
	}
	waitFor(t, "cell b to log the refusal", func() bool {
		return b.logged("handoff: refused an envelope for run " + run.String() + " (admission)")
	})
	if got := b.srv.SchedulerStats().Refused[cell.RefusedBudget]; got != 1 {
		t.Fatalf("cell b counted %d budget refusals, want 1", got)
	}
	hc.completed(t, run)
	g.exactlyOnce(t)
	sum, leases, _ := leaseEntries(t, a.cell.Journal, run, hc.pubs[0])
	if len(sum.Cells) != 1 || len(leases) != 2 || leases[1].Epoch != 2 || leases[1].Request != nil {
		t.Fatalf("seals %v, %d lease entries: want a's alone, its resume after the refusal the second", sum.Cells, len(leases))
	}
	if l, ok, err := a.cell.Cluster.Store.Lease(ctx, run); err != nil || !ok || !bytes.Equal(l.Owner, hc.pubs[0]) {
		t.Fatalf("lease after the run: %+v %v %v", l, ok, err)
	}
	if b.cell.Host.Live(run) {
		t.Fatal("cell b executes the run")
	}
}

// TestHandoffGivesBackTheCellBudget: a run holds its share of its cell's
// budget (SchedulerOptions.CellBudget) while it runs there; handed to
// another cell, it holds none of the source's any more, so that the
// source admits as much new work as before. (Before the fix, the source's
// end hook saw the run still running, elsewhere, and kept the share until
// a restart.)
func TestHandoffGivesBackTheCellBudget(t *testing.T) {
	hc, held, tok := budgetedCluster(t)
	g := newGatedSite(t)
	run := crawlInFlightToken(t, hc.cells[0], g, tok)
	if runs, n := held(); runs != 1 || n != 1000 {
		t.Fatalf("with the crawl running on a, %d runs hold %d of a's cell budget, want 1 holding 1000", runs, n)
	}
	if _, err := hc.handOff(t, g, run, "b"); err != nil {
		t.Fatal(err)
	}
	if runs, n := held(); runs != 0 || n != 0 {
		t.Fatalf("with the crawl handed to b, %d runs hold %d of a's cell budget, want none", runs, n)
	}
	hc.completed(t, run)
	if hc.cells[0].cell.Host.Live(run) {
		t.Fatal("cell a executes the run")
	}
}

// TestLeaseLostGivesBackTheCellBudget: a run whose lease another cell
// takes (here handed to cell b behind cell a's back, as a takeover by a
// peer whose clock judged the lease expired would) stops on a at its next
// renewal, and holds no share of a's cell budget from then on.
func TestLeaseLostGivesBackTheCellBudget(t *testing.T) {
	ctx := context.Background()
	hc, held, tok := budgetedCluster(t)
	a := hc.cells[0]
	g := newGatedSite(t)
	run := crawlInFlightToken(t, a, g, tok)
	if runs, n := held(); runs != 1 || n != 1000 {
		t.Fatalf("with the crawl running on a, %d runs hold %d of a's cell budget, want 1 holding 1000", runs, n)
	}
	l, ok, err := a.cell.Cluster.Store.Lease(ctx, run)
	if err != nil || !ok {
		t.Fatalf("the crawl's lease: %v %v", ok, err)
	}
	if _, err := a.cell.Cluster.Store.Hand(ctx, l, hc.pubs[1], time.Now().Add(time.Hour).UnixNano()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "cell a to stop the run", func() bool { return !a.cell.Host.Live(run) })
	waitFor(t, "cell a's budget to be given back", func() bool { runs, n := held(); return runs == 0 && n == 0 })
}

// budgetedCluster is a handoff cluster whose cell a has a cell budget of
// 1500 HTTP requests, a function that returns how many runs hold how much
// of it, and a token of cell a for the crawler's grant with a budget of
// 1000 HTTP requests.
func budgetedCluster(t *testing.T) (*handoffCluster, func() (int, uint64), []byte) {
	t.Helper()
	hc := newHandoffClusterSched(t, map[string]cell.SchedulerOptions{"a": {CellBudget: "http_requests=1500"}})
	a := hc.cells[0]
	gr, err := host.LoadGrant(testutil.RepoRoot() + "/examples/crawler/grant.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tok := limitedToken(t, a.cell.Key, gr, 1000, time.Now())
	held := func() (int, uint64) {
		cb := a.srv.SchedulerStats().CellBudget
		if cb == nil || len(cb.Dims) != 1 {
			t.Fatalf("cell a's budget: %+v", cb)
		}
		return cb.Runs, cb.Dims[0].Held
	}
	return hc, held, tok
}

// TestHandoffSubjectUnreachableByAgent: an agent of cell a granted http to
// 127.0.0.1 and localhost (any port), where the cluster's NATS server
// listens, tries to reach the bus with what it was granted: a GET of the
// server's port, and a request whose method, path and body are NATS
// protocol publishing to cell b's handoff subject, by address and by
// name. Each is denied before a byte is sent, naming the NATS server, and
// cell b receives nothing on its handoff subject.
func TestHandoffSubjectUnreachableByAgent(t *testing.T) {
	hc := newHandoffCluster(t)
	a := hc.cells[0]
	u, err := url.Parse(hc.natsURL)
	if err != nil {
		t.Fatal(err)
	}
	subject := cell.HandoffSubject(hc.pubs[1])
	got := make(chan *nats.Msg, 4)
	sub, err := hc.nc.ChanSubscribe(subject, got)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	pub := "CONNECT {}\r\nPUB " + subject + " 4\r\nfake\r\n"
	reqs := []map[string]any{
		{"url": "http://" + u.Host + "/"},
		{"method": "PUB", "url": "http://" + u.Host + "/" + subject, "body": pub},
		{"method": "POST", "url": "http://localhost:" + u.Port() + "/", "body": pub},
	}
	in, _ := json.Marshal(reqs)
	g := &host.Grant{Run: &host.RunGrant{}, HTTP: &host.HTTPGrant{Hosts: []string{"127.0.0.1", "localhost"}}}
	res, err := a.cell.Host.Run(context.Background(), host.RunSpec{Code: testutil.BuildGo(t, "host/testdata/agents/egress"), Grant: g, Input: in})
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("run: %v %+v", err, res)
	}
	var lines []string
	if err := json.Unmarshal(res.Output, &lines); err != nil || len(lines) != len(reqs) {
		t.Fatalf("output %s: %v", res.Output, err)
	}
	for i, l := range lines {
		if !strings.HasPrefix(l, "denied: ") || !strings.Contains(l, "(the cluster's NATS server on 127.0.0.1:"+u.Port()+")") {
			t.Errorf("request %d: the agent got %q, want a denial naming the NATS server", i+1, l)
		}
	}
	// A message on b's subject, were one sent, is delivered before the
	// one this test sends last on the same connection.
	if err := hc.nc.Publish(subject, []byte("marker")); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		if string(m.Data) != "marker" {
			t.Fatalf("cell b's handoff subject received %q from the agent", m.Data)
		}
	case <-time.After(time.Minute):
		t.Fatal("the marker never arrived")
	}
}

// TestHandoffErrors: a handoff to a cell that is not in the cluster, of a
// run that is not executing here, of an unknown run or of a finished one,
// is refused before anything stops, with the reason and a hint.
func TestHandoffErrors(t *testing.T) {
	ctx := context.Background()
	hc := newHandoffCluster(t)
	a := hc.cells[0]
	g := newGatedSite(t)
	run := hc.crawlInFlight(t, g)
	_, err := a.client.Handoff(ctx, run.String(), "nowhere")
	var re *cell.RemoteError
	if !errors.Is(err, cell.ErrNoCell) || !errors.As(err, &re) || re.Hint() == "" {
		t.Fatalf("handoff to an unknown cell: %v, want ErrNoCell with a hint", err)
	}
	if _, err := a.client.Handoff(ctx, run.String(), "a"); !errors.Is(err, cell.ErrNoCell) {
		t.Fatalf("handoff to the cell itself: %v, want ErrNoCell", err)
	}
	if !a.cell.Host.Live(run) || a.cell.Host.Stopping(run) {
		t.Fatal("a refused handoff stopped the run")
	}
	if _, err := hc.cells[1].client.Handoff(ctx, run.String(), "c"); !errors.Is(err, host.ErrNotLive) {
		t.Fatalf("handoff from a cell that does not execute the run: %v, want ErrNotLive", err)
	}
	if _, err := a.client.Handoff(ctx, journal.NewRunID(time.Now()).String(), "b"); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("handoff of an unknown run: %v, want not found", err)
	}
	g.open()
	hc.completed(t, run)
	if _, err := a.client.Handoff(ctx, run.String(), "b"); !errors.Is(err, host.ErrFinished) {
		t.Fatalf("handoff of a finished run: %v, want ErrFinished", err)
	}
}
