package tool_test

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/host"
)

const toolGrantYAML = `capabilities:
  run: {}
  tool:
    tools:
      - name: count-todo
        exec: /usr/bin/grep
        args:
          fixed: [-c, TODO]
          flags: [{name: -i}, {name: --max-count, value: '[0-9]{1,4}'}, {name: -f, path: ro}]
          positional: [{pattern: '[A-Za-z0-9._/-]+', path: ro}]
          max: 8
        read: [/usr, /lib, /lib64, /srv/repo]
        workspace: true
        network: none
        env: {LC_ALL: C}
        limits: {wall: 30s, cpu: 10s, memory: 256MiB, procs: 16, output: 1MiB, file_size: 64MiB, disk: 1GiB}
        idempotent: true
      - name: git-log
        exec: /usr/bin/git
        args: {fixed: [log, --oneline]}
        read: [/usr, /srv/repo]
        workdir: /srv/repo
`

func TestToolGrantParsesAndSurvivesTheRunHeader(t *testing.T) {
	g, err := host.ParseGrant([]byte(toolGrantYAML))
	if err != nil {
		t.Fatal(err)
	}
	if !g.Has(abi.CapTool) || !reflect.DeepEqual(g.Capabilities(), []abi.Capability{abi.CapRun, abi.CapTool}) {
		t.Fatalf("capabilities %v", g.Capabilities())
	}
	c := g.Tool.Tools[0]
	if c.Exec != "/usr/bin/grep" || c.Args.Max != 8 || c.Args.Flags[1].Value != "[0-9]{1,4}" || c.Args.Positional[0].Path != "ro" ||
		!c.Workspace || !c.Idempotent || c.Env["LC_ALL"] != "C" || c.Limits.Memory != "256MiB" || c.Limits.Procs != 16 ||
		c.Limits.FileSize != "64MiB" || c.Limits.Disk != "1GiB" {
		t.Fatalf("parsed %+v", c)
	}
	// The grant is recorded in the run header as canonical CBOR, and read
	// back from it on resume, replay and audit.
	b, err := g.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	back, err := host.DecodeGrant(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, g) {
		t.Fatalf("round trip changed the grant:\n%+v\n%+v", back.Tool, g.Tool)
	}
}

func TestToolGrantCheckSaysWhatToChange(t *testing.T) {
	base := func(tool string) string {
		return "capabilities:\n  tool:\n    tools:\n      - " + strings.ReplaceAll(tool, "\n", "\n        ") + "\n"
	}
	tests := []struct {
		name, grant, want string
	}{
		{"bad name", base("name: 'rm -rf'\nexec: /bin/rm"), `tool: tools[0]: name "rm -rf" must be 1-64 letters`},
		{"twice", "capabilities: {tool: {tools: [{name: a, exec: /bin/a}, {name: a, exec: /bin/b}]}}", `tool "a": registered twice`},
		{"relative exec", base("name: g\nexec: grep"), `tool "g": exec: "grep" is not absolute`},
		{"unclean read", base("name: g\nexec: /bin/g\nread: [/usr/../etc]"), `tool "g": read[0]: "/usr/../etc" is not clean; write it as "/etc"`},
		{"root write", base("name: g\nexec: /bin/g\nwrite: [/]"), `tool "g": write[0]: "/" would make the whole host writable`},
		{"network allowlist", base("name: g\nexec: /bin/g\nnetwork: api.example.com:443"), `tool "g": network: "api.example.com:443" is not supported; write network: none (the sandbox refuses network allowlists today`},
		{"network as a map", base("name: g\nexec: /bin/g\nnetwork: {allow: [a:1]}"), "parse:"},
		{"unknown key", base("name: g\nexec: /bin/g\nshell: true"), `line 6: unknown key "shell" in tool.tools[0]; allowed: name, exec, args, read, write, workspace, workdir, network, env, limits, idempotent`},
		{"misspelt key", base("name: g\nexec: /bin/g\nlimits: {wal: 1s}"), `line 6: unknown key "wal" in tool.tools[0].limits; allowed: cpu, wall, memory, procs, output, file_size, disk, hash (did you mean wall?)`},
		{"misspelt flag key", base("name: g\nexec: /bin/g\nargs: {flags: [{nmae: -n}]}"), `line 6: unknown key "nmae" in tool.tools[0].args.flags[0]; allowed: name, value, path (did you mean name?)`},
		{"bad pattern", base("name: g\nexec: /bin/g\nargs: {positional: [{pattern: '(['}]}"), `tool "g": args.positional[0]: pattern: "([" is not an RE2 regexp`},
		{"empty pattern", base("name: g\nexec: /bin/g\nargs: {positional: [{path: ro}]}"), `tool "g": args.positional[0]: a pattern is required`},
		{"bad path kind", base("name: g\nexec: /bin/g\nargs: {positional: [{pattern: x, path: rwx}]}"), `tool "g": args.positional[0]: path: "rwx" is not ro or rw`},
		{"flag without dash", base("name: g\nexec: /bin/g\nargs: {flags: [{name: n}]}"), `tool "g": args.flags[0]: name "n" must start with '-'`},
		{"flag with value in name", base("name: g\nexec: /bin/g\nargs: {flags: [{name: --count=N}]}"), `write the value's pattern under value:`},
		{"max without slots", base("name: g\nexec: /bin/g\nargs: {max: 3}"), `tool "g": args.max: 3 positional values, but no positional slot`},
		{"workdir outside", base("name: g\nexec: /bin/g\nread: [/srv]\nworkdir: /home"), `tool "g": workdir: "/home" is not inside a read or write path`},
		{"env name", base("name: g\nexec: /bin/g\nenv: {'A=B': x}"), `tool "g": env: "A=B" is not a variable name`},
		{"wall", base("name: g\nexec: /bin/g\nlimits: {wall: soon}"), `tool "g": limits.wall: "soon" is not a positive duration`},
		{"memory", base("name: g\nexec: /bin/g\nlimits: {memory: 1MiB}"), `tool "g": limits.memory: 1MiB is too little`},
		{"memory unit", base("name: g\nexec: /bin/g\nlimits: {memory: 1TB}"), `tool "g": limits.memory: "1TB" is not a size`},
		{"procs", base("name: g\nexec: /bin/g\nlimits: {procs: 2}"), `tool "g": limits.procs: 2 is too few`},
		{"output", base("name: g\nexec: /bin/g\nlimits: {output: 1GiB}"), `tool "g": limits.output: 1GiB is over the most a response carries`},
		{"hash", base("name: g\nexec: /bin/g\nlimits: {hash: 17GiB}"), `tool "g": limits.hash: 17GiB is over the most the host hashes for one run, 16GiB`},
		{"file size", base("name: g\nexec: /bin/g\nlimits: {file_size: big}"), `tool "g": limits.file_size: "big" is not a size`},
		{"disk", base("name: g\nexec: /bin/g\nlimits: {disk: 1G}"), `tool "g": limits.disk: 1G bounds what the tool writes, and it writes nowhere`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := host.ParseGrant([]byte(tt.grant))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestGrantTypoNamesTheKey: a misspelt key names the file and line, the
// key, the section, the keys allowed there and the nearest one, and the run
// is refused (nothing is granted by a key nobody meant).
func TestGrantTypoNamesTheKey(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, tc := range []struct{ grant, want string }{
		{"capabilities:\n  run: {}\n  kv: {namepsace: crawler}\n",
			`grant.yaml:3: unknown key "namepsace" in kv; allowed: namespace (did you mean namespace?)`},
		{"capabilities:\n  http: {hosts: [a.example], idempotnet: true}\n",
			`grant.yaml:2: unknown key "idempotnet" in http; allowed: hosts, idempotent (did you mean idempotent?)`},
		{"capabilities:\n  clock: {real: true}\n",
			`grant.yaml:2: unknown key "real" in clock, which takes no keys (write clock: {})`},
		{"capabilites:\n  run: {}\n",
			`grant.yaml:1: unknown key "capabilites" at the top level; allowed: capabilities, limits (did you mean capabilities?)`},
		{`{"capabilities": {"run": {}, "randon": {}}}`,
			`grant.yaml:1: unknown key "randon" in capabilities; allowed: run, kv, http, clock, random, tool, llm, timer, approval, mcp, agent (did you mean random?)`},
	} {
		if err := os.WriteFile("grant.yaml", []byte(tc.grant), 0o644); err != nil {
			t.Fatal(err)
		}
		g, err := host.LoadGrant("grant.yaml")
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q:\n got %v (grant %+v)\nwant %s", tc.grant, err, g, tc.want)
		}
	}
}
