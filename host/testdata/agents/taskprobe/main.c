// taskprobe is a task's attempt for the cell's task tests: it counts its
// attempts in kv, makes the calls asked, may wait for the real clock, and
// fails until its attempt count passes the number asked.
//
//   input: {"fail": 2, "puts": 5, "sleep": NS, "until": UNIX_NS}
//
// Each attempt reads and writes kv "tries" (2 calls), then makes "puts"
// kv.put calls, then, with "sleep", sleeps durably that long (timer.sleep:
// the run parks), then, with "until", reads the real clock (clock.now)
// until it reads that time or later; attempts up to "fail" then fail (exit 1),
// the next ones complete with the output "done after N tries". A key left
// out is 0: an input without them (a task's objective) completes at once.
//
// It is C, not Go, so that it compiles in milliseconds: the task tests
// start many runs, under the race detector too.
//
//go:build ignore

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentrt.h"

// field returns the integer after "name": in the input, 0 if absent.
static long long field(const char *in, const char *name) {
  char key[32];
  snprintf(key, sizeof key, "\"%s\"", name);
  const char *p = strstr(in, key);
  if (!p) return 0;
  p = strchr(p + strlen(key), ':');
  return p ? strtoll(p + 1, NULL, 10) : 0;
}

static int fail(const char *what, agentrt_status_t st) {
  agentrt_logf(AGENTRT_LEVEL_ERROR, "%s: %s (%s)", what, agentrt_status_name(st), agentrt_errmsg());
  return 1;
}

int main(void) {
  agentrt_buf_t input;
  agentrt_status_t st = agentrt_input(&input);
  if (st) return fail("input", st);
  const char *in = (const char *)input.data;
  long long nfail = field(in, "fail"), puts = field(in, "puts"), sleep = field(in, "sleep"), until = field(in, "until");

  long long n = 1;
  agentrt_buf_t prev;
  st = agentrt_kv_get("tries", &prev);
  if (st == AGENTRT_STATUS_OK) {
    n = strtoll((const char *)prev.data, NULL, 10) + 1;
    agentrt_buf_free(&prev);
  } else if (st != AGENTRT_STATUS_NOT_FOUND) {
    return fail("kv.get tries", st);
  }
  char num[24];
  int len = snprintf(num, sizeof num, "%lld", n);
  if ((st = agentrt_kv_put("tries", num, (size_t)len))) return fail("kv.put tries", st);
  for (long long i = 0; i < puts; i++) {
    char key[32];
    snprintf(key, sizeof key, "pad%lld", i);
    if ((st = agentrt_kv_put(key, "x", 1))) return fail("kv.put pad", st);
  }
  if (sleep > 0) {
    int64_t due, woke;
    if ((st = agentrt_sleep(sleep, &due, &woke))) return fail("timer.sleep", st);
  }
  while (until > 0) {
    int64_t now;
    if ((st = agentrt_clock_now(&now))) return fail("clock.now", st);
    if (now >= until) break;
  }
  if (n <= nfail) {
    agentrt_logf(AGENTRT_LEVEL_ERROR, "attempt %lld fails on purpose (fail: %lld)", n, nfail);
    return 1;
  }
  char out[64];
  len = snprintf(out, sizeof out, "done after %lld tries", n);
  if ((st = agentrt_set_output(out, (size_t)len))) return fail("output", st);
  return 0;
}
