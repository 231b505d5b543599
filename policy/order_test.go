package policy

import (
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

// TestOrderAndDuplicatesChangeNothing is security item 21: for every
// fixture, the policy files reversed, rotated, listed twice, or copied under
// a later name give the same decision on every request (determining and
// erroring ids, messages included) and the same policy hash.
func TestOrderAndDuplicatesChangeNothing(t *testing.T) {
	checked := 0
	for _, path := range fixtureFiles(t) {
		f := readFixture(t, path)
		if f.LoadError != nil {
			continue
		}
		t.Run(filepath.Base(path), func(t *testing.T) {
			plat, cust := platformSources(t, f), sources(t, parityDir, f.Customer)
			base, err := NewEngine(plat, cust)
			if err != nil {
				t.Fatal(err)
			}
			for name, v := range variants(plat, cust) {
				e, err := NewEngine(v[0], v[1])
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if e.Hash() != base.Hash() {
					t.Errorf("%s: policy hash changed", name)
				}
				for i, r := range f.Requests {
					req := f.request(t, r)
					if got, want := e.Decide(req), base.Decide(req); !reflect.DeepEqual(got, want) {
						t.Errorf("%s: request %d (%s):\n got  %+v\n want %+v", name, i, r.Description, got, want)
					}
					checked++
				}
			}
		})
	}
	if checked == 0 {
		t.Fatal("no request was checked")
	}
}

// variants returns the platform and customer sources rearranged in ways
// that must not matter.
func variants(plat, cust []Source) map[string][2][]Source {
	rev := func(s []Source) []Source { r := slices.Clone(s); slices.Reverse(r); return r }
	rot := func(s []Source) []Source {
		if len(s) < 2 {
			return slices.Clone(s)
		}
		return append(slices.Clone(s[1:]), s[0])
	}
	twice := func(s []Source) []Source { return append(slices.Clone(s), s...) }
	// A copy under a name that sorts after every original: the originals
	// keep the smaller ids. (A copy under a smaller name would lend its
	// ids to the duplicates, by the smallest-id rule.)
	copied := func(s []Source) []Source {
		out := slices.Clone(s)
		for _, src := range s {
			out = append(out, Source{Name: "~copy-of-" + src.Name, Text: src.Text})
		}
		return out
	}
	v := map[string][2][]Source{
		"reversed":           {rev(plat), rev(cust)},
		"rotated":            {rot(plat), rot(cust)},
		"listed twice":       {twice(plat), twice(cust)},
		"copied":             {copied(plat), copied(cust)},
		"copied and reverse": {rev(copied(plat)), rev(copied(cust))},
	}
	for i := range cust {
		// One duplicate at a time, at the front.
		v[fmt.Sprintf("customer file %d duplicated first", i)] = [2][]Source{plat, append([]Source{cust[i]}, cust...)}
	}
	return v
}
