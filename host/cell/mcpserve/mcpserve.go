// Package mcpserve is a cell as a Model Context Protocol server: the tools
// an MCP client (an IDE, a chat application) uses to drive the cell. It
// serves them over any go-sdk transport; agentrt mcp serve serves them on
// stdio.
//
//	start_run        start a run of a module the cell holds, under the client's token
//	list_runs        the runs this client started
//	run_summary      a run's journal, summarized: calls per op, status, output
//	verify_run       replay a run against its journal and verify every entry
//	list_approvals   the approvals the client's runs wait for, with the statements to sign
//	answer_approval  a signed vote on one of them
//
// Every tool call passes the gate under the capability token given to the
// client (Options.Token), which the cell verifies when the server starts:
// a run the client starts gets an attenuation of it (its own nonce), so
// the host's gate checks the run's grant against it and every call of the
// run against both, and a grant that asks more than the token allows is
// refused before anything runs. The client sees, verifies and answers
// approvals of the runs it started and no other: each is recorded with
// the origin {kind: mcp, id: the client's id}, the first 16 hex digits of
// the token's SHA-256. A vote is counted only when an approver of the
// cell's signed it (approval.Book): the client relays votes, it cannot
// cast one. It must never hand out key material: no answer holds the
// cell's key, the client's token or its key.
package mcpserve

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/fileread"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/cellkey"
	"github.com/agentrt/agentrt/replay"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// OriginMCP is the journal.Origin kind of a run an MCP client started;
// its ID is the client's id.
const OriginMCP = "mcp"

// Options configure a Server.
type Options struct {
	// Token is the client's capability token, carrying its key (as
	// agentrt token issue writes it), so that each run gets an
	// attenuation of it.
	Token []byte
}

// Server serves one MCP client's tools on a cell.
type Server struct {
	cell   *cell.Cell
	token  []byte
	caps   capability.Caps
	client string
	trust  journal.TrustFunc

	runs sync.WaitGroup
	stop context.CancelFunc
	ctx  context.Context
}

// New checks the client's token against the cell (its key and the keys of
// DATA/token_roots): signed by a trusted root, for this cell, within its
// time window, carrying its key. A token the cell refuses is an error
// that says why.
func New(c *cell.Cell, opts Options) (*Server, error) {
	roots := []ed25519.PublicKey{c.Public()}
	if b, err := fileread.Read(filepath.Join(c.Dir, cell.TokenRootsFile), fileread.Trust); err == nil {
		more, err := cellkey.ParseTrustFile(b)
		if err != nil {
			return nil, fmt.Errorf("mcp serve: %s: %w", cell.TokenRootsFile, err)
		}
		roots = append(roots, more...)
	}
	v, err := capability.Verify(opts.Token, roots, capability.Options{Now: c.Clock.Now(), Audience: c.Public()})
	if err != nil {
		return nil, fmt.Errorf("mcp serve: the client's token: %w", err)
	}
	if v.Proof != capability.ProofKey {
		return nil, errors.New("mcp serve: the client's token is sealed: give it as issued or attenuated, carrying its key, so that each run gets an attenuation of it (agentrt token issue -o FILE)")
	}
	sum := sha256.Sum256(opts.Token)
	ctx, stop := context.WithCancel(context.Background())
	return &Server{cell: c, token: opts.Token, caps: v.Claims.Caps, client: hex.EncodeToString(sum[:8]),
		trust: journal.TrustKeys(c.Public()), ctx: ctx, stop: stop}, nil
}

// Client is the client's id: the first 16 hex digits of its token's
// SHA-256.
func (s *Server) Client() string { return s.client }

// Close stops the runs the client started that are still executing
// (they stay journaled, for a resume) and waits for them.
func (s *Server) Close() {
	s.stop()
	s.runs.Wait()
}

// MCP returns the go-sdk server of the client's tools.
func (s *Server) MCP(version string) *sdk.Server {
	srv := sdk.NewServer(&sdk.Implementation{Name: "agentrt", Version: version}, &sdk.ServerOptions{
		Instructions: "agentrt cell " + hex.EncodeToString(s.cell.Public()) + ": runs agents compiled to WebAssembly, journaled and verifiable. Start runs of modules the cell holds, list and verify them, and relay signed votes on their approvals.",
	})
	readOnly := &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}
	sdk.AddTool(srv, &sdk.Tool{Name: "start_run", Description: "Start a run of a module the cell holds (by its SHA-256), with an input and a grant (a grant file's YAML; default: the run capability alone), under this client's token: a grant wider than the token is refused. With wait, answer when the run stops."}, s.startRun)
	sdk.AddTool(srv, &sdk.Tool{Name: "list_runs", Description: "The runs this client started, newest first.", Annotations: readOnly}, s.listRuns)
	sdk.AddTool(srv, &sdk.Tool{Name: "run_summary", Description: "A run's journal summarized: entries, seals, calls per op, status and output.", Annotations: readOnly}, s.runSummary)
	sdk.AddTool(srv, &sdk.Tool{Name: "verify_run", Description: "Replay a run against its journal: every entry's signature and chain link, every call's input and output hashes, the same output.", Annotations: readOnly}, s.verifyRun)
	sdk.AddTool(srv, &sdk.Tool{Name: "list_approvals", Description: "The approvals this client's runs wait for, each with the statements an approver signs (ssh-keygen -Y sign -n agentrt-approval) to approve or deny.", Annotations: readOnly}, s.listApprovals)
	sdk.AddTool(srv, &sdk.Tool{Name: "answer_approval", Description: "Relay an approver's signed vote on an approval one of this client's runs waits for; when it decides the approval, the run goes on."}, s.answerApproval)
	return srv
}

// StartArgs are start_run's arguments.
type StartArgs struct {
	ModuleSHA256 string `json:"module_sha256" jsonschema:"the module's SHA-256, 64 hex digits, of a module the cell holds (agentrt module push)"`
	Input        string `json:"input,omitempty" jsonschema:"the run's input, as text (often JSON)"`
	Grant        string `json:"grant,omitempty" jsonschema:"a grant file's text (YAML or JSON); default: the run capability alone"`
	Wait         bool   `json:"wait,omitempty" jsonschema:"answer when the run stops, with its status and output"`
}

// RunOut is a run as the tools show it.
type RunOut struct {
	Run      string `json:"run_id"`
	Status   string `json:"status"`
	Module   string `json:"module_sha256,omitempty"`
	Started  string `json:"started,omitempty"`
	Steps    uint64 `json:"steps"`
	Output   string `json:"output,omitempty"`
	Error    string `json:"error,omitempty"`
	Waiting  uint64 `json:"waiting_step,omitempty"`
	Replayed uint64 `json:"replayed,omitempty"`
}

// RunsOut is list_runs' answer.
type RunsOut struct {
	Runs []RunOut `json:"runs"`
}

// refused is a tool's refusal: the client sees it as a tool error, whose
// text says why.
func refused(format string, args ...any) (*sdk.CallToolResult, error) {
	r := &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf(format, args...)}}}
	return r, nil
}

func (s *Server) startRun(ctx context.Context, _ *sdk.CallToolRequest, a StartArgs) (*sdk.CallToolResult, *RunOut, error) {
	sum, err := hex.DecodeString(a.ModuleSHA256)
	if err != nil || len(sum) != sha256.Size {
		r, _ := refused("module_sha256: %q is not a SHA-256 in hex (64 digits); push the module first (agentrt module push FILE) and give the hash it prints", a.ModuleSHA256)
		return r, nil, nil
	}
	var g *host.Grant
	if a.Grant != "" {
		if g, err = host.ParseGrant([]byte(a.Grant)); err != nil {
			r, _ := refused("grant: %v", err)
			return r, nil, nil
		}
	}
	// The run's own token: the client's, attenuated to the same claims
	// with a fresh nonce, so that the host's gate checks the grant and
	// every call against the client's ceiling, and no token is presented
	// twice.
	tok, err := capability.Attenuate(s.token, nil, capability.Claims{Caps: s.caps})
	if err != nil {
		return nil, nil, fmt.Errorf("attenuating the client's token: %w", err)
	}
	st, err := s.cell.Host.Start(ctx, host.RunSpec{ModuleSHA256: sum, Input: []byte(a.Input), Grant: g, Token: tok,
		Origin: &journal.Origin{Kind: OriginMCP, ID: s.client}})
	if err != nil {
		if errors.Is(err, host.ErrUnknownModule) {
			r, _ := refused("the cell holds no module %s: push it first (agentrt module push FILE)", a.ModuleSHA256)
			return r, nil, nil
		}
		r, _ := refused("the run was refused: %v", err)
		return r, nil, nil
	}
	done := s.execute(st)
	if !a.Wait {
		out := &RunOut{Run: st.Run.String(), Status: "running"}
		return nil, out, nil
	}
	select {
	case <-done:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	out, err := s.runOut(ctx, st.Run)
	return nil, out, err
}

// execute runs a started run in the background, as long as the server;
// the channel is closed when it stops.
func (s *Server) execute(st *host.Started) <-chan struct{} {
	done := make(chan struct{})
	s.runs.Add(1)
	go func() {
		defer s.runs.Done()
		defer close(done)
		_, _ = st.Execute(s.ctx)
	}()
	return done
}

// own returns the meta of run, which this client must have started.
func (s *Server) own(ctx context.Context, id string) (*journal.RunMeta, string) {
	run, err := journal.ParseRunID(id)
	if err != nil {
		return nil, fmt.Sprintf("run %q: %v (a run id is 32 hex digits, as list_runs shows them)", id, err)
	}
	m, err := s.cell.Journal.Meta(ctx, run)
	if err != nil || m.Origin == nil || m.Origin.Kind != OriginMCP || m.Origin.ID != s.client {
		// Another client's run and no run at all answer alike.
		return nil, fmt.Sprintf("run %s was not started by this client (its token); list_runs shows those that were", id)
	}
	return &m, ""
}

func (s *Server) runOut(ctx context.Context, run journal.RunID) (*RunOut, error) {
	m, err := s.cell.Journal.Meta(ctx, run)
	if err != nil {
		return nil, err
	}
	return metaOut(&m), nil
}

func metaOut(m *journal.RunMeta) *RunOut {
	out := &RunOut{Run: m.ID.String(), Status: string(m.Status), Module: hex.EncodeToString(m.ModuleSHA256), Steps: m.Steps,
		Output: strings.ToValidUTF8(string(m.Output), "\uFFFD"), Error: m.Error}
	if m.Started != 0 {
		out.Started = time.Unix(0, m.Started).UTC().Format(time.RFC3339)
	}
	if m.Wait != nil && m.Wait.Kind == journal.WaitApproval {
		out.Waiting = m.Wait.Step
	}
	return out
}

// ownRuns are the metas of the runs this client started, newest first.
func (s *Server) ownRuns(ctx context.Context) ([]journal.RunMeta, error) {
	all, err := s.cell.Journal.Runs(ctx)
	if err != nil {
		return nil, err
	}
	var mine []journal.RunMeta
	for _, m := range all {
		if m.Origin != nil && m.Origin.Kind == OriginMCP && m.Origin.ID == s.client {
			mine = append(mine, m)
		}
	}
	sort.SliceStable(mine, func(i, j int) bool { return mine[i].Started > mine[j].Started })
	return mine, nil
}

func (s *Server) listRuns(ctx context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, *RunsOut, error) {
	mine, err := s.ownRuns(ctx)
	if err != nil {
		return nil, nil, err
	}
	out := &RunsOut{Runs: []RunOut{}}
	for i := range mine {
		out.Runs = append(out.Runs, *metaOut(&mine[i]))
	}
	return nil, out, nil
}

// RunArgs name a run.
type RunArgs struct {
	Run string `json:"run_id" jsonschema:"the run's id, 32 hex digits"`
}

// SummaryOut is run_summary's answer.
type SummaryOut struct {
	RunOut
	Entries  int      `json:"entries"`
	Seals    int      `json:"seals"`
	Unsigned int      `json:"not_covered_by_a_valid_signature"`
	Ops      []OpStat `json:"ops"`
}

// OpStat counts one op's calls.
type OpStat struct {
	Op     string `json:"op"`
	Calls  int    `json:"calls"`
	Failed int    `json:"failed"`
	Effect bool   `json:"effect"`
}

func (s *Server) runSummary(ctx context.Context, _ *sdk.CallToolRequest, a RunArgs) (*sdk.CallToolResult, *SummaryOut, error) {
	m, why := s.own(ctx, a.Run)
	if m == nil {
		r, _ := refused("%s", why)
		return r, nil, nil
	}
	entries, err := journal.Inspect(ctx, s.cell.Journal, m.ID, s.trust)
	if err != nil && len(entries) == 0 {
		return nil, nil, err
	}
	out := &SummaryOut{RunOut: *metaOut(m), Entries: len(entries), Ops: []OpStat{}}
	idx := map[string]int{}
	for _, in := range entries {
		if in.Err != nil || !in.SigOK {
			out.Unsigned++
		}
		if in.Err != nil {
			continue
		}
		if in.Sealed {
			out.Seals++
		}
		e := in.Entry
		if e.Op == "" {
			continue
		}
		i, ok := idx[e.Op]
		if !ok {
			i = len(out.Ops)
			idx[e.Op] = i
			out.Ops = append(out.Ops, OpStat{Op: e.Op})
		}
		switch e.Phase {
		case journal.PhaseIntent:
			out.Ops[i].Effect = true
		case journal.PhaseCompleted:
			out.Ops[i].Calls++
		case journal.PhaseFailed:
			out.Ops[i].Calls++
			out.Ops[i].Failed++
		}
	}
	return nil, out, nil
}

// VerifyOut is verify_run's answer.
type VerifyOut struct {
	Run      string `json:"run_id"`
	Verified bool   `json:"verified"`
	Entries  int    `json:"entries"`
	Calls    int    `json:"calls"`
	Seals    int    `json:"seals"`
	Output   string `json:"output,omitempty"`
}

func (s *Server) verifyRun(ctx context.Context, _ *sdk.CallToolRequest, a RunArgs) (*sdk.CallToolResult, *VerifyOut, error) {
	m, why := s.own(ctx, a.Run)
	if m == nil {
		r, _ := refused("%s", why)
		return r, nil, nil
	}
	j, err := replay.Load(ctx, s.cell.Journal, m.ID, s.trust)
	if err != nil {
		r, _ := refused("run %s does not verify: %v", m.ID, err)
		return r, nil, nil
	}
	code, err := s.cell.Journal.Module(ctx, j.Summary.Header.ModuleSHA256)
	if err != nil {
		return nil, nil, err
	}
	rep, err := j.Replay(ctx, s.cell.Engine, code, replay.Options{})
	if err != nil {
		r, _ := refused("run %s does not verify: %v", m.ID, err)
		return r, nil, nil
	}
	return nil, &VerifyOut{Run: m.ID.String(), Verified: true, Entries: int(rep.Entries), Calls: rep.Calls, Seals: int(rep.Seals),
		Output: strings.ToValidUTF8(string(rep.Output), "\uFFFD")}, nil
}

// ApprovalOut is one approval a run waits for.
type ApprovalOut struct {
	Run       string   `json:"run_id"`
	Step      uint64   `json:"step"`
	Op        string   `json:"op"`
	Group     string   `json:"group"`
	Action    string   `json:"action"`
	State     string   `json:"state"`
	Approvers []string `json:"approvers,omitempty"`
	// Approve and Deny are the statements an approver signs.
	Approve string `json:"approve_statement"`
	Deny    string `json:"deny_statement"`
}

// ApprovalsOut is list_approvals' answer.
type ApprovalsOut struct {
	Approvals []ApprovalOut `json:"approvals"`
}

func (s *Server) listApprovals(ctx context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, *ApprovalsOut, error) {
	if s.cell.Book == nil {
		r, _ := refused("this cell has no approvers (DATA/approvers): its approvals are asked of its operator, not relayed")
		return r, nil, nil
	}
	mine, err := s.ownRuns(ctx)
	if err != nil {
		return nil, nil, err
	}
	pending, err := s.cell.Book.List(mine)
	if err != nil {
		return nil, nil, err
	}
	out := &ApprovalsOut{Approvals: []ApprovalOut{}}
	for _, p := range pending {
		yes, no := p.Statement(true), p.Statement(false)
		out.Approvals = append(out.Approvals, ApprovalOut{Run: p.Run.String(), Step: p.Step, Op: p.Record.Request.Op, Group: p.Record.Request.Group,
			Action: p.Action, State: string(p.Tally.State), Approvers: slices.Clone(p.Tally.Approvers),
			Approve: string(yes.Marshal()), Deny: string(no.Marshal())})
	}
	return nil, out, nil
}

// VoteArgs are answer_approval's arguments.
type VoteArgs struct {
	Run       string `json:"run_id"`
	Step      uint64 `json:"step"`
	Statement string `json:"statement" jsonschema:"the statement signed, exactly as list_approvals gave it"`
	Signature string `json:"signature" jsonschema:"the approver's SSH signature of it (ssh-keygen -Y sign -n agentrt-approval), armored"`
}

// VoteOut is answer_approval's answer.
type VoteOut struct {
	State     string   `json:"state"`
	Approvers []string `json:"approvers,omitempty"`
	Deniers   []string `json:"deniers,omitempty"`
	// Resumed says the vote decided the approval and the run went on.
	Resumed bool `json:"resumed"`
}

func (s *Server) answerApproval(ctx context.Context, _ *sdk.CallToolRequest, a VoteArgs) (*sdk.CallToolResult, *VoteOut, error) {
	if s.cell.Book == nil {
		r, _ := refused("this cell has no approvers (DATA/approvers): no vote is counted here")
		return r, nil, nil
	}
	m, why := s.own(ctx, a.Run)
	if m == nil {
		r, _ := refused("%s", why)
		return r, nil, nil
	}
	tally, err := s.cell.Book.Vote(m.ID, a.Step, []byte(a.Statement), []byte(a.Signature))
	if err != nil {
		r, _ := refused("the vote was not counted: %v", err)
		return r, nil, nil
	}
	out := &VoteOut{State: string(tally.State), Approvers: tally.Approvers, Deniers: tally.Deniers}
	if tally.State != "pending" {
		// The approval is decided: the run goes on from its journal.
		out.Resumed = true
		s.runs.Add(1)
		go func() {
			defer s.runs.Done()
			_, _ = s.cell.Host.Resume(s.ctx, m.ID)
		}()
	}
	return nil, out, nil
}
