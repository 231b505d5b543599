// Command segments is a long-running agent that checkpoints: it sums the
// steps of run.introspect over N iterations and continues as new every
// Every iterations, carrying its loop counter and sum in the checkpoint's
// state. It reports what each segment saw, so host tests can check that the
// segments, the step numbers, the virtual clock and the random stream go
// on across checkpoints, live, on replay and on resume.
//
//	input: {"n": 2500, "every": 1000}
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/agentrt/agentrt/guest-sdk/agent"
)

type input struct {
	N     int `json:"n"`
	Every int `json:"every"`
}

// state is what a checkpoint carries to the next segment.
type state struct {
	I        int      `json:"i"`
	Sum      uint64   `json:"sum"`
	Segments []string `json:"segments"`
	Clock    int64    `json:"clock"`
	Draws    []uint64 `json:"draws"`
}

func main() {
	agent.MainJSON(func(_ context.Context, in input) (*state, error) {
		raw, segment, err := agent.State()
		if err != nil {
			return nil, err
		}
		st := &state{}
		if segment > 0 {
			if err := json.Unmarshal(raw, st); err != nil {
				return nil, fmt.Errorf("segment %d: state: %w", segment, err)
			}
		}
		now := time.Now().UnixNano()
		if now <= st.Clock {
			return nil, fmt.Errorf("segment %d: the virtual clock went back from %d to %d", segment, st.Clock, now)
		}
		st.Clock = now
		st.Draws = append(st.Draws, rand.Uint64())
		first := uint64(0)
		for st.I < in.N {
			r, err := agent.Introspect()
			if err != nil {
				return nil, err
			}
			if first == 0 {
				first = r.Steps
			}
			st.Sum += r.Steps
			st.I++
			if in.Every > 0 && st.I%in.Every == 0 && st.I < in.N {
				st.Segments = append(st.Segments, fmt.Sprintf("%d:%d-%d", segment, first, st.Sum))
				b, _ := json.Marshal(st)
				if err := agent.Checkpoint(b); err != nil {
					return nil, err
				}
			}
		}
		st.Segments = append(st.Segments, fmt.Sprintf("%d:%d-%d", segment, first, st.Sum))
		return st, nil
	})
}
