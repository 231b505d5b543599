package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/fileread"
	"github.com/agentrt/agentrt/internal/termtext"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/badgerstore"
	"github.com/spf13/cobra"
)

func (c *cli) runCmd() *cobra.Command {
	var (
		input, inputFile, grantFile, seedHex, target, tokenFile string
		asJSON, quiet, inProcess                                bool
		priority                                                int
	)
	var keyFile string // seals the --token on the fly
	cmd := &cobra.Command{
		Use:   "run MODULE.wasm",
		Short: "Run an agent module, journaling every call",
		Long: `Run an agent module on this cell. Every import call is journaled (signed,
hash-chained) before its effect; the run id printed at the end names the
journal for agentrt journal show and agentrt replay.

The grant file (YAML or JSON) names the capabilities the agent may use:
  capabilities:
    run: {}
    kv: {namespace: crawler}
    http: {hosts: ["127.0.0.1:8080"]}
Without --grant the agent gets the run capability alone. A module that imports
a capability its grant lacks is refused before it runs (the refusal is
journaled: a run with a start and a failed end).

With --token the run is granted by a capability token (agentrt token issue,
attenuate): verified against this cell's key and DATA/token_roots, for this
cell, unexpired, never presented before, with a proof that the presenter
holds it (the key it carries, or --key: the token is sealed here, and the run
records it sealed). With --grant too, the grant file must be within the token
and declare each tool exactly as the token binds it. A plain grant is issued
as a token by this cell's key on the fly, so every run passes the same
verification.

Every call then passes the cell's policy (the platform defaults and the
customer's Cedar policies in DATA/policies or --policies) and the permission
modes (DATA/modes.yaml or --modes): a mode that asks is answered at this
terminal (below); without one, an ask is a no.

The guest's stdout, stderr and log lines are shown on stderr as they happen,
and the output on stdout at the end. Everything the guest wrote is shown with
terminal control characters escaped (ESC as \x1b, a bidi override as
\u202e): a guest cannot move the cursor, hide text, retitle the window or
write the clipboard. The output on stdout is escaped when stdout is a
terminal and exact when it goes to a file or a pipe; agentrt logs --raw
prints the exact bytes of the rest.

A run is interactive when stdin and stderr are both terminals: a permission
mode that asks is then asked at the controlling terminal (/dev/tty), on its
own lines, marked in reverse video, apart from the guest's output, and the
answer is read from there (what was typed before the prompt appeared is
dropped). Otherwise (cron, nohup, systemd, </dev/null) the run is
unattended: an ask is a no, and the customer policies that say
context.mode == "unattended" apply. agentrt cancel RUN, from another terminal,
stops the run at its next step boundary; agentrt resume RUN continues it.

With --cell, or when a cell daemon (agentrt cell serve) holds the data
directory, the run is submitted to the daemon and followed; interrupting the
command then detaches from the run, which goes on in the cell. The daemon
keeps each module by its sha256 and compiled: the command asks for the hash
first and sends the module's bytes only when the daemon lacks it, so a
repeated run sends a few hundred bytes and starts without compiling. A line
on stderr says which way the run went; --in-process (or $AGENTRT_IN_PROCESS=1)
runs it in this process, and fails while a daemon holds the data directory.

A run on a daemon that parks on something the cell resolves by itself is
waited for here, and the command exits with the run's real outcome: a parent
awaiting its sub-agents (agent.await), or a durable timer due within 5
minutes. A run parked for a human (an approval, its own or that of a child it
awaits) or on a later timer returns at once with exit status 75
(EX_TEMPFAIL): not a failure; the daemon goes on with it when that happens
(agentrt events RUN --follow waits for its end). Interrupting the wait
detaches; the run goes on in the cell.

--priority N (1 lowest .. 9 highest, default 5) is the run's place in the
daemon's admission queue: a run waits there for a worker, the highest
priority first. A run that executes in this process waits in no queue, so
--priority is refused there (with --in-process, or with no daemon).`,
		Example: `  agentrt run agent.wasm --input '{"n": 3}'
  agentrt run crawler.wasm --grant grant.yaml --input-file in.json --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			code, err := readModule(args[0])
			if err != nil {
				return err
			}
			spec := host.RunSpec{Code: code, Name: filepath.Base(args[0])}
			switch {
			case input != "" && inputFile != "":
				return withHint(errors.New("--input and --input-file both given"), "pass the input one way")
			case inputFile != "":
				if spec.Input, err = fileread.Read(inputFile, fileread.Input); err != nil {
					return err
				}
			case input != "":
				spec.Input = []byte(input)
			}
			var grantText []byte
			if tokenFile != "" {
				if spec.Token, err = fileread.Read(tokenFile, fileread.Token); err != nil {
					return err
				}
				if spec.Token, err = presentToken(spec.Token, keyFile, tokenFile); err != nil {
					return err
				}
			} else if keyFile != "" {
				return withHint(errors.New("--key without --token"), "--key seals the token given with --token; leave it out otherwise")
			}
			if grantFile != "" {
				if grantText, err = fileread.Read(grantFile, fileread.Grant); err != nil {
					return err
				}
				if spec.Grant, err = host.ParseGrantFile(grantFile, grantText); err != nil {
					return err
				}
			}
			if seedHex != "" {
				if spec.Seed, err = hex.DecodeString(seedHex); err != nil || len(spec.Seed) != 32 {
					return withHint(fmt.Errorf("--seed %q is not 32 bytes of hex", seedHex), "give 64 hex digits, or leave --seed out for a fresh seed")
				}
			}
			prioSet := cmd.Flags().Changed("priority")
			if err := checkPriority(priority, prioSet); err != nil {
				return err
			}
			submit := func(cl *cell.Client) (*cell.Stream, error) {
				return submitByHash(ctx, cl, cell.Submission{Module: spec.Code, Name: spec.Name, Input: spec.Input, Grant: string(grantText), Seed: seedHex, Token: spec.Token, Priority: priority})
			}
			forced, err := inProcessForced(inProcess)
			if err != nil {
				return err
			}
			noQueue := func(why string) error {
				return withHint(fmt.Errorf("--priority orders runs in a cell daemon's queue, and this run executes in this process (%s), where there is none", why),
					"start a daemon (agentrt cell serve) or give --cell to queue it there, or leave --priority out")
			}
			if prioSet && forced && target == "" {
				return noQueue("--in-process or $" + envInProcess)
			}
			if target != "" {
				if forced {
					return withHint(errors.New("--cell and --in-process both given"), "pick one: the daemon at --cell, or this process")
				}
				return c.followOnCell(ctx, target, submit, asJSON, quiet)
			}
			// The module compiles while the store opens, when the run is
			// this process's to execute (a store a daemon holds is not
			// opened, and the warm-up does not start). A token's grant is
			// known once verified, inside the run: its limits may differ.
			var warm func(*host.Engine)
			if spec.Token == nil {
				warm = func(e *host.Engine) { e.Warm(spec.Code, spec.Grant) }
			}
			cl, closeCell, err := c.openShowing(ctx, quiet, warm)
			if !forced {
				if daemon := c.heldByDaemon(err, "the run goes to it"); daemon != "" {
					return c.followOnCell(ctx, daemon, submit, asJSON, quiet)
				}
			} else if errors.Is(err, badgerstore.ErrLocked) {
				return withHint(err, "the run was asked to execute in this process (--in-process or $%s) and another process holds the data directory: stop it (a daemon: agentrt cell serve), or leave --in-process out to run in it", envInProcess)
			}
			if err != nil {
				return err
			}
			defer closeCell()
			if prioSet {
				return noQueue("no daemon holds the data directory")
			}
			if !quiet {
				fmt.Fprintf(c.stderr, "no cell daemon holds the data directory: the run executes in this process (%s)\n", cl.Dir)
			}
			start := time.Now()
			res, err := cl.Host.Run(ctx, spec)
			res, err = c.sleepThrough(ctx, cl, res, err)
			return c.report(res, err, start, asJSON)
		},
	}
	f := cmd.Flags()
	f.StringVar(&input, "input", "", "the run input (usually JSON)")
	f.StringVar(&inputFile, "input-file", "", "read the run input from a file")
	f.StringVar(&grantFile, "grant", "", "grant file (YAML or JSON) naming the capabilities the agent may use")
	f.StringVar(&tokenFile, "token", "", "capability token (agentrt token issue/attenuate) granting the run; with --grant, the grant must be within it and declare its tools as the token binds them")
	f.StringVar(&keyFile, "key", "", "OpenSSH ed25519 private key of the token's subject, which seals it, for a token issued to a key held elsewhere")
	f.StringVar(&seedHex, "seed", "", "seed of the guest's random stream, 64 hex digits (default: fresh)")
	f.BoolVar(&asJSON, "json", false, `print one JSON object {"run_id","status","steps","output"} on stdout: output is the JSON itself, a string of UTF-8 text ("output_text": true), or "output_base64" for bytes that are not UTF-8`)
	f.BoolVarP(&quiet, "quiet", "q", false, "do not show the guest's stdout, stderr and log lines")
	f.IntVar(&priority, "priority", 0, fmt.Sprintf("the run's priority in the daemon's admission queue, %d (lowest) to %d (highest); default %d; refused for a run executing in this process", cell.MinPriority, cell.MaxPriority, cell.DefaultPriority))
	f.StringVar(&target, "cell", "", "submit the run to a cell daemon (unix:DATA/agentrt.sock or http://127.0.0.1:PORT) and follow it")
	f.BoolVar(&inProcess, "in-process", false, "execute the run in this process even when a cell daemon could take it (also $"+envInProcess+"=1); fails while a daemon holds the data directory")
	c.engineFlag(cmd)
	return cmd
}

// readModule reads a module file, refusing what no cell takes before
// reading it: a file that is not regular (a FIFO, /dev/zero), or one over
// the cell's limit, which the hint names.
func readModule(path string) ([]byte, error) {
	code, err := fileread.Read(path, fileread.Module)
	if errors.Is(err, fileread.ErrTooLarge) {
		return nil, withHint(fmt.Errorf("%w (%w)", err, cell.ErrModuleTooLarge), "%s", cell.Hint(cell.ErrModuleTooLarge))
	}
	return code, err
}

// envInProcess names the environment variable that makes agentrt run
// execute in its own process (as --in-process does) when set to 1 or true.
const envInProcess = "AGENTRT_IN_PROCESS"

// inProcessForced says whether the run must execute in this process: the
// flag, or $AGENTRT_IN_PROCESS, which must say yes or no.
func inProcessForced(flag bool) (bool, error) {
	if flag {
		return true, nil
	}
	switch v := os.Getenv(envInProcess); v {
	case "", "0", "false":
		return false, nil
	case "1", "true":
		return true, nil
	default:
		return false, withHint(fmt.Errorf("$%s is %q", envInProcess, v), "set it to 1 (execute runs in this process) or 0, or unset it")
	}
}

// submitByHash submits sub to the cell by its module's hash when the cell
// holds the module already, and with its bytes (stored there by hash)
// when it does not: a repeated submission carries no module. A cell that
// answers the question with anything but yes gets the bytes.
func submitByHash(ctx context.Context, cl *cell.Client, sub cell.Submission) (*cell.Stream, error) {
	sum := sha256.Sum256(sub.Module)
	hexSum := hex.EncodeToString(sum[:])
	if _, err := cl.Module(ctx, hexSum); err == nil {
		byHash := sub
		byHash.Module, byHash.ModuleSHA256 = nil, hexSum
		st, err := cl.SubmitFollow(ctx, byHash)
		if !errors.Is(err, host.ErrUnknownModule) {
			return st, err
		}
		// Gone between the question and the submission (a purge): the
		// bytes go after all.
	}
	return cl.SubmitFollow(ctx, sub)
}

// heldByDaemon returns the address of the cell daemon that holds the data
// directory when err says another process holds it and that process is a
// daemon, saying on stderr what goes to it; "" otherwise.
func (c *cli) heldByDaemon(err error, what string) string {
	if !errors.Is(err, badgerstore.ErrLocked) {
		return ""
	}
	cl, cerr := c.cellClient("")
	if cerr != nil || cl == nil {
		return ""
	}
	ci, cerr := cl.Cell(context.Background())
	if cerr != nil || ci.ControlOnly {
		return ""
	}
	target := "unix:" + cell.SocketPath(ci.Dir)
	fmt.Fprintf(c.stderr, "a cell daemon holds the data directory: %s (%s)\n", what, target)
	return target
}

// followOnCell starts a run (or a resume) on a cell daemon with open and
// follows its events to its end. Interrupting the command detaches: the
// run goes on in the cell.
func (c *cli) followOnCell(ctx context.Context, target string, open func(*cell.Client) (*cell.Stream, error), asJSON, quiet bool) error {
	if c.engine != "" {
		return withHint(fmt.Errorf("--engine %s: the run executes in the cell daemon, on its engine", c.engine), "pick the daemon's engine when starting it: agentrt cell serve --engine %s", c.engine)
	}
	cl, err := c.dial(target)
	if err != nil {
		return err
	}
	start := time.Now()
	st, err := open(cl)
	if err != nil {
		return remoteHint(err)
	}
	defer st.Close()
	printer := newEventPrinter(c.stderr, false)
	defer printer.flush()
	var run string
	for {
		l, err := st.Next()
		switch {
		case ctx.Err() != nil:
			return withHint(fmt.Errorf("detached from run %s; it goes on in the cell", run),
				"stop it with: agentrt cancel %s --cell %s", run, target)
		case errors.Is(err, cell.ErrStreamEnd):
			return fmt.Errorf("the cell closed the stream of run %s before its end", run)
		case err != nil:
			return err
		}
		switch {
		case l.RunID != "":
			run = l.RunID
			if !quiet {
				fmt.Fprintf(c.stderr, "run %s executing in %s\n", run, target)
			}
		case l.End != nil && l.End.Status.Finished():
			printer.flush()
			return c.reportRemote(*l.End, start, asJSON)
		case l.End != nil && l.End.Status == journal.StatusParked && resolvesItself(l.End.Wait, time.Now()):
			// Awaiting a child, or a timer due soon: the cell goes on with
			// the run by itself, so the command waits for it.
			printer.flush()
			if !quiet {
				fmt.Fprintf(c.stderr, "run %s parked (%s): waiting for the cell to wake it; interrupt to detach\n", run, waitText(l.End.Wait))
			}
			ri, err := c.awaitWake(ctx, cl, run)
			var ae *awaitedApproval
			switch {
			case ctx.Err() != nil:
				return withHint(fmt.Errorf("detached from run %s; it goes on in the cell", run),
					"follow it with: agentrt events %s --follow --cell %s", run, target)
			case errors.As(err, &ae):
				fmt.Fprintf(c.stderr, "agentrt: run %s awaits its child %s, which waits for an approval (step %d, group %q)\n  vote with: agentrt approve %s %d --key ~/.ssh/id_ed25519 [--deny]\n",
					run, ae.child, ae.step, ae.group, ae.child, ae.step)
				return &exitError{exitParked}
			case err != nil:
				return remoteHint(err)
			}
			// What it logged after the park: agentrt events RUN.
			switch {
			case ri.Status.Finished():
				return c.reportRemote(ri, start, asJSON)
			case ri.Status != journal.StatusParked:
				return withHint(fmt.Errorf("run %s stopped before its end: it is %s", run, ri.Status), "continue it with: agentrt resume %s", run)
			}
			l = cell.StreamLine{End: &ri}
			fallthrough
		case l.End != nil && l.End.Status == journal.StatusParked:
			printer.flush()
			if asJSON {
				if err := c.printJSON(*l.End); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(c.stderr, "run %s parked: %d calls in %s\n", run, l.End.Steps, time.Since(start).Round(time.Millisecond))
			}
			var w *journal.Wait
			if wi := l.End.Wait; wi != nil {
				w = &journal.Wait{Kind: wi.Kind, Step: wi.Step, Op: wi.Op, Group: wi.Group}
				if wi.Until != nil {
					w.Until = wi.Until.UnixNano()
				}
				w.Digest, _ = hex.DecodeString(wi.Digest)
			}
			return c.reportParked(run, w, target)
		case l.End != nil || l.Stopped != "":
			why := l.Stopped
			if why == "" {
				why = "it is " + string(l.End.Status)
			}
			printer.flush()
			return withHint(fmt.Errorf("run %s stopped before its end: %s", run, termtext.Line(why)), "continue it with: agentrt resume %s", run)
		case l.Kind == cell.EventApproval:
			printer.flush()
			fmt.Fprintf(c.stderr, "agentrt: %s\n  answer with: agentrt approve %s [--deny] --cell %s\n", termtext.Line(l.Data), run, target)
		case !quiet:
			printer.print(host.Event{Kind: l.Kind, Level: l.Level, Data: []byte(l.Data)})
		}
	}
}

// timerWaitBound is how far off a durable timer may be for agentrt run to
// wait for the cell to wake the run, rather than return with exitParked.
const timerWaitBound = 5 * time.Minute

// resolvesItself reports whether a run parked on w goes on without anyone
// acting: it awaits a child, or sleeps until at most timerWaitBound from
// now. An approval needs a human.
func resolvesItself(w *cell.WaitInfo, now time.Time) bool {
	switch {
	case w == nil:
		return false
	case w.Kind == string(journal.WaitRun):
		return true
	case w.Kind == string(journal.WaitTimer) && w.Until != nil:
		return w.Until.Sub(now) <= timerWaitBound
	}
	return false
}

func waitText(w *cell.WaitInfo) string {
	if w.Kind == string(journal.WaitRun) {
		return fmt.Sprintf("step %d awaits its child %s", w.Step, w.Run)
	}
	return fmt.Sprintf("step %d sleeps until %s", w.Step, w.Until.UTC().Format(time.RFC3339))
}

// awaitedApproval is awaitWake's answer when the child a run awaits waits
// for an approval: a human must act.
type awaitedApproval struct {
	child, group string
	step         uint64
}

func (a *awaitedApproval) Error() string { return "the awaited child waits for an approval" }

// awaitWake waits until run has ended, or stopped (cancelled, held), or
// parks on something that does not resolve itself, and returns how it
// stands: through every park on a child or a timer due soon, and every
// wake. A child the run awaits that parks for an approval ends the wait
// (*awaitedApproval): a human must act.
func (c *cli) awaitWake(ctx context.Context, cl *cell.Client, run string) (cell.RunInfo, error) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		ri, err := cl.Run(ctx, run)
		if err != nil {
			return ri, err
		}
		switch {
		case ri.Status == journal.StatusRunning:
		case ri.Status != journal.StatusParked || !resolvesItself(ri.Wait, time.Now()):
			return ri, nil
		}
		if w := ri.Wait; ri.Status == journal.StatusParked && w != nil && w.Kind == string(journal.WaitRun) && w.Run != "" {
			if ch, err := cl.Run(ctx, w.Run); err == nil && ch.Status == journal.StatusParked && ch.Wait != nil && ch.Wait.Kind == string(journal.WaitApproval) {
				return ri, &awaitedApproval{child: w.Run, group: ch.Wait.Group, step: ch.Wait.Step}
			}
		}
		select {
		case <-ctx.Done():
			return ri, ctx.Err()
		case <-tick.C:
		}
	}
}

// reportRemote prints how a run on a cell ended, as report does.
func (c *cli) reportRemote(ri cell.RunInfo, start time.Time, asJSON bool) error {
	failed := ri.Status != journal.StatusCompleted
	if asJSON {
		if err := c.printJSON(ri); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(c.stderr, "run %s %s: %d calls in %s\n", ri.RunID, ri.Status, ri.Steps, time.Since(start).Round(time.Millisecond))
		if failed {
			fmt.Fprintf(c.stderr, "agentrt: error: %s\n", termtext.Line(ri.Error))
		} else {
			out := []byte(ri.Output)
			var s string
			switch {
			case ri.OutputBase64 != nil:
				out = ri.OutputBase64
			case ri.OutputText && json.Unmarshal(out, &s) == nil:
				out = []byte(s)
			}
			c.printOutput(out)
		}
	}
	if failed {
		return &exitError{1}
	}
	return nil
}

// openShowing opens the cell for a command that runs an agent, showing the
// guest's events on stderr unless quiet, and serves the cell's control
// socket meanwhile, so that agentrt cancel reaches the run. The returned
// func closes both. warm, when set, is the cell's Options.Warm.
func (c *cli) openShowing(ctx context.Context, quiet bool, warm func(*host.Engine)) (*cell.Cell, func(), error) {
	var sink func(host.Event)
	printer := newEventPrinter(c.stderr, false)
	if !quiet {
		sink = printer.print
	}
	opts := cell.Options{Sink: sink, Warm: warm}
	// Only a person at a terminal can be asked; the policy context says
	// "interactive" exactly when there is an approver to ask.
	if a := c.terminalApprover(); a != nil {
		opts.Approver = a
	}
	cl, err := c.open(ctx, opts)
	if err != nil {
		return nil, nil, err
	}
	c.printer = printer
	closeCell := func() { cl.Close(context.WithoutCancel(ctx)) }
	// Without the socket (a data directory path too long for one) the run
	// goes on; only agentrt cancel cannot reach it.
	path := cell.SocketPath(cl.Dir)
	ln, err := cell.ListenSocket(path)
	if err != nil {
		return cl, closeCell, nil
	}
	srv := cell.NewServer(cl, cell.ServerOptions{ControlOnly: true, Logf: func(string, ...any) {}})
	cl.AddSink(srv.Sink)
	hs, err := srv.Endpoint(ln)
	if err != nil {
		ln.Close()
		return cl, closeCell, nil
	}
	go hs.Serve(ln)
	return cl, func() {
		hs.Close()
		os.Remove(path)
		closeCell()
	}, nil
}

// report prints how a run (or a resume) ended and returns the command's
// error: the output on stdout, or the JSON object with --json.
func (c *cli) report(res *host.Result, err error, start time.Time, asJSON bool) error {
	if c.printer != nil {
		c.printer.flush()
	}
	if err != nil {
		if res != nil {
			fmt.Fprintf(c.stderr, "run %s stopped after %d calls\n", res.Run, res.Steps)
		}
		return err
	}
	if asJSON {
		return c.printRunJSON(res)
	}
	fmt.Fprintf(c.stderr, "run %s %s: %d calls in %s\n", res.Run, res.Status, res.Steps, time.Since(start).Round(time.Millisecond))
	if res.Status == journal.StatusParked {
		return c.reportParked(res.Run.String(), res.Wait, "")
	}
	if res.Status != journal.StatusCompleted {
		fmt.Fprintf(c.stderr, "agentrt: error: %s\n", termtext.Line(res.Err.Error()))
		return &exitError{1}
	}
	c.printOutput(res.Output)
	return nil
}

// printOutput writes a run's output on stdout, ending it with a newline:
// escaped for the terminal when stdout is one, as the guest wrote it when
// it goes to a file or a pipe (where it is data).
func (c *cli) printOutput(out []byte) {
	if isTerminal(c.stdout) {
		out = termtext.Escape(out)
	}
	c.stdout.Write(out)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		fmt.Fprintln(c.stdout)
	}
}

// printJSON writes v as one line of JSON on stdout, with every character a
// terminal would act on written as a \u escape: the same value, safe to
// show.
func (c *cli) printJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = c.stdout.Write(append(termtext.JSON(b), '\n'))
	return err
}

// printRunJSON prints a run's result as one JSON object, its output as the
// cell API carries it (cell.EncodeOutput): "output" holds UTF-8 JSON as it
// is and other UTF-8 text as a string ("output_text": true); output that is
// not UTF-8 is "output_base64", its bytes exactly.
func (c *cli) printRunJSON(res *host.Result) error {
	out := map[string]any{"run_id": res.Run.String(), "status": res.Status, "steps": res.Steps}
	switch value, text, raw := cell.EncodeOutput(res.Output); {
	case raw != nil:
		out["output_base64"] = raw
	default:
		out["output"] = value
		if text {
			out["output_text"] = true
		}
	}
	if res.Err != nil {
		out["error"] = res.Err.Error()
	}
	if res.Wait != nil {
		out["wait"] = cell.Info(journal.RunMeta{Wait: res.Wait}, false).Wait
	}
	if err := c.printJSON(out); err != nil {
		return err
	}
	if res.Status == journal.StatusParked {
		return &exitError{exitParked}
	}
	if res.Status != journal.StatusCompleted {
		return &exitError{1}
	}
	return nil
}

// exitParked is the exit status of a run or resume that left the run
// parked (EX_TEMPFAIL): not a failure; the run goes on when what it waits
// for happens.
const exitParked = 75

// sleepThrough waits here, holding no instance, for each durable sleep a
// run executed in this process parks on, and resumes it at its wake time:
// without a daemon, agentrt run and agentrt resume see the run through its
// timers. Interrupting the wait leaves the run parked, for agentrt resume
// or a daemon to wake. A run parked for an approval is returned as it is.
func (c *cli) sleepThrough(ctx context.Context, ce *cell.Cell, res *host.Result, err error) (*host.Result, error) {
	for err == nil && res != nil && res.Status == journal.StatusParked && res.Wait != nil && res.Wait.Kind == journal.WaitTimer {
		until := time.Unix(0, res.Wait.Until)
		if c.printer != nil {
			c.printer.flush()
		}
		fmt.Fprintf(c.stderr, "run %s parked until %s (timer.sleep, step %d): waiting here; interrupt to leave it parked\n",
			res.Run, until.Format(time.RFC3339), res.Wait.Step)
		t := time.NewTimer(time.Until(until))
		select {
		case <-ctx.Done():
			t.Stop()
			return res, nil
		case <-t.C:
		}
		res, err = ce.Host.Resume(ctx, res.Run)
	}
	return res, err
}

// reportParked says what a parked run waits for and how it goes on, and
// returns the exit status of a parked run. target is the daemon's address
// when a daemon runs it.
func (c *cli) reportParked(run string, w *journal.Wait, target string) error {
	if w == nil {
		return &exitError{exitParked}
	}
	switch w.Kind {
	case journal.WaitTimer:
		fmt.Fprintf(c.stderr, "agentrt: step %d sleeps until %s; ", w.Step, time.Unix(0, w.Until).UTC().Format(time.RFC3339))
		if target != "" {
			fmt.Fprintln(c.stderr, "the cell wakes it then")
		} else {
			fmt.Fprintf(c.stderr, "agentrt resume %s (or a daemon: agentrt cell serve) goes on with it\n", run)
		}
	case journal.WaitApproval:
		fmt.Fprintf(c.stderr, "agentrt: step %d (%s) waits for the approval of group %q (digest %x)\n  vote with: agentrt approve %s %d --key ~/.ssh/id_ed25519 [--deny]\n",
			w.Step, w.Op, w.Group, w.Digest, run, w.Step)
		if target == "" {
			fmt.Fprintf(c.stderr, "  then: agentrt resume %s (a daemon, agentrt cell serve, resumes it when the quorum decides)\n", run)
		}
	}
	return &exitError{exitParked}
}
