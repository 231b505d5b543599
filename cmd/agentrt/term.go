package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/termtext"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// isTerminal reports whether f is an *os.File on a terminal, by the
// terminal ioctl (a character device such as /dev/null is not one).
func isTerminal(f any) bool {
	file, ok := f.(*os.File)
	return ok && term.IsTerminal(int(file.Fd()))
}

// interactive reports whether a person can be asked: stdin and stderr are
// both terminals. A run from cron, nohup, systemd or with </dev/null is
// unattended, and the policies for unattended runs apply to it.
func (c *cli) interactive() bool { return isTerminal(c.stdin) && isTerminal(c.stderr) }

// eventPrinter shows a guest's events: its stdout and stderr as a stream,
// its log lines one per line, everything escaped for the terminal (or, for
// agentrt logs --raw, as the guest wrote it).
type eventPrinter struct {
	mu     sync.Mutex
	w      io.Writer
	stream *termtext.Writer
	raw    bool
}

func newEventPrinter(w io.Writer, raw bool) *eventPrinter {
	return &eventPrinter{w: w, stream: termtext.NewWriter(w), raw: raw}
}

var logLevels = [...]string{"debug", "info", "warn", "error"}

func (p *eventPrinter) print(e host.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case e.Kind == host.EventRunLog:
		p.stream.Flush()
		msg := string(e.Data)
		if !p.raw {
			msg = termtext.Line(msg)
		}
		io.WriteString(p.w, "  ["+logLevels[min(int(e.Level), len(logLevels)-1)]+"] "+msg+"\n")
	case p.raw:
		p.w.Write(e.Data)
	default:
		p.stream.Write(e.Data)
	}
}

// flush writes out a character the guest left incomplete.
func (p *eventPrinter) flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stream.Flush()
}

// progress returns a progress bar for long work, drawn on stderr once
// its total is known (the first set), or nil (no bar) when stdout or
// stderr is not a terminal or quiet is set (--quiet, --json): a bar is
// for a person watching, never for a file or a program reading the
// output. A nil bar's methods do nothing.
func (c *cli) progress(what string, quiet bool) *progressBar {
	if quiet || !isTerminal(c.stderr) || !isTerminal(c.stdout) {
		return nil
	}
	return &progressBar{what: what, w: c.stderr}
}

// spinner returns a bar for work whose size is unknown (a build): a
// spinner with the time elapsed, turning until finish; nil as progress
// returns nil.
func (c *cli) spinner(what string, quiet bool) *progressBar {
	p := c.progress(what, quiet)
	if p == nil {
		return nil
	}
	p.bar = progressbar.NewOptions(-1,
		progressbar.OptionSetWriter(p.w),
		progressbar.OptionSetDescription(what),
		progressbar.OptionSetRenderBlankState(true),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSpinnerType(14),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)
	p.stop, p.stopped = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(p.stopped)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.bar.Add(1)
			}
		}
	}()
	return p
}

// progressBar is a progress bar on the terminal; nil draws nothing.
type progressBar struct {
	what string
	w    io.Writer
	bar  *progressbar.ProgressBar
	// stop ends a spinner's animation, which closes stopped.
	stop, stopped chan struct{}
	finished      bool
}

// describe says what the bar's work is doing now.
func (p *progressBar) describe(what string) {
	if p != nil && p.bar != nil {
		p.bar.Describe(p.what + ": " + termtext.Line(what))
	}
}

// clear takes the bar off the terminal until its next update, so that a
// line printed on the terminal is not drawn over.
func (p *progressBar) clear() {
	if p != nil && p.bar != nil {
		p.bar.Clear()
	}
}

// set moves the bar to done of total.
func (p *progressBar) set(done, total int) {
	if p == nil || p.finished || total <= 0 {
		return
	}
	if p.bar == nil {
		p.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(p.w),
			progressbar.OptionSetDescription(p.what),
			progressbar.OptionSetRenderBlankState(true),
			progressbar.OptionShowCount(),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
	}
	if int64(total) != p.bar.GetMax64() {
		p.bar.ChangeMax(total)
	}
	p.bar.Set(done)
}

// finish clears the bar from the terminal.
func (p *progressBar) finish() {
	if p == nil || p.finished {
		return
	}
	p.finished = true
	if p.stop != nil {
		close(p.stop)
		<-p.stopped
		p.stop = nil
	}
	if p.bar != nil {
		p.bar.Finish()
	}
}

// describer passes each line written to fn, without its newline.
type describer struct {
	fn  func(string)
	buf []byte
}

func (w *describer) Write(b []byte) (int, error) {
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		if line := strings.TrimSpace(string(w.buf[:i])); line != "" {
			w.fn(line)
		}
		w.buf = w.buf[i+1:]
	}
}
