package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"sync"

	"github.com/agentrt/agentrt/host"
)

// termApprover answers the calls a permission mode asks about by asking the
// person at the terminal of `agentrt run`.
type termApprover struct {
	mu  sync.Mutex
	in  *bufio.Reader
	out io.Writer
	who string
}

// terminalApprover returns an approver on in and out when in is a terminal,
// nil otherwise: without a person to ask, an ask is a no.
func terminalApprover(in io.Reader, out io.Writer) host.Approver {
	f, ok := in.(*os.File)
	if !ok {
		return nil
	}
	st, err := f.Stat()
	if err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return nil
	}
	who := "terminal"
	if u, err := user.Current(); err == nil {
		who = "terminal:" + u.Username
	}
	return &termApprover{in: bufio.NewReader(f), out: out, who: who}
}

// Approve asks one question at a time and waits for a line; anything but
// y or yes is a no.
func (a *termApprover) Approve(ctx context.Context, ap host.Approval) (bool, string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	what := ap.Op
	if ap.Method != "" {
		what += " " + ap.Method
	}
	if ap.Resource != "" {
		what += " " + ap.Resource
	}
	fmt.Fprintf(a.out, "agentrt: step %d asks for approval (permission mode rule %q): %s\nallow it? [y/N] ", ap.Step, ap.Rule, what)
	line := make(chan string, 1)
	go func() {
		s, _ := a.in.ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		s = strings.ToLower(strings.TrimSpace(s))
		return s == "y" || s == "yes", a.who, nil
	case <-ctx.Done():
		fmt.Fprintln(a.out)
		return false, "", ctx.Err()
	}
}
