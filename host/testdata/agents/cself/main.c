// cself asks run.self from C (agentrt_self_call) and sets its output to
// the CBOR answer as the host gave it; then it asks for a journal page
// above the host's cap and logs the refusal, so a test sees both.
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
  st = agentrt_set_output(who.data, who.len);
  agentrt_buf_free(&who);
  return st ? 1 : 0;
}
