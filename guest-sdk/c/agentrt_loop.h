/*
 * agentrt_loop.h: the loop controller of the C SDK, the Go SDK's agent.Loop
 * with agent.ToolStep for C guests. Include it after (or instead of)
 * agentrt.h:
 *
 *     #include "agentrt_loop.h"
 *
 * agentrt_loop runs a tool-calling conversation with a model: each
 * iteration makes one model call (llm.complete); the tool calls the answer
 * asks for are admitted against the caps, run by name from the config's
 * tool table, and their results fed back; it ends when the done predicate
 * holds (by default: an answer that asks for no tool) or at a cap:
 * iterations, input and output tokens, money, wall clock, tool calls, or
 * when the model asks the same call a third time (the same fingerprint) or
 * ping-pongs between two (A, B, A, B). At a cap it makes one concluding call
 * with no tools: the conversation, failed results for the calls that did
 * not run, and a note asking for a final answer; its tool calls and results
 * are written as text, since a provider may refuse tool parts in a request
 * that offers no tools. It returns a typed reason,
 * the same set as the Go SDK's LoopReason.
 *
 * Before the first call it asks the host to enforce its caps (run.limit):
 * model_calls max_iterations + 1, input_tokens, output_tokens, micro_usd
 * and wall_seconds, so the host's budget holds them whatever the agent's
 * code does; it journals them too. Tool calls are the loop's alone: the
 * host sees the native tools a tool function runs, not the calls the model
 * asks of the agent.
 *
 * A fingerprint is SHA-256(name || 0x00 || canonical arguments), byte for
 * byte the Go SDK's agent.Fingerprint (guest-sdk/agent/testdata/
 * fingerprints.jsonl holds both to it). Everything is static inline, as in
 * agentrt.h; a module imports agentrt:clock only if it passes a clock.
 *
 * An agent with one tool (its grant needs run and llm):
 *
 *     static agentrt_status_t lookup(void *user, agentrt_bytes_t args, char **result) {
 *       *result = malloc(12);  // what the model is told; the loop frees it
 *       if (*result) memcpy(*result, "2.1 million", 12);
 *       return AGENTRT_STATUS_OK;
 *     }
 *     static const agentrt_loop_tool_t tools[] = {
 *         {"lookup", "{\"type\":\"object\"}", "population of a city", lookup}};
 *     agentrt_llm_part_t ask = {.text = agentrt_str("How many people live in Paris?")};
 *     agentrt_llm_message_t msgs[] = {{AGENTRT_ROLE_USER, &ask, 1}};
 *     agentrt_loop_config_t cfg = {
 *         .request = {.model = "gpt-4.1-mini", .max_output_tokens = 512, .messages = msgs, .nmessages = 1},
 *         .tools = tools, .ntools = 1,
 *         .max_iterations = 8, .max_output_tokens = 8192, .max_tool_calls = 16};
 *     agentrt_loop_result_t res;
 *     if (agentrt_loop(&cfg, &res) == AGENTRT_STATUS_OK)
 *       ... agentrt_loop_reason_name(res.reason), res.response.content ...
 *     agentrt_loop_result_free(&res);
 */
#ifndef AGENTRT_LOOP_H
#define AGENTRT_LOOP_H

#include "agentrt.h"

/* Why agentrt_loop ended: the numbers and names of the Go SDK's LoopReason. */
typedef enum agentrt_loop_reason {
  AGENTRT_LOOP_DONE = 0,           /* the done predicate held */
  AGENTRT_LOOP_MAX_ITERATIONS = 1, /* max_iterations steps ran */
  AGENTRT_LOOP_MAX_TOKENS = 2,     /* another step and the concluding call would not fit a token cap */
  AGENTRT_LOOP_MAX_MONEY = 3,      /* the host refused a call for max_micro_usd */
  AGENTRT_LOOP_MAX_WALL = 4,       /* max_wall_ns passed, by the clock or the host's */
  AGENTRT_LOOP_MAX_TOOL_CALLS = 5, /* the model asked more calls than max_tool_calls leaves */
  AGENTRT_LOOP_REPEAT = 6,         /* the same call a third time */
  AGENTRT_LOOP_PING_PONG = 7,      /* the last four calls alternate between two */
  AGENTRT_LOOP_BUDGET = 8,         /* the host refused a call for a ceiling of the run's budget */
} agentrt_loop_reason_t;

/* agentrt_loop_reason_name returns the name of a reason ("max_tool_calls"),
 * or NULL for a number that is none. */
static inline const char *agentrt_loop_reason_name(agentrt_loop_reason_t r) {
  static const char *const names[] = {"done", "max_iterations", "max_tokens", "max_money", "max_wall",
                                      "max_tool_calls", "repeat", "ping_pong", "budget"};
  return (unsigned)r < sizeof names / sizeof names[0] ? names[r] : NULL;
}

/* A tool the model may call, and the function that runs it. run gets the
 * call's arguments (JSON text) and sets *result to what the model is told:
 * malloc'd, NUL-terminated, freed by the loop (NULL: nothing). A status
 * other than AGENTRT_STATUS_OK tells the model the call failed, with
 * *result or, if that is NULL, agentrt_errmsg(); AGENTRT_STATUS_BUDGET
 * ends the loop with AGENTRT_LOOP_BUDGET. */
typedef struct agentrt_loop_tool {
  const char *name, *schema, *description;
  agentrt_status_t (*run)(void *user, agentrt_bytes_t arguments, char **result);
} agentrt_loop_tool_t;

/* Where the loop stands, for the done predicate. */
typedef struct agentrt_loop_state {
  uint32_t iteration;                 /* steps run */
  uint32_t tool_calls;                /* tool calls admitted */
  agentrt_llm_usage_t usage;          /* every model call's, summed */
  const agentrt_llm_response_t *last; /* the model's last answer */
} agentrt_loop_state_t;

/* What agentrt_loop runs. A cap of 0 is no cap, except max_iterations. */
typedef struct agentrt_loop_config {
  /* The conversation's start: model, provider, the system and user
   * messages, and max_output_tokens, the bound of every call. Its tools
   * must be empty: they are the table below. */
  agentrt_llm_request_t request;
  const agentrt_loop_tool_t *tools;
  size_t ntools;
  uint32_t max_iterations;  /* 1 or more */
  uint64_t max_input_tokens; /* every call's input, cached tokens included */
  uint64_t max_output_tokens;
  uint64_t max_micro_usd;   /* enforced by the host alone, which knows prices */
  int64_t max_wall_ns;      /* needs clock */
  /* clock reads the time max_wall_ns is measured by: agentrt_clock_now,
   * the host's real time (the clock capability); the WASI clock is the
   * run's virtual one, which does not advance while the host waits. */
  agentrt_status_t (*clock)(int64_t *unix_nano);
  uint32_t max_tool_calls;
  /* done reports, after each step, whether the loop reached its goal.
   * NULL: when the model's last answer asks for no tool. */
  bool (*done)(void *user, const agentrt_loop_state_t *s);
  const char *conclusion; /* the concluding note; NULL: the default */
  void *user;             /* passed to done and to every tool */
} agentrt_loop_config_t;

/* How the loop ended. response is the concluding call's answer when
 * concluded, otherwise the model's last (empty if there was none).
 * detail says what tripped the reason, for people. Free with
 * agentrt_loop_result_free. */
typedef struct agentrt_loop_result {
  agentrt_loop_reason_t reason;
  agentrt_str_t detail;
  agentrt_llm_response_t response;
  bool concluded;
  uint32_t iterations, tool_calls;
  agentrt_llm_usage_t usage; /* every call's, the concluding one included */
  void *mem_;
} agentrt_loop_result_t;

/* agentrt_loop_result_free releases what agentrt_loop returned. */
static inline void agentrt_loop_result_free(agentrt_loop_result_t *res) {
  agentrt_llm_response_free(&res->response);
  free(res->mem_);
  memset(res, 0, sizeof *res);
}

/* ------------------------------------------------------------------------ */
/* SHA-256 (FIPS 180-4)                                                     */

typedef struct agentrt__sha256 {
  uint32_t h[8];
  uint8_t buf[64];
  size_t nbuf;
  uint64_t len;
} agentrt__sha256;

static inline uint32_t agentrt__ror(uint32_t x, int n) { return x >> n | x << (32 - n); }

static inline void agentrt__sha256_block(agentrt__sha256 *s, const uint8_t *p) {
  static const uint32_t k[64] = {
      0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01,
      0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc,
      0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
      0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
      0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08,
      0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
      0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
  uint32_t w[64], v[8];
  for (int i = 0; i < 16; i++) w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
  for (int i = 16; i < 64; i++) {
    uint32_t s0 = agentrt__ror(w[i - 15], 7) ^ agentrt__ror(w[i - 15], 18) ^ w[i - 15] >> 3;
    uint32_t s1 = agentrt__ror(w[i - 2], 17) ^ agentrt__ror(w[i - 2], 19) ^ w[i - 2] >> 10;
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  memcpy(v, s->h, sizeof v);
  for (int i = 0; i < 64; i++) {
    uint32_t t1 = v[7] + (agentrt__ror(v[4], 6) ^ agentrt__ror(v[4], 11) ^ agentrt__ror(v[4], 25)) + ((v[4] & v[5]) ^ (~v[4] & v[6])) + k[i] + w[i];
    uint32_t t2 = (agentrt__ror(v[0], 2) ^ agentrt__ror(v[0], 13) ^ agentrt__ror(v[0], 22)) + ((v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]));
    memmove(v + 1, v, 7 * sizeof v[0]);
    v[4] += t1;
    v[0] = t1 + t2;
  }
  for (int i = 0; i < 8; i++) s->h[i] += v[i];
}

static inline void agentrt__sha256_init(agentrt__sha256 *s) {
  static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  memcpy(s->h, h0, sizeof h0);
  s->nbuf = 0;
  s->len = 0;
}

static inline void agentrt__sha256_write(agentrt__sha256 *s, const void *data, size_t n) {
  const uint8_t *p = (const uint8_t *)data;
  s->len += n;
  while (n > 0) {
    size_t k = 64 - s->nbuf < n ? 64 - s->nbuf : n;
    memcpy(s->buf + s->nbuf, p, k);
    s->nbuf += k, p += k, n -= k;
    if (s->nbuf == 64) agentrt__sha256_block(s, s->buf), s->nbuf = 0;
  }
}

static inline void agentrt__sha256_sum(agentrt__sha256 *s, uint8_t out[32]) {
  uint64_t bits = s->len * 8;
  uint8_t pad[72] = {0x80};
  size_t n = (s->nbuf < 56 ? 56 : 120) - s->nbuf;
  for (int i = 0; i < 8; i++) pad[n + i] = (uint8_t)(bits >> (56 - 8 * i));
  agentrt__sha256_write(s, pad, n + 8);
  for (int i = 0; i < 8; i++)
    for (int j = 0; j < 4; j++) out[4 * i + j] = (uint8_t)(s->h[i] >> (24 - 8 * j));
}

/* ------------------------------------------------------------------------ */
/* Fingerprints: the canonical form of a call's JSON arguments              */

/* The nesting the canonical form follows (the Go SDK's maxJSONDepth);
 * deeper arguments are hashed as they are. */
#define AGENTRT__JSON_DEPTH 64

typedef struct agentrt__json {
  const uint8_t *p, *end;
} agentrt__json;

static inline void agentrt__json_space(agentrt__json *j) {
  while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) j->p++;
}

/* agentrt__json_str skips the string at j->p, quotes included. */
static inline bool agentrt__json_str(agentrt__json *j) {
  j->p++;
  while (j->p < j->end) {
    if (*j->p == '\\') {
      if (j->end - j->p < 2) return false;
      j->p += 2;
    } else if (*j->p++ == '"') {
      return true;
    }
  }
  return false;
}

static inline bool agentrt__json_number(const uint8_t *t, size_t n) {
  size_t i = 0, d;
  if (t[i] == '-') i++;
#define AGENTRT__DIGITS() for (d = 0; i < n && t[i] >= '0' && t[i] <= '9'; i++, d++)
  if (i < n && t[i] == '0') {
    i++;
  } else {
    AGENTRT__DIGITS();
    if (d == 0) return false;
  }
  if (i < n && t[i] == '.') {
    i++;
    AGENTRT__DIGITS();
    if (d == 0) return false;
  }
  if (i < n && (t[i] == 'e' || t[i] == 'E')) {
    i++;
    if (i < n && (t[i] == '+' || t[i] == '-')) i++;
    AGENTRT__DIGITS();
    if (d == 0) return false;
  }
#undef AGENTRT__DIGITS
  return i == n;
}

/* One member of an object: its key as written, quotes included, and its
 * value's canonical form. */
typedef struct agentrt__json_member {
  const uint8_t *key;
  size_t klen;
  agentrt__wr value;
} agentrt__json_member;

/* agentrt__json_key_less compares keys by their bytes between the quotes. */
static inline bool agentrt__json_key_less(const agentrt__json_member *a, const agentrt__json_member *b) {
  size_t la = a->klen - 2, lb = b->klen - 2;
  int c = memcmp(a->key + 1, b->key + 1, la < lb ? la : lb);
  return c < 0 || (c == 0 && la < lb);
}

static inline bool agentrt__json_value(agentrt__json *j, agentrt__wr *out, int depth);

static inline bool agentrt__json_object(agentrt__json *j, agentrt__wr *out, int depth) {
  agentrt__json_member *ms = NULL;
  size_t n = 0, cap = 0;
  bool ok = false;
  j->p++;
  agentrt__json_space(j);
  if (j->p < j->end && *j->p == '}') {
    j->p++;
    agentrt__put(out, "{}", 2);
    return true;
  }
  for (;;) {
    agentrt__json_space(j);
    if (j->p >= j->end || *j->p != '"') goto done;
    const uint8_t *k = j->p;
    if (!agentrt__json_str(j)) goto done;
    size_t klen = (size_t)(j->p - k);
    agentrt__json_space(j);
    if (j->p >= j->end || *j->p != ':') goto done;
    j->p++;
    if (n == cap) {
      cap = cap ? 2 * cap : 8;
      agentrt__json_member *m = (agentrt__json_member *)realloc(ms, cap * sizeof *ms);
      if (!m) goto done;
      ms = m;
    }
    ms[n++] = (agentrt__json_member){k, klen, {0}};
    if (!agentrt__json_value(j, &ms[n - 1].value, depth + 1) || ms[n - 1].value.oom) goto done;
    agentrt__json_space(j);
    if (j->p >= j->end) goto done;
    if (*j->p == '}') {
      j->p++;
      break;
    }
    if (*j->p != ',') goto done;
    j->p++;
  }
  /* A stable insertion sort: objects of arguments are small. */
  for (size_t i = 1; i < n; i++) {
    agentrt__json_member m = ms[i];
    size_t at = i;
    while (at > 0 && agentrt__json_key_less(&m, &ms[at - 1])) ms[at] = ms[at - 1], at--;
    ms[at] = m;
  }
  agentrt__put(out, "{", 1);
  for (size_t i = 0; i < n; i++) {
    if (i > 0) agentrt__put(out, ",", 1);
    agentrt__put(out, ms[i].key, ms[i].klen);
    agentrt__put(out, ":", 1);
    agentrt__put(out, ms[i].value.buf, ms[i].value.len);
  }
  agentrt__put(out, "}", 1);
  ok = true;
done:
  for (size_t i = 0; i < n; i++) free(ms[i].value.buf);
  free(ms);
  return ok;
}

static inline bool agentrt__json_value(agentrt__json *j, agentrt__wr *out, int depth) {
  agentrt__json_space(j);
  if (j->p >= j->end || depth > AGENTRT__JSON_DEPTH) return false;
  uint8_t c = *j->p;
  if (c == '{') return agentrt__json_object(j, out, depth);
  if (c == '[') {
    j->p++;
    agentrt__put(out, "[", 1);
    agentrt__json_space(j);
    if (j->p < j->end && *j->p == ']') {
      j->p++;
      agentrt__put(out, "]", 1);
      return true;
    }
    for (;;) {
      if (!agentrt__json_value(j, out, depth + 1)) return false;
      agentrt__json_space(j);
      if (j->p >= j->end) return false;
      if (*j->p == ']') {
        j->p++;
        agentrt__put(out, "]", 1);
        return true;
      }
      if (*j->p != ',') return false;
      j->p++;
      agentrt__put(out, ",", 1);
    }
  }
  const uint8_t *start = j->p;
  if (c == '"') {
    if (!agentrt__json_str(j)) return false;
  } else {
    while (j->p < j->end) {
      uint8_t d = *j->p;
      if (!((d >= '0' && d <= '9') || (d >= 'a' && d <= 'z') || d == '-' || d == '+' || d == '.' || d == 'E')) break;
      j->p++;
    }
    size_t n = (size_t)(j->p - start);
    bool lit = (n == 4 && (memcmp(start, "true", 4) == 0 || memcmp(start, "null", 4) == 0)) ||
               (n == 5 && memcmp(start, "false", 5) == 0);
    if (n == 0 || (!lit && !agentrt__json_number(start, n))) return false;
  }
  agentrt__put(out, start, (size_t)(j->p - start));
  return true;
}

/* agentrt_fingerprint computes the fingerprint of a call of tool name with
 * arguments: SHA-256 of the name, a zero byte and the canonical form of
 * the arguments, which drops insignificant whitespace and sorts every
 * object's members by their keys' bytes as written, between the quotes
 * (a stable sort); strings, numbers and literals stay as written. Empty
 * arguments are "{}"; arguments that are not JSON are hashed as they are.
 * AGENTRT_STATUS_SDK_NOMEM if memory ran out. */
static inline agentrt_status_t agentrt_fingerprint(agentrt_str_t name, agentrt_bytes_t arguments, uint8_t out[32]) {
  agentrt__sha256 s;
  agentrt__wr canon = {0};
  agentrt__json j = {arguments.data, arguments.data + arguments.len};
  const void *form = arguments.data;
  size_t n = arguments.len;
  if (arguments.len == 0) {
    form = "{}", n = 2;
  } else if (agentrt__json_value(&j, &canon, 0) && (agentrt__json_space(&j), j.p == j.end)) {
    if (canon.oom) return agentrt__fail(AGENTRT_STATUS_SDK_NOMEM, "out of memory for a fingerprint");
    form = canon.buf, n = canon.len;
  }
  agentrt__sha256_init(&s);
  agentrt__sha256_write(&s, name.data, name.len);
  agentrt__sha256_write(&s, "", 1);
  agentrt__sha256_write(&s, form, n);
  agentrt__sha256_sum(&s, out);
  free(canon.buf);
  return AGENTRT_STATUS_OK;
}

/* ------------------------------------------------------------------------ */
/* The loop                                                                 */

typedef struct agentrt__loop {
  const agentrt_loop_config_t *cfg;
  agentrt_llm_message_t *msgs; /* the conversation */
  size_t nmsgs, capmsgs;
  void **owned; /* what the conversation points into: parts and texts */
  size_t nowned, capowned;
  agentrt_llm_response_t *resps; /* every answer; the conversation points into them */
  size_t nresps, capresps;
  uint8_t (*calls)[32]; /* the fingerprints of the admitted calls, in order */
  size_t ncalls, capcalls;
  agentrt_llm_tool_t *tooldefs;
  agentrt_loop_state_t st;
  int64_t start;
  char *detail;
} agentrt__loop;

/* agentrt__grow makes room for one more item of size size in *items. */
static inline bool agentrt__grow(void **items, size_t n, size_t *cap, size_t size) {
  if (n < *cap) return true;
  size_t c = *cap ? 2 * *cap : 8;
  void *p = realloc(*items, c * size);
  if (!p) return false;
  *items = p;
  *cap = c;
  return true;
}

static inline bool agentrt__loop_own(agentrt__loop *l, void *p) {
  if (!p || !agentrt__grow((void **)&l->owned, l->nowned, &l->capowned, sizeof *l->owned)) {
    free(p);
    return false;
  }
  l->owned[l->nowned++] = p;
  return true;
}

static inline bool agentrt__loop_append(agentrt__loop *l, const char *role, const agentrt_llm_part_t *parts, size_t n) {
  if (!agentrt__grow((void **)&l->msgs, l->nmsgs, &l->capmsgs, sizeof *l->msgs)) return false;
  l->msgs[l->nmsgs++] = (agentrt_llm_message_t){role, parts, n};
  return true;
}

/* agentrt__loop_setdetail sets the result's detail from a formatted text. */
__attribute__((format(printf, 2, 3))) static inline void agentrt__loop_setdetail(agentrt__loop *l, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *d = n < 0 ? NULL : (char *)malloc((size_t)n + 1);
  if (d) {
    va_start(ap, fmt);
    vsnprintf(d, (size_t)n + 1, fmt, ap);
    va_end(ap);
  }
  /* The old detail may be one of the arguments: free it last. */
  free(l->detail);
  l->detail = d;
}

/* agentrt__strdup copies s (C11 has no strdup). */
static inline char *agentrt__strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = (char *)malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

/* The default concluding note, and the reason's text in the note and in
 * the results of the calls that did not run. */
#define AGENTRT__LOOP_NOTE "You can call no more tools. Give your final answer now, from what you have found so far."
#define AGENTRT__LOOP_NOT_RUN "not run: "

/* agentrt__loop_why returns "the loop stopped (reason: detail)", malloc'd. */
static inline char *agentrt__loop_why(agentrt_loop_reason_t why, const char *detail) {
  const char *reason = agentrt_loop_reason_name(why);
  size_t n = strlen(reason) + (detail ? strlen(detail) : 0) + 32;
  char *w = (char *)malloc(n);
  if (!w) return NULL;
  if (detail && detail[0]) snprintf(w, n, "the loop stopped (%s: %s)", reason, detail);
  else snprintf(w, n, "the loop stopped (%s)", reason);
  return w;
}

/* agentrt__loop_answered reports whether a tool result in msgs answers
 * the call with id. */
static inline bool agentrt__loop_answered(const agentrt_llm_message_t *msgs, size_t nmsgs, agentrt_str_t id) {
  for (size_t a = 0; a < nmsgs; a++)
    for (size_t b = 0; b < msgs[a].nparts; b++) {
      const agentrt_llm_part_t *r = &msgs[a].parts[b];
      if (r->type == AGENTRT_PART_TOOL_RESULT && r->id.len == id.len && memcmp(r->id.data, id.data, id.len) == 0) return true;
    }
  return false;
}

/* agentrt__loop_input_bound is the host's worst case for the input tokens
 * of a request (the Go SDK's inputBound, the host's reservation). */
static inline uint64_t agentrt__loop_input_bound(const agentrt_llm_message_t *msgs, size_t nmsgs, const agentrt_llm_tool_t *tools,
                                                 size_t ntools) {
  uint64_t n = 8;
  for (size_t i = 0; i < nmsgs; i++) {
    n += 8;
    for (size_t k = 0; k < msgs[i].nparts; k++) {
      const agentrt_llm_part_t *p = &msgs[i].parts[k];
      n += 4 + p->text.len + p->id.len + p->name.len + p->arguments.len;
    }
  }
  for (size_t i = 0; i < ntools; i++)
    n += 64 + strlen(tools[i].name) + (tools[i].description ? strlen(tools[i].description) : 0) + (tools[i].schema ? strlen(tools[i].schema) : 0);
  return n;
}

static inline uint64_t agentrt__loop_total_input(const agentrt_llm_usage_t *u) { return u->input + u->cache_read + u->cache_write; }

/* agentrt__loop_complete makes the step's model call and appends the answer. */
static inline agentrt_status_t agentrt__loop_complete(agentrt__loop *l) {
  agentrt_llm_request_t req = l->cfg->request;
  req.messages = l->msgs, req.nmessages = l->nmsgs;
  req.tools = l->tooldefs, req.ntools = l->cfg->ntools;
  bool grown = agentrt__grow((void **)&l->resps, l->nresps, &l->capresps, sizeof *l->resps);
  /* A realloc moves the answers: point at the last one where it is now. */
  l->st.last = l->nresps ? &l->resps[l->nresps - 1] : NULL;
  if (!grown) return agentrt__fail(AGENTRT_STATUS_SDK_NOMEM, "out of memory for an answer");
  agentrt_llm_response_t *r = &l->resps[l->nresps];
  agentrt_status_t st = agentrt_llm_complete(&req, r);
  if (st) return st;
  l->nresps++;
  agentrt_llm_usage_add(&l->st.usage, &r->usage);
  l->st.last = r;
  if (r->ncontent > 0 && !agentrt__loop_append(l, AGENTRT_ROLE_ASSISTANT, r->content, r->ncontent))
    return agentrt__fail(AGENTRT_STATUS_SDK_NOMEM, "out of memory for the conversation");
  return AGENTRT_STATUS_OK;
}

/* agentrt__loop_admit checks a batch of tool calls against the caps; it
 * returns AGENTRT_LOOP_DONE when the batch may run (and counts it), and
 * the reason to stop otherwise. */
static inline agentrt_loop_reason_t agentrt__loop_admit(agentrt__loop *l, const agentrt_llm_response_t *r, agentrt_status_t *st) {
  const agentrt_loop_config_t *c = l->cfg;
  size_t n = 0, base = l->ncalls;
  for (size_t i = 0; i < r->ncontent; i++) n += r->content[i].type == AGENTRT_PART_TOOL_CALL;
  if (c->max_tool_calls > 0 && l->st.tool_calls + n > c->max_tool_calls) {
    agentrt__loop_setdetail(l, "%zu tool calls asked with %u made of %u", n, l->st.tool_calls, c->max_tool_calls);
    return AGENTRT_LOOP_MAX_TOOL_CALLS;
  }
  for (size_t i = 0; i < r->ncontent; i++) {
    const agentrt_llm_part_t *p = &r->content[i];
    if (p->type != AGENTRT_PART_TOOL_CALL) continue;
    if (!agentrt__grow((void **)&l->calls, l->ncalls, &l->capcalls, sizeof *l->calls)) {
      *st = agentrt__fail(AGENTRT_STATUS_SDK_NOMEM, "out of memory for fingerprints");
      l->ncalls = base;
      return AGENTRT_LOOP_DONE;
    }
    uint8_t *fp = l->calls[l->ncalls];
    if ((*st = agentrt_fingerprint(p->name, p->arguments, fp)) != AGENTRT_STATUS_OK) {
      l->ncalls = base;
      return AGENTRT_LOOP_DONE;
    }
    size_t seen = 1;
    for (size_t k = 0; k < l->ncalls; k++) seen += memcmp(l->calls[k], fp, 32) == 0;
    l->ncalls++;
    size_t m = l->ncalls;
    agentrt_loop_reason_t why = AGENTRT_LOOP_DONE;
    if (seen >= 3) {
      agentrt__loop_setdetail(l, "%s asked a third time with the same arguments", p->name.data);
      why = AGENTRT_LOOP_REPEAT;
    } else if (m >= 4 && memcmp(l->calls[m - 1], l->calls[m - 3], 32) == 0 && memcmp(l->calls[m - 2], l->calls[m - 4], 32) == 0 &&
               memcmp(l->calls[m - 1], l->calls[m - 2], 32) != 0) {
      agentrt__loop_setdetail(l, "the calls alternate between two, the last %s", p->name.data);
      why = AGENTRT_LOOP_PING_PONG;
    }
    if (why != AGENTRT_LOOP_DONE) {
      l->ncalls = base;
      return why;
    }
  }
  l->st.tool_calls += (uint32_t)n;
  return AGENTRT_LOOP_DONE;
}

/* agentrt__loop_no_tool says a call names no tool of the table, listing
 * those it has in byte order, as the Go SDK's ToolStep does. */
static inline char *agentrt__loop_no_tool(const agentrt_loop_config_t *c, agentrt_str_t name) {
  size_t n = name.len + 32;
  for (size_t i = 0; i < c->ntools; i++) n += strlen(c->tools[i].name) + 2;
  char *m = (char *)malloc(n);
  if (!m) return NULL;
  snprintf(m, n, "no tool named \"%s\" (tools: ", name.data);
  const char *prev = NULL;
  for (size_t k = 0; k < c->ntools; k++) {
    const char *next = NULL;
    for (size_t i = 0; i < c->ntools; i++) {
      const char *t = c->tools[i].name;
      if ((!prev || strcmp(t, prev) > 0) && (!next || strcmp(t, next) < 0)) next = t;
    }
    if (!next) break;
    if (prev) strcat(m, ", ");
    strcat(m, next);
    prev = next;
  }
  strcat(m, c->ntools ? ")" : "none)");
  return m;
}

/* agentrt__loop_tools runs the admitted calls of r and appends their results. */
static inline agentrt_status_t agentrt__loop_tools(agentrt__loop *l, const agentrt_llm_response_t *r, bool *budget) {
  size_t n = 0;
  for (size_t i = 0; i < r->ncontent; i++) n += r->content[i].type == AGENTRT_PART_TOOL_CALL;
  agentrt_llm_part_t *parts = (agentrt_llm_part_t *)calloc(n, sizeof *parts);
  if (!agentrt__loop_own(l, parts)) return agentrt__fail(AGENTRT_STATUS_SDK_NOMEM, "out of memory for tool results");
  size_t k = 0;
  for (size_t i = 0; i < r->ncontent; i++) {
    const agentrt_llm_part_t *call = &r->content[i];
    if (call->type != AGENTRT_PART_TOOL_CALL) continue;
    const agentrt_loop_tool_t *t = NULL;
    for (size_t j = 0; j < l->cfg->ntools; j++)
      if (strlen(l->cfg->tools[j].name) == call->name.len && memcmp(l->cfg->tools[j].name, call->name.data, call->name.len) == 0)
        t = &l->cfg->tools[j];
    char *out = NULL;
    agentrt_status_t st;
    if (!t) {
      out = agentrt__loop_no_tool(l->cfg, call->name);
      st = AGENTRT_STATUS_NOT_FOUND;
    } else {
      agentrt__errmsg[0] = '\0';
      st = t->run(l->cfg->user, call->arguments, &out);
    }
    if (st == AGENTRT_STATUS_BUDGET) {
      free(out);
      agentrt__loop_setdetail(l, "%s: %s", call->name.data, agentrt_errmsg());
      *budget = true;
      return AGENTRT_STATUS_OK;
    }
    if (st != AGENTRT_STATUS_OK && !out) out = agentrt__strdup(agentrt_errmsg());
    if (out && !agentrt__loop_own(l, out)) return agentrt__fail(AGENTRT_STATUS_SDK_NOMEM, "out of memory for a tool result");
    parts[k++] = (agentrt_llm_part_t){.type = AGENTRT_PART_TOOL_RESULT, .id = call->id, .text = agentrt_str(out), .is_error = st != AGENTRT_STATUS_OK};
  }
  if (!agentrt__loop_append(l, AGENTRT_ROLE_USER, parts, n)) return agentrt__fail(AGENTRT_STATUS_SDK_NOMEM, "out of memory for the conversation");
  return AGENTRT_STATUS_OK;
}

/* An arena holds what one concluding request points into. */
typedef struct agentrt__arena {
  void **p;
  size_t n, cap;
} agentrt__arena;

static inline void *agentrt__arena_own(agentrt__arena *a, void *p) {
  if (!p || !agentrt__grow((void **)&a->p, a->n, &a->cap, sizeof *a->p)) {
    free(p);
    return NULL;
  }
  return a->p[a->n++] = p;
}

static inline void agentrt__arena_free(agentrt__arena *a) {
  for (size_t i = 0; i < a->n; i++) free(a->p[i]);
  free(a->p);
  memset(a, 0, sizeof *a);
}

/* agentrt__arena_cat returns the concatenation of n views, in the arena
 * (NUL-terminated), or an empty view with data NULL when memory ran out. */
static inline agentrt_str_t agentrt__arena_cat(agentrt__arena *a, const agentrt_str_t *v, size_t n) {
  size_t len = 0;
  for (size_t i = 0; i < n; i++) len += v[i].len;
  char *b = (char *)agentrt__arena_own(a, malloc(len + 1));
  agentrt_str_t out = {b, len};
  if (!b) return out;
  for (size_t i = 0, at = 0; i < n; at += v[i].len, i++) memcpy(b + at, v[i].data, v[i].len);
  b[len] = '\0';
  return out;
}

/* agentrt__loop_call_text and agentrt__loop_result_text write a tool call
 * and its result as the concluding call's text: "[tool call ID: NAME
 * ARGUMENTS]", "[tool result ID: TEXT]" ("[tool result ID, failed: TEXT]"),
 * as the Go SDK does. */
static inline agentrt_str_t agentrt__loop_call_text(agentrt__arena *a, const agentrt_llm_part_t *p) {
  agentrt_str_t args = p->arguments.len ? (agentrt_str_t){(const char *)p->arguments.data, p->arguments.len} : agentrt_str("{}");
  agentrt_str_t v[] = {agentrt_str("[tool call "), p->id, agentrt_str(": "), p->name, agentrt_str(" "), args, agentrt_str("]")};
  return agentrt__arena_cat(a, v, sizeof v / sizeof v[0]);
}

static inline agentrt_str_t agentrt__loop_result_text(agentrt__arena *a, agentrt_str_t id, agentrt_str_t text, bool failed) {
  agentrt_str_t v[] = {agentrt_str("[tool result "), id, agentrt_str(failed ? ", failed: " : ": "), text, agentrt_str("]")};
  return agentrt__arena_cat(a, v, sizeof v / sizeof v[0]);
}

/* agentrt__loop_concluding builds the request of the concluding call in
 * the arena: the conversation without tools, its tool calls and results
 * written as text (a provider may refuse tool parts in a request that
 * offers no tools, as Anthropic's does), a failed result for every call
 * left unanswered, and the note. It returns false when memory ran out. */
static inline bool agentrt__loop_concluding(const agentrt__loop *l, agentrt_loop_reason_t why, const char *detail, agentrt__arena *a,
                                            agentrt_llm_request_t *req) {
  size_t ncalls = 0;
  for (size_t i = 0; i < l->nmsgs; i++)
    for (size_t k = 0; k < l->msgs[i].nparts; k++) ncalls += l->msgs[i].parts[k].type == AGENTRT_PART_TOOL_CALL;
  agentrt_llm_message_t *msgs = (agentrt_llm_message_t *)agentrt__arena_own(a, calloc(l->nmsgs + 1, sizeof *msgs));
  agentrt_llm_part_t *last = (agentrt_llm_part_t *)agentrt__arena_own(a, calloc(ncalls + 1, sizeof *last));
  agentrt_str_t *pending = (agentrt_str_t *)agentrt__arena_own(a, calloc(ncalls + 1, sizeof *pending));
  char *whytext = (char *)agentrt__arena_own(a, agentrt__loop_why(why, detail));
  if (!msgs || !last || !pending || !whytext) return false;
  agentrt_str_t notrun_v[] = {agentrt_str(AGENTRT__LOOP_NOT_RUN), agentrt_str(whytext)};
  agentrt_str_t notrun = agentrt__arena_cat(a, notrun_v, 2);
  if (!notrun.data) return false;
  size_t nlast = 0;
  for (size_t i = 0; i < l->nmsgs; i++) {
    const agentrt_llm_message_t *m = &l->msgs[i];
    agentrt_llm_part_t *parts = (agentrt_llm_part_t *)agentrt__arena_own(a, calloc(m->nparts ? m->nparts : 1, sizeof *parts));
    if (!parts) return false;
    for (size_t k = 0; k < m->nparts; k++) {
      const agentrt_llm_part_t *p = &m->parts[k];
      if (p->type == AGENTRT_PART_TOOL_CALL) {
        parts[k] = (agentrt_llm_part_t){.type = AGENTRT_PART_TEXT, .text = agentrt__loop_call_text(a, p)};
        bool answered = agentrt__loop_answered(l->msgs, l->nmsgs, p->id);
        for (size_t d = 0; d < nlast && !answered; d++) answered = pending[d].len == p->id.len && memcmp(pending[d].data, p->id.data, p->id.len) == 0;
        if (!answered) {
          pending[nlast] = p->id;
          last[nlast++] = (agentrt_llm_part_t){.type = AGENTRT_PART_TEXT, .text = agentrt__loop_result_text(a, p->id, notrun, true)};
          if (!last[nlast - 1].text.data) return false;
        }
      } else if (p->type == AGENTRT_PART_TOOL_RESULT) {
        parts[k] = (agentrt_llm_part_t){.type = AGENTRT_PART_TEXT, .text = agentrt__loop_result_text(a, p->id, p->text, p->is_error)};
      } else {
        parts[k] = *p;
      }
      if (p->type != AGENTRT_PART_TEXT && !parts[k].text.data) return false;
    }
    msgs[i] = (agentrt_llm_message_t){m->role, parts, m->nparts};
  }
  const char *note = l->cfg->conclusion ? l->cfg->conclusion : AGENTRT__LOOP_NOTE;
  agentrt_str_t note_v[] = {agentrt_str(note), agentrt_str(" ("), agentrt_str(whytext), agentrt_str(")")};
  last[nlast++] = (agentrt_llm_part_t){.type = AGENTRT_PART_TEXT, .text = agentrt__arena_cat(a, note_v, 4)};
  if (!last[nlast - 1].text.data) return false;
  msgs[l->nmsgs] = (agentrt_llm_message_t){AGENTRT_ROLE_USER, last, nlast};
  *req = l->cfg->request;
  req->messages = msgs, req->nmessages = l->nmsgs + 1;
  req->tools = NULL, req->ntools = 0;
  return true;
}

/* agentrt__loop_concluding_bound is the host's worst case for the input of
 * the concluding call were the loop to stop now for its tokens (the Go
 * SDK's inputBound of its concluding request); UINT64_MAX when memory ran
 * out, which stops the loop. */
static inline uint64_t agentrt__loop_concluding_bound(const agentrt__loop *l) {
  agentrt__arena a = {0};
  agentrt_llm_request_t req;
  uint64_t n = UINT64_MAX / 2;
  if (agentrt__loop_concluding(l, AGENTRT_LOOP_MAX_TOKENS, NULL, &a, &req))
    n = agentrt__loop_input_bound(req.messages, req.nmessages, NULL, 0);
  agentrt__arena_free(&a);
  return n;
}

/* agentrt__loop_budget_reason names the cap behind a budget refusal from
 * the host's message ("budget exceeded: micro_usd: ..."). */
static inline agentrt_loop_reason_t agentrt__loop_budget_reason(const agentrt_loop_config_t *c) {
  if (c->max_micro_usd > 0 && strstr(agentrt_errmsg(), "micro_usd:")) return AGENTRT_LOOP_MAX_MONEY;
  if (c->max_wall_ns > 0 && strstr(agentrt_errmsg(), "wall_seconds:")) return AGENTRT_LOOP_MAX_WALL;
  return AGENTRT_LOOP_BUDGET;
}

/* agentrt__loop_check refuses a config whose caps could not hold. */
static inline agentrt_status_t agentrt__loop_check(const agentrt_loop_config_t *c) {
  char msg[256];
  const agentrt_llm_request_t *r = &c->request;
  if (c->max_iterations == 0)
    return agentrt__fail(AGENTRT_STATUS_SDK_INVALID, "agentrt_loop: max_iterations is 0: a loop needs a bound on its steps (set it to 1 or more)");
  if (c->max_wall_ns < 0) return agentrt__fail(AGENTRT_STATUS_SDK_INVALID, "agentrt_loop: max_wall_ns is negative: set it to 0 (no cap) or more");
  if (c->max_wall_ns > 0 && !c->clock)
    return agentrt__fail(AGENTRT_STATUS_SDK_INVALID,
                         "agentrt_loop: max_wall_ns needs a clock: set clock to agentrt_clock_now (the clock capability); the WASI clock is the virtual one, which does not advance while the host waits");
  if (r->ntools > 0) return agentrt__fail(AGENTRT_STATUS_SDK_INVALID, "agentrt_loop: request.tools is set: give the tools in config.tools, each with its run function");
  if (!r->model || !r->model[0]) return agentrt__fail(AGENTRT_STATUS_SDK_INVALID, "agentrt_loop: request.model is empty");
  if (r->max_output_tokens == 0) return agentrt__fail(AGENTRT_STATUS_SDK_INVALID, "agentrt_loop: request.max_output_tokens is 0; every call needs a bound");
  if (r->nmessages == 0) return agentrt__fail(AGENTRT_STATUS_SDK_INVALID, "agentrt_loop: request.messages is empty");
  for (size_t i = 0; i < c->ntools; i++)
    if (!c->tools[i].name || !c->tools[i].name[0] || !c->tools[i].schema || !c->tools[i].run) {
      snprintf(msg, sizeof msg, "agentrt_loop: tools[%zu] needs a name, a schema and a run function", i);
      return agentrt__fail(AGENTRT_STATUS_SDK_INVALID, msg);
    }
  uint64_t in = 0;
  for (size_t i = 0; i < c->ntools; i++)
    in += 64 + strlen(c->tools[i].name) + strlen(c->tools[i].schema) + (c->tools[i].description ? strlen(c->tools[i].description) : 0);
  in = 2 * (in + agentrt__loop_input_bound(r->messages, r->nmessages, NULL, 0));
  if (c->max_input_tokens > 0 && c->max_input_tokens < in) {
    snprintf(msg, sizeof msg, "agentrt_loop: max_input_tokens %llu leaves no room for one step and the concluding call, of %llu input tokens each at worst: raise it to %llu or more",
             (unsigned long long)c->max_input_tokens, (unsigned long long)in / 2, (unsigned long long)in);
    return agentrt__fail(AGENTRT_STATUS_SDK_INVALID, msg);
  }
  uint64_t out = 2 * (uint64_t)r->max_output_tokens;
  if (c->max_output_tokens > 0 && c->max_output_tokens < out) {
    snprintf(msg, sizeof msg,
             "agentrt_loop: max_output_tokens %llu leaves no room for one step and the concluding call, of request.max_output_tokens %u each: raise it to %llu or lower request.max_output_tokens",
             (unsigned long long)c->max_output_tokens, r->max_output_tokens, (unsigned long long)out);
    return agentrt__fail(AGENTRT_STATUS_SDK_INVALID, msg);
  }
  return AGENTRT_STATUS_OK;
}

/* agentrt__loop_cap says which cap, if any, ends the loop before the next
 * step (AGENTRT_LOOP_DONE: none). */
static inline agentrt_loop_reason_t agentrt__loop_cap(agentrt__loop *l, agentrt_status_t *st) {
  const agentrt_loop_config_t *c = l->cfg;
  if (l->st.iteration >= c->max_iterations) {
    agentrt__loop_setdetail(l, "%u iterations of %u", l->st.iteration, c->max_iterations);
    return AGENTRT_LOOP_MAX_ITERATIONS;
  }
  uint64_t out = 2 * (uint64_t)c->request.max_output_tokens;
  if (c->max_output_tokens > 0 && l->st.usage.output + out > c->max_output_tokens) {
    agentrt__loop_setdetail(l, "%llu output tokens used of %llu, and a step and the concluding call need %llu",
                            (unsigned long long)l->st.usage.output, (unsigned long long)c->max_output_tokens, (unsigned long long)out);
    return AGENTRT_LOOP_MAX_TOKENS;
  }
  if (c->max_input_tokens > 0) {
    uint64_t used = agentrt__loop_total_input(&l->st.usage);
    uint64_t next = agentrt__loop_input_bound(l->msgs, l->nmsgs, l->tooldefs, c->ntools);
    uint64_t end = agentrt__loop_concluding_bound(l);
    if (used + next + end > c->max_input_tokens) {
      agentrt__loop_setdetail(l, "%llu input tokens used of %llu, and a step and the concluding call need %llu at worst", (unsigned long long)used,
                              (unsigned long long)c->max_input_tokens, (unsigned long long)(next + end));
      return AGENTRT_LOOP_MAX_TOKENS;
    }
  }
  if (c->max_wall_ns > 0) {
    int64_t now;
    if ((*st = c->clock(&now)) != AGENTRT_STATUS_OK) return AGENTRT_LOOP_DONE;
    if (now - l->start >= c->max_wall_ns) {
      agentrt__loop_setdetail(l, "%lld ns elapsed of %lld", (long long)(now - l->start), (long long)c->max_wall_ns);
      return AGENTRT_LOOP_MAX_WALL;
    }
  }
  return AGENTRT_LOOP_DONE;
}

/* agentrt__loop_end fills the result, moving the answer it returns out of
 * the loop's list, and frees the rest. */
static inline void agentrt__loop_end(agentrt__loop *l, agentrt_loop_result_t *res, agentrt_loop_reason_t why, agentrt_llm_response_t *concluded) {
  res->reason = why;
  res->iterations = l->st.iteration;
  res->tool_calls = l->st.tool_calls;
  res->usage = l->st.usage;
  res->mem_ = l->detail;
  res->detail = agentrt_str(l->detail);
  l->detail = NULL;
  if (concluded) {
    res->response = *concluded;
    res->concluded = true;
  } else if (l->st.last) {
    size_t i = (size_t)(l->st.last - l->resps);
    res->response = l->resps[i];
    l->resps[i] = l->resps[--l->nresps];
  }
}

static inline void agentrt__loop_free(agentrt__loop *l) {
  for (size_t i = 0; i < l->nresps; i++) agentrt_llm_response_free(&l->resps[i]);
  for (size_t i = 0; i < l->nowned; i++) free(l->owned[i]);
  free(l->resps);
  free(l->owned);
  free(l->msgs);
  free(l->calls);
  free(l->tooldefs);
  free(l->detail);
}

/* agentrt__loop_conclude makes the concluding call; a refusal for the
 * budget leaves the result unconcluded, and is no error. */
static inline agentrt_status_t agentrt__loop_conclude(agentrt__loop *l, agentrt_loop_reason_t why, agentrt_loop_result_t *res) {
  agentrt__arena a = {0};
  agentrt_llm_request_t req;
  if (!agentrt__loop_concluding(l, why, l->detail, &a, &req)) {
    agentrt__arena_free(&a);
    agentrt__loop_free(l);
    return agentrt__fail(AGENTRT_STATUS_SDK_NOMEM, "out of memory for the concluding call");
  }
  agentrt_llm_response_t r;
  agentrt_status_t st = agentrt_llm_complete(&req, &r);
  agentrt__arena_free(&a);
  if (st == AGENTRT_STATUS_BUDGET) {
    agentrt__loop_setdetail(l, "%s; the host refused the concluding call: budget: %s", l->detail ? l->detail : "", agentrt_errmsg());
    st = AGENTRT_STATUS_OK;
  }
  if (st == AGENTRT_STATUS_OK && r.mem_) agentrt_llm_usage_add(&l->st.usage, &r.usage);
  agentrt__loop_end(l, res, why, st == AGENTRT_STATUS_OK && r.mem_ ? &r : NULL);
  agentrt__loop_free(l);
  return st;
}

/* agentrt_loop runs the conversation of cfg until its done predicate holds
 * or a cap ends it, and fills res with why, and the final answer. It
 * returns AGENTRT_STATUS_OK whatever the reason; another status is the
 * error of a call (the run.limit the host refused, a model call that
 * failed, the clock), or AGENTRT_STATUS_SDK_INVALID for a config that
 * cannot run, refused before anything is sent. An error of the concluding
 * call comes with res filled, its reason set; any other leaves res empty.
 * Free res with agentrt_loop_result_free either way. */
static inline agentrt_status_t agentrt_loop(const agentrt_loop_config_t *cfg, agentrt_loop_result_t *res) {
  agentrt__loop l = {0};
  agentrt_status_t st;
  memset(res, 0, sizeof *res);
  if ((st = agentrt__loop_check(cfg)) != AGENTRT_STATUS_OK) return st;
  l.cfg = cfg;
  agentrt_budget_limit_t limits[5] = {{"model_calls", (uint64_t)cfg->max_iterations + 1}};
  size_t nl = 1;
  if (cfg->max_input_tokens) limits[nl++] = (agentrt_budget_limit_t){"input_tokens", cfg->max_input_tokens};
  if (cfg->max_output_tokens) limits[nl++] = (agentrt_budget_limit_t){"output_tokens", cfg->max_output_tokens};
  if (cfg->max_micro_usd) limits[nl++] = (agentrt_budget_limit_t){"micro_usd", cfg->max_micro_usd};
  if (cfg->max_wall_ns) limits[nl++] = (agentrt_budget_limit_t){"wall_seconds", (uint64_t)(cfg->max_wall_ns + 999999999) / 1000000000};
  agentrt_ceilings_t ceilings;
  st = agentrt_limit(limits, nl, &ceilings);
  agentrt_ceilings_free(&ceilings);
  if (st != AGENTRT_STATUS_OK) {
    char msg[AGENTRT__ERRMSG_CAP];
    snprintf(msg, sizeof msg, "agentrt_loop: the host did not take the loop's caps (run.limit): %s", agentrt_errmsg());
    return agentrt__fail(st, msg);
  }
  if (cfg->ntools > 0) {
    l.tooldefs = (agentrt_llm_tool_t *)calloc(cfg->ntools, sizeof *l.tooldefs);
    if (!l.tooldefs) return agentrt__fail(AGENTRT_STATUS_SDK_NOMEM, "out of memory for the tools");
    for (size_t i = 0; i < cfg->ntools; i++) l.tooldefs[i] = (agentrt_llm_tool_t){cfg->tools[i].name, cfg->tools[i].schema, cfg->tools[i].description};
  }
  for (size_t i = 0; i < cfg->request.nmessages; i++)
    if (!agentrt__loop_append(&l, cfg->request.messages[i].role, cfg->request.messages[i].parts, cfg->request.messages[i].nparts)) {
      agentrt__loop_free(&l);
      return agentrt__fail(AGENTRT_STATUS_SDK_NOMEM, "out of memory for the conversation");
    }
  if (cfg->max_wall_ns > 0 && (st = cfg->clock(&l.start)) != AGENTRT_STATUS_OK) {
    agentrt__loop_free(&l);
    return st;
  }
  for (;;) {
    agentrt_loop_reason_t why = agentrt__loop_cap(&l, &st);
    if (st != AGENTRT_STATUS_OK) break;
    if (why != AGENTRT_LOOP_DONE) return agentrt__loop_conclude(&l, why, res);
    st = agentrt__loop_complete(&l);
    l.st.iteration++;
    if (st == AGENTRT_STATUS_BUDGET) {
      agentrt__loop_setdetail(&l, "%s", agentrt_errmsg());
      agentrt__loop_end(&l, res, agentrt__loop_budget_reason(cfg), NULL);
      agentrt__loop_free(&l);
      return AGENTRT_STATUS_OK;
    }
    if (st != AGENTRT_STATUS_OK) break;
    const agentrt_llm_response_t *r = l.st.last;
    bool calls = false;
    for (size_t i = 0; i < r->ncontent; i++) calls |= r->content[i].type == AGENTRT_PART_TOOL_CALL;
    if (calls) {
      why = agentrt__loop_admit(&l, r, &st);
      if (st != AGENTRT_STATUS_OK) break;
      if (why != AGENTRT_LOOP_DONE) return agentrt__loop_conclude(&l, why, res);
      bool budget = false;
      if ((st = agentrt__loop_tools(&l, r, &budget)) != AGENTRT_STATUS_OK) break;
      if (budget) {
        agentrt__loop_end(&l, res, AGENTRT_LOOP_BUDGET, NULL);
        agentrt__loop_free(&l);
        return AGENTRT_STATUS_OK;
      }
    }
    if (cfg->done ? cfg->done(cfg->user, &l.st) : !calls) {
      agentrt__loop_end(&l, res, AGENTRT_LOOP_DONE, NULL);
      agentrt__loop_free(&l);
      return AGENTRT_STATUS_OK;
    }
  }
  agentrt__loop_free(&l);
  memset(res, 0, sizeof *res);
  return st;
}

#endif /* AGENTRT_LOOP_H */
