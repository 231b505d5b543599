package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentrt/agentrt/approval"
	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/fileread"
	"github.com/agentrt/agentrt/internal/termtext"
	"github.com/agentrt/agentrt/journal"
	"github.com/spf13/cobra"
)

// approvalsSource is where the approvals of the data directory are read and
// voted on: its daemon, or, when none runs, its store.
type approvalsSource struct {
	client *cell.Client
	cell   *cell.Cell
}

// openApprovals reaches the cell's approvals: through its daemon when one
// holds the data directory (or --cell names one), else in its store. signed
// reports whether the cell has approvers (its approvals take signed votes).
func (c *cli) openApprovals(ctx context.Context, target string) (src *approvalsSource, signed bool, err error) {
	cl, err := c.cellClient(target)
	if err != nil {
		return nil, false, err
	}
	if cl != nil {
		info, err := cl.Cell(ctx)
		if err != nil {
			return nil, false, remoteHint(err)
		}
		return &approvalsSource{client: cl}, info.Approvers, nil
	}
	ce, err := c.open(ctx, cell.Options{})
	if err != nil {
		return nil, false, err
	}
	return &approvalsSource{cell: ce}, ce.Book != nil, nil
}

func (a *approvalsSource) close() {
	if a.cell != nil {
		a.cell.Close(context.Background())
	}
}

func (a *approvalsSource) list(ctx context.Context) ([]cell.SignedApproval, error) {
	if a.client != nil {
		out, err := a.client.SignedApprovals(ctx)
		return out, remoteErr(err)
	}
	runs, err := a.cell.Store.Runs(ctx)
	if err != nil {
		return nil, err
	}
	ps, err := a.cell.Book.List(runs)
	if err != nil {
		return nil, err
	}
	out := []cell.SignedApproval{}
	for _, p := range ps {
		out = append(out, cell.SignedApprovalOf(p))
	}
	return out, nil
}

// pending returns the approval run waits for (at step, or its current
// wait when step is 0).
func (a *approvalsSource) pending(ctx context.Context, run string, step uint64) (cell.SignedApproval, error) {
	if a.client != nil {
		if step == 0 {
			ri, err := a.client.Run(ctx, run)
			if err != nil {
				return cell.SignedApproval{}, remoteHint(err)
			}
			if ri.Wait == nil || ri.Wait.Kind != journal.WaitApproval {
				return cell.SignedApproval{}, withHint(fmt.Errorf("run %s (%s) waits for no approval", ri.RunID, ri.Status), "agentrt approvals lists the approvals waiting")
			}
			step = ri.Wait.Step
		}
		p, err := a.client.SignedApproval(ctx, run, step)
		return p, remoteErr(err)
	}
	id, err := cell.FindRun(ctx, a.cell.Store, run)
	if err != nil {
		return cell.SignedApproval{}, err
	}
	if step == 0 {
		m, err := a.cell.Store.Meta(ctx, id)
		if err != nil {
			return cell.SignedApproval{}, err
		}
		if m.Wait == nil || m.Wait.Kind != journal.WaitApproval {
			return cell.SignedApproval{}, withHint(fmt.Errorf("run %s (%s) waits for no approval", id, m.Status), "agentrt approvals lists the approvals waiting")
		}
		step = m.Wait.Step
	}
	p, err := a.cell.Book.Get(id, step)
	if err != nil {
		return cell.SignedApproval{}, err
	}
	return cell.SignedApprovalOf(p), nil
}

func (a *approvalsSource) vote(ctx context.Context, p cell.SignedApproval, statement, signature []byte) (cell.SignedApproval, error) {
	if a.client != nil {
		ans, err := a.client.Vote(ctx, p.RunID, cell.VoteSubmission{Step: p.Step, Statement: string(statement), Signature: string(signature)})
		return ans.Approval, remoteErr(err)
	}
	id, err := journal.ParseRunID(p.RunID)
	if err != nil {
		return cell.SignedApproval{}, err
	}
	m, err := a.cell.Store.Meta(ctx, id)
	if err != nil {
		return cell.SignedApproval{}, err
	}
	if m.Wait == nil || m.Wait.Kind != journal.WaitApproval || m.Wait.Step != p.Step || m.Status.Finished() {
		return cell.SignedApproval{}, fmt.Errorf("%w: run %s (%s) waits for no approval at step %d", cell.ErrNotWaiting, id, m.Status, p.Step)
	}
	if _, err := a.cell.Book.Vote(id, p.Step, statement, signature); err != nil {
		return cell.SignedApproval{}, err
	}
	q, err := a.cell.Book.Get(id, p.Step)
	if err != nil {
		return cell.SignedApproval{}, err
	}
	return cell.SignedApprovalOf(q), nil
}

// remoteErr is remoteHint for an error that may be nil.
func remoteErr(err error) error {
	if err == nil {
		return nil
	}
	return remoteHint(err)
}

func (c *cli) approvalsCmd() *cobra.Command {
	var (
		target string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "approvals",
		Short: "List the approvals parked runs wait for, with their action, digest, votes and expiry",
		Long: `List the approvals the runs of this cell wait for. A run that asks for an
approval (agent.RequestApproval, or a call a permission mode answers with
"ask") parks: its instance is closed, and it resumes when the quorum of its
group of approvers (DATA/approvers/GROUP, rules in DATA/approvals.yaml)
decides, by votes signed with their SSH keys, or when the request expires.

Each line shows the run and step, the group and its rule, the votes so far
and the expiry; --json adds the action digest the votes are bound to, the
members, the counted votes and the statement to sign. Vote with
agentrt approve RUN STEP --key ~/.ssh/id_ed25519.

It asks the cell daemon that holds the data directory, or reads the store
when no daemon runs. A cell without approvers asks its operator instead
(agentrt approve --list shows those calls).`,
		Example: "  agentrt approvals\n  agentrt approvals --json | jq '.[0].statement'",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			src, signed, err := c.openApprovals(ctx, target)
			if err != nil {
				return err
			}
			defer src.close()
			if !signed {
				return withHint(errors.New("this cell has no approvers (DATA/approvers): its permission modes ask its operator"),
					"agentrt approve --list lists the calls waiting in the daemon; to take signed votes, add DATA/approvers/GROUP files of authorized_keys lines")
			}
			list, err := src.list(ctx)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(c.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(list)
			}
			if len(list) == 0 {
				fmt.Fprintln(c.stderr, "no approval is waiting")
				return nil
			}
			tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "RUN\tSTEP\tOP\tGROUP\tVOTES\tEXPIRES\tACTION")
			for _, a := range list {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", a.RunID, a.Step, a.Op, a.Group, votesLine(a), expiresLine(a.Expires), termtext.Quote(a.Action))
			}
			return tw.Flush()
		},
	}
	f := cmd.Flags()
	f.StringVar(&target, "cell", "", "the cell to ask (unix:PATH or http://127.0.0.1:PORT); default: the data directory's daemon, or its store")
	f.BoolVar(&asJSON, "json", false, "print the approvals as JSON, with digests, members, votes and the statements to sign")
	return cmd
}

func votesLine(a cell.SignedApproval) string {
	s := fmt.Sprintf("%d of %d", len(a.Approvers), a.Quorum)
	if len(a.Approvers) > 0 {
		s += " (" + strings.Join(a.Approvers, " ") + ")"
	}
	if a.TwoPerson {
		s += " two-person"
	}
	if a.Ordered {
		s += " ordered"
	}
	return s
}

func expiresLine(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return t.Format(time.RFC3339)
}

func (c *cli) approveCmd() *cobra.Command {
	var (
		target, key, statementFile, signatureFile string
		step                                      uint64
		deny, list, printStatement                bool
	)
	cmd := &cobra.Command{
		Use:   "approve RUN [STEP]",
		Short: "Vote on an approval a run waits for (signed with your SSH key), or answer a call a permission mode parked",
		Long: `Vote on the approval a parked run waits for. In a cell with approvers
(DATA/approvers/GROUP: one authorized_keys line per approver, the comment its
name), a vote is a statement signed with the approver's own ed25519 SSH key
in the SSH signature format (namespace agentrt-approval), bound to the
request's action digest: SHA-256 over the op, the request, the run and the
step. The cell counts it towards the group's quorum (DATA/approvals.yaml:
k of n distinct approvers, the two-person rule, an order, an expiry) and
journals it, with its signature, when the request is decided; a forged,
unknown, duplicate, late or self-approving vote is refused and changes
nothing.

  --key FILE        sign here with an OpenSSH ed25519 private key (unencrypted;
                    for an encrypted key, sign with ssh-keygen as below)
  --print           print the statement to sign, and sign it elsewhere:
                      agentrt approve RUN STEP --print > vote.txt
                      ssh-keygen -Y sign -n agentrt-approval -f ~/.ssh/id_ed25519 vote.txt
                      agentrt approve RUN STEP --statement vote.txt --signature vote.txt.sig
  --deny            vote to deny (one counted deny denies the request)

RUN is a run id, a unique prefix of one, or "last"; STEP defaults to the
step the run waits at. The vote goes to the cell daemon holding the data
directory, or, when none runs, into its store (agentrt resume RUN then goes
on with a decided run).

In a cell without approvers, a permission mode's ask waits in the daemon for
its operator: agentrt approve RUN [--step N] [--deny] answers it. Who
answered is named by the cell from the credential the answer came with,
never by the answer itself: on the unix socket, the user the kernel reports
for this process ("unix:alice(uid 1000)"); on TCP, the API token
("token:api#" and the first 8 hex digits of the token's SHA-256).
agentrt approve --list lists those calls.`,
		Example: "  agentrt approvals\n  agentrt approve last --key ~/.ssh/id_ed25519\n  agentrt approve 18ec7ae8 12 --deny --key ~/.ssh/id_ed25519\n  agentrt approve 18ec7ae8 12 --print > vote.txt",
		Args:    cobra.MaximumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if len(args) == 2 {
				n, err := strconv.ParseUint(args[1], 10, 64)
				if err != nil || n == 0 {
					return withHint(fmt.Errorf("step %q is not a step number", args[1]), "steps count from 1; agentrt approvals lists them")
				}
				if step != 0 && step != n {
					return fmt.Errorf("step %d and --step %d disagree", n, step)
				}
				step = n
			}
			src, signed, err := c.openApprovals(ctx, target)
			if err != nil {
				return err
			}
			defer src.close()
			if !signed {
				if key != "" || statementFile != "" || signatureFile != "" || printStatement {
					return withHint(errors.New("this cell has no approvers (DATA/approvers): it takes its operator's answers, not signed votes"),
						"answer with: agentrt approve RUN [--deny]")
				}
				return c.answerOperator(ctx, src, args, step, deny, list)
			}
			if list || len(args) == 0 {
				return withHint(errors.New("name the run whose approval you vote on"), "agentrt approvals lists them")
			}
			p, err := src.pending(ctx, args[0], step)
			if err != nil {
				return err
			}
			statement := []byte(p.Statement)
			if deny {
				statement = []byte(p.DenyStatement)
			}
			if printStatement {
				_, err := c.stdout.Write(statement)
				return err
			}
			var sig []byte
			switch {
			case key != "" && signatureFile != "":
				return errors.New("--key signs here and --signature gives a signature made elsewhere: use one")
			case key != "":
				if statementFile != "" {
					return errors.New("--statement goes with --signature (a statement signed elsewhere); with --key agentrt signs the request's own statement")
				}
				signer, err := approval.LoadSigner(key)
				if err != nil {
					return withHint(err, "the key is an OpenSSH ed25519 private key, mode 0600; an encrypted one: sign the statement of --print with ssh-keygen -Y sign")
				}
				if sig, err = approval.Sign(signer, statement); err != nil {
					return err
				}
			case signatureFile != "":
				if statementFile != "" {
					if statement, err = fileread.Read(statementFile, fileread.Vote); err != nil {
						return err
					}
				}
				if sig, err = fileread.Read(signatureFile, fileread.Vote); err != nil {
					return err
				}
			default:
				return withHint(errors.New("a vote in this cell is signed: give --key FILE, or --signature FILE for a statement signed elsewhere"),
					"agentrt approve %s %d --key ~/.ssh/id_ed25519", p.RunID, p.Step)
			}
			after, err := src.vote(ctx, p, statement, sig)
			var ve *cell.VoteError
			if errors.As(err, &ve) || errors.Is(err, cell.ErrVoteRefused) {
				return withHint(err, "nothing changed: the vote was not counted")
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(c.stdout, "run %s step %d: vote counted; %s: %s\n", after.RunID, after.Step, after.State, votesLine(after))
			if after.State != "pending" && src.client == nil {
				fmt.Fprintf(c.stderr, "agentrt: no daemon holds this data directory: agentrt resume %s goes on with the run\n", after.RunID)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&target, "cell", "", "the cell to ask (unix:PATH or http://127.0.0.1:PORT); default: the data directory's daemon, or its store")
	f.StringVar(&key, "key", "", "sign the vote with this OpenSSH ed25519 private key")
	f.StringVar(&statementFile, "statement", "", "the statement signed elsewhere (default: the request's own, as --print prints it)")
	f.StringVar(&signatureFile, "signature", "", "the statement's armored SSH signature, as ssh-keygen -Y sign writes it")
	f.BoolVar(&printStatement, "print", false, "print the statement to sign and exit")
	f.Uint64Var(&step, "step", 0, "the step of the call (default: the step the run waits at)")
	f.BoolVar(&deny, "deny", false, "vote to deny (refuse the call)")
	f.BoolVar(&list, "list", false, "in a cell without approvers: list the calls waiting for their operator")
	return cmd
}

// answerOperator answers, in a cell daemon without approvers, a call a
// permission mode parked for its operator.
func (c *cli) answerOperator(ctx context.Context, src *approvalsSource, args []string, step uint64, deny, list bool) error {
	cl := src.client
	if cl == nil {
		return withHint(errors.New("no cell daemon holds this data directory"), "calls wait for approval only in a cell daemon: agentrt cell serve (a foreground agentrt run asks at its terminal)")
	}
	if list || len(args) == 0 {
		waiting, err := cl.Approvals(ctx)
		if err != nil {
			return remoteHint(err)
		}
		if len(waiting) == 0 {
			fmt.Fprintln(c.stderr, "no call is waiting for approval")
		}
		for _, a := range waiting {
			fmt.Fprintf(c.stdout, "%s\tstep %d\t%s\trule %s\n", a.RunID, a.Step, describeCall(a.Op, a.Method, a.Resource), termtext.Quote(a.Rule))
		}
		return nil
	}
	a, err := cl.Approve(ctx, args[0], cell.Answer{Step: step, Approve: !deny})
	if err != nil {
		return remoteHint(err)
	}
	verb := "approved"
	if deny {
		verb = "denied"
	}
	fmt.Fprintf(c.stdout, "run %s step %d (%s) %s by %s\n", a.RunID, a.Step, a.Op, verb, a.Approver)
	return nil
}
