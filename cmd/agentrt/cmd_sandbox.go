package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	sandbox "github.com/agentrt/agentrt/native-sandbox"
	"github.com/spf13/cobra"
)

// The agentrt binary is its own sandbox helper: Launch re-executes it
// inside bubblewrap to apply Landlock and limits before the tool runs.
func init() { sandbox.HelperMain() }

func (c *cli) sandboxCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sandbox",
		Short: "Check, run and explain the native tools sandbox",
		Long: `Native programs an agent may use run under an OS sandbox described by a spec
file: bubblewrap with seccomp and Landlock on Linux, Seatbelt on macOS, an
AppContainer in a Job Object on Windows. These commands show what this machine
supports, run one command under a spec, and print what a spec sets up.`,
	}
	cmd.AddCommand(c.sandboxCheckCmd(), c.sandboxExecCmd(), c.sandboxExplainCmd())
	return cmd
}

func (c *cli) sandboxCheckCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "check",
		Short: "Report what sandboxing this machine supports",
		Long: `Report the sandbox backend's parts on this machine (on Linux: bubblewrap, user
namespaces, seccomp, Landlock, a pids cgroup) and run a trial launch. Exits 1
when a required part is missing: launches are then refused, never run
unsandboxed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := sandbox.Check()
			if err != nil {
				return sandboxErr(err)
			}
			fmt.Fprint(c.stdout, r)
			if !r.Ready() {
				return &exitError{code: 1}
			}
			return nil
		},
	}
}

func (c *cli) sandboxExecCmd() *cobra.Command {
	var specFile string
	cmd := &cobra.Command{
		Use:   "exec --spec FILE -- PROGRAM [ARG...]",
		Short: "Run one command under a sandbox spec",
		Long: `Run PROGRAM with its arguments under the sandbox a spec file describes, for
debugging a tool's sandbox. No shell is involved: PROGRAM is an absolute path
or a name found in the spec's path list. The tool's stdout and stderr are
printed (each cut at limits.output), a cut or a kill is reported on stderr,
and agentrt exits with the tool's status.`,
		Example: "  agentrt sandbox exec --spec tool.yaml -- /usr/bin/git status",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec, err := loadSpec(specFile)
			if err != nil {
				return err
			}
			res, err := sandbox.Launch(cmd.Context(), spec, args, sandbox.WithStdin(c.stdin))
			if res != nil {
				c.stdout.Write(res.Stdout)
				c.stderr.Write(res.Stderr)
				reportResult(c, res)
			}
			if err != nil {
				return sandboxErr(err)
			}
			if res.ExitCode != 0 {
				return &exitError{code: res.ExitCode}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&specFile, "spec", "", "sandbox spec file (YAML or JSON)")
	return cmd
}

// reportResult says on stderr what the tool's output alone does not.
func reportResult(c *cli, res *sandbox.Result) {
	if res.StdoutTruncated {
		fmt.Fprintf(c.stderr, "agentrt: stdout cut at %d bytes (limits.output)\n", len(res.Stdout))
	}
	if res.StderrTruncated {
		fmt.Fprintf(c.stderr, "agentrt: stderr cut at %d bytes (limits.output)\n", len(res.Stderr))
	}
	switch {
	case res.TimedOut:
		fmt.Fprintf(c.stderr, "agentrt: killed after %v (limits.wall), with every process it started\n", res.WallTime.Round(1e6))
	case res.Canceled:
		fmt.Fprintln(c.stderr, "agentrt: cancelled; every process it started was killed")
	case res.Signal != 0:
		fmt.Fprintf(c.stderr, "agentrt: killed by signal %d\n", res.Signal)
	}
	for _, l := range res.Exceeded {
		if l != sandbox.LimitOutput && l != sandbox.LimitWall {
			fmt.Fprintf(c.stderr, "agentrt: limit exceeded: %s\n", l)
		}
	}
}

func (c *cli) sandboxExplainCmd() *cobra.Command {
	var specFile, goos string
	cmd := &cobra.Command{
		Use:   "explain --spec FILE [--os linux|darwin|windows] [-- PROGRAM [ARG...]]",
		Short: "Print what a sandbox spec sets up",
		Long: `Print what a launch under the spec would set up: the bubblewrap command line,
seccomp and Landlock rules and limits on Linux; the Seatbelt profile and the
sandbox-exec command on macOS; the Job Object and AppContainer settings on
Windows. --os explains another platform's.`,
		Example: "  agentrt sandbox explain --spec tool.yaml -- git status\n  agentrt sandbox explain --spec tool.yaml --os darwin",
		RunE: func(cmd *cobra.Command, args []string) error {
			spec, err := loadSpec(specFile)
			if err != nil {
				return err
			}
			out, err := sandbox.Explain(spec, goos, args)
			if err != nil {
				return sandboxErr(err)
			}
			fmt.Fprint(c.stdout, out)
			return nil
		},
	}
	cmd.Flags().StringVar(&specFile, "spec", "", "sandbox spec file (YAML or JSON)")
	cmd.Flags().StringVar(&goos, "os", runtime.GOOS, "platform to explain: linux, darwin or windows")
	return cmd
}

func loadSpec(file string) (*sandbox.Spec, error) {
	if file == "" {
		return nil, withHint(errors.New("--spec is required"), "give the sandbox spec file: --spec tool.yaml (see README.md, Native tools sandbox)")
	}
	spec, err := sandbox.Load(file)
	var se *sandbox.SpecError
	switch {
	case errors.As(err, &se):
		return nil, withHint(err, "fix the spec file; the keys are listed in README.md, Native tools sandbox")
	case errors.Is(err, os.ErrNotExist):
		return nil, withHint(err, "give the path of an existing spec file")
	}
	return spec, err
}

// sandboxErr attaches the launcher's own hint to a refusal.
func sandboxErr(err error) error {
	var re *sandbox.RefusedError
	switch {
	case errors.As(err, &re) && re.Hint != "":
		return withHint(err, "%s", re.Hint)
	case errors.Is(err, sandbox.ErrUnsupported):
		return withHint(err, "native tools run sandboxed only on Linux, macOS and Windows")
	}
	return err
}
