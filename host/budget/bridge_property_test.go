package budget

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"pgregory.net/rapid"
)

// The budget bridge as the host runs it (host/budget.go): a child's
// ceilings are reserved in its parent's ledger (ReserveCarve), the child's
// own ledger runs apart, and when the child ends its parent settles the
// carve at what the child's journal says it spent: its settles, plus, for
// a child cancelled with reservations open (its own calls' or its
// children's carves), those at their worst case (SettleCarve).

// bridgeDims are the dimensions the trees below limit and carve: steps
// are counted by each run (Step) and reserved by its parent's carve like
// the others. The wall clock is limited too, and checked apart (a child's
// deadline is never past its parent's).
var bridgeDims = []Dim{MicroUSD, ToolCalls, HTTPRequests, Steps}

// node is one run of a tree: its ledger, the carve that holds its
// ceilings in its parent, its own open reservations and what its own
// calls actually spent.
type node struct {
	l      *Ledger
	parent *node
	carve  Reservation
	kids   []*node
	open   []Reservation
	ended  bool
	// start is when the run started, on the tree's clock, and deadline
	// when its wall-clock ceiling runs out.
	start, deadline uint64
	// actual is what the run's own calls spent (settled) and steps made;
	// wasted what it held at worst case when it was cancelled.
	actual, wasted Amounts
	ops            []Op
}

func (n *node) live() bool { return !n.ended }

// tree is the runs of one root, and the property's bookkeeping.
type tree struct {
	root  *node
	all   []*node
	ceil  Ceilings
	steps uint64
	// forfeit is what cancelled runs' parents held for children that
	// were still running: charged in full, whatever those spent.
	forfeit Amounts
	// now is the tree's clock, in seconds.
	now uint64
}

func newTree(c Ceilings) *tree {
	wall, _ := c.Get(WallSeconds)
	root := &node{l: New(c), deadline: wall}
	return &tree{root: root, all: []*node{root}, ceil: c}
}

// liveNodes returns the runs that have not ended.
func (t *tree) liveNodes() []*node {
	var out []*node
	for _, n := range t.all {
		if n.live() {
			out = append(out, n)
		}
	}
	return out
}

// spawn carves a child of ceilings c out of p, the spawn being one of p's
// steps. A refusal must be right: some dimension of c, steps included,
// does not fit in what p has left, or its wall clock is more than p has
// left.
func (t *tree) spawn(p *node, c Ceilings) (*node, error) {
	t.steps++
	if err := p.l.Step(); err != nil {
		if errors.Is(err, ErrBudget) {
			return nil, nil
		}
		return nil, err
	}
	p.actual[Steps]++
	p.l.Elapse(t.now - p.start)
	spent, reserved := p.l.Spent()
	r, err := p.l.ReserveCarve(t.steps, c)
	if err != nil {
		if errors.Is(err, ErrCarve) {
			if w, _ := c.Get(WallSeconds); t.now < p.deadline && t.now+w <= p.deadline {
				return nil, fmt.Errorf("carve of %ds at %d out of a parent whose deadline is %d: %v", w, t.now, p.deadline, err)
			}
			return nil, nil
		}
		var ex *ExceededError
		if !errors.As(err, &ex) {
			return nil, fmt.Errorf("carve: %v", err)
		}
		max, _ := p.l.Ceilings().Get(ex.Dim)
		want, _ := c.Get(ex.Dim)
		if sat(spent[ex.Dim], reserved[ex.Dim])+want <= max {
			return nil, fmt.Errorf("carve of %s %d refused with %d spent and %d reserved of %d: %v", ex.Dim, want, spent[ex.Dim], reserved[ex.Dim], max, err)
		}
		return nil, nil
	}
	if w, _ := c.Get(WallSeconds); t.now+w > p.deadline {
		return nil, fmt.Errorf("carved %ds at %d out of a parent whose deadline is %d", w, t.now, p.deadline)
	}
	p.ops = append(p.ops, r.Op())
	w, _ := c.Get(WallSeconds)
	k := &node{l: New(c), parent: p, carve: r, start: t.now, deadline: t.now + w}
	p.kids = append(p.kids, k)
	t.all = append(t.all, k)
	return k, nil
}

// spend makes one call of n that reserves a and uses used (at most a).
func (t *tree) spend(n *node, a, used Amounts) error {
	t.steps++
	if err := n.l.Step(); err != nil {
		if errors.Is(err, ErrBudget) {
			return nil
		}
		return err
	}
	n.actual[Steps]++
	r, err := n.l.Reserve(t.steps, a)
	if errors.Is(err, ErrBudget) {
		return nil
	}
	if err != nil {
		return err
	}
	n.ops = append(n.ops, r.Op())
	n.open = append(n.open, r)
	return nil
}

// settle settles n's oldest open call at used (at most what it reserved).
func (t *tree) settle(n *node, frac uint64) error {
	if len(n.open) == 0 {
		return nil
	}
	r := n.open[0]
	n.open = n.open[1:]
	var used Amounts
	for d := range used {
		used[d] = r.Amounts[d] * frac / 4
	}
	o, err := n.l.Settle(r, used)
	if err != nil {
		return err
	}
	n.ops = append(n.ops, o)
	n.actual = n.actual.add(used)
	return nil
}

// childSpent is what the host's Spawner reports of an ended child: what
// its ledger spent and what it still holds.
func childSpent(l *Ledger) Amounts {
	s, r := l.Spent()
	return s.add(r)
}

// end ends n: a completed run settled its calls and its children are
// over; a cancelled one stops with its calls open, after its descendants
// (each cancelled, their parents told nothing: a cancelled run journals
// no more). Then n's parent, still running, settles n's carve.
func (t *tree) end(n *node, cancel bool) error {
	if cancel {
		for _, k := range n.kids {
			if k.live() {
				t.forfeit = t.forfeit.add(k.carve.Amounts)
				if err := t.stop(k); err != nil {
					return err
				}
			}
		}
		for _, r := range n.open {
			n.wasted = n.wasted.add(r.Amounts)
		}
		n.open = nil
	} else {
		for len(n.open) > 0 {
			if err := t.settle(n, 4); err != nil {
				return err
			}
		}
		for _, k := range n.kids {
			if k.live() {
				if err := t.end(k, false); err != nil {
					return err
				}
			}
		}
	}
	n.ended = true
	if p := n.parent; p != nil && p.live() {
		return t.settleCarve(p, n)
	}
	return nil
}

// stop cancels n and its descendants without settling anything in n.
func (t *tree) stop(n *node) error {
	for _, k := range n.kids {
		if k.live() {
			t.forfeit = t.forfeit.add(k.carve.Amounts)
			if err := t.stop(k); err != nil {
				return err
			}
		}
	}
	for _, r := range n.open {
		n.wasted = n.wasted.add(r.Amounts)
	}
	n.open = nil
	n.ended = true
	return nil
}

// settleCarve settles k's carve in p, checking that what k did not spend
// is back in p: p's spent + reserved moves by k's spend minus its carve.
func (t *tree) settleCarve(p, k *node) error {
	spent := childSpent(k.l)
	beforeS, beforeR := p.l.Spent()
	o, err := p.l.SettleCarve(k.carve, spent)
	if err != nil {
		return err
	}
	p.ops = append(p.ops, o)
	afterS, afterR := p.l.Spent()
	for _, d := range bridgeDims {
		if afterR[d] != beforeR[d]-k.carve.Amounts[d] || afterS[d] != beforeS[d]+spent[d] {
			return fmt.Errorf("closing a child of %s %d that spent %d: the parent went from %d+%d to %d+%d", d, k.carve.Amounts[d], spent[d], beforeS[d], beforeR[d], afterS[d], afterR[d])
		}
	}
	return nil
}

// check asserts the bridge's invariants: no run holds more than its
// ceilings, and what the whole tree's calls really spent and hold is
// within the root's ceiling and counted in full by the root.
func (t *tree) check() error {
	var real Amounts
	for _, n := range t.all {
		if n.live() && n.parent != nil && n.deadline > n.parent.deadline {
			return fmt.Errorf("a run's wall clock runs out at %d, its parent's at %d", n.deadline, n.parent.deadline)
		}
		if n.live() {
			s, r := n.l.Spent()
			for _, d := range bridgeDims {
				if max, ok := n.l.Ceilings().Get(d); ok && sat(s[d], r[d]) > max {
					return fmt.Errorf("a run holds %d spent + %d reserved of %s, ceiling %d", s[d], r[d], d, max)
				}
			}
		}
		real = real.add(n.actual).add(n.wasted)
		for _, r := range n.open {
			real = real.add(r.Amounts)
		}
	}
	rs, rr := t.root.l.Spent()
	for _, d := range bridgeDims {
		max, _ := t.ceil.Get(d)
		if real[d] > max {
			return fmt.Errorf("the tree spent and holds %d of %s, the root's ceiling is %d", real[d], d, max)
		}
		if held := sat(rs[d], rr[d]); held < real[d] {
			return fmt.Errorf("the root counts %d of %s, the tree spent and holds %d", held, d, real[d])
		}
	}
	return nil
}

func randCeilings(t *rapid.T, label string) Ceilings {
	return Ceilings{}.
		With(MicroUSD, rapid.Uint64Range(0, 4_000_000).Draw(t, label+"usd")).
		With(ToolCalls, rapid.Uint64Range(0, 12).Draw(t, label+"tools")).
		With(HTTPRequests, rapid.Uint64Range(0, 12).Draw(t, label+"http")).
		With(Steps, rapid.Uint64Range(0, 60).Draw(t, label+"steps")).
		With(WallSeconds, rapid.Uint64Range(0, 700).Draw(t, label+"wall"))
}

// TestBridgeProperty: random interleavings of spawns (at any depth),
// spends, settles, completions, cancels and the passing of time over one
// root of $10, 30 tool calls, 30 HTTP requests, 100 steps and 600 s: after
// every action no run holds more than its ceilings, no run's wall clock
// runs past its parent's, and the tree's real spend (steps included) is
// within the root's ceiling and counted by it; when everything has ended
// the root holds nothing, has spent exactly what the tree's calls and
// steps spent (and what cancelled runs held, at worst case), and every
// ledger's records replay to it.
func TestBridgeProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		c := Ceilings{}.With(MicroUSD, ten).With(ToolCalls, 30).With(HTTPRequests, 30).With(Steps, 100).With(WallSeconds, 600)
		tr := newTree(c)
		for i := range rapid.IntRange(1, 60).Draw(rt, "actions") {
			live := tr.liveNodes()
			if len(live) == 0 {
				break
			}
			n := live[rapid.IntRange(0, len(live)-1).Draw(rt, fmt.Sprintf("run%d", i))]
			var err error
			switch rapid.IntRange(0, 6).Draw(rt, fmt.Sprintf("action%d", i)) {
			case 6:
				tr.now = min(tr.now+rapid.Uint64Range(1, 120).Draw(rt, fmt.Sprintf("secs%d", i)), tr.root.deadline)
			case 0:
				_, err = tr.spawn(n, randCeilings(rt, fmt.Sprintf("c%d", i)))
			case 1, 2:
				a := Amounts{MicroUSD: rapid.Uint64Range(1, 900_000).Draw(rt, fmt.Sprintf("usd%d", i))}
				a[[]Dim{ToolCalls, HTTPRequests}[rapid.IntRange(0, 1).Draw(rt, fmt.Sprintf("dim%d", i))]] = 1
				err = tr.spend(n, a, a)
			case 3:
				err = tr.settle(n, rapid.Uint64Range(0, 4).Draw(rt, fmt.Sprintf("frac%d", i)))
			case 4:
				if n != tr.root {
					err = tr.end(n, false)
				}
			case 5:
				if n != tr.root {
					err = tr.end(n, true)
				}
			}
			if err != nil {
				rt.Fatal(err)
			}
			if err := tr.check(); err != nil {
				rt.Fatalf("after action %d: %v", i, err)
			}
		}
		if err := tr.end(tr.root, false); err != nil {
			rt.Fatal(err)
		}
		if err := tr.check(); err != nil {
			rt.Fatal(err)
		}
		var real Amounts
		for _, n := range tr.all {
			real = real.add(n.actual).add(n.wasted)
		}
		rs, rr := tr.root.l.Spent()
		if !rr.IsZero() || len(tr.root.l.Open()) != 0 {
			rt.Fatalf("the root holds %v after every run ended", rr)
		}
		// Exactly what the tree spent, but for what cancelled runs held
		// for children still running, which is charged whole.
		for _, d := range bridgeDims {
			if rs[d] < real[d] || rs[d] > real[d]+tr.forfeit[d] {
				rt.Fatalf("the root spent %d of %s, its tree %d (and %d held for children of cancelled runs)", rs[d], d, real[d], tr.forfeit[d])
			}
			if tr.forfeit.IsZero() && rs[d] != real[d] {
				rt.Fatalf("the root spent %d of %s, its tree %d", rs[d], d, real[d])
			}
		}
		// Each run's records, in the order it journaled them, rebuild
		// its ledger: the bridge is in the journals on both sides.
		for i, n := range tr.all {
			r, err := Replay(n.l.Ceilings(), n.actual[Steps], n.ops)
			if err != nil {
				rt.Fatalf("run %d: replay: %v", i, err)
			}
			ls, lr := n.l.Spent()
			ps, pr := r.Spent()
			ls[WallSeconds] = 0 // counted from the journal's times
			if ls != ps || lr != pr || r.ChildSteps() != n.l.ChildSteps() {
				rt.Fatalf("run %d: replayed %v+%v, live %v+%v", i, ps, pr, ls, lr)
			}
		}
	})
}

// TestBridgeConcurrent: children carved concurrently out of one parent,
// each spending and spawning grandchildren on goroutines of its own, some
// cancelled with a call open: no parent ever holds more than its
// ceiling, and once all are over the root has spent exactly what the
// tree's calls settled plus what the cancelled ones held, with nothing
// held. (A child ends after its own children here: a cancelled run's
// running children are TestBridgeProperty's.)
func TestBridgeConcurrent(t *testing.T) {
	for seed := range 20 {
		root := New(Ceilings{}.With(MicroUSD, ten).With(HTTPRequests, 40))
		var total sync.Mutex
		var settled, requests uint64
		count := func(usd, reqs uint64) {
			total.Lock()
			settled += usd
			requests += reqs
			total.Unlock()
		}
		var run func(p *Ledger, depth, k int)
		run = func(p *Ledger, depth, k int) {
			c := Ceilings{}.With(MicroUSD, 3_000_000>>depth).With(HTTPRequests, uint64(12>>depth))
			carve, err := p.ReserveCarve(uint64(k), c)
			if err != nil {
				if !errors.Is(err, ErrBudget) {
					t.Error(err)
				}
				return
			}
			child := New(c)
			var kids sync.WaitGroup
			if depth < 2 {
				for g := range 2 {
					kids.Add(1)
					go func() {
						defer kids.Done()
						run(child, depth+1, k*10+g)
					}()
				}
			}
			cancelled := (seed+k)%5 == 0
			for i := range 8 {
				r, err := child.Reserve(uint64(i+1), Amounts{HTTPRequests: 1, MicroUSD: 100_000})
				if err != nil {
					continue
				}
				if cancelled && i == 3 {
					// Cancelled with this call open: its parent charges it
					// at its worst case.
					count(100_000, 1)
					break
				}
				used := uint64((seed*7+k*3+i)%100_000 + 1)
				if _, err := child.Settle(r, Amounts{HTTPRequests: 1, MicroUSD: used}); err != nil {
					t.Error(err)
				}
				count(used, 1)
			}
			kids.Wait()
			s, r := child.Spent()
			if _, err := p.SettleCarve(carve, s.add(r)); err != nil {
				t.Error(err)
			}
			ps, pr := p.Spent()
			for _, d := range []Dim{MicroUSD, HTTPRequests} {
				if max, _ := p.Ceilings().Get(d); sat(ps[d], pr[d]) > max {
					t.Errorf("a parent holds %d + %d of %s, ceiling %d", ps[d], pr[d], d, max)
				}
			}
		}
		var wg sync.WaitGroup
		for k := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				run(root, 0, k+1)
			}()
		}
		wg.Wait()
		s, r := root.Spent()
		if !r.IsZero() || s[MicroUSD] != settled || s[HTTPRequests] != requests {
			t.Fatalf("seed %d: the root spent %v and holds %v, the tree spent $%d and %d requests", seed, s, r, settled, requests)
		}
	}
}
