/*
 * loop.c drives agentrt_loop.h for loop_test.go: an agent with two tools,
 * search and fetch, that runs the loop the scenario named by its first
 * argument configures, against the Go test's host, and prints one line:
 *
 *   status=<name> reason=<name> concluded=<0|1> iterations=<n> tool_calls=<n>
 *   runs=<n> usage=<input>/<output>/<cache_read> text=<hex> detail=<hex>
 *
 * ("status=<name> error=<hex message>" when agentrt_loop fails), where runs
 * counts the tool functions' runs. The scenario "fingerprints" instead
 * reads lines "<hex name> <hex arguments>" on stdin and prints the
 * fingerprint of each, in hex; "complete" makes one agentrt_llm_complete
 * and prints what it decoded.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentrt_loop.h"

static int runs;

static void put_hex(const char *key, const void *p, size_t n) {
  const uint8_t *b = (const uint8_t *)p;
  printf(" %s=", key);
  for (size_t i = 0; i < n; i++) printf("%02x", b[i]);
}

/* answer returns "<name> <arguments>", as the Go test's tools do. */
static char *answer(const char *name, agentrt_bytes_t args) {
  char *s = malloc(strlen(name) + args.len + 2);
  strcpy(s, name);
  strcat(s, " ");
  memcpy(s + strlen(name) + 1, args.data, args.len + 1);
  return s;
}

static agentrt_status_t search(void *user, agentrt_bytes_t args, char **result) {
  (void)user;
  runs++;
  *result = answer("search", args);
  return AGENTRT_STATUS_OK;
}

static agentrt_status_t fetch(void *user, agentrt_bytes_t args, char **result) {
  (void)user;
  runs++;
  *result = answer("fetch", args);
  return AGENTRT_STATUS_OK;
}

static agentrt_status_t search_offline(void *user, agentrt_bytes_t args, char **result) {
  (void)user, (void)args;
  runs++;
  *result = malloc(14);
  strcpy(*result, "index offline");
  return AGENTRT_STATUS_FAILED;
}

static agentrt_status_t fetch_over_budget(void *user, agentrt_bytes_t args, char **result) {
  (void)user, (void)args, (void)result;
  runs++;
  return AGENTRT_STATUS_BUDGET;
}

static const char schema[] = "{\"type\":\"object\",\"properties\":{\"q\":{\"type\":\"string\"}}}";

static agentrt_loop_tool_t tools[] = {
    {"search", schema, NULL, search},
    {"fetch", schema, NULL, fetch},
};

static const agentrt_llm_part_t system_part = {.type = AGENTRT_PART_TEXT, .text = {"You research.", 13}};
static const agentrt_llm_part_t user_part = {.type = AGENTRT_PART_TEXT, .text = {"What is agentrt?", 16}};
static const agentrt_llm_message_t messages[] = {
    {AGENTRT_ROLE_SYSTEM, &system_part, 1},
    {AGENTRT_ROLE_USER, &user_part, 1},
};

/* The Go test's clock: each read a second after the last. */
static int64_t ticks;
static agentrt_status_t clock_ticks(int64_t *now) {
  *now = 1767225600000000000 + ticks++ * 1000000000;
  return AGENTRT_STATUS_OK;
}

static int drafts;
static bool third_draft(void *user, const agentrt_loop_state_t *s) {
  (void)user;
  drafts++;
  return s->iteration == 3;
}

static int fingerprints(void) {
  char line[8192];
  while (fgets(line, sizeof line, stdin)) {
    char *sp = strchr(line, ' ');
    if (!sp) return 2;
    *sp = 0;
    uint8_t name[4096], args[4096];
    size_t nn = 0, na = 0;
    for (char *p = line; p[0] && p[1]; p += 2) sscanf(p, "%2hhx", &name[nn++]);
    for (char *p = sp + 1; p[0] && p[0] != '\n' && p[1]; p += 2) sscanf(p, "%2hhx", &args[na++]);
    name[nn] = 0;
    args[na] = 0;
    uint8_t fp[32];
    agentrt_status_t st = agentrt_fingerprint((agentrt_str_t){(const char *)name, nn}, (agentrt_bytes_t){args, na}, fp);
    if (st) return 3;
    put_hex("fp", fp, 32);
    printf("\n");
  }
  return 0;
}

/* complete makes one model call and prints what agentrt_llm_complete
 * decoded: "ok id=<hex> model=<hex> stop=<hex> provider=<hex> credential=<hex>
 * usage=<i>/<o>/<r>/<cr>/<cw>"
 * and " part=<type>,<hex id>,<hex name>,<hex text>,<hex arguments>" per
 * part, or "status=<name> error=<hex message>". */
static int complete(void) {
  agentrt_llm_request_t req = {.model = "m", .max_output_tokens = 1, .messages = &messages[1], .nmessages = 1};
  agentrt_llm_response_t r;
  agentrt_status_t st = agentrt_llm_complete(&req, &r);
  if (st) {
    printf("status=%s", agentrt_status_name(st));
    put_hex("error", agentrt_errmsg(), strlen(agentrt_errmsg()));
    printf("\n");
    return 0;
  }
  printf("ok");
  put_hex("id", r.id.data, r.id.len);
  put_hex("model", r.model.data, r.model.len);
  put_hex("stop", r.stop_reason.data, r.stop_reason.len);
  put_hex("provider", r.provider.data, r.provider.len);
  put_hex("credential", r.credential.data, r.credential.len);
  printf(" usage=%" PRIu64 "/%" PRIu64 "/%" PRIu64 "/%" PRIu64 "/%" PRIu64, r.usage.input, r.usage.output, r.usage.reasoning,
         r.usage.cache_read, r.usage.cache_write);
  for (size_t i = 0; i < r.ncontent; i++) {
    const agentrt_llm_part_t *p = &r.content[i];
    static const char *const types[] = {"text", "tool_call", "tool_result"};
    printf(" part=%s,", types[p->type]);
    for (size_t k = 0; k < p->id.len; k++) printf("%02x", (uint8_t)p->id.data[k]);
    printf(",");
    for (size_t k = 0; k < p->name.len; k++) printf("%02x", (uint8_t)p->name.data[k]);
    printf(",");
    for (size_t k = 0; k < p->text.len; k++) printf("%02x", (uint8_t)p->text.data[k]);
    printf(",");
    for (size_t k = 0; k < p->arguments.len; k++) printf("%02x", p->arguments.data[k]);
  }
  printf("\n");
  agentrt_llm_response_free(&r);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  const char *sc = argv[1];
  if (strcmp(sc, "fingerprints") == 0) return fingerprints();
  if (strcmp(sc, "complete") == 0) return complete();
  agentrt_loop_config_t cfg = {
      .request = {.model = "m", .max_output_tokens = 100, .messages = messages, .nmessages = 2},
      .tools = tools,
      .ntools = 2,
      .max_iterations = 10,
  };
  if (strcmp(sc, "done") == 0) {
    cfg.max_input_tokens = 100000, cfg.max_output_tokens = 1000, cfg.max_micro_usd = 5000;
  } else if (strcmp(sc, "max_iterations") == 0 || strcmp(sc, "conclusion_refused") == 0) {
    cfg.max_iterations = strcmp(sc, "max_iterations") == 0 ? 3 : 1;
  } else if (strcmp(sc, "max_tool_calls") == 0) {
    cfg.max_tool_calls = 2;
  } else if (strcmp(sc, "max_output_tokens") == 0) {
    cfg.max_output_tokens = 350;
  } else if (strcmp(sc, "max_input_tokens") == 0) {
    cfg.max_input_tokens = 6500;
  } else if (strcmp(sc, "max_wall") == 0) {
    cfg.max_wall_ns = 2500000000, cfg.clock = clock_ticks;
  } else if (strcmp(sc, "budget_money") == 0 || strcmp(sc, "budget_tokens") == 0) {
    cfg.max_micro_usd = 5000;
  } else if (strcmp(sc, "tool_errors") == 0) {
    tools[0].run = search_offline, tools[1].run = fetch_over_budget;
  } else if (strcmp(sc, "done_predicate") == 0) {
    cfg.ntools = 0, cfg.done = third_draft;
  } else if (strcmp(sc, "no_iterations") == 0) {
    cfg.max_iterations = 0;
  } else if (strcmp(sc, "wall_without_clock") == 0) {
    cfg.max_wall_ns = 60000000000;
  } else if (strcmp(sc, "output_too_small") == 0) {
    cfg.max_output_tokens = 150;
  } else if (strcmp(sc, "input_too_small") == 0) {
    cfg.max_input_tokens = 10;
  }
  /* repeat, ping_pong, batch, limit_refused: the defaults. */
  agentrt_loop_result_t res;
  agentrt_status_t st = agentrt_loop(&cfg, &res);
  printf("status=%s", agentrt_status_name(st));
  if (st != AGENTRT_STATUS_OK && !res.iterations && !res.response.mem_) {
    put_hex("error", agentrt_errmsg(), strlen(agentrt_errmsg()));
    printf("\n");
    return 0;
  }
  const agentrt_llm_response_t *r = &res.response;
  printf(" reason=%s concluded=%d iterations=%" PRIu32 " tool_calls=%" PRIu32 " runs=%d usage=%" PRIu64 "/%" PRIu64 "/%" PRIu64,
         agentrt_loop_reason_name(res.reason), res.concluded, res.iterations, res.tool_calls, runs, res.usage.input, res.usage.output,
         res.usage.cache_read);
  agentrt__wr text = {0};
  for (size_t i = 0; i < r->ncontent; i++)
    if (r->content[i].type == AGENTRT_PART_TEXT) agentrt__put(&text, r->content[i].text.data, r->content[i].text.len);
  for (size_t i = 0; i < r->ncontent; i++)
    if (r->content[i].type == AGENTRT_PART_TOOL_CALL) agentrt__put(&text, r->content[i].id.data, r->content[i].id.len);
  put_hex("text", text.buf ? (const char *)text.buf : "", text.len);
  put_hex("detail", res.detail.data, res.detail.len);
  printf("\n");
  free(text.buf);
  agentrt_loop_result_free(&res);
  return 0;
}
