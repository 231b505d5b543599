package plan

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand"

	"github.com/agentrt/agentrt/guest-sdk/agent"
)

// Bandit chooses among named strategies by Thompson sampling: each arm's
// recorded outcomes (pulls, and rewards between 0 and 1) make a Beta
// posterior, one draw is taken from each, and the highest draw wins. The
// outcomes live in kv under "plan/bandit/<Name>/<arm>", so the bandit
// learns across runs; the draws come from a sampler seeded by 8 bytes of
// random.bytes, so a replay draws the same.
type Bandit struct {
	// Name names the decision the bandit learns (its kv prefix).
	Name string
	// Arms are the strategies, by name.
	Arms []string
	// Host is the host (nil: SDK()).
	Host Memory
}

// Arm is the record of one strategy: how often it was chosen and recorded,
// and the sum of its rewards.
type Arm struct {
	Name   string  `json:"-"`
	Pulls  uint64  `json:"pulls"`
	Reward float64 `json:"reward"`
}

func (b *Bandit) host() Memory {
	if b.Host == nil {
		return SDK()
	}
	return b.Host
}

func (b *Bandit) key(arm string) string { return "plan/bandit/" + b.Name + "/" + arm }

func (b *Bandit) check() error {
	if b.Name == "" || len(b.Arms) == 0 {
		return errors.New("plan: a Bandit needs a Name and at least one arm")
	}
	seen := map[string]bool{}
	for _, a := range b.Arms {
		if a == "" || seen[a] {
			return fmt.Errorf("plan: bandit %s: arm %q is empty or named twice", b.Name, a)
		}
		seen[a] = true
	}
	return nil
}

// Stats reads the arms' records from kv, in the order of Arms (an arm
// never recorded has zero pulls).
func (b *Bandit) Stats() ([]Arm, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	out := make([]Arm, len(b.Arms))
	for i, name := range b.Arms {
		out[i].Name = name
		v, err := b.host().KVGet(b.key(name))
		if errors.Is(err, agent.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("plan: bandit %s: reading arm %s: %w", b.Name, name, err)
		}
		if err := json.Unmarshal(v, &out[i]); err != nil {
			return nil, fmt.Errorf("plan: bandit %s: arm %s: the record in kv is not JSON (%v); hint: delete key %s", b.Name, name, err, b.key(name))
		}
	}
	return out, nil
}

// Choose picks an arm: a Beta(1+reward, 1+pulls-reward) draw per arm, the
// highest wins (the first of equal draws).
func (b *Bandit) Choose() (string, error) {
	arms, err := b.Stats()
	if err != nil {
		return "", err
	}
	seed, err := b.host().RandomBytes(8)
	if err != nil {
		return "", fmt.Errorf("plan: bandit %s: random.bytes: %w", b.Name, err)
	}
	if len(seed) != 8 {
		return "", fmt.Errorf("plan: bandit %s: random.bytes gave %d bytes, asked 8", b.Name, len(seed))
	}
	rng := rand.New(rand.NewSource(int64(binary.LittleEndian.Uint64(seed))))
	best, bestDraw := "", -1.0
	for _, a := range arms {
		fail := float64(a.Pulls) - a.Reward
		if fail < 0 {
			fail = 0
		}
		if d := beta(rng, 1+a.Reward, 1+fail); d > bestDraw {
			best, bestDraw = a.Name, d
		}
	}
	return best, nil
}

// Record adds one outcome of arm, with a reward between 0 (a failure) and
// 1 (a success), to its record in kv.
func (b *Bandit) Record(arm string, reward float64) error {
	if reward < 0 || reward > 1 || math.IsNaN(reward) {
		return fmt.Errorf("plan: bandit %s: reward %v is not between 0 and 1", b.Name, reward)
	}
	arms, err := b.Stats()
	if err != nil {
		return err
	}
	for _, a := range arms {
		if a.Name != arm {
			continue
		}
		a.Pulls++
		a.Reward += reward
		v, _ := json.Marshal(a)
		if err := b.host().KVPut(b.key(arm), v); err != nil {
			return fmt.Errorf("plan: bandit %s: recording arm %s: %w", b.Name, arm, err)
		}
		return nil
	}
	return fmt.Errorf("plan: bandit %s has no arm %q (arms: %v)", b.Name, arm, b.Arms)
}

// beta draws from Beta(a, b) as X/(X+Y), X and Y Gamma draws.
func beta(rng *rand.Rand, a, b float64) float64 {
	x, y := gamma(rng, a), gamma(rng, b)
	return x / (x + y)
}

// gamma draws from Gamma(k, 1), k >= 1, by Marsaglia and Tsang's method.
func gamma(rng *rand.Rand, k float64) float64 {
	d := k - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := rng.Float64()
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}

// Reflection is the record of a plan written after it ran: what ran, how
// it ended, what it cost, and the strategy it followed.
type Reflection struct {
	Goal     string `json:"goal"`
	Strategy string `json:"strategy,omitempty"`
	// Outcome is "completed", or "rolled_back" for a plan that failed.
	Outcome string      `json:"outcome"`
	Error   string      `json:"error,omitempty"`
	Done    []string    `json:"done"`
	Runs    []StepRun   `json:"runs,omitempty"`
	Failed  []StepError `json:"failed,omitempty"`
	Signals []Signal    `json:"signals,omitempty"`
	Undone  []string    `json:"undone,omitempty"`
	// Cost: the plan's import calls, children and waves.
	Cost Cost `json:"cost"`
}

// StepRun is a child step and its run.
type StepRun struct {
	Step string `json:"step"`
	Run  string `json:"run"`
}

// Cost is what a plan spent.
type Cost struct {
	Calls    uint64 `json:"calls"`
	Children int    `json:"children"`
	Waves    int    `json:"waves"`
	Replans  int    `json:"replans"`
}

// Reflect writes the Reflection of r, the result of a plan for goal under
// strategy, which ended with err (Execute's), to kv under
// "plan/reflection/<goal>/<n>", n counting the goal's reflections from 1
// (six digits, so that kv lists them in order). It returns the record and
// its key.
func Reflect(h Memory, goal, strategy string, r *Result, err error) (*Reflection, string, error) {
	if h == nil {
		h = SDK()
	}
	if goal == "" || r == nil {
		return nil, "", errors.New("plan: Reflect needs a goal and the Result of Execute")
	}
	ref := &Reflection{Goal: goal, Strategy: strategy, Outcome: "completed", Done: r.Done, Failed: r.Failed,
		Signals: r.Signals, Undone: r.Undone, Cost: Cost{Calls: r.Spent, Children: len(r.Runs), Waves: r.Waves, Replans: r.Replans}}
	if err != nil {
		ref.Outcome, ref.Error = "rolled_back", err.Error()
	}
	for _, id := range r.Done {
		if run, ok := r.Runs[id]; ok {
			ref.Runs = append(ref.Runs, StepRun{Step: id, Run: run})
		}
	}
	for _, f := range r.Failed {
		if f.Run != "" {
			ref.Runs = append(ref.Runs, StepRun{Step: f.Step, Run: f.Run})
		}
	}
	counter := "plan/reflection/" + goal + "/n"
	n := uint64(0)
	v, gerr := h.KVGet(counter)
	switch {
	case gerr == nil:
		if len(v) != 8 {
			return nil, "", fmt.Errorf("plan: the reflection counter %s is %d bytes, not 8; hint: delete it", counter, len(v))
		}
		n = binary.BigEndian.Uint64(v)
	case !errors.Is(gerr, agent.ErrNotFound):
		return nil, "", fmt.Errorf("plan: reading %s: %w", counter, gerr)
	}
	n++
	key := fmt.Sprintf("plan/reflection/%s/%06d", goal, n)
	body, _ := json.Marshal(ref)
	if err := h.KVPut(key, body); err != nil {
		return nil, "", fmt.Errorf("plan: writing the reflection %s: %w", key, err)
	}
	if err := h.KVPut(counter, binary.BigEndian.AppendUint64(nil, n)); err != nil {
		return nil, "", fmt.Errorf("plan: writing %s: %w", counter, err)
	}
	return ref, key, nil
}
