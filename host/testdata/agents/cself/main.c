// cself asks run.self from C (agentrt_self_call) and sets its output to
// the CBOR answer as the host gave it; then it asks for a journal page
// above the host's cap and logs the refusal, and asks again through the
// typed calls (agentrt_whoami, agentrt_self_budget, agentrt_may), logging
// what they decoded, so a test sees all of them.
//
//go:build ignore

#include <stdint.h>
#include <string.h>

#include "agentrt.h"

int main(void) {
  agentrt_buf_t who;
  agentrt_status_t st = agentrt_self_call(AGENTRT_OP_RUN_SELF, NULL, 0, &who);
  if (st) {
    agentrt_logf(AGENTRT_LEVEL_ERROR, "run.self: %s (%s)", agentrt_status_name(st), agentrt_errmsg());
    return 1;
  }
  /* {"limit": 101}: one pair, the key "limit", the uint 101 (0x18 0x65). */
  static const uint8_t over[] = {0xa1, 0x65, 'l', 'i', 'm', 'i', 't', 0x18, 0x65};
  agentrt_buf_t page;
  st = agentrt_self_call(AGENTRT_OP_RUN_SELF_JOURNAL, over, sizeof over, &page);
  agentrt_logf(AGENTRT_LEVEL_WARN, "journal over the cap: %s: %s", agentrt_status_name(st), agentrt_errmsg());
  if (st == AGENTRT_STATUS_OK) agentrt_buf_free(&page);
  agentrt_self_t me;
  if ((st = agentrt_whoami(&me))) {
    agentrt_logf(AGENTRT_LEVEL_ERROR, "whoami: %s (%s)", agentrt_status_name(st), agentrt_errmsg());
    return 1;
  }
  agentrt_self_budget_t b;
  if ((st = agentrt_self_budget(&b))) {
    agentrt_logf(AGENTRT_LEVEL_ERROR, "self_budget: %s (%s)", agentrt_status_name(st), agentrt_errmsg());
    return 1;
  }
  const agentrt_self_budget_dim_t *steps = agentrt_self_budget_get(&b, "steps");
  /* {"key": "a"}: a kv.get this run, granted run alone, may not make. */
  static const uint8_t get[] = {0xa1, 0x63, 'k', 'e', 'y', 0x61, 'a'};
  agentrt_may_t may;
  if ((st = agentrt_may("kv.get", get, sizeof get, &may))) {
    agentrt_logf(AGENTRT_LEVEL_ERROR, "may: %s (%s)", agentrt_status_name(st), agentrt_errmsg());
    return 1;
  }
  agentrt_logf(AGENTRT_LEVEL_INFO, "typed whoami run=%s depth=%u cell=%s parent=%s sha=%zu | budget dims=%zu first=%s steps=%llu limited=%d | may kv.get decision=%s stage=%s status=%s",
               me.run_id.data, (unsigned)me.depth, me.cell.data, me.parent.data, me.module_sha256.len, b.ndims,
               b.ndims ? b.dims[0].dim.data : "", steps ? (unsigned long long)steps->spent : 0ULL, steps ? (int)steps->limited : -1,
               may.decision.data, may.stage.data, agentrt_status_name(may.status));
  agentrt_self_free(&me);
  agentrt_self_budget_free(&b);
  agentrt_may_free(&may);
  st = agentrt_set_output(who.data, who.len);
  agentrt_buf_free(&who);
  return st ? 1 : 0;
}
