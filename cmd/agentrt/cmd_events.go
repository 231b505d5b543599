package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/termtext"
	"github.com/agentrt/agentrt/journal"
	"github.com/spf13/cobra"
)

func (c *cli) eventsCmd() *cobra.Command {
	var follow, asJSON bool
	var from uint64
	cmd := &cobra.Command{
		Use:   "events RUN",
		Short: "Print a run's event stream: its calls, gate decisions, denials, approvals, budget records, chunks, leases and output, in order",
		Long: `Print a run's event stream: its journal and its event log read as one
sequence, in the order things happened. Each journal entry shows as the
events it records (the start, a lease taken, each phase of each call, the
gate's decision, a denial with its layer and reason, an approval's request
and decision, budget records, a streamed model call's chunks, the end),
with the entry's seq; the guest's stdout, stderr and log lines show where
it wrote them. No payload is shown: calls show their status and sizes.

Each event has an offset, its ordinal in the stream from 0, which never
changes: --from OFFSET starts there, so a reader that stopped goes on
without losing or repeating an event.

With --follow, the command waits for more until the run ends or is
cancelled. A run executes in a daemon (agentrt cell serve) or a foreground
agentrt run, which holds the data directory; the events are then read from
it as they are committed. With --json, one JSON object per event.

RUN is a run id, a unique prefix of one, or "last" for the newest run.`,
		Example: "  agentrt events last\n  agentrt events 18ec7ae8 --follow\n  agentrt events last --json --from 40 | jq -c 'select(.kind == \"denied\")'",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			st, run, err := c.openRunReader(ctx, args[0])
			if err != nil {
				return err
			}
			defer st.Close()
			m, err := st.Meta(ctx, run)
			if err != nil {
				return err
			}
			show := func(e host.StreamEvent) error { return printStreamEvent(c.stdout, e, asJSON) }
			if follow && st.remote != nil {
				_, err := st.remote.StreamEvents(ctx, run.String(), from, show)
				return err
			}
			if err := host.NewStreamReader(st, st, run, from).Read(ctx, show); err != nil {
				return err
			}
			if follow && !m.Status.Finished() && m.Status != journal.StatusCancelled {
				fmt.Fprintf(c.stderr, "agentrt: run %s is %s and no process holds this data directory: nothing executes it, so no more events come (resume it with agentrt resume, or in a daemon)\n", run, m.Status)
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "wait for more events until the run ends")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per event (offset, kind, seq, time, step, op, phase, status, layer, reason, ...)")
	cmd.Flags().Uint64Var(&from, "from", 0, "start at this offset (the offset of the first event wanted)")
	return cmd
}

// printStreamEvent writes e as one line: a JSON object, or its offset,
// seq, kind and what it says, escaped for the terminal.
func printStreamEvent(w io.Writer, e host.StreamEvent, asJSON bool) error {
	if asJSON {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	var parts []string
	add := func(s string) {
		if s != "" {
			parts = append(parts, s)
		}
	}
	if e.Step > 0 && e.Kind != host.StreamEnd {
		add(fmt.Sprintf("step %d", e.Step))
	}
	add(e.Op)
	add(e.Phase)
	add(e.Status)
	switch e.Kind {
	case host.StreamLease:
		add(fmt.Sprintf("epoch %d cell %.16s", e.Epoch, e.Cell))
	case host.StreamBudget:
		add(e.Budget)
	case host.StreamChunk:
		add(fmt.Sprintf("%d bytes", e.Size))
	case host.StreamEnd:
		add(fmt.Sprintf("after %d steps", e.Step))
	case host.StreamCall:
		if e.Output != "" {
			add(fmt.Sprintf("response %d bytes", e.Size))
		}
	}
	if e.Layer != "" {
		add("by " + e.Layer)
	}
	if e.Reason != "" {
		add(termtext.Line(e.Reason))
	}
	if e.Data != "" {
		data := strings.TrimSuffix(e.Data, "\n")
		if e.Kind == host.EventRunLog {
			data = "[" + logLevels[min(int(e.Level), len(logLevels)-1)] + "] " + data
		}
		add(termtext.Line(data))
	}
	seq := fmt.Sprintf("seq %d", e.Seq)
	if e.After {
		seq = fmt.Sprintf("after %d", e.Seq)
	}
	_, err := fmt.Fprintf(w, "%6d  %-9s  %-8s  %s\n", e.Offset, seq, e.Kind, strings.Join(parts, "  "))
	return err
}
