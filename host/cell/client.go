package cell

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
)

// Client speaks the cell API to a cell daemon (or to a foreground run's
// control socket).
type Client struct {
	base string
	hc   *http.Client
	// token is the bearer token sent to a TCP address.
	token string
}

// DialOptions tune DialWith.
type DialOptions struct {
	// Token is the API token for an http:// target; empty: $AGENTRT_API_TOKEN,
	// else the api.token file of DataDir.
	Token string
	// DataDir is the data directory whose api.token an http:// target
	// takes; empty: DefaultDataDir.
	DataDir string
}

// Dial returns a client for target: "unix:PATH" (or "unix://PATH") for a
// unix socket, or an http:// URL of a loopback address, with the API token
// found as DialOptions says.
func Dial(target string) (*Client, error) { return DialWith(target, DialOptions{}) }

// DialWith is Dial with options. For an http:// target it fails with
// ErrNoAPIToken when no token is found, naming where it looked.
func DialWith(target string, opts DialOptions) (*Client, error) {
	switch {
	case strings.HasPrefix(target, "unix:"):
		path := strings.TrimPrefix(strings.TrimPrefix(target, "unix:"), "//")
		if path == "" {
			return nil, fmt.Errorf("cell: %q names no socket (write unix:/path/to/%s)", target, SocketName)
		}
		tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}}
		return &Client{base: "http://" + SocketHost, hc: &http.Client{Transport: tr}}, nil
	case strings.HasPrefix(target, "http://"):
		u, err := url.Parse(target)
		if err != nil {
			return nil, fmt.Errorf("cell: %q: %w", target, err)
		}
		tok, err := findToken(opts)
		if err != nil {
			return nil, err
		}
		// The API answers with errors, never redirects; a client that
		// followed one would carry the token elsewhere.
		hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		return &Client{base: strings.TrimSuffix(u.String(), "/"), hc: hc, token: tok}, nil
	}
	return nil, fmt.Errorf("cell: %q is not a cell address (unix:/path/to/%s or http://127.0.0.1:PORT)", target, SocketName)
}

// findToken returns the API token: the option, $AGENTRT_API_TOKEN, or the
// data directory's token file, in that order.
func findToken(opts DialOptions) (string, error) {
	if opts.Token != "" {
		return parseTokenFrom("the token given", opts.Token)
	}
	if env := os.Getenv(EnvAPIToken); env != "" {
		return parseTokenFrom("$"+EnvAPIToken, env)
	}
	dir := opts.DataDir
	if dir == "" {
		var err error
		if dir, err = DefaultDataDir(); err != nil {
			return "", fmt.Errorf("%w: %v", ErrNoAPIToken, err)
		}
	}
	tok, err := ReadAPIToken(APITokenPath(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%w: $%s is not set and %s does not exist", ErrNoAPIToken, EnvAPIToken, APITokenPath(dir))
	}
	return tok, err
}

func parseTokenFrom(what, s string) (string, error) {
	tok, err := parseAPIToken(s)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %v", ErrBadAPIToken, what, err)
	}
	return tok, nil
}

// RemoteError is an error answer of the API. Its text is the cell's; it
// matches, with errors.Is and errors.As, the sentinel errors of the kinds
// the answer lists and the *journal.GapError it names.
type RemoteError struct {
	Code int
	APIError
	wrapped []error
}

func (e *RemoteError) Error() string { return e.APIError.Error }

// Unwrap returns the errors of the kinds the answer lists.
func (e *RemoteError) Unwrap() []error { return e.wrapped }

// Hint returns the cell's hint for the error, if any.
func (e *RemoteError) Hint() string { return e.APIError.Hint }

func (c *Client) do(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cell: %w", err)
	}
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		var e APIError
		if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&e); err != nil || e.Error == "" {
			e = APIError{Error: fmt.Sprintf("cell answered %s", resp.Status)}
		}
		return nil, newRemoteError(resp.StatusCode, e)
	}
	return resp, nil
}

func (c *Client) call(ctx context.Context, method, path string, body, out any) error {
	resp, err := c.do(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("cell: bad answer to %s %s: %w", method, path, err)
	}
	return nil
}

// Cell returns the cell's identity and live runs.
func (c *Client) Cell(ctx context.Context) (CellInfo, error) {
	var ci CellInfo
	return ci, c.call(ctx, http.MethodGet, "/v1/cell", nil, &ci)
}

// Runs lists the cell's runs, newest first.
func (c *Client) Runs(ctx context.Context) ([]RunInfo, error) {
	var out []RunInfo
	return out, c.call(ctx, http.MethodGet, "/v1/runs", nil, &out)
}

// Run returns one run (an id, a unique prefix, or "last").
func (c *Client) Run(ctx context.Context, run string) (RunInfo, error) {
	var ri RunInfo
	return ri, c.call(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(run), nil, &ri)
}

// Submit starts a run on the cell and returns its id.
func (c *Client) Submit(ctx context.Context, sub Submission) (string, error) {
	var s Submitted
	return s.RunID, c.call(ctx, http.MethodPost, "/v1/runs", sub, &s)
}

// SubmitFollow starts a run and streams its events from the first one: the
// first line carries the run id, the last its end.
func (c *Client) SubmitFollow(ctx context.Context, sub Submission) (*Stream, error) {
	resp, err := c.do(ctx, http.MethodPost, "/v1/runs?follow=1", sub)
	if err != nil {
		return nil, err
	}
	return newStream(resp.Body), nil
}

// Resume continues a stopped or cancelled run on the cell.
func (c *Client) Resume(ctx context.Context, run string) (string, error) {
	var s Submitted
	return s.RunID, c.call(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(run)+"/resume", nil, &s)
}

// Handoff moves a run executing on the cell to the cell to (its id or
// registry name) by a signed handoff, and returns once the destination
// accepted it, or refused it and the cell resumed the run.
func (c *Client) Handoff(ctx context.Context, run, to string) (HandoffInfo, error) {
	var out HandoffInfo
	return out, c.call(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(run)+"/handoff", HandoffRequest{To: to}, &out)
}

// ResumeFollow continues a run and streams its events, as SubmitFollow.
func (c *Client) ResumeFollow(ctx context.Context, run string) (*Stream, error) {
	resp, err := c.do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(run)+"/resume?follow=1", nil)
	if err != nil {
		return nil, err
	}
	return newStream(resp.Body), nil
}

// Cancel stops a run at its next step boundary and returns how it stands.
func (c *Client) Cancel(ctx context.Context, run string) (RunInfo, error) {
	var ri RunInfo
	return ri, c.call(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(run)+"/cancel", nil, &ri)
}

// Events streams a run's event log; with follow, live events after it
// until the run stops.
func (c *Client) Events(ctx context.Context, run string, follow bool) (*Stream, error) {
	path := "/v1/runs/" + url.PathEscape(run) + "/events"
	if follow {
		path += "?follow=1"
	}
	resp, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	return newStream(resp.Body), nil
}

// Stream reads the lines of an event stream.
type Stream struct {
	body io.ReadCloser
	sc   *bufio.Scanner
}

func newStream(body io.ReadCloser) *Stream {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	return &Stream{body: body, sc: sc}
}

// ErrStreamEnd is returned by Next after the stream's last line.
var ErrStreamEnd = errors.New("cell: end of stream")

// Next returns the next line, or ErrStreamEnd.
func (s *Stream) Next() (StreamLine, error) {
	var l StreamLine
	if !s.sc.Scan() {
		if err := s.sc.Err(); err != nil {
			return l, fmt.Errorf("cell: event stream: %w", err)
		}
		return l, ErrStreamEnd
	}
	if err := json.Unmarshal(s.sc.Bytes(), &l); err != nil {
		return l, fmt.Errorf("cell: event stream: %w", err)
	}
	return l, nil
}

// Close ends the stream.
func (s *Stream) Close() error { return s.body.Close() }

// Approvals lists the calls waiting for approval in the cell.
func (c *Client) Approvals(ctx context.Context) ([]ApprovalInfo, error) {
	var out []ApprovalInfo
	return out, c.call(ctx, http.MethodGet, "/v1/approvals", nil, &out)
}

// SignedApprovals lists the approvals waiting in a cell with approvers.
func (c *Client) SignedApprovals(ctx context.Context) ([]SignedApproval, error) {
	var out []SignedApproval
	return out, c.call(ctx, http.MethodGet, "/v1/approvals", nil, &out)
}

// SignedApproval returns the approval run waits for at step.
func (c *Client) SignedApproval(ctx context.Context, run string, step uint64) (SignedApproval, error) {
	var out SignedApproval
	return out, c.call(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(run)+"/approvals/"+strconv.FormatUint(step, 10), nil, &out)
}

// Vote submits a signed vote on the approval run waits for.
func (c *Client) Vote(ctx context.Context, run string, v VoteSubmission) (VoteAnswer, error) {
	var out VoteAnswer
	return out, c.call(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(run)+"/votes", v, &out)
}

// Approve answers a call of run waiting for approval.
func (c *Client) Approve(ctx context.Context, run string, a Answer) (ApprovalInfo, error) {
	var out ApprovalInfo
	return out, c.call(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(run)+"/approve", a, &out)
}

// AddTrigger adds a trigger to the cell; a webhook trigger's answer
// carries its secret, once.
func (c *Client) AddTrigger(ctx context.Context, ts TriggerSpec) (TriggerInfo, error) {
	var out TriggerInfo
	return out, c.call(ctx, http.MethodPost, "/v1/triggers", ts, &out)
}

// Triggers lists the cell's triggers by name.
func (c *Client) Triggers(ctx context.Context) ([]TriggerInfo, error) {
	var out []TriggerInfo
	return out, c.call(ctx, http.MethodGet, "/v1/triggers", nil, &out)
}

// Trigger returns one trigger.
func (c *Client) Trigger(ctx context.Context, name string) (TriggerInfo, error) {
	var out TriggerInfo
	return out, c.call(ctx, http.MethodGet, "/v1/triggers/"+url.PathEscape(name), nil, &out)
}

// RemoveTrigger removes a trigger and its log; the runs it started stay.
func (c *Client) RemoveTrigger(ctx context.Context, name string) error {
	var out map[string]string
	return c.call(ctx, http.MethodDelete, "/v1/triggers/"+url.PathEscape(name), nil, &out)
}

// PauseTrigger stops a trigger from firing until ResumeTrigger.
func (c *Client) PauseTrigger(ctx context.Context, name string) (TriggerInfo, error) {
	var out TriggerInfo
	return out, c.call(ctx, http.MethodPost, "/v1/triggers/"+url.PathEscape(name)+"/pause", nil, &out)
}

// ResumeTrigger lets a paused trigger fire again; a schedule's moments
// while it was paused are not caught up.
func (c *Client) ResumeTrigger(ctx context.Context, name string) (TriggerInfo, error) {
	var out TriggerInfo
	return out, c.call(ctx, http.MethodPost, "/v1/triggers/"+url.PathEscape(name)+"/resume", nil, &out)
}

// TriggerLog returns a trigger's firings, oldest first; limit > 0 keeps
// the newest limit.
func (c *Client) TriggerLog(ctx context.Context, name string, limit int) ([]Firing, error) {
	var out []Firing
	path := "/v1/triggers/" + url.PathEscape(name) + "/log"
	if limit > 0 {
		path += "?limit=" + strconv.Itoa(limit)
	}
	return out, c.call(ctx, http.MethodGet, path, nil, &out)
}
