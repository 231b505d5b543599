package placement

import (
	"fmt"
	"strings"
	"text/tabwriter"
)

// Explain returns the decision as text for people: the cell chosen, the
// weights, each candidate's score and its parts, best first, and each
// refused cell's reasons. Every text in it was validated by Place to hold
// no control character.
func (d *Decision) Explain() string {
	var b strings.Builder
	names := make(map[string]string, len(d.Inputs.Cells))
	for _, c := range d.Inputs.Cells {
		names[c.ID] = c.Name
	}
	name := func(id string) string {
		if n := names[id]; n != "" {
			return n
		}
		return "-"
	}
	if d.Cell == "" {
		b.WriteString("chosen: none, every cell was refused\n")
	} else {
		fmt.Fprintf(&b, "chosen: %s (%s), score %d\n", d.Cell, name(d.Cell), d.Candidates[0].Score.Total)
		if d.Tie {
			fmt.Fprintf(&b, "tie: another candidate scored %d too; the lowest id was chosen\n", d.Candidates[0].Score.Total)
		}
	}
	w := d.Weights
	fmt.Fprintf(&b, "weights: gpu %d, model %d, data %d, cost %d, load %d\n", deref(w.GPU), deref(w.Model), deref(w.Data), deref(w.Cost), deref(w.Load))

	if len(d.Candidates) == 0 {
		b.WriteString("\ncandidates: none\n")
	} else {
		fmt.Fprintf(&b, "\ncandidates (%d), best first; each part is 0 to 1000, score = weighted gpu + model + data + cost - weighted load:\n", len(d.Candidates))
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "  cell\tname\t%6s %5s %5s %5s %5s %5s\n", "score", "gpu", "model", "data", "cost", "load")
		for _, c := range d.Candidates {
			s := c.Score
			fmt.Fprintf(tw, "  %s\t%s\t%6d %5d %5d %5d %5d %5d\n", short(c.Cell), name(c.Cell), s.Total, s.GPU, s.Model, s.Data, s.Cost, s.Load)
		}
		tw.Flush()
	}
	fmt.Fprintf(&b, "\nrefused (%d):\n", len(d.Refused))
	if len(d.Refused) > 0 {
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		for _, r := range d.Refused {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", short(r.Cell), name(r.Cell), r.details("; "))
		}
		tw.Flush()
	}
	return b.String()
}

// details joins the refusal's reasons with sep.
func (r Refusal) details(sep string) string {
	why := make([]string, len(r.Reasons))
	for i, x := range r.Reasons {
		why[i] = x.Detail
	}
	return strings.Join(why, sep)
}

func deref(p *int) int {
	if p == nil {
		return DefaultWeight
	}
	return *p
}
