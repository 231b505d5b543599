package budget

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Row is one dimension of a Report.
type Row struct {
	Dim Dim `json:"-"`
	// Name is the dimension's name (Dim.String).
	Name string `json:"dimension"`
	// Ceiling is nil for an unlimited dimension.
	Ceiling  *uint64 `json:"ceiling"`
	Reserved uint64  `json:"reserved"`
	Spent    uint64  `json:"spent"`
	// Left is ceiling - spent - reserved, at least 0; nil when unlimited.
	Left *uint64 `json:"left"`
	// Over is what was spent beyond the ceiling (settles above their
	// reserves), 0 when none.
	Over uint64 `json:"over,omitempty"`
}

// Report is what `agentrt budget RUN` shows: per dimension, the ceiling,
// what open reservations hold, what was spent and what is left. Money is
// in micro-USD in JSON and in dollars in text.
type Report struct {
	Rows []Row `json:"dimensions"`
	// Open is the number of open reservations (calls in flight, or
	// orphans of a crash not yet resolved).
	Open int `json:"open_reservations"`
}

// Report returns the ledger's report.
func (l *Ledger) Report() Report {
	l.mu.Lock()
	defer l.mu.Unlock()
	rep := Report{Rows: make([]Row, NumDims), Open: len(l.open)}
	for d := range NumDims {
		r := Row{Dim: d, Name: d.String(), Reserved: l.reserved[d], Spent: l.spent[d]}
		if max, ok := l.ceil.Get(d); ok {
			left := uint64(0)
			if used := sat(r.Spent, r.Reserved); used < max {
				left = max - used
			}
			if r.Spent > max {
				r.Over = r.Spent - max
			}
			r.Ceiling, r.Left = &max, &left
		}
		rep.Rows[d] = r
	}
	return rep
}

// Journal is what a report needs of a run's journal.
type Journal struct {
	// Steps is the step of the run's last call entry.
	Steps uint64
	// ElapsedSeconds is the run's wall-clock time so far: from its start
	// entry's time to its last entry's (or now, for a live run).
	ElapsedSeconds uint64
	// Fields are the budget fields of its entries, in journal order.
	Fields [][]byte
}

// ReportFrom returns the report of a run from its journal, under its
// ceilings (CeilingsOf its token's and its grant's budget). Orphans stay
// reserved: the report says what the journal holds. It is all
// `agentrt budget RUN` needs:
//
//	rep, err := budget.ReportFrom(budget.CeilingsOf(tokenBudget, grantBudget), budget.Journal{Steps: last, ElapsedSeconds: secs, Fields: fields})
func ReportFrom(c Ceilings, j Journal) (Report, error) {
	var ops []Op
	for i, f := range j.Fields {
		o, err := DecodeRecord(f)
		if err != nil {
			return Report{}, fmt.Errorf("budget field %d: %w", i, err)
		}
		ops = append(ops, o...)
	}
	l, err := Replay(c, j.Steps, ops)
	if err != nil {
		return Report{}, err
	}
	l.Tick(j.ElapsedSeconds)
	return l.Report(), nil
}

// WriteText writes the report as a table, e.g.
//
//	dimension      ceiling  reserved  spent  left
//	micro_usd      $10      $0        $9.9   $0.1
func (r Report) WriteText(w io.Writer) error {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "dimension\tceiling\treserved\tspent\tleft\t")
	for _, row := range r.Rows {
		ceil, left := "unlimited", "-"
		if row.Ceiling != nil {
			ceil, left = row.Dim.format(*row.Ceiling), row.Dim.format(*row.Left)
		}
		note := ""
		if row.Over > 0 {
			note = "over by " + row.Dim.format(row.Over)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", row.Name, ceil, row.Dim.format(row.Reserved), row.Dim.format(row.Spent), left, note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// The padding of an empty last column is not worth keeping.
	for _, line := range strings.SplitAfter(buf.String(), "\n") {
		if line != "" {
			if _, err := io.WriteString(w, strings.TrimRight(line, " \n")+"\n"); err != nil {
				return err
			}
		}
	}
	_, err := fmt.Fprintf(w, "open reservations: %d\n", r.Open)
	return err
}

// WriteJSON writes the report as indented JSON, one object, newline
// terminated.
func (r Report) WriteJSON(w io.Writer) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
