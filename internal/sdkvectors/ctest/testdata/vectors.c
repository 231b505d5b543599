/*
 * vectors.c drives agentrt.h for vectors_test.go. It reads one command per
 * line on stdin, makes the SDK call the command names, and prints one line
 * per command on stdout: what the call returned, rendered as the Go test
 * renders the value it decoded from the same vector. The Go test's stub
 * host checks the request bytes each call sends.
 *
 * Commands (tokens separated by one space):
 *   statuses                       print every ABI status: "0:ok 1:pending ..."
 *   <op> <args...>                 call the op, e.g. "kv.put x6b -"
 * Argument tokens: "x<hex>" is text or bytes (hex may be empty), "-" is a
 * NULL byte buffer, anything else a decimal number.
 * Output: "ok <fields...>" or "status <code> x<hex message>".
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentrt.h"

static char **tok;
static size_t ntok, next;

static void die(const char *msg) {
  fprintf(stderr, "vectors.c: %s (token %zu)\n", msg, next);
  exit(2);
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  die("bad hex digit");
  return 0;
}

/* arg_bytes returns the next token's bytes, NUL-terminated, or NULL for "-". */
static uint8_t *arg_bytes(size_t *len) {
  if (next >= ntok) die("missing argument");
  const char *t = tok[next++];
  if (strcmp(t, "-") == 0) {
    *len = 0;
    return NULL;
  }
  if (t[0] != 'x' || strlen(t + 1) % 2) die("argument is not x<hex>");
  size_t n = strlen(t + 1) / 2;
  uint8_t *b = malloc(n + 1);
  for (size_t i = 0; i < n; i++) b[i] = (uint8_t)(hexval(t[1 + 2 * i]) << 4 | hexval(t[2 + 2 * i]));
  b[n] = 0;
  *len = n;
  return b;
}

static char *arg_text(void) {
  size_t n;
  char *s = (char *)arg_bytes(&n);
  if (!s) die("text argument is -");
  if (strlen(s) != n) die("text argument holds a NUL byte; the C API takes C strings");
  return s;
}

static uint64_t arg_uint(void) {
  if (next >= ntok) die("missing argument");
  return strtoull(tok[next++], NULL, 10);
}

/* put_view prints a result view as x<hex>, checking the header's promise
 * that views are never NULL and always NUL-terminated. */
static void put_view(const void *data, size_t len) {
  const uint8_t *d = data;
  if (!d || d[len] != 0) {
    printf(" bad-view");
    return;
  }
  printf(" x");
  for (size_t i = 0; i < len; i++) printf("%02x", d[i]);
}

static void put_bool(bool b) { printf(b ? " true" : " false"); }

/* failed prints the start of a result line and reports whether the call
 * failed (the line is then complete). */
static bool failed(agentrt_status_t st) {
  if (st == AGENTRT_STATUS_OK) {
    if (agentrt_errmsg()[0] != '\0') {
      printf("errmsg-after-ok\n");
      return true;
    }
    printf("ok");
    return false;
  }
  printf("status %u", (unsigned)st);
  put_view(agentrt_errmsg(), strlen(agentrt_errmsg()));
  printf("\n");
  return true;
}

static void run(const char *op) {
  agentrt_status_t st;
  if (strcmp(op, "statuses") == 0) {
    const char *sep = "";
    for (unsigned i = 0; i < 64; i++) {
      const char *name = agentrt_status_name((agentrt_status_t)i);
      if (name) printf("%s%u:%s", sep, i, name), sep = " ";
    }
    printf("\n");
  } else if (strcmp(op, "run.input") == 0) {
    agentrt_buf_t in, state;
    uint32_t segment;
    if (failed(agentrt__run_input(&in, &state, &segment))) return;
    put_view(in.data, in.len);
    put_view(state.data, state.len);
    printf(" %" PRIu32 "\n", segment);
    agentrt_buf_free(&in);
  } else if (strcmp(op, "run.checkpoint") == 0) {
    size_t n;
    uint8_t *b = arg_bytes(&n);
    if (!failed(agentrt_checkpoint(b, n))) printf("\n");
  } else if (strcmp(op, "kv.get") == 0) {
    agentrt_buf_t b;
    st = agentrt_kv_get(arg_text(), &b);
    if (failed(st)) return;
    put_view(b.data, b.len);
    printf("\n");
    agentrt_buf_free(&b);
  } else if (strcmp(op, "run.set_output") == 0) {
    size_t n;
    uint8_t *b = arg_bytes(&n);
    if (!failed(agentrt_set_output(b, n))) printf("\n");
  } else if (strcmp(op, "run.log") == 0) {
    uint8_t level = (uint8_t)arg_uint();
    if (!failed(agentrt_log(level, arg_text()))) printf("\n");
  } else if (strcmp(op, "run.limit") == 0) {
    size_t n = (size_t)arg_uint();
    agentrt_budget_limit_t limits[16];
    if (n > 16) die("too many limits");
    for (size_t i = 0; i < n; i++) {
      limits[i].dim = arg_text();
      limits[i].amount = arg_uint();
    }
    agentrt_ceilings_t c;
    if (failed(agentrt_limit(limits, n, &c))) return;
    printf(" %zu", c.n);
    for (size_t i = 0; i < c.n; i++) {
      put_view(c.items[i].dim.data, c.items[i].dim.len);
      printf(" %" PRIu64, c.items[i].amount);
    }
    printf("\n");
    agentrt_ceilings_free(&c);
  } else if (strcmp(op, "run.introspect") == 0) {
    agentrt_introspect_t in;
    if (failed(agentrt_introspect(&in))) return;
    printf(" %" PRIu32 " %" PRIu64, in.abi, in.steps);
    put_view(in.run_id.data, in.run_id.len);
    printf(" %zu", in.ncapabilities);
    for (size_t i = 0; i < in.ncapabilities; i++) put_view(in.capabilities[i].data, in.capabilities[i].len);
    put_view(in.module_sha256.data, in.module_sha256.len);
    printf("\n");
    agentrt_introspect_free(&in);
  } else if (strcmp(op, "kv.put") == 0) {
    char *key = arg_text();
    size_t n;
    uint8_t *v = arg_bytes(&n);
    if (!failed(agentrt_kv_put(key, v, n))) printf("\n");
  } else if (strcmp(op, "kv.delete") == 0) {
    bool existed = true;
    if (failed(agentrt_kv_delete(arg_text(), &existed))) return;
    put_bool(existed);
    printf("\n");
  } else if (strcmp(op, "kv.list") == 0) {
    char *prefix = arg_text(), *after = arg_text();
    uint32_t limit = (uint32_t)arg_uint();
    agentrt_kv_list_t l;
    if (failed(agentrt_kv_list(prefix, after, limit, &l))) return;
    printf(" %zu", l.nkeys);
    for (size_t i = 0; i < l.nkeys; i++) put_view(l.keys[i].data, l.keys[i].len);
    put_bool(l.more);
    printf("\n");
    agentrt_kv_list_free(&l);
  } else if (strcmp(op, "http.request") == 0) {
    agentrt_http_request_t req = {0};
    req.method = arg_text();
    req.url = arg_text();
    req.nheaders = (size_t)arg_uint();
    agentrt_http_header_t *hs = calloc(req.nheaders + 1, sizeof *hs);
    for (size_t i = 0; i < req.nheaders; i++) {
      hs[i].name = arg_text();
      hs[i].value = arg_text();
    }
    req.headers = hs;
    req.body = arg_bytes(&req.body_len);
    agentrt_http_response_t resp;
    if (failed(agentrt_http_request(&req, &resp))) return;
    printf(" %u %zu", (unsigned)resp.status, resp.nheaders);
    for (size_t i = 0; i < resp.nheaders; i++) {
      put_view(resp.headers[i].name.data, resp.headers[i].name.len);
      put_view(resp.headers[i].value.data, resp.headers[i].value.len);
    }
    put_view(resp.body.data, resp.body.len);
    put_bool(resp.truncated);
    printf("\n");
    agentrt_http_response_free(&resp);
  } else if (strcmp(op, "clock.now") == 0) {
    int64_t t = 42;
    if (failed(agentrt_clock_now(&t))) return;
    printf(" %" PRId64 "\n", t);
  } else if (strcmp(op, "random.bytes") == 0) {
    uint32_t n = (uint32_t)arg_uint();
    uint8_t *b = malloc(n + 1);
    memset(b, 0xaa, n);
    b[n] = 0;
    if (failed(agentrt_random_bytes(b, n))) return;
    put_view(b, n);
    printf("\n");
  } else if (strcmp(op, "tool.run") == 0) {
    agentrt_tool_request_t req = {0};
    req.name = arg_text();
    req.nargs = (size_t)arg_uint();
    const char **args = calloc(req.nargs + 1, sizeof *args);
    for (size_t i = 0; i < req.nargs; i++) args[i] = arg_text();
    req.args = args;
    req.stdin_data = arg_bytes(&req.stdin_len);
    agentrt_tool_result_t res;
    if (failed(agentrt_tool_run(&req, &res))) return;
    printf(" %" PRId64, res.exit_code);
    put_view(res.signal.data, res.signal.len);
    put_view(res.stdout_data.data, res.stdout_data.len);
    put_view(res.stderr_data.data, res.stderr_data.len);
    put_bool(res.stdout_truncated);
    put_bool(res.stderr_truncated);
    put_bool(res.timed_out);
    printf(" %zu", res.nlimits);
    for (size_t i = 0; i < res.nlimits; i++) put_view(res.limits[i].data, res.limits[i].len);
    printf(" %zu", res.nfiles);
    for (size_t i = 0; i < res.nfiles; i++) {
      put_view(res.files[i].path.data, res.files[i].path.len);
      put_bool(res.files[i].path_bytes);
      printf(" %" PRIu64, res.files[i].size);
      put_view(res.files[i].sha256.data, res.files[i].sha256.len);
      put_view(res.files[i].unhashed.data, res.files[i].unhashed.len);
    }
    printf("\n");
    agentrt_tool_result_free(&res);
  } else if (strcmp(op, "timer.sleep") == 0) {
    /* "timer.sleep x<for|until> NS": the field the request sets. */
    char *field = arg_text();
    int64_t ns = (int64_t)arg_uint(), due = 42, woke = 42;
    if (strcmp(field, "for") != 0 && strcmp(field, "until") != 0) die("timer.sleep takes for or until");
    st = strcmp(field, "for") == 0 ? agentrt_sleep(ns, &due, &woke) : agentrt_sleep_until(ns, &due, &woke);
    if (failed(st)) return;
    printf(" %" PRId64 " %" PRId64 "\n", due, woke);
  } else if (strcmp(op, "approval.request") == 0) {
    char *action = arg_text(), *group = arg_text();
    agentrt_approval_t a;
    if (failed(agentrt_request_approval(action, group, &a))) return;
    put_bool(a.approved);
    put_view(a.digest.data, a.digest.len);
    put_view(a.reason.data, a.reason.len);
    printf(" %zu", a.n_approvers);
    for (size_t i = 0; i < a.n_approvers; i++) put_view(a.approvers[i].data, a.approvers[i].len);
    printf("\n");
    agentrt_approval_free(&a);
  } else {
    die("unknown command");
  }
}

int main(void) {
  static char input[1 << 20];
  size_t n = fread(input, 1, sizeof input - 1, stdin);
  if (n == sizeof input - 1) die("input too long");
  input[n] = '\0';
  /* Split in place: lines at '\n', tokens at ' ' (strtok_r is not C11). */
  for (char *line = input; *line;) {
    char *eol = strchr(line, '\n');
    if (!eol) die("the last line lacks a newline");
    *eol = '\0';
    ntok = 0;
    for (char *t = line; *t;) {
      tok = realloc(tok, (ntok + 1) * sizeof *tok);
      tok[ntok++] = t;
      char *sp = strchr(t, ' ');
      if (!sp) break;
      *sp = '\0';
      t = sp + 1;
    }
    if (ntok > 0) {
      next = 1;
      run(tok[0]);
      if (next != ntok) die("unused arguments");
    }
    line = eol + 1;
  }
  free(tok);
  return 0;
}
