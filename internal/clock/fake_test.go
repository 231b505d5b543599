package clock

import (
	"sync"
	"testing"
	"time"
)

func TestFakeFiresInOrderWhenMoved(t *testing.T) {
	var c Clock = NewFake(time.Unix(1000, 0))
	f := c.(*Fake)
	var mu sync.Mutex
	var wg sync.WaitGroup
	var got []int
	for i, d := range []time.Duration{3 * time.Second, time.Second, 2 * time.Second} {
		wg.Add(1)
		c.AfterFunc(d, func() { mu.Lock(); got = append(got, i); mu.Unlock(); wg.Done() })
	}
	stopped := c.AfterFunc(time.Second, func() { t.Error("a stopped timer fired") })
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop reports wrongly")
	}
	if n := f.Advance(500 * time.Millisecond); n != 0 {
		t.Fatalf("%d timers fired before their time", n)
	}
	if n := f.Advance(5 * time.Second); n != 3 {
		t.Fatalf("Advance fired %d timers, want 3", n)
	}
	wg.Wait()
	if len(got) != 3 || f.Pending() != 0 {
		t.Fatalf("fired %v, %d pending", got, f.Pending())
	}
	if !c.Now().Equal(time.Unix(1005, 500e6)) {
		t.Fatalf("Now = %v", c.Now())
	}
}
