package main

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/budget"
	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/termtext"
	"github.com/agentrt/agentrt/journal"
	"github.com/spf13/cobra"
)

func (c *cli) journalCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "journal",
		Short: "Inspect run journals",
	}
	var (
		asJSON, summary bool
		trustFile       string
	)
	show := &cobra.Command{
		Use:   "show RUN",
		Short: "Print the entries of a run's journal",
		Long: `Print every entry of a run's journal: its phase, step, op, input and output
hashes, its budget records when the journal has any (the reserve of a
metered call, its settle or release), and whether it is covered by a valid
signature of a trusted cell (by
default this cell; --trust FILE names authorized_keys-style keys). RUN is a run id,
a unique prefix of one, or "last" for the newest run. Unlike replay, show goes
on past a bad entry and marks it.`,
		Example: "  agentrt journal show 0188c3\n  agentrt journal show 0188c3 --json | jq .op",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			st, run, err := c.openRunReader(ctx, args[0])
			if err != nil {
				return err
			}
			defer st.Close()
			trust, err := c.trust(trustFile)
			if err != nil {
				return err
			}
			entries, err := journal.Inspect(ctx, st, run, trust)
			// A journal the store cannot give back whole is shown as far
			// as it reads, and the command fails naming what is missing.
			incomplete := err
			if err != nil && (!errors.Is(err, journal.ErrIncomplete) || len(entries) == 0) {
				return err
			}
			if len(entries) == 0 {
				return fmt.Errorf("run %s: %w", run, journal.ErrNotFound)
			}
			if summary {
				if err := c.printSummary(run, entries); incomplete == nil {
					return err
				}
				return incomplete
			}
			if asJSON {
				enc := json.NewEncoder(c.stdout)
				for _, in := range entries {
					if err := enc.Encode(entryJSON(in)); err != nil {
						return err
					}
				}
				return incomplete
			}
			// A BUDGET column, for a journal with budget records: the
			// reserves, settles and releases of each entry.
			budgeted := slices.ContainsFunc(entries, func(in journal.Inspected) bool { return in.Err == nil && len(in.Entry.Budget) > 0 })
			tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
			header := "SEQ\tPHASE\tSTEP\tOP\tSTATUS\tINPUT\tOUTPUT\tSIG"
			if budgeted {
				header += "\tBUDGET"
			}
			fmt.Fprintln(tw, header)
			bad := 0
			for _, in := range entries {
				if in.Err != nil {
					bad++
					fmt.Fprintf(tw, "%d\tUNDECODABLE\t\t%v\t\t\t\t\n", in.Seq, in.Err)
					continue
				}
				e := in.Entry
				sig := "ok"
				if !in.SigOK {
					sig, bad = "BAD", bad+1
				}
				op := e.Op
				switch e.Phase {
				case journal.PhaseStart:
					op = e.Header.ModuleName
				case journal.PhaseLease:
					op = fmt.Sprintf("epoch %d, cell %x", e.Epoch, e.Cell[:4])
				}
				// The module name and a placeholder op are the submitter's
				// or the guest's words: escaped, as all guest text is on a
				// terminal.
				row := fmt.Sprintf("%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s", e.Seq, e.Phase, stepText(e.Step), termtext.Line(op), statusText(e),
					short(e.InputHash), short(e.OutputHash), sig)
				if budgeted {
					row += "\t" + budgetText(e.Budget)
				}
				fmt.Fprintln(tw, row)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(c.stderr, "%d entries of run %s; %d not covered by a valid signature\n", len(entries), run, bad)
			if incomplete != nil {
				return incomplete
			}
			if bad > 0 {
				return &exitError{1}
			}
			return nil
		},
	}
	show.Flags().BoolVar(&summary, "summary", false, "print calls per op, seals and the run's outcome instead of every entry")
	show.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per entry (seq, phase, step, op, input_hash, output_hash, cell, sig_ok, ...)")
	show.Flags().StringVar(&trustFile, "trust", "", "file of trusted cell keys, one authorized_keys line each (default: this cell's key)")
	cmd.AddCommand(show, c.journalQueryCmd())
	return cmd
}

// printSummary prints what a journal holds in a few lines: the calls per
// op with their outcomes, the seals, and how the run ended.
func (c *cli) printSummary(run journal.RunID, entries []journal.Inspected) error {
	type counts struct{ calls, failed, effects int }
	ops := map[string]*counts{}
	var order []string
	seals, bad := 0, 0
	var end *journal.End
	var fork *journal.Fork
	for _, in := range entries {
		if in.Err != nil || !in.SigOK {
			bad++
		}
		if in.Err != nil {
			continue
		}
		e := in.Entry
		if in.Sealed {
			seals++
		}
		if e.End != nil {
			end = e.End
		}
		if e.Header != nil && e.Header.Fork != nil {
			fork = e.Header.Fork
		}
		if e.Op == "" {
			continue
		}
		n := ops[e.Op]
		if n == nil {
			n = &counts{}
			ops[e.Op] = n
			order = append(order, e.Op)
		}
		switch e.Phase {
		case journal.PhaseIntent:
			n.effects++
		case journal.PhaseCompleted:
			n.calls++
		case journal.PhaseFailed:
			n.calls++
			n.failed++
		}
	}
	fmt.Fprintf(c.stdout, "run %s: %d entries, %d seals, %d not covered by a valid signature\n", run, len(entries), seals, bad)
	if fork != nil {
		fmt.Fprintf(c.stdout, "forked from %s at entry %d: steps 1-%d answered from its journal\n", fork.Parent, fork.Seq, fork.Step)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "OP\tCALLS\tFAILED\tJOURNALED AS")
	for _, op := range order {
		n := ops[op]
		kind := "pure (1 entry)"
		if n.effects > 0 {
			kind = "effect (intent, executing, outcome)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", op, n.calls, n.failed, kind)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	switch {
	case end == nil:
		fmt.Fprintln(c.stdout, "the run has not finished (no end entry)")
	case end.Error != "":
		fmt.Fprintf(c.stdout, "ended %s after %d calls: %s\n", end.Status, end.Steps, termtext.Line(end.Error))
	default:
		fmt.Fprintf(c.stdout, "ended %s after %d calls, output %d bytes\n", end.Status, end.Steps, len(end.Output))
	}
	if bad > 0 {
		return &exitError{1}
	}
	return nil
}

func stepText(step uint64) string {
	if step == 0 {
		return "-"
	}
	return fmt.Sprint(step)
}

func statusText(e *journal.Entry) string {
	switch e.Phase {
	case journal.PhaseCompleted, journal.PhaseFailed:
		return statusName(e.Status)
	case journal.PhaseEnd:
		return string(e.End.Status)
	}
	return ""
}

func short(h []byte) string {
	if len(h) < 6 {
		return hex.EncodeToString(h)
	}
	return hex.EncodeToString(h[:6])
}

func entryJSON(in journal.Inspected) map[string]any {
	o := map[string]any{"seq": in.Seq, "sig_ok": in.SigOK}
	if in.Err != nil {
		o["error"] = in.Err.Error()
		return o
	}
	e := in.Entry
	o["phase"] = e.Phase.String()
	o["step"] = e.Step
	o["op"] = e.Op
	o["input_hash"] = hex.EncodeToString(e.InputHash)
	o["output_hash"] = hex.EncodeToString(e.OutputHash)
	o["cell"] = hex.EncodeToString(e.Cell)
	o["time"] = time.Unix(0, e.Time).UTC().Format(time.RFC3339Nano)
	o["sealed"] = in.Sealed
	if e.Epoch != 0 {
		o["epoch"] = e.Epoch
	}
	if e.Phase == journal.PhaseCompleted || e.Phase == journal.PhaseFailed {
		o["status"] = statusName(e.Status)
	}
	if e.Key != "" {
		o["idempotency_key"] = e.Key
	}
	if e.Header != nil {
		o["module_sha256"] = hex.EncodeToString(e.Header.ModuleSHA256)
		o["module"] = e.Header.ModuleName
		if len(e.Header.Token) > 0 {
			o["token_sha256"] = hex.EncodeToString(journal.Sum(e.Header.Token))
		}
		if f := e.Header.Fork; f != nil {
			o["fork"] = map[string]any{"parent": f.Parent.String(), "seq": f.Seq, "entry_sha256": hex.EncodeToString(f.Entry), "step": f.Step}
		}
	}
	if len(e.Gate) > 0 {
		var g host.GateRecord
		if abi.Unmarshal(e.Gate, &g) == nil {
			o["gate"] = g
		} else {
			o["gate"] = hex.EncodeToString(e.Gate)
		}
	}
	if len(e.Budget) > 0 {
		o["budget"] = budgetJSON(e.Budget)
	}
	if e.End != nil {
		o["run_status"] = e.End.Status
		if e.End.Error != "" {
			o["error"] = e.End.Error
		}
	}
	return o
}

// budgetText writes an entry's budget records for the table, e.g.
// "reserve #1 step 3 http_requests=1; settle #1 http_requests=1".
func budgetText(field []byte) string {
	if len(field) == 0 {
		return ""
	}
	ops, err := budget.DecodeRecord(field)
	if err != nil {
		return "BAD: " + err.Error()
	}
	parts := make([]string, len(ops))
	for i, o := range ops {
		parts[i] = o.String()
	}
	return strings.Join(parts, "; ")
}

// budgetJSON is an entry's budget records for --json: one object per
// record, as journal/SPEC.md's budget-op, amounts in their units (money in
// micro-USD); the field's hex when it does not decode.
func budgetJSON(field []byte) any {
	ops, err := budget.DecodeRecord(field)
	if err != nil {
		return map[string]any{"error": err.Error(), "hex": hex.EncodeToString(field)}
	}
	out := make([]map[string]any, len(ops))
	for i, o := range ops {
		m := map[string]any{"op": o.Kind.String(), "id": o.ID}
		if o.Step != 0 {
			m["step"] = o.Step
		}
		if !o.Amounts.IsZero() {
			a := map[string]uint64{}
			for d, n := range o.Amounts {
				if n != 0 {
					a[budget.Dim(d).String()] = n
				}
			}
			m["amounts"] = a
		}
		for name, on := range map[string]bool{"carve": o.Carve, "orphan": o.Orphan, "worst_case": o.WorstCase} {
			if on {
				m[name] = true
			}
		}
		out[i] = m
	}
	return out
}

// queryFlags are the flags of journal query, as typed.
type queryFlags struct {
	run, op, resource, cell, since, until, input, output, consumed string
	subRuns, forks, asJSON, reindex                                bool
	limit                                                          int
}

func (c *cli) journalQueryCmd() *cobra.Command {
	var q queryFlags
	cmd := &cobra.Command{
		Use:   "query",
		Short: "Find the calls of every run by op, resource, cell, time or hash",
		Long: `Find import calls across every run's journal: which runs called which op, on
which resource (the HTTP host; the kv namespace/key), on which cell, when, with
which input and output hashes and outcome. One row per call, oldest first.

Filters combine (all must match):
  --run RUN         a run id, a unique prefix of one, or "last"; --sub-runs adds
                    the runs it started, --forks the runs forked from it
                    (agentrt fork), transitively; with both, either relation
  --op OP           an op (kv.put), or a prefix ending in "." or "*" (http.)
  --resource R      a resource (example.com:8080, ns/key), or a prefix ending in
                    "*" (ns/*)
  --cell HEX        a prefix of the cell key that sealed the call
  --since/--until   an RFC 3339 time, or a duration ago (24h, 90m, 7d)
  --input-hash H, --output-hash H   64 hex digits, as journal show --json prints

--consumed H lists instead the runs that consumed the data with hash H: a call
of theirs received a response hashing to H, or their input hashes to H.

The index behind this is built from the journals on first use and caught up on
every query; --reindex rebuilds it. A row of a fork names the run it was
forked from (the FORK OF column, "fork_of" in JSON). It finds runs; it proves nothing: verify
what it finds with agentrt replay.`,
		Example: `  agentrt journal query --op http. --since 24h
  agentrt journal query --resource 'smoke/*' --json
  agentrt journal query --consumed 3b1f...e0 `,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return c.journalQuery(cmd, &q) },
	}
	fl := cmd.Flags()
	fl.StringVar(&q.run, "run", "", "only the calls of this run (id, prefix or \"last\")")
	fl.BoolVar(&q.subRuns, "sub-runs", false, "with --run, also the calls of the runs it started, transitively")
	fl.BoolVar(&q.forks, "forks", false, "with --run, also the calls of the runs forked from it (agentrt fork), transitively")
	fl.StringVar(&q.op, "op", "", "op name, or a prefix ending in \".\" or \"*\"")
	fl.StringVar(&q.resource, "resource", "", "resource, or a prefix ending in \"*\"")
	fl.StringVar(&q.cell, "cell", "", "hex prefix of the sealing cell's key")
	fl.StringVar(&q.since, "since", "", "calls at or after this time (RFC 3339, or a duration ago: 24h)")
	fl.StringVar(&q.until, "until", "", "calls before this time (RFC 3339, or a duration ago)")
	fl.StringVar(&q.input, "input-hash", "", "calls whose request hashes to this (64 hex digits)")
	fl.StringVar(&q.output, "output-hash", "", "calls whose response hashes to this (64 hex digits)")
	fl.StringVar(&q.consumed, "consumed", "", "list the runs that consumed the data with this hash instead")
	fl.IntVar(&q.limit, "limit", 0, "print at most this many rows (0: all)")
	fl.BoolVar(&q.asJSON, "json", false, "print one JSON object per row")
	fl.BoolVar(&q.reindex, "reindex", false, "rebuild the lineage index from every journal first")
	return cmd
}

func (c *cli) journalQuery(cmd *cobra.Command, q *queryFlags) error {
	ctx := cmd.Context()
	f, err := q.filter(time.Now())
	if err != nil {
		return err
	}
	var consumed []byte
	if q.consumed != "" {
		if consumed, err = parseHash("--consumed", q.consumed); err != nil {
			return err
		}
		for _, name := range []string{"run", "sub-runs", "forks", "op", "resource", "cell", "since", "until", "input-hash", "output-hash"} {
			if cmd.Flags().Changed(name) {
				return withHint(fmt.Errorf("--consumed takes no other filter (got --%s)", name),
					"list the consumers with --consumed alone, then query their calls with --run")
			}
		}
	}
	st, err := c.openReader(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	if q.run != "" {
		run, err := cell.FindRun(ctx, st, q.run)
		if err != nil {
			return err
		}
		f.Run = &run
	}
	index := st.Index
	if q.reindex {
		index = st.Reindex
	}
	rep, err := index(ctx)
	if err != nil {
		return err
	}
	if q.reindex {
		fmt.Fprintf(c.stderr, "reindexed %d runs: %d entries, %d calls\n", rep.Runs, rep.Entries, rep.Calls)
	}
	for _, sk := range rep.Skipped {
		fmt.Fprintf(c.stderr, "agentrt: warning: %s\n", sk)
	}
	if consumed != nil {
		cons, err := st.Consumers(ctx, consumed, f.Limit)
		if err != nil {
			return err
		}
		return c.printConsumers(cons, q.asJSON)
	}
	calls, err := st.Query(ctx, f)
	if errors.Is(err, journal.ErrBadFilter) {
		return withHint(err, "see: agentrt journal query --help")
	}
	if err != nil {
		return err
	}
	return c.printCalls(calls, q.asJSON)
}

// filter turns the flags, but --run, into a journal.Filter.
func (q *queryFlags) filter(now time.Time) (journal.Filter, error) {
	f := journal.Filter{Op: q.op, Resource: q.resource, Cell: strings.ToLower(q.cell), Limit: q.limit, SubRuns: q.subRuns, Forks: q.forks}
	var err error
	if q.since != "" {
		if f.Since, err = parseWhen("--since", q.since, now); err != nil {
			return f, err
		}
	}
	if q.until != "" {
		if f.Until, err = parseWhen("--until", q.until, now); err != nil {
			return f, err
		}
	}
	if q.input != "" {
		if f.InputHash, err = parseHash("--input-hash", q.input); err != nil {
			return f, err
		}
	}
	if q.output != "" {
		if f.OutputHash, err = parseHash("--output-hash", q.output); err != nil {
			return f, err
		}
	}
	if q.subRuns && q.run == "" {
		return f, withHint(errors.New("--sub-runs needs --run"), "name the parent run: --run RUN --sub-runs")
	}
	if q.forks && q.run == "" {
		return f, withHint(errors.New("--forks needs --run"), "name the run forked: --run RUN --forks")
	}
	check := f
	check.SubRuns, check.Forks = false, false // --run is resolved later, against the store
	if err := check.Check(); err != nil {
		return f, withHint(err, "see: agentrt journal query --help")
	}
	return f, nil
}

// parseWhen reads an RFC 3339 time, or a duration before now ("24h",
// "24h ago", "7d").
func parseWhen(flag, s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "ago"))
	if days, ok := strings.CutSuffix(d, "d"); ok {
		if n, err := strconv.ParseFloat(days, 64); err == nil && n >= 0 {
			return now.Add(-time.Duration(n * float64(24*time.Hour))), nil
		}
	}
	if dur, err := time.ParseDuration(d); err == nil && dur >= 0 {
		return now.Add(-dur), nil
	}
	return time.Time{}, withHint(fmt.Errorf("%s %q is neither a time nor a duration", flag, s),
		"give an RFC 3339 time (2026-01-02T15:04:05Z) or a duration ago (90m, 24h, 7d)")
}

func parseHash(flag, s string) ([]byte, error) {
	h, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil || len(h) != journal.HashSize {
		return nil, withHint(fmt.Errorf("%s %q is not a SHA-256 (want 64 hex digits)", flag, s),
			"copy a hash from: agentrt journal show RUN --json (input_hash, output_hash)")
	}
	return h, nil
}

func outcomeText(call *journal.Call) string {
	if call.Outcome == journal.OutcomeFailed {
		return "failed:" + statusName(call.Status)
	}
	return string(call.Outcome)
}

func timeText(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }

func (c *cli) printCalls(calls []journal.Call, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(c.stdout)
		for i := range calls {
			call := &calls[i]
			o := map[string]any{
				"run": call.Run.String(), "step": call.Step, "seq": call.Seq, "op": call.Op, "resource": call.Resource,
				"cell": hex.EncodeToString(call.Cell), "time": timeText(call.Time), "input_hash": hex.EncodeToString(call.InputHash),
				"output_hash": hex.EncodeToString(call.OutputHash), "outcome": string(call.Outcome), "status": statusName(call.Status),
			}
			if !call.Parent.IsZero() {
				o["parent"] = call.Parent.String()
			}
			if !call.ForkOf.IsZero() {
				o["fork_of"] = call.ForkOf.String()
			}
			if err := enc.Encode(o); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tRUN\tSTEP\tOP\tRESOURCE\tOUTCOME\tCELL\tINPUT\tOUTPUT\tFORK OF")
	for i := range calls {
		call := &calls[i]
		res := call.Resource
		if res == "" {
			res = "-"
		}
		forkOf := "-"
		if !call.ForkOf.IsZero() {
			forkOf = call.ForkOf.String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", time.Unix(0, call.Time).UTC().Format("2006-01-02T15:04:05.000Z"),
			call.Run, call.Step, call.Op, termtext.Line(res), outcomeText(call), short(call.Cell), short(call.InputHash), short(call.OutputHash), forkOf)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(c.stderr, plural(len(calls), "call", "calls"))
	return nil
}

func (c *cli) printConsumers(cons []journal.Consumer, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(c.stdout)
		for _, cn := range cons {
			o := map[string]any{"run": cn.Run.String(), "input": cn.Input, "steps": cn.Steps, "time": timeText(cn.Time)}
			if cn.Steps == nil {
				o["steps"] = []uint64{}
			}
			if !cn.Parent.IsZero() {
				o["parent"] = cn.Parent.String()
			}
			if err := enc.Encode(o); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tRUN\tPARENT\tCONSUMED THROUGH")
	for _, cn := range cons {
		var via []string
		if cn.Input {
			via = append(via, "input")
		}
		for _, s := range cn.Steps {
			via = append(via, fmt.Sprintf("step %d", s))
		}
		parent := "-"
		if !cn.Parent.IsZero() {
			parent = cn.Parent.String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", time.Unix(0, cn.Time).UTC().Format("2006-01-02T15:04:05.000Z"), cn.Run, parent, strings.Join(via, ", "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(c.stderr, plural(len(cons), "run", "runs"), "consumed it")
	return nil
}
