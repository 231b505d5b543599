package sandbox

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseSpec(t *testing.T) {
	s, err := Parse([]byte(`
read_only: [/usr, /etc/ssl/certs]
read_write: [/work/ws]
protected: [.git, /work/ws/secrets]
workdir: /work/ws/src
path: [/usr/bin]
env: {LANG: C.UTF-8}
network: none
limits: {cpu: 1500ms, wall: 30s, memory: 512MiB, processes: 32, output: 64KiB, file_size: 2G, disk: 1GiB}
require_landlock: true
`))
	if err != nil {
		t.Fatal(err)
	}
	l := s.Limits
	if l.CPU != 1500*time.Millisecond || l.Wall != 30*time.Second || l.Memory != 512<<20 || l.Processes != 32 || l.Output != 64<<10 || l.FileSize != 2<<30 || l.Disk != 1<<30 {
		t.Errorf("limits: %+v", l)
	}
	if !s.RequireLandlock || !s.Network.None() || s.Env["LANG"] != "C.UTF-8" || s.workdir() != "/work/ws/src" {
		t.Errorf("spec: %+v", s)
	}
	if got := strings.Join(s.protectedPaths(), " "); got != "/work/ws/.git /work/ws/secrets" {
		t.Errorf("protected paths: %s", got)
	}
	// CPU rounds up to whole seconds: SIGXCPU at 2, SIGKILL at 3.
	if r := s.rlimits()[0]; r.Name != "cpu" || r.Cur != 2 || r.Max != 3 {
		t.Errorf("cpu rlimit: %+v", r)
	}
	// JSON is YAML too.
	j, err := Parse([]byte(`{"read_write": ["/w"], "network": {"allow": ["api.example.com:443"]}, "limits": {"wall": "5s"}}`))
	if err != nil || len(j.Network.Allow) != 1 || j.outputCap() != DefaultOutputCap {
		t.Errorf("JSON spec: %+v, %v", j, err)
	}
}

func TestParseSpecErrors(t *testing.T) {
	for _, tc := range []struct{ spec, field, msg string }{
		{"nosuch: 1\nlimits: {wall: 1s}", "", `sandbox spec: line 1: unknown key "nosuch" at the top level; allowed: read_only, read_write, protected, workdir, path, env, network, limits, require_landlock`},
		{"limits: {wall: 1s, nosuch: 2}", "limits", `sandbox spec: line 1: unknown key "nosuch" in limits; allowed: cpu, wall, memory, processes, output, file_size, disk`},
		{"read_only: [/usr]\nlimits:\n  wal: 1s\n", "limits", `sandbox spec: line 3: unknown key "wal" in limits; allowed: cpu, wall, memory, processes, output, file_size, disk (did you mean wall?)`},
		{"readonly: [/usr]\nlimits: {wall: 1s}", "", `unknown key "readonly" at the top level; allowed: read_only, read_write, protected, workdir, path, env, network, limits, require_landlock (did you mean read_only?)`},
		{"read_only: [usr]\nlimits: {wall: 1s}", "read_only[0]", "not absolute"},
		{"read_only: [/usr/../etc]\nlimits: {wall: 1s}", "read_only[0]", `write it as "/etc"`},
		{"read_write: [/]\nlimits: {wall: 1s}", "read_write[0]", "whole host writable"},
		{"read_write: ['C:\\']\nlimits: {wall: 1s}", "read_write[0]", "whole host writable"},
		{"read_only: [/usr]", "limits.wall", "is required"},
		{"limits: {wall: soon}", "limits.wall", "not a duration"},
		{"limits: {wall: 1s, memory: lots}", "limits.memory", "not a size"},
		{"limits: {wall: 1s, memory: 1KiB}", "limits.memory", "at least 16MiB"},
		{"limits: {wall: 1s, processes: 2}", "limits.processes", "at least 4"},
		{"read_write: [/w]\nprotected: [/elsewhere/.git]\nlimits: {wall: 1s}", "protected[0]", "not inside any read_write root"},
		{"read_write: [/w]\nprotected: [../x]\nlimits: {wall: 1s}", "protected[0]", "clean relative path"},
		{"protected: [.git]\nlimits: {wall: 1s}", "protected[0]", "there are none"},
		{"read_write: [/w]\nworkdir: /tmp\nlimits: {wall: 1s}", "workdir", "would not exist"},
		{"path: [/usr/bin]\nlimits: {wall: 1s}", "path[0]", "nothing could be found"},
		{"env: {'A=B': x}\nlimits: {wall: 1s}", "env", "not a valid variable name"},
		{"network: all\nlimits: {wall: 1s}", "network", "network: none"},
		{"network: {allow: [example.com]}\nlimits: {wall: 1s}", "network.allow[0]", "not host:port"},
		{"network: {alow: [x]}\nlimits: {wall: 1s}", "network", `sandbox spec: line 1: unknown key "alow" in network; allowed: allow (did you mean allow?)`},
		{"limits: {wall: 1s, disk: 1GiB}", "limits.disk", "there are none"},
		{"read_write: [/w]\nlimits: {wall: 1s, disk: -1}", "limits.disk", "not a size"},
	} {
		_, err := Parse([]byte(tc.spec))
		var se *SpecError
		if !errors.As(err, &se) || se.Field != tc.field || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%q: got %v; want field %q and %q", tc.spec, err, tc.field, tc.msg)
		}
	}
}
