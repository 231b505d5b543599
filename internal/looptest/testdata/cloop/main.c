/*
 * A looping agent in C: agentrt_loop over one tool, lookup, with at most
 * 3 iterations. Its output is one line: the reason, whether the loop
 * concluded, the iterations, the tool calls, the lookups run and the
 * final answer's text.
 */
#include <stdio.h>

#include "agentrt_loop.h"

static int lookups;

static agentrt_status_t lookup(void *user, agentrt_bytes_t args, char **result) {
  (void)user, (void)args;
  lookups++;
  *result = malloc(12);
  if (*result) memcpy(*result, "2.1 million", 12);
  return AGENTRT_STATUS_OK;
}

int main(void) {
  static const agentrt_loop_tool_t tools[] = {
      {"lookup", "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}", "population of a city", lookup},
  };
  agentrt_llm_part_t system = {.text = agentrt_str("Answer with numbers.")};
  agentrt_llm_part_t user = {.text = agentrt_str("How many people live in Paris?")};
  agentrt_llm_message_t msgs[] = {{AGENTRT_ROLE_SYSTEM, &system, 1}, {AGENTRT_ROLE_USER, &user, 1}};
  agentrt_loop_config_t cfg = {
      .request = {.model = "m-test", .max_output_tokens = 256, .messages = msgs, .nmessages = 2},
      .tools = tools,
      .ntools = 1,
      .max_iterations = 3,
  };
  agentrt_loop_result_t res;
  agentrt_status_t st = agentrt_loop(&cfg, &res);
  if (st != AGENTRT_STATUS_OK) {
    agentrt_logf(AGENTRT_LEVEL_ERROR, "agentrt_loop: %s: %s", agentrt_status_name(st), agentrt_errmsg());
    return 1;
  }
  const char *text = "";
  for (size_t i = 0; i < res.response.ncontent; i++)
    if (res.response.content[i].type == AGENTRT_PART_TEXT) text = res.response.content[i].text.data;
  char out[512];
  int n = snprintf(out, sizeof out, "reason=%s concluded=%d iterations=%u tool_calls=%u lookups=%d text=%s",
                   agentrt_loop_reason_name(res.reason), res.concluded, (unsigned)res.iterations, (unsigned)res.tool_calls, lookups, text);
  st = agentrt_set_output(out, (size_t)n);
  agentrt_loop_result_free(&res);
  return st != AGENTRT_STATUS_OK;
}
