package main

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentrt/agentrt/internal/fileread"
	"github.com/agentrt/agentrt/policy"
	"github.com/spf13/cobra"
)

func (c *cli) policyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Check and explain Cedar policy decisions",
		Long: `Every call that passes its capability check is decided by two Cedar policy
sets: the platform defaults, built in, and the customer's policies. A call is
allowed only if both allow it. A customer policy can therefore only restrict:
a customer permit never lets through what the platform forbids, and a
customer policy that fails to evaluate denies the call.

Policies are validated against agentrt's schema (agentrt policy schema) when
they are loaded. Permission modes (allow / ask / deny rules in YAML) are
applied after the decision and can only narrow it.`,
	}
	cmd.AddCommand(c.policyCheckCmd(), c.policyValidateCmd(), c.policySchemaCmd())
	return cmd
}

func (c *cli) policyCheckCmd() *cobra.Command {
	var (
		requestFile, policiesDir, modesFile string
		asJSON                              bool
	)
	cmd := &cobra.Command{
		Use:   "check --request FILE [--policies DIR] [--modes FILE]",
		Short: "Explain the decision on one request",
		Long: `Decide one request and explain the decision: allowed or denied, by which set,
the determining policies, and the policies that failed to evaluate.

The request file is JSON: principal and resource as Cedar entity references,
action as an op name, the context, and the entities in Cedar's JSON format
(see policy/testdata/parity/README.md). Without --policies only the platform
defaults decide. With --modes, the permission modes' verdict is printed too.

The exit status is 0 when the call would run (allowed, or ask under the
modes) and 1 when it is denied.`,
		Example: "  agentrt policy check --request req.json\n  agentrt policy check --request req.json --policies policies/ --modes modes.yaml --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if requestFile == "" {
				return withHint(errors.New("--request is required"), "give a request file; see policy/testdata/parity/README.md for its format")
			}
			b, err := fileread.Read(requestFile, fileread.Request)
			if err != nil {
				return err
			}
			req, err := policy.ParseRequest(b)
			if err != nil {
				return fmt.Errorf("%s: %w", requestFile, err)
			}
			var customer []policy.Source
			if policiesDir != "" {
				if customer, err = policy.LoadDir(policiesDir); err != nil {
					return err
				}
			}
			engine, err := policy.NewEngine(policy.Platform(), customer)
			if err != nil {
				return c.policyLoadError(policiesDir, err)
			}
			var modes *policy.Modes
			if modesFile != "" {
				mb, err := fileread.Read(modesFile, fileread.Modes)
				if err != nil {
					return err
				}
				if modes, err = policy.ParseModes(mb); err != nil {
					return fmt.Errorf("%s: %w", modesFile, err)
				}
			}
			d := engine.Decide(req)
			denied := !d.Allowed
			var verdict *policy.Verdict
			if modes != nil {
				v := modes.Apply(d, policy.CallOf(req))
				verdict = &v
				denied = v.Effect == policy.Deny
			}
			hash := engine.Hash()
			if asJSON {
				out := struct {
					Decision   policy.Decision `json:"decision"`
					Modes      *policy.Verdict `json:"modes,omitempty"`
					PolicyHash string          `json:"policy_hash"`
				}{d, verdict, hex.EncodeToString(hash[:])}
				enc := json.NewEncoder(c.stdout)
				enc.SetIndent("", "  ")
				if err := enc.Encode(out); err != nil {
					return err
				}
			} else {
				fmt.Fprint(c.stdout, d.Explain())
				if verdict != nil {
					rule := "no rule matched: the default"
					if verdict.Rule != "" {
						rule = "rule " + verdict.Rule
					} else if !d.Allowed {
						rule = "the policy decision denied"
					}
					fmt.Fprintf(c.stdout, "modes: %s (%s)\n", verdict.Effect, rule)
				}
			}
			if denied {
				return &exitError{1}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&requestFile, "request", "", "JSON file of the request to decide")
	f.StringVar(&policiesDir, "policies", "", "directory (or file) of customer policies, *.cedar")
	f.StringVar(&modesFile, "modes", "", "YAML file of permission modes to apply after the decision")
	f.BoolVar(&asJSON, "json", false, `print one JSON object {"decision", "modes", "policy_hash"}`)
	return cmd
}

func (c *cli) policyValidateCmd() *cobra.Command {
	var modesFile string
	cmd := &cobra.Command{
		Use:   "validate DIR",
		Short: "Validate customer policies against the schema",
		Long: `Parse every *.cedar file under DIR (or the one file DIR names) and validate
each policy against agentrt's schema: entity types, actions, attributes and
types. Each problem is printed as FILE:LINE:COLUMN with the policy's id;
for schema errors the position is that of the policy.`,
		Example: "  agentrt policy validate policies/\n  agentrt policy validate policies/ --modes modes.yaml",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			srcs, err := policy.LoadDir(dir)
			if err != nil {
				return err
			}
			set, err := policy.ParseSet(policy.SetCustomer, srcs)
			if err != nil {
				return c.policyLoadError(dir, err)
			}
			fmt.Fprintf(c.stdout, "%s: valid (%s, %s)\n", dir, plural(set.Len(), "policy", "policies"), plural(len(srcs), "file", "files"))
			if modesFile != "" {
				b, err := fileread.Read(modesFile, fileread.Modes)
				if err != nil {
					return err
				}
				m, err := policy.ParseModes(b)
				if err != nil {
					return fmt.Errorf("%s: %w", modesFile, err)
				}
				fmt.Fprintf(c.stdout, "%s: valid (%s, default %s)\n", modesFile, plural(len(m.Rules), "rule", "rules"), m.Default)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&modesFile, "modes", "", "also validate this YAML file of permission modes")
	return cmd
}

func (c *cli) policySchemaCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the Cedar schema policies are validated against",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := c.stdout.Write(policy.Schema())
			return err
		},
	}
}

// policyLoadError prints each problem of a *policy.LoadError on its own line,
// with file names as the user gave them, and returns the error to exit with.
func (c *cli) policyLoadError(dir string, err error) error {
	var le *policy.LoadError
	if !errors.As(err, &le) {
		return err
	}
	base := dir
	if st, serr := os.Stat(dir); serr == nil && !st.IsDir() {
		base = filepath.Dir(dir)
	}
	for _, p := range le.Problems {
		if le.Set == policy.SetCustomer && base != "" {
			p.File = filepath.Join(base, filepath.FromSlash(p.File))
		}
		fmt.Fprintln(c.stderr, p)
	}
	return withHint(fmt.Errorf("%d problems in the %s policies", len(le.Problems), le.Set),
		"the schema they are checked against: agentrt policy schema")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
