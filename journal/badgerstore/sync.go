package badgerstore

import "sync"

// groupSync makes commits durable in groups. The store writes with badger's
// SyncWrites off; a caller that needs durability joins the next sync round
// after its commit, and one goroutine runs the rounds back to back. Every
// commit that joined a round was written before the round's fsync began, so
// one fsync covers all of them: many concurrent runs pay for one fsync, not
// one each.
type groupSync struct {
	sync func() error

	mu   sync.Mutex
	next *round
	wake chan struct{}
	quit chan struct{}
	done chan struct{}
}

type round struct {
	done chan struct{}
	err  error
}

func newGroupSync(sync func() error) *groupSync {
	g := &groupSync{sync: sync, wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go g.loop()
	return g
}

// wait returns once everything the caller wrote before calling it is on
// disk.
func (g *groupSync) wait() error {
	g.mu.Lock()
	r := g.next
	if r == nil {
		r = &round{done: make(chan struct{})}
		g.next = r
		select {
		case g.wake <- struct{}{}:
		default:
		}
	}
	g.mu.Unlock()
	<-r.done
	return r.err
}

func (g *groupSync) loop() {
	defer close(g.done)
	for {
		select {
		case <-g.quit:
			return
		case <-g.wake:
		}
		g.mu.Lock()
		r := g.next
		g.next = nil
		g.mu.Unlock()
		if r != nil {
			r.err = g.sync()
			close(r.done)
		}
	}
}

// close stops the loop after the round in progress.
func (g *groupSync) close() {
	close(g.quit)
	<-g.done
}
