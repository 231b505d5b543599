package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/user"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/termtext"
)

// termApprover answers the calls a permission mode asks about by asking the
// person at the controlling terminal of `agentrt run`. The prompt is
// written to the terminal itself, never to the streams the guest's output
// goes to, and the answer is read from it: what a guest prints (escaped,
// and on stderr) can neither look like the prompt nor answer it.
type termApprover struct {
	mu      sync.Mutex
	in, out *os.File
	who     string
	// styled: the terminal shows SGR attributes; the prompt's banner is
	// then in reverse video, which no guest text can produce (its ESC
	// bytes are escaped).
	styled bool
}

// terminalApprover returns an approver on the controlling terminal when
// the command is interactive (stdin and stderr are terminals, and there is
// a controlling terminal to open); nil otherwise: without a person to ask,
// an ask is a no, and the run's policy mode is "unattended".
func (c *cli) terminalApprover() host.Approver {
	if !c.interactive() {
		return nil
	}
	in, out, err := openTTY()
	if err != nil {
		return nil
	}
	who := "terminal"
	if u, err := user.Current(); err == nil {
		who = "terminal:" + u.Username
	}
	// A Windows console shows SGR only in VT mode, which agentrt does not
	// turn on; a dumb terminal never does.
	styled := os.Getenv("TERM") != "dumb" && runtime.GOOS != "windows"
	return &termApprover{in: in, out: out, who: who, styled: styled}
}

// Approve asks one question at a time and waits for a line typed after
// the prompt appeared; anything but y or yes is a no.
func (a *termApprover) Approve(ctx context.Context, ap host.Approval) (bool, string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	banner := "== agentrt =="
	if a.styled {
		banner = "\x1b[0;7m agentrt \x1b[0m"
	}
	what := describeCall(ap.Op, ap.Method, ap.Resource)
	// What was typed before the prompt is dropped before it is shown: an
	// answer typed as soon as it appears must not be dropped with it.
	discardInput(a.in)
	// A fresh line first: the guest's last line may be unfinished.
	fmt.Fprintf(a.out, "\r\n%s approval needed: run %s, step %d (permission mode rule %s)\r\n%s   %s\r\n%s allow it? [y/N] ",
		banner, ap.Run, ap.Step, termtext.Quote(ap.Rule), banner, what, banner)
	a.in.SetReadDeadline(time.Time{})
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(a.in).ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		s = strings.ToLower(strings.TrimSpace(s))
		return s == "y" || s == "yes", a.who, nil
	case <-ctx.Done():
		// Unblock the reader (a terminal is pollable); what it read is
		// dropped with it.
		a.in.SetReadDeadline(time.Now())
		fmt.Fprint(a.out, "\r\n")
		return false, "", ctx.Err()
	}
}

// describeCall names a parked call for the operator: its op, and its
// method and resource quoted (they come from the guest, and quoted they
// show every control character escaped).
func describeCall(op, method, resource string) string {
	what := op
	if method != "" {
		what += " " + termtext.Quote(method)
	}
	if resource != "" {
		what += " " + termtext.Quote(resource)
	}
	return what
}
