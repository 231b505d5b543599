package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/fileread"
	"github.com/agentrt/agentrt/internal/termtext"
	"github.com/spf13/cobra"
)

func (c *cli) triggerCmd() *cobra.Command {
	var target string
	cmd := &cobra.Command{
		Use:   "trigger",
		Short: "Start runs on their own in a cell daemon: on a schedule, a kv write, a file, a webhook, a metric",
		Long: `A trigger starts a run of its module, under its grant or token, each time it
fires. Triggers live in a cell daemon (agentrt cell serve), which keeps them
and their log in its store: they survive restarts, and every firing is
written to the trigger's log, each scheduled moment exactly once, also when
the daemon is killed at the moment. These commands talk to the daemon that
holds the data directory (or the one named with --cell).

Every firing's start passes the gate like a submission. A start the cell
refuses (an expired token, a module the grant does not cover) is logged with
its reason and not retried; after 3 refusals in a row the trigger pauses
itself, and agentrt trigger list shows why.

See agentrt trigger add --help for the kinds of trigger and their policies.`,
	}
	cmd.PersistentFlags().StringVar(&target, "cell", "", "the cell daemon to ask (unix:PATH or http://127.0.0.1:PORT); default: the data directory's socket")
	client := func() (*cell.Client, error) {
		cl, err := c.cellClient(target)
		if err != nil {
			return nil, err
		}
		if cl == nil {
			return nil, withHint(errors.New("no cell daemon holds this data directory"), "triggers run in a cell daemon: start one with agentrt cell serve")
		}
		return cl, nil
	}
	cmd.AddCommand(c.triggerAddCmd(client), c.triggerListCmd(client), c.triggerRemoveCmd(client),
		c.triggerPauseCmd(client, true), c.triggerPauseCmd(client, false), c.triggerLogCmd(client))
	return cmd
}

func (c *cli) triggerAddCmd(client func() (*cell.Client, error)) *cobra.Command {
	var moduleFile, grantFile, tokenFile, on, inputFile, misfire, overlap string
	var priority int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "add NAME --module M.wasm (--grant F | --token T) --on SPEC",
		Short: "Add a trigger to the cell daemon",
		Long: `Add a trigger NAME that starts a run of the module each time it fires. The
module is stored in the cell once; its runs are granted by --grant (the cell
issues it as a token for each run, as for a submission) or --token (a token
that carries its key: each firing attenuates it to a fresh link of the same
capabilities, since the cell takes a token once). Both may be given; the
grant is then within the token.

Kinds of SPEC:
  schedule:CRON      the moments of a cron expression: five fields (minute
                     hour day-of-month month day-of-week), an optional leading
                     seconds field, or a descriptor (@hourly, @daily,
                     "@every 30s"). Times are the daemon's local time zone,
                     or CRON_TZ=Zone first. The run's input is --input, or
                     {"trigger","kind","seq","moment"}.
  kv:NAMESPACE/PREFIX  a kv write (not a delete) by any run under the key
                     prefix; one firing per write. The input is {"trigger",
                     "kind","namespace","key","size","run"}. Writes by the
                     trigger's own runs do not fire it.
  file:DIR/GLOB      a file that arrives in DIR (created, written or moved
                     in) and matches GLOB (doublestar: *, ?, [..], {a,b}, **
                     for subfolders). A file is complete when it has stayed
                     unchanged (size and modification time) for 1 second;
                     it then fires once. Write elsewhere and move the file
                     in to be safe. The input is {"trigger","kind","path",
                     "size","mtime"}.
  webhook            a POST to /v1/hooks/NAME on the daemon's API, signed
                     with the secret printed once by this command:
                       X-Agentrt-Timestamp: UNIX-SECONDS
                       X-Agentrt-Signature: v1=HEX(HMAC-SHA256(SECRET,
                         "v1:" + TIMESTAMP + ":" + BODY))
                     A timestamp more than 5 minutes off, a bad signature or
                     a request sent twice is refused. The body (at most
                     1 MiB) is the run's input. It needs no API token, and
                     no agent of the cell can reach the daemon's listeners.
  metric:EXPR        a threshold over the cell's own counters, which fires
                     when it comes to hold (and again only after it stopped
                     holding): COUNTER OP NUMBER[/WINDOW], OP one of
                     > >= < <= ==. Counters over a window: runs_started,
                     runs_completed, runs_failed, runs_cancelled, and
                     spend_usd (dollars spent by the runs that ended in
                     it); now: runs_parked, runs_live. queue_depth is
                     refused: the cell has no queue yet. It is looked at
                     when a run ends and every 15 seconds.

Policies:
  --misfire skip|once|all:N  (schedules) what to do with moments missed: a
      moment more than a minute late, or one whose next moment has come too
      (the daemon was down). skip drops them (a moment still on time
      fires); once (the default) fires the newest once for them all; all:N
      fires the N newest. Catch-up firings are spaced 10 seconds apart, not
      started in a burst, and each obeys --overlap.
  --overlap skip|queue|allow  what a firing does while a run the trigger
      started is still going (or parked): skip it (logged), queue it until
      the runs end (at most 100), or start beside them. Default: skip for
      schedule and metric, queue for kv, file and webhook.
  --priority N  the priority of the trigger's runs in the daemon's queue,
      1 (lowest) to 9 (highest); default 5. Stored with the trigger.`,
		Example: `  agentrt trigger add nightly --module report.wasm --grant grant.yaml --on 'schedule:0 3 * * *'
  agentrt trigger add tick --module agent.wasm --grant grant.yaml --on 'schedule:@every 10s' --misfire all:5 --overlap queue
  agentrt trigger add on-order --module agent.wasm --token agent.token --on kv:orders/new/
  agentrt trigger add inbox --module ingest.wasm --grant grant.yaml --on 'file:./inbox/*.csv'
  agentrt trigger add deploy --module deploy.wasm --grant grant.yaml --on webhook
  agentrt trigger add alarm --module page.wasm --grant grant.yaml --on 'metric:runs_failed>3/10m'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if moduleFile == "" || on == "" {
				return withHint(errors.New("trigger add needs --module and --on"), "e.g. agentrt trigger add NAME --module agent.wasm --grant grant.yaml --on 'schedule:@hourly'")
			}
			if grantFile == "" && tokenFile == "" {
				return withHint(errors.New("trigger add needs --grant or --token"), "the trigger's runs are granted by a grant file or a capability token (that carries its key)")
			}
			code, err := readModule(moduleFile)
			if err != nil {
				return err
			}
			if err := checkPriority(priority, cmd.Flags().Changed("priority")); err != nil {
				return err
			}
			ts := cell.TriggerSpec{Name: args[0], On: on, Module: code, ModuleName: filepath.Base(moduleFile), Misfire: misfire, Overlap: overlap, Priority: priority}
			if rest, ok := strings.CutPrefix(on, "file:"); ok && rest != "" && !filepath.IsAbs(rest) {
				// The daemon's working folder is not this one.
				abs, err := filepath.Abs(rest)
				if err != nil {
					return err
				}
				ts.On = "file:" + abs
			}
			if grantFile != "" {
				b, err := fileread.Read(grantFile, fileread.Grant)
				if err != nil {
					return err
				}
				if _, err := host.ParseGrantFile(grantFile, b); err != nil {
					return err
				}
				ts.Grant = string(b)
			}
			if tokenFile != "" {
				if ts.Token, err = fileread.Read(tokenFile, fileread.Token); err != nil {
					return err
				}
			}
			if inputFile != "" {
				if ts.Input, err = fileread.Read(inputFile, fileread.Input); err != nil {
					return err
				}
			}
			cl, err := client()
			if err != nil {
				return err
			}
			ti, err := cl.AddTrigger(ctx, ts)
			if err != nil {
				return remoteHint(err)
			}
			if asJSON {
				return json.NewEncoder(c.stdout).Encode(ti)
			}
			fmt.Fprintf(c.stdout, "trigger %s added: %s\n", ti.Name, termtext.Line(ti.On))
			if ti.Next != nil {
				fmt.Fprintf(c.stdout, "next: %s\n", ti.Next.Local().Format(time.RFC3339))
			}
			if ti.Secret != "" {
				fmt.Fprintf(c.stdout, "webhook: POST %s\nsecret: %s\n", ti.Webhook, ti.Secret)
				fmt.Fprintln(c.stderr, "the secret is shown this once: keep it where the sender signs its requests")
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&moduleFile, "module", "", "the agent's wasm module (stored in the cell)")
	f.StringVar(&grantFile, "grant", "", "grant file of the trigger's runs")
	f.StringVar(&tokenFile, "token", "", "capability token of the trigger's runs; it must carry its key (agentrt token issue without --subject)")
	f.StringVar(&on, "on", "", "what fires it: schedule:CRON, kv:NAMESPACE/PREFIX, file:DIR/GLOB, webhook, metric:EXPR")
	f.StringVar(&inputFile, "input", "", "file whose bytes are the input of a schedule's or metric's runs")
	f.StringVar(&misfire, "misfire", "", "schedules: what to do with missed moments: skip, once or all:N (default once)")
	f.StringVar(&overlap, "overlap", "", "while a run of the trigger is going: skip, queue or allow (default skip for schedule and metric, queue otherwise)")
	f.IntVar(&priority, "priority", 0, fmt.Sprintf("the priority of the trigger's runs in the daemon's queue, %d (lowest) to %d (highest); default %d", cell.MinPriority, cell.MaxPriority, cell.DefaultPriority))
	f.BoolVar(&asJSON, "json", false, "print the trigger as JSON (with a webhook's secret)")
	return cmd
}

func (c *cli) triggerListCmd(client func() (*cell.Client, error)) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the cell daemon's triggers",
		Long: `List the triggers: their spec, whether they are paused (and why: a trigger
whose starts are refused 3 times in a row pauses itself), their next moment,
their runs going and their last firing.`,
		Example: "  agentrt trigger list\n  agentrt trigger list --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := client()
			if err != nil {
				return err
			}
			all, err := cl.Triggers(cmd.Context())
			if err != nil {
				return remoteHint(err)
			}
			if asJSON {
				enc := json.NewEncoder(c.stdout)
				for _, ti := range all {
					if err := enc.Encode(ti); err != nil {
						return err
					}
				}
				return nil
			}
			if len(all) == 0 {
				fmt.Fprintln(c.stderr, "no triggers (add one with agentrt trigger add)")
				return nil
			}
			tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tON\tSTATE\tNEXT\tLAST")
			for _, ti := range all {
				state := "active"
				if ti.Paused {
					state = "paused: " + ti.PausedReason
				} else if len(ti.Active) > 0 {
					state = fmt.Sprintf("active, %d running", len(ti.Active))
				}
				next := "-"
				if ti.Next != nil {
					next = ti.Next.Local().Format("2006-01-02 15:04:05")
				}
				last := "-"
				if ti.Last != nil {
					last = describeFiring(*ti.Last)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", ti.Name, termtext.Line(ti.On), termtext.Line(state), next, termtext.Line(last))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per trigger")
	return cmd
}

// describeFiring is one line for a firing.
func describeFiring(f cell.Firing) string {
	s := fmt.Sprintf("#%d %s %s", f.Seq, f.Moment.Local().Format("2006-01-02 15:04:05"), f.State)
	if f.Catchup {
		s += " (catch-up)"
	}
	if f.Run != "" {
		s += " run " + f.Run
	}
	if f.Reason != "" {
		s += ": " + f.Reason
	}
	return s
}

func (c *cli) triggerRemoveCmd(client func() (*cell.Client, error)) *cobra.Command {
	return &cobra.Command{
		Use:     "remove NAME",
		Short:   "Remove a trigger and its log (the runs it started stay)",
		Example: "  agentrt trigger remove nightly",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := client()
			if err != nil {
				return err
			}
			if err := cl.RemoveTrigger(cmd.Context(), args[0]); err != nil {
				return remoteHint(err)
			}
			fmt.Fprintf(c.stdout, "trigger %s removed\n", args[0])
			return nil
		},
	}
}

func (c *cli) triggerPauseCmd(client func() (*cell.Client, error), pause bool) *cobra.Command {
	use, short, example := "pause NAME", "Stop a trigger from firing until it is resumed", "  agentrt trigger pause nightly"
	if !pause {
		use, short, example = "resume NAME", "Let a paused trigger fire again (a schedule's moments while paused are not caught up)", "  agentrt trigger resume nightly"
	}
	return &cobra.Command{
		Use:     use,
		Short:   short,
		Example: example,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := client()
			if err != nil {
				return err
			}
			do := cl.ResumeTrigger
			verb := "resumed"
			if pause {
				do, verb = cl.PauseTrigger, "paused"
			}
			ti, err := do(cmd.Context(), args[0])
			if err != nil {
				return remoteHint(err)
			}
			fmt.Fprintf(c.stdout, "trigger %s %s\n", ti.Name, verb)
			return nil
		},
	}
}

func (c *cli) triggerLogCmd(client func() (*cell.Client, error)) *cobra.Command {
	var asJSON bool
	var limit int
	cmd := &cobra.Command{
		Use:   "log NAME",
		Short: "Show a trigger's firings: started (with the run), refused (with why), skipped, queued",
		Long: `Show a trigger's log, oldest first: one entry per firing (a schedule's
moment, an event), with its state: started and the run, refused and the
cell's reason, skipped (by the misfire or overlap policy; one entry stands
for a span of missed moments), queued, pending (a catch-up moment waiting its
turn) or claimed (about to start).`,
		Example: "  agentrt trigger log nightly\n  agentrt trigger log nightly --json --limit 20",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 0 {
				return withHint(fmt.Errorf("--limit %d is negative", limit), "give the number of newest firings to show, or leave --limit out for all")
			}
			cl, err := client()
			if err != nil {
				return err
			}
			log, err := cl.TriggerLog(cmd.Context(), args[0], limit)
			if err != nil {
				return remoteHint(err)
			}
			if asJSON {
				enc := json.NewEncoder(c.stdout)
				for _, f := range log {
					if err := enc.Encode(f); err != nil {
						return err
					}
				}
				return nil
			}
			if len(log) == 0 {
				fmt.Fprintf(c.stderr, "trigger %s has not fired yet\n", args[0])
			}
			for _, f := range log {
				fmt.Fprintln(c.stdout, termtext.Line(describeFiring(f)))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per firing")
	cmd.Flags().IntVar(&limit, "limit", 0, "show the newest N firings only")
	return cmd
}
