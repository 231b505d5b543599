package badgerstore

import (
	"fmt"
	"sync"
	"testing"
)

func TestCellRecords(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CellPut("votes", "run1/2/a", []byte("A")); err != nil {
		t.Fatal(err)
	}
	if err := st.CellPut("votes", "run1/2/b", []byte("B")); err != nil {
		t.Fatal(err)
	}
	if err := st.CellPut("votes", "run2/1/a", []byte("C")); err != nil {
		t.Fatal(err)
	}
	if err := st.CellPut("other", "run1/2/z", []byte("Z")); err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := st.CellList("votes", "run1/", func(k string, v []byte) error {
		got = append(got, k+"="+string(v))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[run1/2/a=A run1/2/b=B]" {
		t.Fatalf("CellList = %v", got)
	}
	// Of many concurrent creates of one key, exactly one wins.
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := st.CellCreate("firings", "t/100", []byte{byte(i)})
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				won++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if won != 1 {
		t.Fatalf("%d creates of one key won, want 1", won)
	}
	if err := st.CellDelete("votes", "run1/2/a"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := st.CellGet("votes", "run1/2/a"); ok {
		t.Fatal("a deleted record is still there")
	}
	if _, _, err := st.CellGet("bad\x00table", "k"); err == nil {
		t.Fatal("a table with a NUL byte was taken")
	}
	// The records survive a reopen.
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if v, ok, err := st.CellGet("votes", "run2/1/a"); err != nil || !ok || string(v) != "C" {
		t.Fatalf("after reopen: %q %v %v", v, ok, err)
	}
}
