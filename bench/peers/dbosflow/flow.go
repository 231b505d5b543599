// Package dbosflow is the DBOS side of make bench-peers: a DBOS Transact
// workflow of n sequential trivial steps. DBOS checkpoints each step's
// output in its system database (PostgreSQL, synchronous commit, fsync on)
// before the workflow goes on to the next, as agentrt journals each kv.put
// durably before the agent's next call.
package dbosflow

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
)

// AppName is the DBOS application name of the benchmark.
const AppName = "agentrt-peers"

// Steps is the workflow: n steps, each returning its index, run one after
// the other.
func Steps(ctx dbos.Context, n int) (int, error) {
	for i := range n {
		got, err := dbos.RunAsStep(ctx, func(context.Context) (int, error) { return i, nil })
		if err != nil {
			return 0, fmt.Errorf("step %d: %w", i, err)
		}
		if got != i {
			return 0, fmt.Errorf("step %d returned %d", i, got)
		}
	}
	return n, nil
}

// Open makes a DBOS context on the PostgreSQL database at url with the
// workflow registered, and launches it. DBOS's own log is dropped.
func Open(url string) (dbos.Context, error) {
	ctx, err := dbos.NewContext(context.Background(), dbos.Config{
		DatabaseURL: url,
		AppName:     AppName,
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return nil, err
	}
	dbos.RegisterWorkflow(ctx, Steps)
	if err := dbos.Launch(ctx); err != nil {
		dbos.Shutdown(ctx, 5*time.Second)
		return nil, err
	}
	return ctx, nil
}

// Run runs the workflow of n steps to its end.
func Run(ctx dbos.Context, n int) error {
	h, err := dbos.RunWorkflow(ctx, Steps, n)
	if err != nil {
		return err
	}
	got, err := h.GetResult()
	if err != nil {
		return err
	}
	if got != n {
		return fmt.Errorf("dbosflow: the workflow made %d steps, want %d", got, n)
	}
	return nil
}

// Close shuts DBOS down.
func Close(ctx dbos.Context) { dbos.Shutdown(ctx, 10*time.Second) }
