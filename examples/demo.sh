#!/bin/sh
# make demo: run the crawler example against a site served on loopback, on a
# fresh embedded store, then show the journal, replay and verify the run;
# then the research agent against the fake model provider (cmd/fakellm) on
# loopback: no network, no API key of a real provider; then the mcp-notes
# agent with the example's notes MCP server, launched under the sandbox.
set -eu
root=$(pwd)
data="$root/.demo/data"
rm -rf "$root/.demo"
mkdir -p "$data"
export AGENTRT_DATA="$data"
agentrt="$root/bin/agentrt"

"$root/bin/siteserver" > "$root/.demo/site.url" &
site=$!
fake=
fake_mcp=
fake_team=
cell=
trap 'kill $site $fake $fake_mcp 2>/dev/null || true' EXIT INT TERM
for _ in 1 2 3 4 5 6 7 8 9 10; do
	[ -s "$root/.demo/site.url" ] && break
	sleep 0.2
done
url=$(head -n 1 "$root/.demo/site.url")
[ -n "$url" ] || { echo "demo: the site server did not start" >&2; exit 1; }

echo "== cell key (data directory $data)"
"$agentrt" keys
echo
echo "== crawl $url"
"$agentrt" run build/crawler.wasm --grant examples/crawler/grant.yaml --input "{\"start\":\"$url\"}"
run=$("$agentrt" runs --json | head -n 1 | sed 's/.*"run_id":"\([0-9a-f]*\)".*/\1/')
echo
echo "== journal of run $run"
"$agentrt" journal show "$run" --summary
echo
echo "== its first 12 entries"
"$agentrt" journal show "$run" | head -n 13
echo "..."
echo
echo "== replay and verify"
"$agentrt" replay "$run"
echo
echo "== an auditor verifies an exported bundle offline, with nothing but the cell's public key"
"$agentrt" audit export "$run" -o "$root/.demo/run.bundle"
"$agentrt" keys > "$root/.demo/cell.pub"
(cd "$root/.demo" && "$agentrt" audit verify run.bundle --trust cell.pub)
echo
echo "== a second crawl reads its progress from durable state"
"$agentrt" run build/crawler.wasm --grant examples/crawler/grant.yaml --input "{\"start\":\"$url\"}" --json
echo
echo "== the C example"
echo "the quick brown fox jumps over the lazy dog the end" > "$root/.demo/words.txt"
"$agentrt" run build/wordfreq-c.wasm --grant examples/wordfreq-c/grant.yaml --input-file "$root/.demo/words.txt"
run=$("$agentrt" runs --json | head -n 1 | sed 's/.*"run_id":"\([0-9a-f]*\)".*/\1/')
"$agentrt" replay "$run"
echo
echo "== the Rust example: the same calls with the same bytes, and the same grant, so it counts on from the C agent's total"
"$agentrt" run build/wordfreq-rust.wasm --grant examples/wordfreq-rust/grant.yaml --input-file "$root/.demo/words.txt"
run=$("$agentrt" runs --json | head -n 1 | sed 's/.*"run_id":"\([0-9a-f]*\)".*/\1/')
"$agentrt" replay "$run"
echo
echo "== the research agent: a model (the fake provider, scripted) asks for tools, the agent runs them"
site_base=${url%/}
sed "s#{{site}}#$site_base#g" examples/research-agent/script.yaml > "$root/.demo/script.yaml"
"$root/bin/fakellm" --script "$root/.demo/script.yaml" > "$root/.demo/fake.url" &
fake=$!
for _ in 1 2 3 4 5 6 7 8 9 10; do
	[ -s "$root/.demo/fake.url" ] && break
	sleep 0.2
done
fake_url=$(head -n 1 "$root/.demo/fake.url")
[ -n "$fake_url" ] || { echo "demo: the fake provider did not start" >&2; exit 1; }
# The cell's provider configuration, and the key where the cell reads it:
# the agent and its grant name only the provider and the model.
sed "s#{{fake}}#$fake_url#" examples/research-agent/llm.yaml > "$data/llm.yaml"
export FAKELLM_API_KEY=sk-fake-research
question="How does a durable agent avoid repeating an effect after a crash? Use the handbook at $site_base/"
"$agentrt" run build/research-agent.wasm --grant examples/research-agent/grant.yaml \
	--input "{\"question\":\"$question\",\"model\":\"fake-mini\",\"stream\":true}"
run=$("$agentrt" runs --json | head -n 1 | sed 's/.*"run_id":"\([0-9a-f]*\)".*/\1/')
echo
echo "== its journal: every model call and tool call, in order"
"$agentrt" journal show "$run" --summary
echo
echo "== its first model call and the tools it asked for"
"$agentrt" journal show "$run" | head -n 10
echo "..."
echo
echo "== replay: the model is not called again, its answers come from the journal"
"$agentrt" replay "$run"
"$agentrt" audit export "$run" -o "$root/.demo/research.bundle"
(cd "$root/.demo" && "$agentrt" audit verify research.bundle --trust cell.pub)
echo
echo "== the mcp-notes agent: the tools of an MCP server launched under the sandbox for the run"
mkdir -p "$root/.demo/notes"
# Run as root, the sandbox runs the server as an unprivileged user.
[ "$(id -u)" = 0 ] && chown 65534:65534 "$root/.demo/notes"
sed -e "s#/srv/mcp-notes/server#$root/bin/mcp-notes-server#" -e "s#/srv/notes#$root/.demo/notes#" \
	examples/mcp-notes/grant.yaml > "$root/.demo/notes-grant.yaml"
"$agentrt" run build/mcp-notes.wasm --grant "$root/.demo/notes-grant.yaml" \
	--input '{"notes":[{"title":"milk","text":"buy milk"}],"calls":[{"tool":"delete_note","arguments":{"title":"milk"}}]}'
run=$("$agentrt" runs --json | head -n 1 | sed 's/.*"run_id":"\([0-9a-f]*\)".*/\1/')
echo "(delete_note is not granted: refused by the host, the note is still there: $(ls "$root/.demo/notes"))"
"$agentrt" journal show "$run" --summary
"$agentrt" replay "$run"
echo
echo "== the research agent's MCP mode: its model is offered the notes server's tools"
echo "$site_base/effects is the page on effects." > "$root/.demo/notes/handbook.txt"
[ "$(id -u)" = 0 ] && chown 65534:65534 "$root/.demo/notes/handbook.txt"
sed -e "s#/srv/mcp-notes/server#$root/bin/mcp-notes-server#" -e "s#/srv/notes#$root/.demo/notes#" \
	examples/research-agent/grant.yaml > "$root/.demo/research-mcp-grant.yaml"
sed "s#{{site}}#$site_base#g" examples/research-agent/script-mcp.yaml > "$root/.demo/script-mcp.yaml"
"$root/bin/fakellm" --script "$root/.demo/script-mcp.yaml" > "$root/.demo/fake-mcp.url" &
fake_mcp=$!
for _ in 1 2 3 4 5 6 7 8 9 10; do
	[ -s "$root/.demo/fake-mcp.url" ] && break
	sleep 0.2
done
fake_mcp_url=$(head -n 1 "$root/.demo/fake-mcp.url")
[ -n "$fake_mcp_url" ] || { echo "demo: the fake provider did not start" >&2; exit 1; }
sed "s#{{fake}}#$fake_mcp_url#" examples/research-agent/llm.yaml > "$data/llm.yaml"
"$agentrt" run build/research-agent.wasm --grant "$root/.demo/research-mcp-grant.yaml" \
	--input '{"question":"How does a server drop a repeated request?","model":"fake-mini","mcp":"notes"}'
echo "(the note the model saved through the server: $(cat "$root/.demo/notes/effects.txt"))"
echo
echo "== the team planner (examples/team), in a cell daemon: three sub-agents with different powers"
"$root/bin/fakellm" --script examples/team/script.yaml > "$root/.demo/fake-team.url" &
fake_team=$!
for _ in 1 2 3 4 5 6 7 8 9 10; do
	[ -s "$root/.demo/fake-team.url" ] && break
	sleep 0.2
done
fake_team_url=$(head -n 1 "$root/.demo/fake-team.url")
[ -n "$fake_team_url" ] || { echo "demo: the fake provider did not start" >&2; exit 1; }
sed "s#{{fake}}#$fake_team_url#" examples/team/llm.yaml > "$data/llm.yaml"
FAKELLM_API_KEY=sk-fake-team "$agentrt" cell serve > "$root/.demo/cell.log" 2>&1 &
cell=$!
trap 'kill $site $fake $fake_mcp $fake_team $cell 2>/dev/null || true' EXIT INT TERM
for _ in $(seq 1 100); do
	[ -S "$data/agentrt.sock" ] && break
	sleep 0.1
done
fetch=$("$agentrt" module push build/team-fetch.wasm 2>/dev/null)
count=$("$agentrt" module push build/team-count.wasm 2>/dev/null)
write=$("$agentrt" module push build/team-write.wasm 2>/dev/null)
# The team parks while it awaits its children: agentrt run waits for the
# cell to wake it and exits with the team's outcome.
"$agentrt" run build/team.wasm --grant examples/team/grant.yaml \
	--input "{\"site\":\"$site_base\",\"model\":\"fake-mini\",\"modules\":{\"fetch\":\"$fetch\",\"count\":\"$count\",\"write\":\"$write\"}}" \
	> "$root/.demo/team.out" 2>&1 || { cat "$root/.demo/team.out" >&2; exit 1; }
team=$(sed -n 's/^run \([0-9a-f]*\) executing.*/\1/p' "$root/.demo/team.out")
[ -n "$team" ] || { cat "$root/.demo/team.out" >&2; exit 1; }
"$agentrt" logs "$team"
echo
"$agentrt" runs
