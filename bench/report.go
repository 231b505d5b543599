package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// Report is everything one harness run measured. It is written as
// results.json; Markdown renders it as results.md.
type Report struct {
	Schema    string   `json:"schema"`
	Started   string   `json:"started"`
	DurationS float64  `json:"duration_s"`
	Machine   Machine  `json:"machine"`
	Config    Config   `json:"config"`
	Figures   []Figure `json:"figures"`
	// Notes are caveats that apply to the whole run.
	Notes []string `json:"notes,omitempty"`
}

// Machine describes where the figures were taken.
type Machine struct {
	GOOS       string  `json:"goos"`
	GOARCH     string  `json:"goarch"`
	CPUs       int     `json:"cpus"`
	GOMAXPROCS int     `json:"gomaxprocs"`
	Go         string  `json:"go"`
	LoadAvg    string  `json:"loadavg,omitempty"`
	FsyncUS    float64 `json:"fsync_us"`
}

// Figure is one measured figure, the floor it stands on and the goal it is
// held to.
type Figure struct {
	// ID is the figure's number in the benchmark plan, e.g. "3b".
	ID   string `json:"id"`
	Name string `json:"name"`
	// Measures says exactly what was timed.
	Measures string  `json:"measures"`
	Value    float64 `json:"value"`
	Unit     string  `json:"unit"`
	// Better is "lower" or "higher".
	Better string `json:"better"`
	Floor  *Floor `json:"floor,omitempty"`
	// Ratio is Value / Floor.Value; 0 without a floor.
	Ratio float64 `json:"ratio,omitempty"`
	Goal  *Goal   `json:"goal,omitempty"`
	// Met is whether every bound of the goal holds; null without a goal.
	Met *bool `json:"met"`
	// Samples are the per-repetition values the figure is the median of.
	Samples []float64 `json:"samples,omitempty"`
	// Extra holds secondary figures (breakdowns, percentiles), in Unit
	// unless their key names another unit.
	Extra map[string]float64 `json:"extra,omitempty"`
	Notes string             `json:"notes,omitempty"`
	// LoadAvg is the machine's load average (1, 5, 15 min) when the
	// figure's measurement began: other work on the machine slows both
	// ours and the floor, but not always alike.
	LoadAvg string `json:"loadavg,omitempty"`
	// OtherCPUs is the CPU time other processes used while the figure
	// (with its floor) was measured, divided by its wall time: how many of
	// the machine's CPUs were not the harness's. Negative: unknown.
	OtherCPUs float64 `json:"other_cpus"`
}

// Floor is what a figure is compared with: the same work done by the bare
// layer below ours.
type Floor struct {
	Name     string    `json:"name"`
	Measures string    `json:"measures"`
	Value    float64   `json:"value"`
	Unit     string    `json:"unit"`
	Samples  []float64 `json:"samples,omitempty"`
}

// Goal bounds a figure. Unset bounds do not apply.
type Goal struct {
	Text     string   `json:"text"`
	MaxValue *float64 `json:"max_value,omitempty"`
	MinValue *float64 `json:"min_value,omitempty"`
	MaxRatio *float64 `json:"max_ratio,omitempty"`
	MinRatio *float64 `json:"min_ratio,omitempty"`
}

func ptr(f float64) *float64 { return &f }

// settle computes the ratio and whether the goal is met.
func (f *Figure) settle() {
	if f.Floor != nil && f.Floor.Value != 0 {
		f.Ratio = f.Value / f.Floor.Value
	}
	if f.Goal == nil {
		return
	}
	ok := true
	g := f.Goal
	if g.MaxValue != nil && f.Value > *g.MaxValue {
		ok = false
	}
	if g.MinValue != nil && f.Value < *g.MinValue {
		ok = false
	}
	if g.MaxRatio != nil && (f.Floor == nil || f.Ratio > *g.MaxRatio) {
		ok = false
	}
	if g.MinRatio != nil && (f.Floor == nil || f.Ratio < *g.MinRatio) {
		ok = false
	}
	f.Met = &ok
}

// WriteJSON writes r as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Markdown renders r as a table with one row per figure, then what each
// figure measures.
func (r *Report) Markdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# agentrt benchmarks\n\n")
	fmt.Fprintf(&b, "%s, %s/%s, %d CPUs (GOMAXPROCS %d), %s, fsync %.0f us", r.Started, r.Machine.GOOS, r.Machine.GOARCH,
		r.Machine.CPUs, r.Machine.GOMAXPROCS, r.Machine.Go, r.Machine.FsyncUS)
	if r.Machine.LoadAvg != "" {
		fmt.Fprintf(&b, ", load %s", r.Machine.LoadAvg)
	}
	fmt.Fprintf(&b, "; harness took %.1f s.\n\n", r.DurationS)
	fmt.Fprintf(&b, "| # | figure | ours | floor | ratio | goal | met | noise |\n")
	fmt.Fprintf(&b, "|---|---|--:|--:|--:|---|---|--:|\n")
	for _, f := range r.Figures {
		floor, ratio := "-", "-"
		if f.Floor != nil {
			floor = fmt.Sprintf("%s (%s)", num(f.Floor.Value, f.Floor.Unit), f.Floor.Name)
			if f.Ratio != 0 {
				ratio = fmt.Sprintf("%.2fx", f.Ratio)
			}
		}
		goal, met := "-", "-"
		if f.Goal != nil {
			goal = f.Goal.Text
		}
		if f.Met != nil {
			met = "yes"
			if !*f.Met {
				met = "**NO**"
			}
		}
		noise := "-"
		if f.OtherCPUs >= 0 {
			noise = fmt.Sprintf("%.2f", f.OtherCPUs)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", f.ID, f.Name, num(f.Value, f.Unit), floor, ratio, goal, met, noise)
	}
	fmt.Fprintf(&b, "\nRatio is ours / floor. Every figure is the median of its repetitions (samples in results.json). Noise is the CPU other processes used while the figure was measured, in CPUs (0 on an idle machine; the kernel's own threads and interrupts, mostly the I/O of the figure itself, left out).\n")
	fmt.Fprintf(&b, "\n## What each figure measures\n\n")
	for _, f := range r.Figures {
		fmt.Fprintf(&b, "- **%s %s**: %s", f.ID, f.Name, f.Measures)
		if f.Floor != nil {
			fmt.Fprintf(&b, " Floor: %s", f.Floor.Measures)
		}
		if len(f.Extra) > 0 {
			fmt.Fprintf(&b, " Also: %s.", extras(f.Extra))
		}
		if f.Notes != "" {
			fmt.Fprintf(&b, " %s", f.Notes)
		}
		if f.LoadAvg != "" {
			fmt.Fprintf(&b, " (Load average at its start: %s; other processes used %.2f CPUs meanwhile.)", f.LoadAvg, f.OtherCPUs)
		}
		b.WriteString("\n")
	}
	if len(r.Notes) > 0 {
		fmt.Fprintf(&b, "\n## Notes\n\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Table renders the table and the notes, without the descriptions, for
// the terminal.
func (r *Report) Table(w io.Writer) error {
	var md strings.Builder
	if err := r.Markdown(&md); err != nil {
		return err
	}
	s := md.String()
	head, rest, ok := strings.Cut(s, "\n## What each figure measures")
	if ok {
		if _, notes, ok := strings.Cut(rest, "\n## Notes\n"); ok {
			head += "\nNotes:\n" + notes
		}
	}
	_, err := io.WriteString(w, head)
	return err
}

func extras(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s = %s", k, trim(m[k]))
	}
	return strings.Join(parts, ", ")
}

// num formats v with its unit, with as many digits as it deserves.
func num(v float64, unit string) string { return trim(v) + " " + unit }

func trim(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}
