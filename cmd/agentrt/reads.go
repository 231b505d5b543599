package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/badgerstore"
)

// readStore is what the read commands read: the store of the data
// directory, opened here, or, while another process (a cell daemon, a
// foreground run) holds it, that store read through the process's API.
// The two answer the same reads with the same bytes, so that a command
// runs the same code on either and prints the same output.
type readStore interface {
	journal.Store
	journal.Blobs
	journal.Lineage
	host.EventLog
	Reindex(ctx context.Context) (journal.IndexReport, error)
}

var (
	_ readStore = (*badgerstore.Store)(nil)
	_ readStore = (*cell.RemoteStore)(nil)
)

// reader is an open readStore.
type reader struct {
	readStore
	// remote is the client of the process that holds the data directory,
	// nil when the store was opened here. What needs the cell's private
	// key (a bundle, a checkpoint) is asked of it.
	remote *cell.Client
}

// openReader opens the data directory's store, or, when another process
// holds it, reaches the store through that process's socket
// (DATA/agentrt.sock). A holder that serves no socket, or whose socket
// does not answer, is the lock error with a hint that says so.
func (c *cli) openReader(ctx context.Context) (*reader, error) {
	st, err := c.openStore()
	if err == nil {
		return &reader{readStore: st}, nil
	}
	if !errors.Is(err, badgerstore.ErrLocked) {
		return nil, err
	}
	cl, err := c.holder(ctx, err)
	if err != nil {
		return nil, err
	}
	return &reader{readStore: cl.Store(), remote: cl}, nil
}

// openRunReader is openReader with a run argument resolved in it.
func (c *cli) openRunReader(ctx context.Context, arg string) (*reader, journal.RunID, error) {
	r, err := c.openReader(ctx)
	if err != nil {
		return nil, journal.RunID{}, err
	}
	run, err := cell.FindRun(ctx, r, arg)
	if err != nil {
		r.Close()
		return nil, journal.RunID{}, err
	}
	return r, run, nil
}

// holder returns a client for the process that holds the data directory,
// whose store refused to open with locked; when there is none to reach,
// locked with a hint that says why and what to do.
func (c *cli) holder(ctx context.Context, locked error) (*cell.Client, error) {
	dir, err := c.data()
	if err != nil {
		return nil, err
	}
	sock := cell.SocketPath(dir)
	if _, err := os.Stat(sock); err != nil {
		return nil, withHint(locked, "another agentrt process holds this data directory and serves no socket (%s): a command such as agentrt purge or store check, or a daemon starting up; wait for it and try again, or pick another with --data", sock)
	}
	cl, err := cell.Dial("unix:" + sock)
	if err == nil {
		_, err = cl.Cell(ctx)
	}
	if err != nil {
		return nil, withHint(fmt.Errorf("%w; its socket does not answer: %w", locked, err),
			"the process that holds the data directory (agentrt cell serve, or a foreground agentrt run) serves reads on %s; if it is stopping, wait and try again, or pick another data directory with --data", sock)
	}
	return cl, nil
}
