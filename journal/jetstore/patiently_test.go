package jetstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/agentrt/agentrt/journal/jetstore"
	"github.com/nats-io/nats.go"
)

// TestPatientlyRetriesOnlyWhileTheServersCannotAnswer: an attempt that
// finds no responders is tried again until it succeeds; one refused for
// another reason is not; one that never succeeds gives up with its error
// once the limit has passed.
func TestPatientlyRetriesOnlyWhileTheServersCannotAnswer(t *testing.T) {
	ctx := context.Background()
	calls := 0
	err := jetstore.Patiently(ctx, time.Minute, func(context.Context) error {
		if calls++; calls < 3 {
			return fmt.Errorf("open a bucket: %w", nats.ErrNoResponders)
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("not ready twice, then ready: %d calls, err %v; want 3 calls and no error", calls, err)
	}

	refused := errors.New("a bucket with other replicas")
	calls = 0
	err = jetstore.Patiently(ctx, time.Minute, func(context.Context) error { calls++; return refused })
	if !errors.Is(err, refused) || calls != 1 {
		t.Fatalf("refused: %d calls, err %v; want 1 call and the refusal", calls, err)
	}

	calls = 0
	start := time.Now()
	err = jetstore.Patiently(ctx, 300*time.Millisecond, func(ctx context.Context) error {
		calls++
		if _, ok := ctx.Deadline(); !ok {
			t.Error("an attempt has no deadline")
		}
		return nats.ErrTimeout
	})
	if !errors.Is(err, nats.ErrTimeout) || calls < 2 {
		t.Fatalf("never ready: %d calls, err %v; want the timeout after retries", calls, err)
	}
	if took := time.Since(start); took > time.Minute {
		t.Fatalf("never ready: gave up after %s, past its limit of 300ms", took)
	}
}
