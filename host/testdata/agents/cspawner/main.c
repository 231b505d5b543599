// cspawner is the C sub-agent test agent: its input is a module's SHA-256
// (32 bytes) and the child's caps (the rest); it spawns one child of that
// module with those caps and the input {"output":"from c"}, awaits it and
// outputs "<child run> <status> <output hash in hex> <child output>", or,
// when the spawn is refused, "refused <status name>: <message>". Caps that
// begin with a digit and a colon ("3:{run: {}}") ask for that priority.
//
//go:build ignore

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "agentrt.h"

int main(void) {
  agentrt_buf_t input;
  agentrt_status_t st = agentrt_input(&input);
  if (st || input.len <= 32) return 2;
  agentrt_child_t child;
  static const char in[] = "{\"output\":\"from c\"}";
  const char *caps = (const char *)input.data + 32;
  uint8_t priority = 0;
  if (caps[0] >= '1' && caps[0] <= '9' && caps[1] == ':') {
    priority = (uint8_t)(caps[0] - '0');
    caps += 2;
  }
  st = agentrt_spawn_priority(input.data, in, sizeof in - 1, caps, "steps=40", priority, &child);
  char out[4096];
  if (st) {
    int n = snprintf(out, sizeof out, "refused %s: %s", agentrt_status_name(st), agentrt_errmsg());
    return agentrt_set_output(out, (size_t)n) ? 1 : 0;
  }
  agentrt_outcome_t o;
  if ((st = agentrt_await(child.run, &o))) return 3;
  int n = snprintf(out, sizeof out, "%s %s ", child.run, o.status.data);
  for (size_t i = 0; i < o.output_hash.len; i++) n += snprintf(out + n, sizeof out - n, "%02x", o.output_hash.data[i]);
  n += snprintf(out + n, sizeof out - n, " %.*s", (int)o.output.len, (const char *)o.output.data);
  agentrt_outcome_free(&o);
  return agentrt_set_output(out, (size_t)n) ? 1 : 0;
}
