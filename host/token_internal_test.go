package host

import (
	"fmt"
	"testing"
	"time"
)

// TestDevTokensKeepsAtMostTheirBound: the tokens a host keeps for plain
// grants stay at devTokensMax however many grants it sees; those no longer
// reusable go first, and a full set of fresh ones is dropped whole.
func TestDevTokensKeepsAtMostTheirBound(t *testing.T) {
	var d devTokens
	t0 := time.Now()
	for i := range devTokensMax {
		d.put(fmt.Sprint("old", i), devToken{issued: t0})
	}
	later := t0.Add(devTokenReuse)
	d.put("new", devToken{issued: later})
	if len(d.m) != 1 {
		t.Fatalf("after a put a minute later: %d tokens kept, want 1 (the stale ones dropped)", len(d.m))
	}
	for i := range 3 * devTokensMax {
		d.put(fmt.Sprint("fresh", i), devToken{issued: later})
		if len(d.m) > devTokensMax {
			t.Fatalf("%d tokens kept after %d puts, over the bound of %d", len(d.m), i+1, devTokensMax)
		}
	}
	if _, ok := d.get(fmt.Sprint("fresh", 3*devTokensMax-1), later); !ok {
		t.Fatal("the last token put is not kept")
	}
}
