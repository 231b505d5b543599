// waiter waits, durably, as its input says: it sleeps for a duration or
// until a time (timer.sleep), or asks its approvers (approval.request), and
// around the wait it makes effects (HTTP POSTs to a test server, kv
// increments of a counter) so that a test sees none made twice across the
// parks and resumes.
//
//   input: {"sleep": NS, "until": UNIX_NS, "action": "TEXT", "group": "NAME",
//           "hits": "URL", "counter": true}
//
// Its output is JSON: {"due": N, "woke": N} after a sleep; {"approved":
// BOOL, "approvers": [...], "reason": "...", "digest": "HEX"} after an
// approval; and "effects": "N", the counter, when it counts. Strings in the
// input are taken up to their closing quote (no escapes).
//
// It is C, not Go, so that it compiles in milliseconds: the parking tests
// open many cells, under the race detector too.
//
//go:build ignore

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentrt.h"

static const char *after(const char *in, const char *name) {
  char key[32];
  snprintf(key, sizeof key, "\"%s\"", name);
  const char *p = strstr(in, key);
  if (!p) return NULL;
  p = strchr(p + strlen(key), ':');
  if (!p) return NULL;
  p++;
  while (*p == ' ') p++;
  return p;
}

static long long number(const char *in, const char *name) {
  const char *p = after(in, name);
  return p ? strtoll(p, NULL, 10) : 0;
}

static int truth(const char *in, const char *name) {
  const char *p = after(in, name);
  return p && strncmp(p, "true", 4) == 0;
}

// text copies the string value of name into dst; "" when absent.
static void text(const char *in, const char *name, char *dst, size_t cap) {
  dst[0] = 0;
  const char *p = after(in, name);
  if (!p || *p != '"') return;
  const char *end = strchr(p + 1, '"');
  if (!end) return;
  size_t n = (size_t)(end - p - 1);
  if (n >= cap) n = cap - 1;
  memcpy(dst, p + 1, n);
  dst[n] = 0;
}

static int fail(const char *what, agentrt_status_t st) {
  agentrt_logf(AGENTRT_LEVEL_ERROR, "%s: %s (%s)", what, agentrt_status_name(st), agentrt_errmsg());
  return 1;
}

static agentrt_status_t bump(void) {
  long long n = 0;
  agentrt_buf_t prev;
  agentrt_status_t st = agentrt_kv_get("effects", &prev);
  if (st == AGENTRT_STATUS_OK) {
    n = strtoll((const char *)prev.data, NULL, 10);
    agentrt_buf_free(&prev);
  } else if (st != AGENTRT_STATUS_NOT_FOUND) {
    return st;
  }
  char num[24];
  int len = snprintf(num, sizeof num, "%lld", n + 1);
  return agentrt_kv_put("effects", num, (size_t)len);
}

static agentrt_status_t around(int counter, const char *hits, const char *what) {
  agentrt_status_t st;
  if (counter && (st = bump())) return st;
  if (hits[0]) {
    agentrt_http_request_t req = {.method = "POST", .url = hits, .body = what, .body_len = strlen(what)};
    agentrt_http_response_t resp;
    if ((st = agentrt_http_request(&req, &resp))) return st;
    agentrt_http_response_free(&resp);
  }
  return AGENTRT_STATUS_OK;
}

int main(void) {
  agentrt_buf_t input;
  agentrt_status_t st = agentrt_input(&input);
  if (st) return fail("input", st);
  const char *in = (const char *)input.data;
  static char action[4096], group[128], hits[512], out[8192];
  long long sleep = number(in, "sleep"), until = number(in, "until");
  int counter = truth(in, "counter");
  text(in, "action", action, sizeof action);
  text(in, "group", group, sizeof group);
  text(in, "hits", hits, sizeof hits);

  if ((st = around(counter, hits, "before"))) return fail("before", st);
  size_t n = 0;
  n += (size_t)snprintf(out + n, sizeof out - n, "{");
  if (sleep > 0 || until > 0) {
    int64_t due = 0, woke = 0;
    st = sleep > 0 ? agentrt_sleep(sleep, &due, &woke) : agentrt_sleep_until(until, &due, &woke);
    if (st) return fail("timer.sleep", st);
    n += (size_t)snprintf(out + n, sizeof out - n, "\"due\":%lld,\"woke\":%lld", (long long)due, (long long)woke);
  } else if (action[0]) {
    agentrt_approval_t a;
    if ((st = agentrt_request_approval(action, group, &a))) return fail("approval.request", st);
    n += (size_t)snprintf(out + n, sizeof out - n, "\"approved\":%s,\"approvers\":[", a.approved ? "true" : "false");
    for (size_t i = 0; i < a.n_approvers; i++)
      n += (size_t)snprintf(out + n, sizeof out - n, "%s\"%s\"", i ? "," : "", a.approvers[i].data);
    n += (size_t)snprintf(out + n, sizeof out - n, "],\"reason\":\"%s\",\"digest\":\"", a.reason.data);
    for (size_t i = 0; i < a.digest.len; i++) n += (size_t)snprintf(out + n, sizeof out - n, "%02x", a.digest.data[i]);
    n += (size_t)snprintf(out + n, sizeof out - n, "\"");
    agentrt_approval_free(&a);
  }
  if ((st = around(counter, hits, "after"))) return fail("after", st);
  if (counter) {
    agentrt_buf_t v;
    if ((st = agentrt_kv_get("effects", &v))) return fail("kv.get effects", st);
    n += (size_t)snprintf(out + n, sizeof out - n, "%s\"effects\":\"%.*s\"", n > 1 ? "," : "", (int)v.len, (const char *)v.data);
    agentrt_buf_free(&v);
  }
  n += (size_t)snprintf(out + n, sizeof out - n, "}");
  if ((st = agentrt_set_output(out, n))) return fail("output", st);
  return 0;
}
