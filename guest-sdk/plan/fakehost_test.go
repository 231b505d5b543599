package plan_test

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"

	"github.com/agentrt/agentrt/guest-sdk/abi"
	"github.com/agentrt/agentrt/guest-sdk/agent"
	"github.com/agentrt/agentrt/guest-sdk/plan"
)

// fakeHost is the planner's host in memory, as the agent package's tests
// fake the imports: children are functions of their input, named by the
// SHA-256 of a name (mod); kv is a map; random.bytes a stream seeded by
// seed; the budget counts every call, against ceiling. Errors are the
// SDK's *agent.HostError values, as the real host answers them.
//
// Every call is a journal entry: the fake records each call's request and
// answer, and a fake made with replaying(j) answers the first len(j) calls
// from j, checking that each asks the same as before, as the host does on
// resume; crashAt panics at that call, as a kill would stop the guest.
type fakeHost struct {
	children map[string]func(input []byte) (status string, out []byte)
	denied   map[string]string // approval group -> reason
	kv       map[string][]byte
	seed     uint64
	ceiling  uint64
	calls    uint64

	trace   []string // "spawn fetch", "await fetch", "kv.put k", ...
	journal []entry
	replay  []entry
	crashAt int // 0: never
	// live counts the calls answered live (not from the journal), by op.
	live map[string]int

	runs  map[string]string // run id -> module name
	input map[string][]byte // run id -> input
}

type entry struct {
	op, req string
	resp    any
	err     error
}

// errCrash is the panic of a fake that crashes.
var errCrash = errors.New("fake host: killed")

func newFake() *fakeHost {
	return &fakeHost{children: map[string]func([]byte) (string, []byte){}, denied: map[string]string{}, kv: map[string][]byte{},
		live: map[string]int{}, runs: map[string]string{}, input: map[string][]byte{}}
}

// replaying is a fresh fake (the cell's durable state, kv, carried over)
// that answers from the journal of f first, as a resumed run is answered.
func (f *fakeHost) replaying() *fakeHost {
	g := newFake()
	g.children, g.denied, g.kv, g.seed, g.ceiling = f.children, f.denied, f.kv, f.seed, f.ceiling
	g.replay = f.journal
	g.runs, g.input = f.runs, f.input
	return g
}

func mod(name string) []byte {
	s := sha256.Sum256([]byte(name))
	return s[:]
}

func (f *fakeHost) child(name string, fn func([]byte) (string, []byte)) []byte {
	f.children[fmt.Sprintf("%x", mod(name))] = fn
	return mod(name)
}

func hostErr(code abi.Status, msg string) error { return &agent.HostError{Code: code, Message: msg} }

// do is one host call: replayed from the journal while it lasts, else
// answered live by fn.
func (f *fakeHost) do(op, req string, fn func() (any, error)) (any, error) {
	f.calls++
	n := len(f.journal)
	if f.crashAt > 0 && n+1 == f.crashAt {
		panic(errCrash)
	}
	var e entry
	if n < len(f.replay) {
		e = f.replay[n]
		if e.op != op || e.req != req {
			panic(fmt.Sprintf("diverged at call %d: journal has %s %s, the guest asks %s %s", n+1, e.op, e.req, op, req))
		}
	} else {
		f.live[op]++
		resp, err := fn()
		e = entry{op, req, resp, err}
	}
	f.journal = append(f.journal, e)
	if op != "run.log" && op != "budget" {
		f.trace = append(f.trace, op+" "+req)
	}
	return e.resp, e.err
}

func (f *fakeHost) Spawn(module, input []byte, opts agent.SpawnOptions) (*agent.Child, error) {
	name := fmt.Sprintf("%x", module)
	r, err := f.do("spawn", string(input), func() (any, error) {
		if _, ok := f.children[name]; !ok {
			return nil, hostErr(abi.StatusNotFound, "agent.spawn: the cell holds no module "+name[:8])
		}
		run := fmt.Sprintf("run%d", len(f.runs)+1)
		f.runs[run], f.input[run] = name, input
		return &agent.Child{Run: run, Budget: opts.Budget}, nil
	})
	if err != nil {
		return nil, err
	}
	return r.(*agent.Child), nil
}

func (f *fakeHost) Await(run string) (*agent.Outcome, error) {
	r, err := f.do("await", run, func() (any, error) {
		name, ok := f.runs[run]
		if !ok {
			return nil, hostErr(abi.StatusNotFound, "agent.await: run "+run+" is not a child of the caller")
		}
		st, out := f.children[name](f.input[run])
		o := &agent.Outcome{Run: run, Status: st, Output: out}
		if st != abi.ChildCompleted {
			o.Err = string(out)
		}
		return o, nil
	})
	if err != nil {
		return nil, err
	}
	return r.(*agent.Outcome), nil
}

// approver is a step's Approver: approval.request to group for action.
func (f *fakeHost) approver(group, action string) plan.Approver {
	return func() (*agent.Approval, error) { return f.requestApproval(action, group) }
}

func (f *fakeHost) requestApproval(action, group string) (*agent.Approval, error) {
	r, err := f.do("approval", group+": "+action, func() (any, error) {
		if why, ok := f.denied[group]; ok {
			return &agent.Approval{Approved: false, Reason: why}, nil
		}
		return &agent.Approval{Approved: true, Approvers: []string{"ada"}}, nil
	})
	if err != nil {
		return nil, err
	}
	return r.(*agent.Approval), nil
}

func (f *fakeHost) KVGet(key string) ([]byte, error) {
	r, err := f.do("kv.get", key, func() (any, error) {
		v, ok := f.kv[key]
		if !ok {
			return nil, hostErr(abi.StatusNotFound, "kv.get: no key "+key)
		}
		return append([]byte{}, v...), nil
	})
	if err != nil {
		return nil, err
	}
	return r.([]byte), nil
}

func (f *fakeHost) KVPut(key string, value []byte) error {
	_, err := f.do("kv.put", key, func() (any, error) {
		f.kv[key] = append([]byte{}, value...)
		return nil, nil
	})
	return err
}

// kvDelete is a compensation's call in these tests (not a Host method:
// the planner itself never deletes).
func (f *fakeHost) kvDelete(key string) error {
	_, err := f.do("kv.delete", key, func() (any, error) {
		if _, ok := f.kv[key]; !ok {
			return nil, hostErr(abi.StatusNotFound, "kv.delete: no key "+key)
		}
		delete(f.kv, key)
		return nil, nil
	})
	return err
}

// RandomBytes is a counter-mode SHA-256 stream from seed.
func (f *fakeHost) RandomBytes(n uint32) ([]byte, error) {
	r, err := f.do("random", fmt.Sprint(n), func() (any, error) {
		var out []byte
		for uint32(len(out)) < n {
			s := sha256.Sum256([]byte(fmt.Sprint(f.seed)))
			f.seed++
			out = append(out, s[:]...)
		}
		return out[:n], nil
	})
	if err != nil {
		return nil, err
	}
	return r.([]byte), nil
}

func (f *fakeHost) Log(level agent.Level, msg string) error {
	_, err := f.do("run.log", msg, func() (any, error) { return nil, nil })
	return err
}

// logs are the plan's log lines so far.
func (f *fakeHost) logs() string {
	var b strings.Builder
	for _, e := range f.journal {
		if e.op == "run.log" {
			b.WriteString(e.req + "\n")
		}
	}
	return b.String()
}

func (f *fakeHost) Budget() (uint64, uint64, error) {
	r, err := f.do("budget", "", func() (any, error) { return [2]uint64{f.calls, f.ceiling}, nil })
	if err != nil {
		return 0, 0, err
	}
	b := r.([2]uint64)
	return b[0], b[1], nil
}

var (
	_ plan.Host   = (*fakeHost)(nil)
	_ plan.Memory = (*fakeHost)(nil)
)
