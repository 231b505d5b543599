package abivectors

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

const wasiHeader = "pages: 1\nseed: " + "0303030303030303030303030303030303030303030303030303030303030303" + "\nsegment: 0\nwall-base: 5\nclock: 0\n"

// TestParseWASIRoundTrip: what Format writes, ParseWASI reads back.
func TestParseWASIRoundTrip(t *testing.T) {
	v := &WASIVector{File: "x.txt", Comment: []string{"c"}, Pages: 2, Seed: bytes.Repeat([]byte{3}, 32), Segment: 1,
		WallBase: -5, Clock: 7, ModuleName: "m", Calls: []WASICall{
			{Func: "fd_write", Args: []int64{1, 1024, 1, -16}, Comment: []string{"d"},
				Mem: []Span{{1024, []byte{1, 2}}}, Writes: []Span{{512, []byte{6}}}, Stdout: []byte("hi"), Now: 9, HasNow: true},
			{Func: "clock_time_get", Args: []int64{1, -1, 40}, Errno: 21},
			{Func: "proc_exit", Args: []int64{3}, End: "exit 3"},
		}}
	got, err := ParseWASI("x.txt", v.Format())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, v) {
		t.Fatalf("read back\n%+v\nwrote\n%+v", got, v)
	}
}

// TestParseWASIRefuses: a file a runner could misread is refused, with
// the line named.
func TestParseWASIRefuses(t *testing.T) {
	for _, c := range []struct{ name, body, want string }{
		{"unknown header", "colour: red\n" + wasiHeader + "call: sched_yield\nerrno: 0\n", "unknown header"},
		{"unknown key", wasiHeader + "call: sched_yield\nerrno: 0\nnote: x\n", "unknown key"},
		{"key out of place", wasiHeader + "call: sched_yield\nerrno: 0\nmem: 1 00\n", "out of place"},
		{"two results", wasiHeader + "call: sched_yield\nerrno: 0\nerrno: 0\n", "out of place"},
		{"no result", wasiHeader + "call: sched_yield\ncall: sched_yield\nerrno: 0\n", "no errno or end"},
		{"unknown function", wasiHeader + "call: fd_frobnicate 1\nerrno: 0\n", "not a function"},
		{"argument count", wasiHeader + "call: fd_close 1 2\nerrno: 0\n", "takes 1 arguments"},
		{"i32 out of range", wasiHeader + "call: fd_close 4294967296\nerrno: 0\n", "does not fit an i32"},
		{"call after exit", wasiHeader + "call: proc_exit 0\nend: exit 0\n\ncall: sched_yield\nerrno: 0\n", "ended the instance"},
		{"exit from another function", wasiHeader + "call: sched_yield\nend: exit 0\n", "cannot exit"},
		{"output after a trap", wasiHeader + "call: fd_filestat_set_times 1 0 0 0\nend: trap\nstdout: 00\n", "nothing of it is observed"},
		{"upper-case hex", wasiHeader + "call: sched_yield\nerrno: 0\nstdout: AB\n", "lower-case"},
		{"short seed", "pages: 1\nseed: 03\nwall-base: 0\ncall: sched_yield\nerrno: 0\n", "32 bytes"},
		{"no calls", wasiHeader, "no calls"},
	} {
		_, err := ParseWASI("v.txt", []byte(c.body))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error with %q", c.name, err, c.want)
		}
	}
}

// TestParseModule reads a module vector and refuses a malformed one.
func TestParseModule(t *testing.T) {
	v := &ModuleVector{File: "m.txt", Feature: "mvp", Expect: "accept", Comment: []string{"c"}, Wasm: []byte("\x00asm\x01\x00\x00\x00")}
	got, err := ParseModule("m.txt", v.Format())
	if err != nil || !reflect.DeepEqual(got, v) {
		t.Fatalf("read back %+v, %v", got, err)
	}
	for _, body := range []string{
		"feature: x\nexpect: maybe\nwasm: 0061736d01000000\n",
		"feature: x\nexpect: accept\nwasm: 00\n",
		"feature: x\nexpect: accept\nwasm: 0061736d01000000\ncomment: late\n",
		"expect: accept\nwasm: 0061736d01000000\n",
	} {
		if _, err := ParseModule("m.txt", []byte(body)); err == nil {
			t.Errorf("accepted %q", body)
		}
	}
}
