/*
 * agentrt.h: the C SDK for agentrt agents, ABI v1 ("agentrt-abi/1").
 *
 * Header-only. Build a guest with
 *
 *     clang --target=wasm32-wasi -O2 -I guest-sdk/c -o agent.wasm main.c
 *
 * (agentrt build DIR does this), and run it with agentrt run. abi/SPEC.md is
 * the normative text of what this file implements; abi/testdata/vectors are
 * the bytes it is tested against (internal/sdkvectors/ctest/vectors_test.go).
 *
 * Every function is static inline and each capability has its own import
 * module (agentrt:run, agentrt:kv, ...), so a module imports only the
 * capabilities whose functions it calls, at any optimization level, and its
 * import section states exactly what its grant must include.
 *
 * agentrt_loop.h beside this file is the loop controller (agentrt_loop: a
 * tool-calling conversation with a model, under caps), over
 * agentrt_llm_complete and agentrt_limit here.
 *
 * Conventions:
 *   - Every call returns an agentrt_status_t. On anything but
 *     AGENTRT_STATUS_OK, agentrt_errmsg() holds the host's message (or this
 *     SDK's, for the AGENTRT_STATUS_SDK_* codes) until the next call.
 *   - Text you pass in is a NUL-terminated C string, sent as is: the host
 *     answers AGENTRT_STATUS_BAD_REQUEST for text that is not UTF-8.
 *   - Text and bytes you get back are views (agentrt_str_t, agentrt_bytes_t)
 *     into memory the result owns: NUL-terminated for convenience, never
 *     NULL, valid until the result's agentrt_*_free. On failure a result is
 *     zeroed, so freeing it is always safe.
 *   - Responses are decoded strictly, by the same canonical CBOR rules the
 *     host applies to requests; a response that breaks them is
 *     AGENTRT_STATUS_SDK_MALFORMED.
 *
 * Single-threaded, as wasm32-wasi guests are. C11.
 */
#ifndef AGENTRT_H
#define AGENTRT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if !defined(__wasm32__)
#error "agentrt.h is for guests built with clang --target=wasm32-wasi"
#endif

/* The ABI this header implements. */
#define AGENTRT_ABI_VERSION 1
#define AGENTRT_ABI "agentrt-abi/1"

/*
 * AGENTRT_RESPONSE_HINT is the response buffer passed to every call. A
 * larger response costs a second import call (take) and a realloc, never a
 * second request. Define it before including this header to tune it.
 */
#ifndef AGENTRT_RESPONSE_HINT
#define AGENTRT_RESPONSE_HINT 4096
#endif
_Static_assert(AGENTRT_RESPONSE_HINT >= 1 && AGENTRT_RESPONSE_HINT < 0x7fffffff,
               "AGENTRT_RESPONSE_HINT must be a positive int32");

/* Status codes: the numbers of abi/status.go. Never renumbered. */
typedef enum agentrt_status {
  AGENTRT_STATUS_OK = 0,
  AGENTRT_STATUS_PENDING = 1, /* handled inside this SDK; never returned */
  AGENTRT_STATUS_BAD_REQUEST = 2,
  AGENTRT_STATUS_TOO_LARGE = 3,
  AGENTRT_STATUS_DENIED = 4,
  AGENTRT_STATUS_NOT_FOUND = 5,
  AGENTRT_STATUS_FAILED = 6,
  AGENTRT_STATUS_IN_DOUBT = 7,
  AGENTRT_STATUS_INTERNAL = 8,
  AGENTRT_STATUS_NO_PENDING = 9,
  AGENTRT_STATUS_BUFFER_TOO_SMALL = 10,
  AGENTRT_STATUS_BUDGET = 11, /* a budget ceiling of the run: nothing was sent */
  /* Codes from 0x10000 on are this SDK's own; no host sends them. */
  AGENTRT_STATUS_SDK_NOMEM = 0x10000,     /* malloc failed */
  AGENTRT_STATUS_SDK_MALFORMED = 0x10001, /* the response broke the ABI */
  AGENTRT_STATUS_SDK_INVALID = 0x10002,   /* the arguments cannot make a valid call; nothing was sent */
} agentrt_status_t;

/* Op codes, per capability module (abi/abi.go). */
enum {
  AGENTRT_OP_RUN_INPUT = 1,
  AGENTRT_OP_RUN_SET_OUTPUT = 2,
  AGENTRT_OP_RUN_LOG = 3,
  AGENTRT_OP_RUN_INTROSPECT = 4,
  AGENTRT_OP_RUN_CHECKPOINT = 5,
  AGENTRT_OP_RUN_LIMIT = 6,
  /* The run.self family (SPEC.md §9.15): agentrt_self_call. */
  AGENTRT_OP_RUN_SELF = 7,
  AGENTRT_OP_RUN_SELF_CAPS = 8,
  AGENTRT_OP_RUN_SELF_MAY = 9,
  AGENTRT_OP_RUN_SELF_BUDGET = 10,
  AGENTRT_OP_RUN_SELF_MODE = 11,
  AGENTRT_OP_RUN_SELF_JOURNAL = 12,
  AGENTRT_OP_KV_GET = 1,
  AGENTRT_OP_KV_PUT = 2,
  AGENTRT_OP_KV_DELETE = 3,
  AGENTRT_OP_KV_LIST = 4,
  AGENTRT_OP_HTTP_REQUEST = 1,
  AGENTRT_OP_CLOCK_NOW = 1,
  AGENTRT_OP_RANDOM_BYTES = 1,
  AGENTRT_OP_TOOL_RUN = 1,
  AGENTRT_OP_LLM_COMPLETE = 1,
  AGENTRT_OP_TIMER_SLEEP = 1,
  AGENTRT_OP_APPROVAL_REQUEST = 1,
  AGENTRT_OP_AGENT_SPAWN = 1,
  AGENTRT_OP_AGENT_AWAIT = 2,
  AGENTRT_OP_AGENT_CANCEL = 3,
};

/* Log levels of agentrt_log. */
enum {
  AGENTRT_LEVEL_DEBUG = 0,
  AGENTRT_LEVEL_INFO = 1,
  AGENTRT_LEVEL_WARN = 2,
  AGENTRT_LEVEL_ERROR = 3,
};

/* A view of text in a result: data[len] == '\0', data is never NULL. */
typedef struct agentrt_str {
  const char *data;
  size_t len;
} agentrt_str_t;

/* A view of bytes in a result: data[len] == 0, data is never NULL. */
typedef struct agentrt_bytes {
  const uint8_t *data;
  size_t len;
} agentrt_bytes_t;

/* Bytes returned by agentrt_input and agentrt_kv_get. Free with agentrt_buf_free. */
typedef struct agentrt_buf {
  const uint8_t *data; /* NUL-terminated, never NULL after success */
  size_t len;
  void *mem_; /* private: the owned response */
} agentrt_buf_t;

/* Who the run is (agentrt_introspect). Free with agentrt_introspect_free. */
typedef struct agentrt_introspect {
  agentrt_str_t run_id;
  agentrt_bytes_t module_sha256;
  uint32_t abi;
  agentrt_str_t *capabilities; /* granted capabilities, in ABI order */
  size_t ncapabilities;
  uint64_t steps; /* import calls made before this one */
  void *mem_;
} agentrt_introspect_t;

/* A page of keys (agentrt_kv_list). Free with agentrt_kv_list_free. */
typedef struct agentrt_kv_list {
  agentrt_str_t *keys; /* in byte order */
  size_t nkeys;
  bool more; /* keys remain after the last one */
  void *mem_;
} agentrt_kv_list_t;

/* A header of an HTTP request: two C strings. */
typedef struct agentrt_http_header {
  const char *name;
  const char *value;
} agentrt_http_header_t;

/* An HTTP request (agentrt_http_request). Headers keep their order, and a
 * name may repeat. body may be NULL when body_len is 0. */
typedef struct agentrt_http_request {
  const char *method;
  const char *url;
  const agentrt_http_header_t *headers;
  size_t nheaders;
  const void *body;
  size_t body_len;
} agentrt_http_request_t;

/* A header of an HTTP response: two views. */
typedef struct agentrt_http_response_header {
  agentrt_str_t name;
  agentrt_str_t value;
} agentrt_http_response_header_t;

/* The answer to an HTTP request. Free with agentrt_http_response_free. */
typedef struct agentrt_http_response {
  uint16_t status;
  agentrt_http_response_header_t *headers;
  size_t nheaders;
  agentrt_bytes_t body;
  bool truncated; /* the host cut the body at its limit */
  void *mem_;
} agentrt_http_response_t;

/* A native tool's run (agentrt_tool_run): the tool the grant registers as
 * name, with nargs arguments after the grant's fixed ones, each one argv
 * element (no shell), and stdin_data as its standard input (NULL or
 * stdin_len 0: an empty one). */
typedef struct agentrt_tool_request {
  const char *name;
  const char *const *args;
  size_t nargs;
  const void *stdin_data;
  size_t stdin_len;
} agentrt_tool_request_t;

/* A file the tool created or changed in its read-write area. path is
 * relative to the tool's working directory when beneath it, else absolute.
 * A file name is bytes: path_bytes says the name is not valid UTF-8, and
 * path holds its bytes as they are (the host sends such a name as a byte
 * string; it never holds a NUL).
 * sha256 is the hash of its content (32 bytes), or empty when the host did
 * not hash it; then unhashed says why: "sparse" (it has holes, which the
 * host does not read), "hash" (the tool's hash limit was spent) or
 * "stopped" (the run was stopped while the host hashed). */
typedef struct agentrt_tool_file {
  agentrt_str_t path;
  bool path_bytes;
  uint64_t size;
  agentrt_bytes_t sha256;
  agentrt_str_t unhashed;
} agentrt_tool_file_t;

/* How a tool's run ended. Free with agentrt_tool_result_free. */
typedef struct agentrt_tool_result {
  int64_t exit_code;           /* 128 + n for a tool ended by signal n */
  agentrt_str_t signal;        /* "SIGKILL", or "" */
  agentrt_bytes_t stdout_data; /* at most the tool's output limit */
  agentrt_bytes_t stderr_data;
  bool stdout_truncated, stderr_truncated; /* cut at the output limit */
  bool timed_out;              /* the wall-clock limit passed; the tool was killed */
  agentrt_str_t *limits;       /* limits run into: "wall", "cpu", "memory", "disk", "output", "hash", ... */
  size_t nlimits;
  agentrt_tool_file_t *files;  /* sorted by path */
  size_t nfiles;
  void *mem_;
} agentrt_tool_result_t;

/* ------------------------------------------------------------------------ */
/* Errors                                                                   */

/* The last error message, shared by every translation unit of the module
 * (a weak definition, merged by the linker, so one file can read the
 * message of a call made in another). */
#define AGENTRT__ERRMSG_CAP 512
__attribute__((weak)) char agentrt__errmsg[AGENTRT__ERRMSG_CAP];

/* agentrt_errmsg returns the message of the last failed call, "" after a
 * call that succeeded. */
static inline const char *agentrt_errmsg(void) { return agentrt__errmsg; }

/* agentrt_status_name returns the name of s as abi/status.go spells it
 * ("not_found"), or NULL for a code this header does not know. */
static inline const char *agentrt_status_name(agentrt_status_t s) {
  switch (s) {
  case AGENTRT_STATUS_OK: return "ok";
  case AGENTRT_STATUS_PENDING: return "pending";
  case AGENTRT_STATUS_BAD_REQUEST: return "bad_request";
  case AGENTRT_STATUS_TOO_LARGE: return "too_large";
  case AGENTRT_STATUS_DENIED: return "denied";
  case AGENTRT_STATUS_NOT_FOUND: return "not_found";
  case AGENTRT_STATUS_FAILED: return "failed";
  case AGENTRT_STATUS_IN_DOUBT: return "in_doubt";
  case AGENTRT_STATUS_INTERNAL: return "internal";
  case AGENTRT_STATUS_NO_PENDING: return "no_pending";
  case AGENTRT_STATUS_BUFFER_TOO_SMALL: return "buffer_too_small";
  case AGENTRT_STATUS_BUDGET: return "budget";
  case AGENTRT_STATUS_SDK_NOMEM: return "sdk_nomem";
  case AGENTRT_STATUS_SDK_MALFORMED: return "sdk_malformed";
  case AGENTRT_STATUS_SDK_INVALID: return "sdk_invalid";
  }
  return NULL;
}

/* agentrt__seterr copies msg into the error buffer, cut at a UTF-8
 * character boundary if it is too long. */
static inline void agentrt__seterr(const char *msg, size_t n) {
  if (n >= AGENTRT__ERRMSG_CAP) {
    n = AGENTRT__ERRMSG_CAP - 1;
    while (n > 0 && ((uint8_t)msg[n] & 0xc0) == 0x80) n--;
  }
  memcpy(agentrt__errmsg, msg, n);
  agentrt__errmsg[n] = '\0';
}

static inline agentrt_status_t agentrt__fail(agentrt_status_t s, const char *msg) {
  agentrt__seterr(msg, strlen(msg));
  return s;
}

/* ------------------------------------------------------------------------ */
/* Canonical CBOR writer (RFC 8949 section 4.2.1)                           */

typedef struct agentrt__wr {
  uint8_t *buf;
  size_t len, cap;
  bool oom;
} agentrt__wr;

static inline void agentrt__put(agentrt__wr *w, const void *p, size_t n) {
  if (w->oom || n == 0) return;
  if (w->cap - w->len < n) {
    size_t c = w->cap ? w->cap : 64;
    while (c - w->len < n) c *= 2;
    uint8_t *b = (uint8_t *)realloc(w->buf, c);
    if (!b) {
      w->oom = true;
      return;
    }
    w->buf = b;
    w->cap = c;
  }
  memcpy(w->buf + w->len, p, n);
  w->len += n;
}

/* agentrt__wr_head writes a major type and argument in the shortest form. */
static inline void agentrt__wr_head(agentrt__wr *w, uint8_t major, uint64_t v) {
  uint8_t b[9];
  size_t n;
  major <<= 5;
  if (v < 24) {
    b[0] = major | (uint8_t)v;
    n = 1;
  } else if (v <= 0xff) {
    b[0] = major | 24;
    n = 2;
  } else if (v <= 0xffff) {
    b[0] = major | 25;
    n = 3;
  } else if (v <= 0xffffffff) {
    b[0] = major | 26;
    n = 5;
  } else {
    b[0] = major | 27;
    n = 9;
  }
  for (size_t i = n - 1; i >= 1; i--, v >>= 8) b[i] = (uint8_t)v;
  agentrt__put(w, b, n);
}

static inline void agentrt__wr_uint(agentrt__wr *w, uint64_t v) { agentrt__wr_head(w, 0, v); }

static inline void agentrt__wr_text(agentrt__wr *w, const char *s, size_t n) {
  agentrt__wr_head(w, 3, n);
  agentrt__put(w, s, n);
}

/* agentrt__wr_cstr writes a C string; NULL is the empty string. */
static inline void agentrt__wr_cstr(agentrt__wr *w, const char *s) {
  agentrt__wr_text(w, s ? s : "", s ? strlen(s) : 0);
}

/* agentrt__wr_bytes writes a byte string, or null for NULL: the two are
 * different values (Go's nil and empty slices) with different bytes. */
static inline void agentrt__wr_bytes(agentrt__wr *w, const void *p, size_t n) {
  if (!p) {
    agentrt__put(w, "\xf6", 1);
    return;
  }
  agentrt__wr_head(w, 2, n);
  agentrt__put(w, p, n);
}

/* ------------------------------------------------------------------------ */
/* Strict CBOR reader                                                       */

/*
 * A decoder walks the fields of a body in canonical order: keys sorted by
 * their encoded bytes, omitempty fields present exactly when not zero,
 * every other field present. Accepting nothing but that one order rejects
 * unsorted, duplicate and unknown keys in one rule.
 */
typedef struct agentrt__rd {
  const uint8_t *p, *end;
} agentrt__rd;

#define AGENTRT__MAX_ITEMS 65536 /* abi/codec.go maxItems */

/* agentrt__rd_head reads an item head. It rejects what canonical ABI CBOR
 * never holds: non-shortest arguments, indefinite lengths, reserved
 * values, tags, floats and simple values other than false, true, null
 * (returned as major 7 with arg 20, 21, 22). */
static inline bool agentrt__rd_head(agentrt__rd *r, int *major, uint64_t *arg) {
  if (r->p >= r->end) return false;
  uint8_t ib = *r->p++;
  int mt = ib >> 5, ai = ib & 31;
  uint64_t v = (uint64_t)ai;
  if (ai >= 24) {
    if (ai > 27 || mt == 7) return false;
    size_t n = (size_t)1 << (ai - 24);
    if ((size_t)(r->end - r->p) < n) return false;
    v = 0;
    for (size_t i = 0; i < n; i++) v = v << 8 | *r->p++;
    static const uint64_t min[4] = {24, 0x100, 0x10000, 0x100000000};
    if (v < min[ai - 24]) return false;
  }
  if (mt == 6 || (mt == 7 && (v < 20 || v > 22))) return false;
  *major = mt;
  *arg = v;
  return true;
}

static inline bool agentrt__rd_uint(agentrt__rd *r, uint64_t max, uint64_t *v) {
  int mt;
  return agentrt__rd_head(r, &mt, v) && mt == 0 && *v <= max;
}

static inline bool agentrt__rd_int64(agentrt__rd *r, int64_t *v) {
  int mt;
  uint64_t a;
  if (!agentrt__rd_head(r, &mt, &a) || (mt != 0 && mt != 1) || a > (uint64_t)INT64_MAX) return false;
  *v = mt == 0 ? (int64_t)a : -1 - (int64_t)a;
  return true;
}

static inline bool agentrt__rd_bool(agentrt__rd *r, bool *b) {
  int mt;
  uint64_t a;
  if (!agentrt__rd_head(r, &mt, &a) || mt != 7 || a == 22) return false;
  *b = a == 21;
  return true;
}

/* agentrt__utf8 reports whether s is valid UTF-8 as Go's utf8.Valid means
 * it: no overlong forms, no surrogates, nothing above U+10FFFF. */
static inline bool agentrt__utf8(const uint8_t *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    uint8_t c = s[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    size_t k;
    uint8_t lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) k = 1;
    else if (c == 0xe0) k = 2, lo = 0xa0;
    else if (c == 0xed) k = 2, hi = 0x9f;
    else if (c >= 0xe1 && c <= 0xef) k = 2;
    else if (c == 0xf0) k = 3, lo = 0x90;
    else if (c == 0xf4) k = 3, hi = 0x8f;
    else if (c >= 0xf1 && c <= 0xf3) k = 3;
    else return false;
    if (n - i - 1 < k || s[i + 1] < lo || s[i + 1] > hi) return false;
    for (size_t j = 2; j <= k; j++)
      if ((s[i + j] & 0xc0) != 0x80) return false;
    i += k + 1;
  }
  return true;
}

/* agentrt__rd_string reads a text (major 3) or byte (major 2) string; with
 * nullable, null reads as a NULL view. */
static inline bool agentrt__rd_string(agentrt__rd *r, int want, bool nullable, const uint8_t **data, size_t *len) {
  int mt;
  uint64_t n;
  if (!agentrt__rd_head(r, &mt, &n)) return false;
  if (mt == 7 && n == 22 && nullable) {
    *data = NULL;
    *len = 0;
    return true;
  }
  if (mt != want || n > (uint64_t)(r->end - r->p)) return false;
  if (mt == 3 && !agentrt__utf8(r->p, (size_t)n)) return false;
  *data = r->p;
  *len = (size_t)n;
  r->p += n;
  return true;
}

static inline bool agentrt__rd_text(agentrt__rd *r, agentrt_str_t *s) {
  const uint8_t *d;
  if (!agentrt__rd_string(r, 3, false, &d, &s->len)) return false;
  s->data = (const char *)d;
  return true;
}

static inline bool agentrt__rd_bytes(agentrt__rd *r, agentrt_bytes_t *b) {
  return agentrt__rd_string(r, 2, true, &b->data, &b->len);
}

/* agentrt__rd_array reads an array head, or null as no items. min_item is
 * the fewest bytes one item takes, to refuse counts the body cannot hold
 * before allocating for them. */
static inline bool agentrt__rd_array(agentrt__rd *r, size_t min_item, size_t *n) {
  int mt;
  uint64_t a;
  if (!agentrt__rd_head(r, &mt, &a)) return false;
  if (mt == 7 && a == 22) {
    *n = 0;
    return true;
  }
  if (mt != 4 || a > AGENTRT__MAX_ITEMS || a * min_item > (uint64_t)(r->end - r->p)) return false;
  *n = (size_t)a;
  return true;
}

/* agentrt__rd_begin starts a body. An empty body is the zero value: it has
 * no fields (*pairs = 0, *empty = true). */
static inline bool agentrt__rd_begin(agentrt__rd *r, size_t *pairs, bool *empty) {
  int mt;
  uint64_t a;
  *empty = r->p == r->end;
  *pairs = 0;
  if (*empty) return true;
  if (!agentrt__rd_head(r, &mt, &a) || mt != 5 || a > AGENTRT__MAX_ITEMS) return false;
  *pairs = (size_t)a;
  return true;
}

/* agentrt__rd_key consumes the next key if it is name (a key of ABI v1, so
 * shorter than 24 bytes and encoded in one head byte). */
static inline bool agentrt__rd_key(agentrt__rd *r, size_t *pairs, const char *name) {
  size_t n = strlen(name);
  if (*pairs == 0 || (size_t)(r->end - r->p) < n + 1 || r->p[0] != (uint8_t)(0x60 + n) ||
      memcmp(r->p + 1, name, n) != 0)
    return false;
  r->p += n + 1;
  (*pairs)--;
  return true;
}

/* agentrt__rd_end checks that every pair was read and nothing follows. */
static inline bool agentrt__rd_end(const agentrt__rd *r, size_t pairs) { return pairs == 0 && r->p == r->end; }

/* agentrt__term_* make a view NUL-terminated and non-NULL. They run only
 * after a whole body has decoded: the byte after a string's content is the
 * head of the next item (or the spare byte after the body), which is no
 * longer needed, so writing '\0' there cannot touch another view. */
static inline void agentrt__term_str(agentrt_str_t *s) {
  if (s->data == NULL) s->data = "";
  else ((char *)s->data)[s->len] = '\0';
}

static inline void agentrt__term_bytes(agentrt_bytes_t *b) {
  if (b->data == NULL) b->data = (const uint8_t *)"";
  else ((uint8_t *)b->data)[b->len] = 0;
}

/* ------------------------------------------------------------------------ */
/* Transport: call, and take when the response did not fit                  */

typedef struct agentrt__resp {
  uint8_t *body; /* owned; one spare byte after cap for agentrt__term_* */
  size_t len, cap;
} agentrt__resp;

/* agentrt__begin allocates the response buffer of a call. */
static inline bool agentrt__begin(agentrt__wr *w, agentrt__resp *out) {
  agentrt__errmsg[0] = '\0';
  out->len = 0;
  out->cap = AGENTRT_RESPONSE_HINT;
  out->body = w->oom ? NULL : (uint8_t *)malloc(out->cap + 1);
  if (!out->body) {
    free(w->buf);
    return false;
  }
  return true;
}

/* agentrt__pending reports whether res asks for a take, after growing the
 * buffer to the pending response's size. */
static inline bool agentrt__pending(uint64_t *res, agentrt__resp *out) {
  if ((uint32_t)(*res >> 32) != AGENTRT_STATUS_PENDING) return false;
  size_t need = (uint32_t)*res;
  uint8_t *b = (uint8_t *)realloc(out->body, need + 1);
  if (!b) {
    *res = (uint64_t)AGENTRT_STATUS_SDK_NOMEM << 32;
    return false;
  }
  out->body = b;
  out->cap = need;
  return true;
}

/* agentrt__end turns the result of a call (or take) into a status: on OK,
 * out holds the response; otherwise out is freed and the error message is
 * set from the host's Error body. */
static inline agentrt_status_t agentrt__end(agentrt__wr *w, uint64_t res, agentrt__resp *out) {
  agentrt_status_t st = (agentrt_status_t)(uint32_t)(res >> 32);
  size_t n = (uint32_t)res;
  free(w->buf);
  w->buf = NULL;
  if (st == AGENTRT_STATUS_OK && n <= out->cap) {
    out->len = n;
    return st;
  }
  agentrt__rd r = {out->body, out->body + (n <= out->cap ? n : 0)};
  size_t pairs;
  bool empty;
  uint64_t code;
  agentrt_str_t msg;
  if (st == AGENTRT_STATUS_OK) {
    st = agentrt__fail(AGENTRT_STATUS_SDK_MALFORMED, "the host reported a response longer than the buffer");
  } else if (st == AGENTRT_STATUS_SDK_NOMEM) {
    agentrt__fail(st, "out of memory for a pending response");
  } else if (st == AGENTRT_STATUS_NO_PENDING || st == AGENTRT_STATUS_BUFFER_TOO_SMALL) {
    agentrt__fail(st, "take of a pending response failed");
  } else if (n <= out->cap && agentrt__rd_begin(&r, &pairs, &empty) && !empty &&
             agentrt__rd_key(&r, &pairs, "code") && agentrt__rd_uint(&r, UINT32_MAX, &code) &&
             agentrt__rd_key(&r, &pairs, "message") && agentrt__rd_text(&r, &msg) &&
             agentrt__rd_end(&r, pairs) && code == (uint64_t)st) {
    agentrt__seterr(msg.data, msg.len);
  } else {
    agentrt__fail(st, "malformed error body");
  }
  free(out->body);
  out->body = NULL;
  return st;
}

/* One transport per capability, each naming only its own imports, so a
 * module imports a capability exactly when it calls one of its functions.
 * A transport consumes the request writer. */
#define AGENTRT__CAPABILITY(name)                                                                  \
  __attribute__((import_module("agentrt:" #name), import_name("call"))) uint64_t agentrt__##name##_call( \
      uint32_t op, const void *req, uint32_t req_len, void *resp, uint32_t resp_cap);              \
  __attribute__((import_module("agentrt:" #name), import_name("take"))) uint64_t agentrt__##name##_take( \
      void *resp, uint32_t resp_cap);                                                              \
  static inline agentrt_status_t agentrt__##name##_roundtrip(uint32_t op, agentrt__wr *w, agentrt__resp *out) { \
    if (!agentrt__begin(w, out)) return agentrt__fail(AGENTRT_STATUS_SDK_NOMEM, "out of memory for a request"); \
    uint64_t res = agentrt__##name##_call(op, w->buf, (uint32_t)w->len, out->body, (uint32_t)out->cap); \
    if (agentrt__pending(&res, out)) res = agentrt__##name##_take(out->body, (uint32_t)out->cap);     \
    return agentrt__end(w, res, out);                                                              \
  }

AGENTRT__CAPABILITY(run)
AGENTRT__CAPABILITY(kv)
AGENTRT__CAPABILITY(http)
AGENTRT__CAPABILITY(clock)
AGENTRT__CAPABILITY(random)
AGENTRT__CAPABILITY(tool)
AGENTRT__CAPABILITY(llm)
AGENTRT__CAPABILITY(timer)
AGENTRT__CAPABILITY(approval)
AGENTRT__CAPABILITY(agent)

static inline agentrt_status_t agentrt__malformed(agentrt__resp *out, const char *what) {
  free(out->body);
  out->body = NULL;
  /* Built by hand: snprintf would pull stdio into every module. */
  static const char pre[] = "malformed ", post[] = " response";
  char msg[64];
  size_t n = strlen(what);
  if (n > sizeof msg - sizeof pre - sizeof post) n = sizeof msg - sizeof pre - sizeof post;
  memcpy(msg, pre, sizeof pre - 1);
  memcpy(msg + sizeof pre - 1, what, n);
  memcpy(msg + sizeof pre - 1 + n, post, sizeof post);
  agentrt__seterr(msg, strlen(msg));
  return AGENTRT_STATUS_SDK_MALFORMED;
}

/* agentrt__empty decodes a response without fields: the empty body or {}. */
static inline agentrt_status_t agentrt__empty(agentrt__resp *out, const char *what) {
  agentrt__rd r = {out->body, out->body + out->len};
  size_t pairs;
  bool empty;
  bool ok = agentrt__rd_begin(&r, &pairs, &empty) && agentrt__rd_end(&r, pairs);
  if (!ok) return agentrt__malformed(out, what);
  free(out->body);
  return AGENTRT_STATUS_OK;
}

/* agentrt__one_bytes decodes a response whose one field is a byte string,
 * keeping the body as the owner of the view. */
static inline agentrt_status_t agentrt__one_bytes(agentrt__resp *out, const char *what, const char *key, agentrt_buf_t *b) {
  agentrt__rd r = {out->body, out->body + out->len};
  size_t pairs;
  bool empty;
  agentrt_bytes_t v = {NULL, 0};
  if (!agentrt__rd_begin(&r, &pairs, &empty) ||
      (!empty && !(agentrt__rd_key(&r, &pairs, key) && agentrt__rd_bytes(&r, &v))) || !agentrt__rd_end(&r, pairs))
    return agentrt__malformed(out, what);
  agentrt__term_bytes(&v);
  b->data = v.data;
  b->len = v.len;
  b->mem_ = out->body;
  return AGENTRT_STATUS_OK;
}

/* ------------------------------------------------------------------------ */
/* The run capability: agentrt:run                                          */

/* agentrt_buf_free releases what agentrt_input or agentrt_kv_get returned. */
static inline void agentrt_buf_free(agentrt_buf_t *b) {
  free(b->mem_);
  memset(b, 0, sizeof *b);
}

/* agentrt__run_input calls run.input and returns its input, and its state
 * and segment (absent, so empty and 0, in the first segment). Both buffers
 * share the one response: free input only. */
static inline agentrt_status_t agentrt__run_input(agentrt_buf_t *input, agentrt_buf_t *state, uint32_t *segment) {
  agentrt__wr w = {0};
  agentrt__resp out;
  memset(input, 0, sizeof *input);
  memset(state, 0, sizeof *state);
  *segment = 0;
  agentrt_status_t st = agentrt__run_roundtrip(AGENTRT_OP_RUN_INPUT, &w, &out);
  if (st) return st;
  agentrt__rd r = {out.body, out.body + out.len};
  size_t pairs;
  bool empty;
  agentrt_bytes_t in = {NULL, 0}, s = {NULL, 0};
  uint64_t seg = 0;
  bool ok = agentrt__rd_begin(&r, &pairs, &empty) && (empty || (agentrt__rd_key(&r, &pairs, "input") && agentrt__rd_bytes(&r, &in)));
  /* Canonical order: "state" (5 bytes) before "segment" (7); both are
   * omitted in the first segment. */
  if (ok && pairs > 0 && r.p < r.end && r.p[0] == 0x65) ok = agentrt__rd_key(&r, &pairs, "state") && agentrt__rd_bytes(&r, &s);
  if (ok && pairs > 0) ok = agentrt__rd_key(&r, &pairs, "segment") && agentrt__rd_uint(&r, UINT32_MAX, &seg) && seg > 0; /* omitted when 0 */
  if (!ok || !agentrt__rd_end(&r, pairs)) return agentrt__malformed(&out, "run.input");
  agentrt__term_bytes(&in);
  agentrt__term_bytes(&s);
  *input = (agentrt_buf_t){in.data, in.len, out.body};
  *state = (agentrt_buf_t){s.data, s.len, NULL};
  *segment = (uint32_t)seg;
  return AGENTRT_STATUS_OK;
}

/* agentrt_input returns the run's input (run.input). */
static inline agentrt_status_t agentrt_input(agentrt_buf_t *input) {
  agentrt_buf_t state;
  uint32_t segment;
  return agentrt__run_input(input, &state, &segment);
}

/* agentrt_state returns the state the run continues from and the number of
 * its segment (run.input): after agentrt_checkpoint(state) the run starts
 * over, in a fresh instance, as segment 1, 2, ...; in the first segment
 * *segment is 0 and the state empty. Free state with agentrt_buf_free. */
static inline agentrt_status_t agentrt_state(agentrt_buf_t *state, uint32_t *segment) {
  agentrt_buf_t input, st;
  agentrt_status_t s = agentrt__run_input(&input, &st, segment);
  if (s) return s;
  *state = (agentrt_buf_t){st.data, st.len, input.mem_};
  return AGENTRT_STATUS_OK;
}

/* agentrt_checkpoint ends this segment of the run and starts the next from
 * state (continue-as-new, run.checkpoint): the host journals the state and
 * runs the module again from _start, where agentrt_state returns it. A
 * resumed run starts from its last checkpoint instead of replaying its
 * whole history. On success it does not return; it returns the error of a
 * checkpoint the host refused (AGENTRT_STATUS_TOO_LARGE for a state over
 * the request limit). A host that does not end the segment (a test stub)
 * gets its response checked and AGENTRT_STATUS_OK back. */
static inline agentrt_status_t agentrt_checkpoint(const void *state, size_t len) {
  agentrt__wr w = {0};
  agentrt__resp out;
  agentrt__wr_head(&w, 5, 1);
  agentrt__wr_cstr(&w, "state");
  agentrt__wr_bytes(&w, state, len);
  agentrt_status_t st = agentrt__run_roundtrip(AGENTRT_OP_RUN_CHECKPOINT, &w, &out);
  if (st) return st;
  agentrt__rd r = {out.body, out.body + out.len};
  size_t pairs;
  bool empty;
  uint64_t seg;
  int64_t clock;
  agentrt_bytes_t header;
  bool ok = agentrt__rd_begin(&r, &pairs, &empty) &&
            (empty || (agentrt__rd_key(&r, &pairs, "clock") && agentrt__rd_int64(&r, &clock) &&
                       agentrt__rd_key(&r, &pairs, "header") && agentrt__rd_bytes(&r, &header) &&
                       agentrt__rd_key(&r, &pairs, "segment") && agentrt__rd_uint(&r, UINT32_MAX, &seg)));
  if (!ok || !agentrt__rd_end(&r, pairs))
    return agentrt__malformed(&out, "run.checkpoint");
  free(out.body);
  return AGENTRT_STATUS_OK;
}

/* agentrt_set_output records the run's output; the last call wins
 * (run.set_output). NULL and a non-NULL empty buffer are distinct values
 * (null and the empty byte string), both an empty output. */
static inline agentrt_status_t agentrt_set_output(const void *data, size_t len) {
  agentrt__wr w = {0};
  agentrt__resp out;
  agentrt__wr_head(&w, 5, 1);
  agentrt__wr_cstr(&w, "output");
  agentrt__wr_bytes(&w, data, len);
  agentrt_status_t st = agentrt__run_roundtrip(AGENTRT_OP_RUN_SET_OUTPUT, &w, &out);
  return st ? st : agentrt__empty(&out, "run.set_output");
}

/* agentrt_log writes msg to the run's event log at level (run.log). */
static inline agentrt_status_t agentrt_log(uint8_t level, const char *msg) {
  agentrt__wr w = {0};
  agentrt__resp out;
  agentrt__wr_head(&w, 5, 2);
  agentrt__wr_cstr(&w, "msg");
  agentrt__wr_cstr(&w, msg);
  agentrt__wr_cstr(&w, "level");
  agentrt__wr_uint(&w, level);
  agentrt_status_t st = agentrt__run_roundtrip(AGENTRT_OP_RUN_LOG, &w, &out);
  return st ? st : agentrt__empty(&out, "run.log");
}

/* agentrt_logf formats like printf and logs the result at level. */
__attribute__((format(printf, 2, 3))) static inline agentrt_status_t agentrt_logf(uint8_t level, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) return agentrt__fail(AGENTRT_STATUS_SDK_MALFORMED, "agentrt_logf: bad format");
  char *msg = (char *)malloc((size_t)n + 1);
  if (!msg) return agentrt__fail(AGENTRT_STATUS_SDK_NOMEM, "out of memory for a log line");
  va_start(ap, fmt);
  vsnprintf(msg, (size_t)n + 1, fmt, ap);
  va_end(ap);
  agentrt_status_t st = agentrt_log(level, msg);
  free(msg);
  return st;
}

/* agentrt__rd_texts reads a list of text (or null) into a malloc'd array. */
static inline bool agentrt__rd_texts(agentrt__rd *r, agentrt_str_t **items, size_t *n) {
  if (!agentrt__rd_array(r, 1, n)) return false;
  if (*n == 0) return true;
  *items = (agentrt_str_t *)calloc(*n, sizeof **items);
  if (!*items) return false;
  for (size_t i = 0; i < *n; i++)
    if (!agentrt__rd_text(r, &(*items)[i])) return false;
  return true;
}

/* agentrt_introspect_free releases what agentrt_introspect returned. */
static inline void agentrt_introspect_free(agentrt_introspect_t *in) {
  free(in->capabilities);
  free(in->mem_);
  memset(in, 0, sizeof *in);
}

/* agentrt_introspect says who the run is (run.introspect). */
static inline agentrt_status_t agentrt_introspect(agentrt_introspect_t *in) {
  agentrt__wr w = {0};
  agentrt__resp out;
  memset(in, 0, sizeof *in);
  agentrt_status_t st = agentrt__run_roundtrip(AGENTRT_OP_RUN_INTROSPECT, &w, &out);
  if (st) return st;
  agentrt__rd r = {out.body, out.body + out.len};
  size_t pairs;
  bool empty;
  uint64_t abi = 0;
  bool ok = agentrt__rd_begin(&r, &pairs, &empty);
  if (ok && !empty)
    ok = agentrt__rd_key(&r, &pairs, "abi") && agentrt__rd_uint(&r, UINT32_MAX, &abi) &&
         agentrt__rd_key(&r, &pairs, "steps") && agentrt__rd_uint(&r, UINT64_MAX, &in->steps) &&
         agentrt__rd_key(&r, &pairs, "run_id") && agentrt__rd_text(&r, &in->run_id) &&
         agentrt__rd_key(&r, &pairs, "capabilities") && agentrt__rd_texts(&r, &in->capabilities, &in->ncapabilities) &&
         agentrt__rd_key(&r, &pairs, "module_sha256") && agentrt__rd_bytes(&r, &in->module_sha256);
  if (!ok || !agentrt__rd_end(&r, pairs)) {
    free(in->capabilities);
    memset(in, 0, sizeof *in);
    return agentrt__malformed(&out, "run.introspect");
  }
  in->abi = (uint32_t)abi;
  agentrt__term_str(&in->run_id);
  agentrt__term_bytes(&in->module_sha256);
  for (size_t i = 0; i < in->ncapabilities; i++) agentrt__term_str(&in->capabilities[i]);
  in->mem_ = out.body;
  return AGENTRT_STATUS_OK;
}

/* agentrt_self_call makes a call of the run.self family (op is one of
 * AGENTRT_OP_RUN_SELF..AGENTRT_OP_RUN_SELF_JOURNAL) with the canonical CBOR
 * request req (req_len 0: the empty body, for the ops without request
 * fields) and returns the CBOR response in resp, as SPEC.md §9.15 gives it,
 * for the caller to read; free it with agentrt_buf_free. The answer is
 * journaled, so a replay gets the same bytes. agentrt_whoami,
 * agentrt_self_budget and agentrt_may (below) decode three of them. */
static inline agentrt_status_t agentrt_self_call(uint32_t op, const uint8_t *req, size_t req_len, agentrt_buf_t *resp) {
  memset(resp, 0, sizeof *resp);
  if (op < AGENTRT_OP_RUN_SELF || op > AGENTRT_OP_RUN_SELF_JOURNAL)
    return agentrt__fail(AGENTRT_STATUS_BAD_REQUEST, "agentrt_self_call: op is not of the run.self family (7..12)");
  agentrt__wr w = {0};
  agentrt__resp out;
  if (req_len > 0) agentrt__put(&w, req, req_len);
  agentrt_status_t st = agentrt__run_roundtrip(op, &w, &out);
  if (st) return st;
  out.body[out.len] = 0;
  *resp = (agentrt_buf_t){out.body, out.len, out.body};
  return AGENTRT_STATUS_OK;
}

/* Typed answers of run.self (SPEC.md §9.15), decoded here: agentrt_whoami
 * (run.self), agentrt_self_budget (run.self_budget) and agentrt_may
 * (run.self_may). Each answer's strings point into memory the answer owns
 * (NUL-terminated, "" when absent): free it with its _free function. */

/* agentrt__rd_anykey reads the next key of a body, whatever it is. */
static inline bool agentrt__rd_anykey(agentrt__rd *r, size_t *pairs, agentrt_str_t *key) {
  if (*pairs == 0 || !agentrt__rd_text(r, key)) return false;
  (*pairs)--;
  return true;
}

static inline bool agentrt__key_is(agentrt_str_t k, const char *name) {
  return k.len == strlen(name) && memcmp(k.data, name, k.len) == 0;
}

/* agentrt_self_t is who the run is (run.self). */
typedef struct agentrt_self {
  uint32_t abi;
  /* cell is the executing cell: the first 8 bytes of its key, hex. */
  agentrt_str_t cell;
  /* depth counts the run's ancestors (0: a top-level run). */
  uint32_t depth;
  agentrt_str_t run_id;
  /* task, attempt: the task the run is an attempt of ("" and 0: none). */
  agentrt_str_t task;
  uint64_t attempt;
  /* parent, parent_step: a sub-agent's parent and its spawning step. */
  agentrt_str_t parent;
  uint64_t parent_step;
  agentrt_bytes_t module_sha256;
  void *mem_;
} agentrt_self_t;

static inline void agentrt_self_free(agentrt_self_t *me) {
  free(me->mem_);
  memset(me, 0, sizeof *me);
}

/* agentrt_whoami asks who the run is (run.self). */
static inline agentrt_status_t agentrt_whoami(agentrt_self_t *me) {
  memset(me, 0, sizeof *me);
  agentrt_buf_t b;
  agentrt_status_t st = agentrt_self_call(AGENTRT_OP_RUN_SELF, NULL, 0, &b);
  if (st) return st;
  agentrt__resp out = {(uint8_t *)b.mem_, b.len, b.len + 1};
  agentrt__rd r = {out.body, out.body + out.len};
  size_t pairs;
  bool empty, ok = agentrt__rd_begin(&r, &pairs, &empty) && !empty;
  uint64_t abi = 0, depth = 0;
  while (ok && pairs > 0) {
    agentrt_str_t k;
    if (!agentrt__rd_anykey(&r, &pairs, &k)) ok = false;
    else if (agentrt__key_is(k, "abi")) ok = agentrt__rd_uint(&r, UINT32_MAX, &abi);
    else if (agentrt__key_is(k, "cell")) ok = agentrt__rd_text(&r, &me->cell);
    else if (agentrt__key_is(k, "depth")) ok = agentrt__rd_uint(&r, UINT32_MAX, &depth);
    else if (agentrt__key_is(k, "task")) ok = agentrt__rd_text(&r, &me->task);
    else if (agentrt__key_is(k, "run_id")) ok = agentrt__rd_text(&r, &me->run_id);
    else if (agentrt__key_is(k, "parent")) ok = agentrt__rd_text(&r, &me->parent);
    else if (agentrt__key_is(k, "attempt")) ok = agentrt__rd_uint(&r, UINT64_MAX, &me->attempt);
    else if (agentrt__key_is(k, "parent_step")) ok = agentrt__rd_uint(&r, UINT64_MAX, &me->parent_step);
    else if (agentrt__key_is(k, "module_sha256")) ok = agentrt__rd_bytes(&r, &me->module_sha256);
    else ok = false;
  }
  if (!ok || !agentrt__rd_end(&r, pairs) || me->run_id.len == 0) {
    memset(me, 0, sizeof *me);
    return agentrt__malformed(&out, "run.self");
  }
  me->abi = (uint32_t)abi;
  me->depth = (uint32_t)depth;
  agentrt__term_str(&me->cell);
  agentrt__term_str(&me->task);
  agentrt__term_str(&me->run_id);
  agentrt__term_str(&me->parent);
  agentrt__term_bytes(&me->module_sha256);
  me->mem_ = out.body;
  return AGENTRT_STATUS_OK;
}

/* agentrt_self_budget_dim_t is one dimension of the run's budget. */
typedef struct agentrt_self_budget_dim {
  /* dim is "steps", "model_calls", ..., "wall_seconds" (money in micro_usd). */
  agentrt_str_t dim;
  /* limited says the dimension has a ceiling; left is ceiling - spent -
   * reserved, at least 0 (0 when unlimited). */
  bool limited;
  uint64_t ceiling, spent, reserved, left;
  /* children is, of reserved, what is carved out for running children. */
  uint64_t children;
} agentrt_self_budget_dim_t;

/* agentrt_self_budget_t is what the run has spent and has left. */
typedef struct agentrt_self_budget {
  agentrt_self_budget_dim_t *dims;
  size_t ndims;
  void *mem_;
} agentrt_self_budget_t;

static inline void agentrt_self_budget_free(agentrt_self_budget_t *b) {
  free(b->dims);
  free(b->mem_);
  memset(b, 0, sizeof *b);
}

/* agentrt_self_budget_get returns the dimension named dim of b, or NULL. */
static inline const agentrt_self_budget_dim_t *agentrt_self_budget_get(const agentrt_self_budget_t *b, const char *dim) {
  for (size_t i = 0; i < b->ndims; i++)
    if (agentrt__key_is(b->dims[i].dim, dim)) return &b->dims[i];
  return NULL;
}

/* agentrt_self_budget asks what the run has spent and has left, per
 * dimension (run.self_budget). */
static inline agentrt_status_t agentrt_self_budget(agentrt_self_budget_t *out_b) {
  memset(out_b, 0, sizeof *out_b);
  agentrt_buf_t b;
  agentrt_status_t st = agentrt_self_call(AGENTRT_OP_RUN_SELF_BUDGET, NULL, 0, &b);
  if (st) return st;
  agentrt__resp out = {(uint8_t *)b.mem_, b.len, b.len + 1};
  agentrt__rd r = {out.body, out.body + out.len};
  size_t pairs, n = 0;
  bool empty, ok = agentrt__rd_begin(&r, &pairs, &empty);
  agentrt_self_budget_dim_t *dims = NULL;
  if (ok && !empty) {
    ok = agentrt__rd_key(&r, &pairs, "dims") && agentrt__rd_array(&r, 1, &n);
    if (ok && n > 0) ok = (dims = (agentrt_self_budget_dim_t *)calloc(n, sizeof *dims)) != NULL;
    for (size_t i = 0; ok && i < n; i++) {
      size_t dp;
      bool de;
      ok = agentrt__rd_begin(&r, &dp, &de) && !de;
      while (ok && dp > 0) {
        agentrt_str_t k;
        agentrt_self_budget_dim_t *d = &dims[i];
        if (!agentrt__rd_anykey(&r, &dp, &k)) ok = false;
        else if (agentrt__key_is(k, "dim")) ok = agentrt__rd_text(&r, &d->dim);
        else if (agentrt__key_is(k, "left")) ok = agentrt__rd_uint(&r, UINT64_MAX, &d->left);
        else if (agentrt__key_is(k, "spent")) ok = agentrt__rd_uint(&r, UINT64_MAX, &d->spent);
        else if (agentrt__key_is(k, "ceiling")) ok = agentrt__rd_uint(&r, UINT64_MAX, &d->ceiling);
        else if (agentrt__key_is(k, "limited")) ok = agentrt__rd_bool(&r, &d->limited);
        else if (agentrt__key_is(k, "children")) ok = agentrt__rd_uint(&r, UINT64_MAX, &d->children);
        else if (agentrt__key_is(k, "reserved")) ok = agentrt__rd_uint(&r, UINT64_MAX, &d->reserved);
        else ok = false;
      }
      ok = ok && dims[i].dim.len > 0;
    }
  }
  if (!ok || !agentrt__rd_end(&r, pairs)) {
    free(dims);
    return agentrt__malformed(&out, "run.self_budget");
  }
  for (size_t i = 0; i < n; i++) agentrt__term_str(&dims[i].dim);
  *out_b = (agentrt_self_budget_t){dims, n, out.body};
  return AGENTRT_STATUS_OK;
}

/* agentrt_may_t is the gate's answer to "may I?" (run.self_may). */
typedef struct agentrt_may {
  /* decision is "allow", "deny" or "ask". */
  agentrt_str_t decision;
  /* stage is the gate's layer that denies or asks ("capability", "policy",
   * "budget", "mode"; "" on allow); reason why; status the status the call
   * would get when denied (0 otherwise). */
  agentrt_str_t stage, reason;
  agentrt_status_t status;
  void *mem_;
} agentrt_may_t;

static inline void agentrt_may_free(agentrt_may_t *m) {
  free(m->mem_);
  memset(m, 0, sizeof *m);
}

/* agentrt_may asks whether a call of op (e.g. "http.request") with the
 * CBOR request req would pass the gate now: a dry run, journaled as a
 * pure call, that holds and sends nothing. */
static inline agentrt_status_t agentrt_may(const char *op, const uint8_t *req, size_t req_len, agentrt_may_t *m) {
  memset(m, 0, sizeof *m);
  agentrt__wr w = {0};
  agentrt__wr_head(&w, 5, 2);
  agentrt__wr_cstr(&w, "op");
  agentrt__wr_cstr(&w, op);
  agentrt__wr_cstr(&w, "request");
  agentrt__wr_bytes(&w, req ? (const void *)req : (const void *)"", req_len);
  if (w.oom) {
    free(w.buf);
    return agentrt__fail(AGENTRT_STATUS_INTERNAL, "agentrt_may: out of memory");
  }
  agentrt_buf_t b;
  agentrt_status_t st = agentrt_self_call(AGENTRT_OP_RUN_SELF_MAY, w.buf, w.len, &b);
  free(w.buf);
  if (st) return st;
  agentrt__resp out = {(uint8_t *)b.mem_, b.len, b.len + 1};
  agentrt__rd r = {out.body, out.body + out.len};
  size_t pairs;
  uint64_t status = 0;
  bool empty, ok = agentrt__rd_begin(&r, &pairs, &empty) && !empty;
  while (ok && pairs > 0) {
    agentrt_str_t k;
    if (!agentrt__rd_anykey(&r, &pairs, &k)) ok = false;
    else if (agentrt__key_is(k, "stage")) ok = agentrt__rd_text(&r, &m->stage);
    else if (agentrt__key_is(k, "reason")) ok = agentrt__rd_text(&r, &m->reason);
    else if (agentrt__key_is(k, "status")) ok = agentrt__rd_uint(&r, UINT32_MAX, &status);
    else if (agentrt__key_is(k, "decision")) ok = agentrt__rd_text(&r, &m->decision);
    else ok = false;
  }
  if (!ok || !agentrt__rd_end(&r, pairs) || m->decision.len == 0) {
    memset(m, 0, sizeof *m);
    return agentrt__malformed(&out, "run.self_may");
  }
  m->status = (agentrt_status_t)status;
  agentrt__term_str(&m->decision);
  agentrt__term_str(&m->stage);
  agentrt__term_str(&m->reason);
  m->mem_ = out.body;
  return AGENTRT_STATUS_OK;
}

/* A limit of agentrt_limit: at most amount more of dim from now on. dim is
 * one of "steps", "model_calls", "input_tokens", "output_tokens",
 * "micro_usd", "tool_calls", "http_requests", "wall_seconds" (money in
 * micro-USD). */
typedef struct agentrt_budget_limit {
  const char *dim;
  uint64_t amount;
} agentrt_budget_limit_t;

/* A ceiling in force: dim's most, absolute. */
typedef struct agentrt_budget_ceiling {
  agentrt_str_t dim;
  uint64_t amount;
} agentrt_budget_ceiling_t;

/* The ceilings agentrt_limit returns, one per limited dimension, in the
 * order above. Free with agentrt_ceilings_free. */
typedef struct agentrt_ceilings {
  agentrt_budget_ceiling_t *items;
  size_t n;
  void *mem_;
} agentrt_ceilings_t;

/* agentrt_ceilings_free releases what agentrt_limit returned. */
static inline void agentrt_ceilings_free(agentrt_ceilings_t *c) {
  free(c->items);
  free(c->mem_);
  memset(c, 0, sizeof *c);
}

/* agentrt_limit lowers the run's own budget ceilings (run.limit): for each
 * of the nlimits limits the host allows at most its amount more of its
 * dimension from now on, and never raises a ceiling. It returns the
 * ceilings now in force, which the host enforces whatever the guest does
 * next: a loop's caps set here hold even for code that ignores the loop.
 * With no limits it changes nothing and reports the ceilings. An unknown
 * dimension is AGENTRT_STATUS_BAD_REQUEST. */
static inline agentrt_status_t agentrt_limit(const agentrt_budget_limit_t *limits, size_t nlimits, agentrt_ceilings_t *out_ceilings) {
  agentrt__wr w = {0};
  agentrt__resp out;
  memset(out_ceilings, 0, sizeof *out_ceilings);
  if (nlimits > 0) {
    /* "dim" (3 bytes) before "amount" (6). */
    agentrt__wr_head(&w, 5, 1);
    agentrt__wr_cstr(&w, "limits");
    agentrt__wr_head(&w, 4, nlimits);
    for (size_t i = 0; i < nlimits; i++) {
      agentrt__wr_head(&w, 5, 2);
      agentrt__wr_cstr(&w, "dim");
      agentrt__wr_cstr(&w, limits[i].dim);
      agentrt__wr_cstr(&w, "amount");
      agentrt__wr_uint(&w, limits[i].amount);
    }
  }
  agentrt_status_t st = agentrt__run_roundtrip(AGENTRT_OP_RUN_LIMIT, &w, &out);
  if (st) return st;
  agentrt__rd r = {out.body, out.body + out.len};
  size_t pairs, n = 0;
  bool empty;
  agentrt_budget_ceiling_t *items = NULL;
  bool ok = agentrt__rd_begin(&r, &pairs, &empty);
  if (ok && agentrt__rd_key(&r, &pairs, "ceilings")) {
    /* omitempty: present means at least one. */
    int mt;
    uint64_t a;
    ok = agentrt__rd_head(&r, &mt, &a) && mt == 4 && a > 0 && a <= AGENTRT__MAX_ITEMS && a <= (uint64_t)(r.end - r.p);
    if (ok) {
      n = (size_t)a;
      items = (agentrt_budget_ceiling_t *)calloc(n, sizeof *items);
      ok = items != NULL;
    }
    for (size_t i = 0; ok && i < n; i++) {
      size_t kv = 2;
      ok = agentrt__rd_head(&r, &mt, &a) && mt == 5 && a == 2 && agentrt__rd_key(&r, &kv, "dim") &&
           agentrt__rd_text(&r, &items[i].dim) && agentrt__rd_key(&r, &kv, "amount") &&
           agentrt__rd_uint(&r, UINT64_MAX, &items[i].amount);
    }
  }
  if (!ok || !agentrt__rd_end(&r, pairs)) {
    free(items);
    return agentrt__malformed(&out, "run.limit");
  }
  for (size_t i = 0; i < n; i++) agentrt__term_str(&items[i].dim);
  out_ceilings->items = items;
  out_ceilings->n = n;
  out_ceilings->mem_ = out.body;
  return AGENTRT_STATUS_OK;
}

/* ------------------------------------------------------------------------ */
/* The kv capability: agentrt:kv                                            */

static inline void agentrt__wr_key_request(agentrt__wr *w, const char *key) {
  agentrt__wr_head(w, 5, 1);
  agentrt__wr_cstr(w, "key");
  agentrt__wr_cstr(w, key);
}

/* agentrt_kv_get returns the value of key, or AGENTRT_STATUS_NOT_FOUND
 * (kv.get). */
static inline agentrt_status_t agentrt_kv_get(const char *key, agentrt_buf_t *value) {
  agentrt__wr w = {0};
  agentrt__resp out;
  memset(value, 0, sizeof *value);
  agentrt__wr_key_request(&w, key);
  agentrt_status_t st = agentrt__kv_roundtrip(AGENTRT_OP_KV_GET, &w, &out);
  return st ? st : agentrt__one_bytes(&out, "kv.get", "value", value);
}

/* agentrt_kv_put durably sets key to value; the write is journaled before
 * it happens (kv.put). value NULL and a non-NULL empty value are distinct
 * encodings, both an empty value. */
static inline agentrt_status_t agentrt_kv_put(const char *key, const void *value, size_t len) {
  agentrt__wr w = {0};
  agentrt__resp out;
  agentrt__wr_head(&w, 5, 2);
  agentrt__wr_cstr(&w, "key");
  agentrt__wr_cstr(&w, key);
  agentrt__wr_cstr(&w, "value");
  agentrt__wr_bytes(&w, value, len);
  agentrt_status_t st = agentrt__kv_roundtrip(AGENTRT_OP_KV_PUT, &w, &out);
  return st ? st : agentrt__empty(&out, "kv.put");
}

/* agentrt_kv_delete removes key; *existed (when existed is not NULL) says
 * whether it was there (kv.delete). */
static inline agentrt_status_t agentrt_kv_delete(const char *key, bool *existed) {
  agentrt__wr w = {0};
  agentrt__resp out;
  bool e = false;
  agentrt__wr_key_request(&w, key);
  agentrt_status_t st = agentrt__kv_roundtrip(AGENTRT_OP_KV_DELETE, &w, &out);
  if (st) return st;
  agentrt__rd r = {out.body, out.body + out.len};
  size_t pairs;
  bool empty;
  if (!agentrt__rd_begin(&r, &pairs, &empty) ||
      (!empty && !(agentrt__rd_key(&r, &pairs, "existed") && agentrt__rd_bool(&r, &e))) || !agentrt__rd_end(&r, pairs))
    return agentrt__malformed(&out, "kv.delete");
  free(out.body);
  if (existed) *existed = e;
  return AGENTRT_STATUS_OK;
}

/* agentrt_kv_list_free releases what agentrt_kv_list returned. */
static inline void agentrt_kv_list_free(agentrt_kv_list_t *l) {
  free(l->keys);
  free(l->mem_);
  memset(l, 0, sizeof *l);
}

/* agentrt_kv_list returns keys starting with prefix, in byte order, after
 * the key after (exclusive; NULL or "" to start), at most limit of them (0:
 * the host's default) (kv.list). */
static inline agentrt_status_t agentrt_kv_list(const char *prefix, const char *after, uint32_t limit, agentrt_kv_list_t *l) {
  agentrt__wr w = {0};
  agentrt__resp out;
  bool has_after = after && after[0];
  memset(l, 0, sizeof *l);
  /* Canonical order: "after" and "limit" (5 bytes) before "prefix" (6). */
  agentrt__wr_head(&w, 5, 1 + has_after + (limit != 0));
  if (has_after) {
    agentrt__wr_cstr(&w, "after");
    agentrt__wr_cstr(&w, after);
  }
  if (limit != 0) {
    agentrt__wr_cstr(&w, "limit");
    agentrt__wr_uint(&w, limit);
  }
  agentrt__wr_cstr(&w, "prefix");
  agentrt__wr_cstr(&w, prefix);
  agentrt_status_t st = agentrt__kv_roundtrip(AGENTRT_OP_KV_LIST, &w, &out);
  if (st) return st;
  agentrt__rd r = {out.body, out.body + out.len};
  size_t pairs;
  bool empty;
  bool ok = agentrt__rd_begin(&r, &pairs, &empty);
  if (ok && !empty)
    ok = agentrt__rd_key(&r, &pairs, "keys") && agentrt__rd_texts(&r, &l->keys, &l->nkeys) &&
         agentrt__rd_key(&r, &pairs, "more") && agentrt__rd_bool(&r, &l->more);
  if (!ok || !agentrt__rd_end(&r, pairs)) {
    free(l->keys);
    memset(l, 0, sizeof *l);
    return agentrt__malformed(&out, "kv.list");
  }
  for (size_t i = 0; i < l->nkeys; i++) agentrt__term_str(&l->keys[i]);
  l->mem_ = out.body;
  return AGENTRT_STATUS_OK;
}

/* ------------------------------------------------------------------------ */
/* The http capability: agentrt:http                                        */

/* agentrt_http_response_free releases what agentrt_http_request returned. */
static inline void agentrt_http_response_free(agentrt_http_response_t *resp) {
  free(resp->headers);
  free(resp->mem_);
  memset(resp, 0, sizeof *resp);
}

/* agentrt__rd_headers reads a list of [name, value] pairs (or null). */
static inline bool agentrt__rd_headers(agentrt__rd *r, agentrt_http_response_header_t **hs, size_t *n) {
  if (!agentrt__rd_array(r, 3, n)) return false;
  if (*n == 0) return true;
  *hs = (agentrt_http_response_header_t *)calloc(*n, sizeof **hs);
  if (!*hs) return false;
  for (size_t i = 0; i < *n; i++) {
    int mt;
    uint64_t len;
    if (!agentrt__rd_head(r, &mt, &len) || mt != 4 || len != 2 || !agentrt__rd_text(r, &(*hs)[i].name) ||
        !agentrt__rd_text(r, &(*hs)[i].value))
      return false;
  }
  return true;
}

/* agentrt_http_request performs req (http.request). It is an effect,
 * journaled before it is sent, with an Idempotency-Key header the host
 * derives from the run and the step; not idempotent, so after a crash in
 * flight it is AGENTRT_STATUS_IN_DOUBT rather than sent twice. Hosts
 * outside the grant are AGENTRT_STATUS_DENIED; network errors
 * AGENTRT_STATUS_FAILED. An HTTP error status is a successful call. */
static inline agentrt_status_t agentrt_http_request(const agentrt_http_request_t *req, agentrt_http_response_t *resp) {
  agentrt__wr w = {0};
  agentrt__resp out;
  bool has_body = req->body != NULL && req->body_len > 0, has_headers = req->nheaders > 0;
  memset(resp, 0, sizeof *resp);
  /* Canonical order: url (3), body (4), method (6), headers (7). */
  agentrt__wr_head(&w, 5, 2 + has_body + has_headers);
  agentrt__wr_cstr(&w, "url");
  agentrt__wr_cstr(&w, req->url);
  if (has_body) {
    agentrt__wr_cstr(&w, "body");
    agentrt__wr_bytes(&w, req->body, req->body_len);
  }
  agentrt__wr_cstr(&w, "method");
  agentrt__wr_cstr(&w, req->method);
  if (has_headers) {
    agentrt__wr_cstr(&w, "headers");
    agentrt__wr_head(&w, 4, req->nheaders);
    for (size_t i = 0; i < req->nheaders; i++) {
      agentrt__wr_head(&w, 4, 2);
      agentrt__wr_cstr(&w, req->headers[i].name);
      agentrt__wr_cstr(&w, req->headers[i].value);
    }
  }
  agentrt_status_t st = agentrt__http_roundtrip(AGENTRT_OP_HTTP_REQUEST, &w, &out);
  if (st) return st;
  agentrt__rd r = {out.body, out.body + out.len};
  size_t pairs;
  bool empty;
  uint64_t status = 0;
  bool ok = agentrt__rd_begin(&r, &pairs, &empty);
  if (ok && !empty) {
    ok = agentrt__rd_key(&r, &pairs, "body") && agentrt__rd_bytes(&r, &resp->body) &&
         agentrt__rd_key(&r, &pairs, "status") && agentrt__rd_uint(&r, UINT16_MAX, &status) &&
         agentrt__rd_key(&r, &pairs, "headers") && agentrt__rd_headers(&r, &resp->headers, &resp->nheaders);
    /* truncated is omitempty: present only when true. */
    if (ok && agentrt__rd_key(&r, &pairs, "truncated"))
      ok = agentrt__rd_bool(&r, &resp->truncated) && resp->truncated;
  }
  if (!ok || !agentrt__rd_end(&r, pairs)) {
    free(resp->headers);
    memset(resp, 0, sizeof *resp);
    return agentrt__malformed(&out, "http.request");
  }
  resp->status = (uint16_t)status;
  agentrt__term_bytes(&resp->body);
  for (size_t i = 0; i < resp->nheaders; i++) {
    agentrt__term_str(&resp->headers[i].name);
    agentrt__term_str(&resp->headers[i].value);
  }
  resp->mem_ = out.body;
  return AGENTRT_STATUS_OK;
}

/* ------------------------------------------------------------------------ */
/* The clock capability: agentrt:clock                                      */

/* agentrt_clock_now returns the host's real wall time in Unix nanoseconds
 * (clock.now), journaled so replay returns the same instant. The WASI
 * clock (time(), clock_gettime) is the run's virtual clock instead:
 * deterministic, and needing no capability. */
static inline agentrt_status_t agentrt_clock_now(int64_t *unix_nano) {
  agentrt__wr w = {0};
  agentrt__resp out;
  int64_t v = 0;
  agentrt_status_t st = agentrt__clock_roundtrip(AGENTRT_OP_CLOCK_NOW, &w, &out);
  if (st) return st;
  agentrt__rd r = {out.body, out.body + out.len};
  size_t pairs;
  bool empty;
  if (!agentrt__rd_begin(&r, &pairs, &empty) ||
      (!empty && !(agentrt__rd_key(&r, &pairs, "unix_nano") && agentrt__rd_int64(&r, &v))) || !agentrt__rd_end(&r, pairs))
    return agentrt__malformed(&out, "clock.now");
  free(out.body);
  *unix_nano = v;
  return AGENTRT_STATUS_OK;
}

/* ------------------------------------------------------------------------ */
/* The timer capability: agentrt:timer                                      */

static inline agentrt_status_t agentrt__timer_sleep(const char *key, int64_t v, int64_t *due, int64_t *woke) {
  agentrt__wr w = {0};
  agentrt__resp out;
  agentrt__wr_head(&w, 5, 1);
  agentrt__wr_cstr(&w, key);
  agentrt__wr_uint(&w, (uint64_t)v);
  agentrt_status_t st = agentrt__timer_roundtrip(AGENTRT_OP_TIMER_SLEEP, &w, &out);
  if (st) return st;
  agentrt__rd r = {out.body, out.body + out.len};
  size_t pairs;
  bool empty;
  int64_t d = 0, k = 0;
  /* The empty body is the zero value (abi/SPEC.md 6.3), as for every
   * response. */
  if (!agentrt__rd_begin(&r, &pairs, &empty) ||
      (!empty && !(agentrt__rd_key(&r, &pairs, "due") && agentrt__rd_int64(&r, &d) && agentrt__rd_key(&r, &pairs, "woke") &&
                   agentrt__rd_int64(&r, &k))) ||
      !agentrt__rd_end(&r, pairs))
    return agentrt__malformed(&out, "timer.sleep");
  free(out.body);
  if (due) *due = d;
  if (woke) *woke = k;
  return AGENTRT_STATUS_OK;
}

/* agentrt_sleep waits ns nanoseconds of real time, durably (timer.sleep):
 * the run parks, its instance is closed, and the cell resumes it when the
 * time has passed, across restarts. due and woke (either may be NULL) get
 * the wake time and the real time the run went on, Unix ns, journaled.
 * The WASI sleep (nanosleep, poll_oneoff) only advances the run's virtual
 * clock. Needs the timer capability (timer: {} in the grant). */
static inline agentrt_status_t agentrt_sleep(int64_t ns, int64_t *due, int64_t *woke) {
  if (ns <= 0) return agentrt__fail(AGENTRT_STATUS_BAD_REQUEST, "agentrt_sleep needs a duration above 0");
  return agentrt__timer_sleep("for", ns, due, woke);
}

/* agentrt_sleep_until waits until unix_ns, a wall-clock time, as
 * agentrt_sleep does; a time already past answers at once. */
static inline agentrt_status_t agentrt_sleep_until(int64_t unix_ns, int64_t *due, int64_t *woke) {
  if (unix_ns <= 0) return agentrt__fail(AGENTRT_STATUS_BAD_REQUEST, "agentrt_sleep_until needs a time after 1970");
  return agentrt__timer_sleep("until", unix_ns, due, woke);
}

/* ------------------------------------------------------------------------ */
/* The approval capability: agentrt:approval                                */

/* The answer of agentrt_request_approval. */
typedef struct agentrt_approval {
  bool approved;            /* the group's quorum approved */
  agentrt_str_t reason;     /* why not, when denied (a veto, the expiry) */
  agentrt_bytes_t digest;   /* the action digest the votes were bound to (32 bytes) */
  agentrt_str_t *approvers; /* the names of those who approved */
  size_t n_approvers;
  void *mem_;
} agentrt_approval_t;

/* agentrt_approval_free releases what agentrt_request_approval returned. */
static inline void agentrt_approval_free(agentrt_approval_t *a) {
  free(a->approvers);
  free(a->mem_);
  memset(a, 0, sizeof *a);
}

/* agentrt_request_approval asks the cell's approvers of group to approve
 * action, a text they read (approval.request): the run parks until the
 * group's quorum decides by signed votes, or the request expires. A denial
 * is an answer (approved false, reason set), not an error. Needs the
 * approval capability (approval: {groups: [...]} in the grant). Release
 * the answer with agentrt_approval_free. */
static inline agentrt_status_t agentrt_request_approval(const char *action, const char *group, agentrt_approval_t *a) {
  agentrt__wr w = {0};
  agentrt__resp out;
  memset(a, 0, sizeof *a);
  agentrt__wr_head(&w, 5, 2);
  agentrt__wr_cstr(&w, "group");
  agentrt__wr_cstr(&w, group);
  agentrt__wr_cstr(&w, "action");
  agentrt__wr_cstr(&w, action);
  agentrt_status_t st = agentrt__approval_roundtrip(AGENTRT_OP_APPROVAL_REQUEST, &w, &out);
  if (st) return st;
  agentrt__rd r = {out.body, out.body + out.len};
  size_t pairs;
  bool empty;
  bool ok = agentrt__rd_begin(&r, &pairs, &empty);
  /* The empty body is the zero value (abi/SPEC.md 6.3). Keys in canonical
   * order, shorter first: digest, reason, approved, approvers. reason,
   * approved and approvers are omitempty: present only when not empty
   * (not false). */
  if (ok && !empty) {
    ok = agentrt__rd_key(&r, &pairs, "digest") && agentrt__rd_bytes(&r, &a->digest);
    if (ok && agentrt__rd_key(&r, &pairs, "reason")) ok = agentrt__rd_text(&r, &a->reason) && a->reason.len > 0;
    if (ok && agentrt__rd_key(&r, &pairs, "approved")) ok = agentrt__rd_bool(&r, &a->approved) && a->approved;
    if (ok && agentrt__rd_key(&r, &pairs, "approvers"))
      ok = agentrt__rd_texts(&r, &a->approvers, &a->n_approvers) && a->n_approvers > 0;
  }
  if (!ok || !agentrt__rd_end(&r, pairs)) {
    /* Nothing of a refused body stays readable: its views point into
     * memory agentrt__malformed frees. */
    free(a->approvers);
    memset(a, 0, sizeof *a);
    return agentrt__malformed(&out, "approval.request");
  }
  agentrt__term_bytes(&a->digest);
  agentrt__term_str(&a->reason);
  for (size_t i = 0; i < a->n_approvers; i++) agentrt__term_str(&a->approvers[i]);
  a->mem_ = out.body;
  return AGENTRT_STATUS_OK;
}

/* ------------------------------------------------------------------------ */
/* The sub-agent capability: agentrt:agent (abi/SPEC.md 16)                  */

/* A child run, as agentrt_spawn returns it. */
typedef struct agentrt_child {
  char run[33];             /* the child's run id: 32 hex digits and a NUL */
  uint8_t token_hash[32];   /* SHA-256 of the child's token */
} agentrt_child_t;

/* agentrt_spawn starts a sub-agent (agent.spawn): a run of its own of the
 * module the cell holds under the SHA-256 module (32 bytes), with input
 * and the powers caps (a YAML or JSON capabilities map, "{run: {}}") and
 * budget (the flag syntax, "steps=100"; NULL or "" for the caller's
 * ceilings), which the cell never lets be wider than the caller's
 * (AGENTRT_STATUS_DENIED). Needs the agent capability (agent:
 * {max_children: N, max_depth: D} in the grant). The child runs at the
 * caller's priority; agentrt_spawn_priority chooses one. */
static inline agentrt_status_t agentrt_spawn_priority(const uint8_t module[32], const void *input, size_t input_len,
                                                      const char *caps, const char *budget, uint8_t priority,
                                                      agentrt_child_t *c);
static inline agentrt_status_t agentrt_spawn(const uint8_t module[32], const void *input, size_t input_len,
                                             const char *caps, const char *budget, agentrt_child_t *c) {
  return agentrt_spawn_priority(module, input, input_len, caps, budget, 0, c);
}

/* agentrt_spawn_priority is agentrt_spawn with the child's priority in the
 * cell's queue: 1 (lowest) to 9 (highest), at most the caller's
 * (AGENTRT_STATUS_DENIED otherwise); 0 for the caller's. */
static inline agentrt_status_t agentrt_spawn_priority(const uint8_t module[32], const void *input, size_t input_len,
                                                      const char *caps, const char *budget, uint8_t priority,
                                                      agentrt_child_t *c) {
  agentrt__wr w = {0};
  agentrt__resp out;
  memset(c, 0, sizeof *c);
  bool has_budget = budget && budget[0];
  agentrt__wr_head(&w, 5, 2 + (input_len > 0) + has_budget + (priority > 0));
  /* Keys in canonical order, shorter first: caps, input, budget, module,
   * priority. */
  agentrt__wr_cstr(&w, "caps");
  agentrt__wr_cstr(&w, caps);
  if (input_len > 0) {
    agentrt__wr_cstr(&w, "input");
    agentrt__wr_bytes(&w, input, input_len);
  }
  if (has_budget) {
    agentrt__wr_cstr(&w, "budget");
    agentrt__wr_cstr(&w, budget);
  }
  agentrt__wr_cstr(&w, "module");
  agentrt__wr_bytes(&w, module, 32);
  if (priority > 0) {
    agentrt__wr_cstr(&w, "priority");
    agentrt__wr_uint(&w, priority);
  }
  agentrt_status_t st = agentrt__agent_roundtrip(AGENTRT_OP_AGENT_SPAWN, &w, &out);
  if (st) return st;
  agentrt__rd r = {out.body, out.body + out.len};
  size_t pairs;
  bool empty;
  agentrt_str_t run = {0}, granted = {0};
  agentrt_bytes_t hash = {0};
  bool ok = agentrt__rd_begin(&r, &pairs, &empty) && !empty;
  /* Keys: run, budget (omitted for none), token_hash. */
  ok = ok && agentrt__rd_key(&r, &pairs, "run") && agentrt__rd_text(&r, &run) && run.len == 32;
  if (ok && agentrt__rd_key(&r, &pairs, "budget")) ok = agentrt__rd_text(&r, &granted) && granted.len > 0;
  ok = ok && agentrt__rd_key(&r, &pairs, "token_hash") && agentrt__rd_bytes(&r, &hash) && hash.len == 32;
  if (!ok || !agentrt__rd_end(&r, pairs)) return agentrt__malformed(&out, "agent.spawn");
  memcpy(c->run, run.data, 32);
  memcpy(c->token_hash, hash.data, 32);
  free(out.body);
  return AGENTRT_STATUS_OK;
}

/* A child's terminal state, as agentrt_await returns it: status is
 * "completed", "failed", "cancelled", "budget_exhausted" or "in_doubt";
 * error says why for any but completed. */
typedef struct agentrt_outcome {
  agentrt_str_t status;
  agentrt_bytes_t output;
  agentrt_bytes_t output_hash; /* 32 bytes */
  agentrt_str_t error;
  void *mem_;
} agentrt_outcome_t;

/* agentrt_outcome_free releases what agentrt_await returned. */
static inline void agentrt_outcome_free(agentrt_outcome_t *o) {
  free(o->mem_);
  memset(o, 0, sizeof *o);
}

static inline void agentrt__wr_run_ref(agentrt__wr *w, const char *run) {
  agentrt__wr_head(w, 5, 1);
  agentrt__wr_cstr(w, "run");
  agentrt__wr_cstr(w, run);
}

/* agentrt_await waits for the caller's child run to end (agent.await): the
 * caller parks, and the cell resumes it when the child ends. A failed
 * child is an outcome, not an error. Release it with agentrt_outcome_free. */
static inline agentrt_status_t agentrt_await(const char *run, agentrt_outcome_t *o) {
  agentrt__wr w = {0};
  agentrt__resp out;
  memset(o, 0, sizeof *o);
  agentrt__wr_run_ref(&w, run);
  agentrt_status_t st = agentrt__agent_roundtrip(AGENTRT_OP_AGENT_AWAIT, &w, &out);
  if (st) return st;
  agentrt__rd r = {out.body, out.body + out.len};
  size_t pairs;
  bool empty;
  agentrt_str_t id = {0};
  bool ok = agentrt__rd_begin(&r, &pairs, &empty) && !empty;
  /* Keys: run, error, output, status, output_hash; error and output are
   * omitted when empty. */
  ok = ok && agentrt__rd_key(&r, &pairs, "run") && agentrt__rd_text(&r, &id);
  if (ok && agentrt__rd_key(&r, &pairs, "error")) ok = agentrt__rd_text(&r, &o->error) && o->error.len > 0;
  if (ok && agentrt__rd_key(&r, &pairs, "output")) ok = agentrt__rd_bytes(&r, &o->output) && o->output.len > 0;
  ok = ok && agentrt__rd_key(&r, &pairs, "status") && agentrt__rd_text(&r, &o->status);
  ok = ok && agentrt__rd_key(&r, &pairs, "output_hash") && agentrt__rd_bytes(&r, &o->output_hash) && o->output_hash.len == 32;
  if (!ok || !agentrt__rd_end(&r, pairs)) {
    memset(o, 0, sizeof *o);
    return agentrt__malformed(&out, "agent.await");
  }
  agentrt__term_str(&o->status);
  agentrt__term_str(&o->error);
  agentrt__term_bytes(&o->output);
  agentrt__term_bytes(&o->output_hash);
  o->mem_ = out.body;
  return AGENTRT_STATUS_OK;
}

/* agentrt_cancel cancels the caller's child run and every run below it
 * (agent.cancel). */
static inline agentrt_status_t agentrt_cancel(const char *run) {
  agentrt__wr w = {0};
  agentrt__resp out;
  agentrt__wr_run_ref(&w, run);
  agentrt_status_t st = agentrt__agent_roundtrip(AGENTRT_OP_AGENT_CANCEL, &w, &out);
  return st ? st : agentrt__empty(&out, "agent.cancel");
}

/* ------------------------------------------------------------------------ */
/* The random capability: agentrt:random                                    */

/* agentrt_random_bytes fills dst with n real random bytes (random.bytes),
 * journaled. The WASI random_get (getentropy, arc4random) is the run's
 * seeded stream instead. A response of any other length than n is
 * AGENTRT_STATUS_SDK_MALFORMED, and dst is left untouched. */
static inline agentrt_status_t agentrt_random_bytes(void *dst, uint32_t n) {
  agentrt__wr w = {0};
  agentrt__resp out;
  agentrt__wr_head(&w, 5, 1);
  agentrt__wr_cstr(&w, "n");
  agentrt__wr_uint(&w, n);
  agentrt_status_t st = agentrt__random_roundtrip(AGENTRT_OP_RANDOM_BYTES, &w, &out);
  if (st) return st;
  agentrt_buf_t b;
  st = agentrt__one_bytes(&out, "random.bytes", "bytes", &b);
  if (st) return st;
  if (b.len != n) {
    agentrt_buf_free(&b);
    return agentrt__fail(AGENTRT_STATUS_SDK_MALFORMED, "random.bytes: the host returned a different number of bytes");
  }
  memcpy(dst, b.data, n);
  agentrt_buf_free(&b);
  return AGENTRT_STATUS_OK;
}

/* ------------------------------------------------------------------------ */
/* The tool capability: agentrt:tool                                        */

/* agentrt_tool_result_free releases what agentrt_tool_run returned. */
static inline void agentrt_tool_result_free(agentrt_tool_result_t *res) {
  free(res->limits);
  free(res->files);
  free(res->mem_);
  memset(res, 0, sizeof *res);
}

/* agentrt__rd_name reads a file name: a text string, or a byte string
 * holding a name that is not UTF-8 (a UTF-8 one in a byte string is not
 * canonical). */
static inline bool agentrt__rd_name(agentrt__rd *r, agentrt_str_t *s, bool *raw) {
  *raw = r->p < r->end && (r->p[0] >> 5) == 2;
  if (!*raw) return agentrt__rd_text(r, s);
  const uint8_t *d;
  if (!agentrt__rd_string(r, 2, false, &d, &s->len) || agentrt__utf8(d, s->len)) return false;
  s->data = (const char *)d;
  return true;
}

/* agentrt__rd_files reads a non-empty list of tool-file maps (the field is
 * omitempty: absent when there are none). */
static inline bool agentrt__rd_files(agentrt__rd *r, agentrt_tool_file_t **fs, size_t *n) {
  int mt;
  uint64_t a;
  if (!agentrt__rd_head(r, &mt, &a) || mt != 4 || a == 0 || a > AGENTRT__MAX_ITEMS || a > (uint64_t)(r->end - r->p))
    return false;
  *n = (size_t)a;
  *fs = (agentrt_tool_file_t *)calloc(*n, sizeof **fs);
  if (!*fs) return false;
  for (size_t i = 0; i < *n; i++) {
    size_t pairs;
    agentrt_tool_file_t *f = &(*fs)[i];
    /* path, size, then sha256 or (without a hash) unhashed. */
    if (!agentrt__rd_head(r, &mt, &a) || mt != 5 || a != 3) return false;
    pairs = 3;
    if (!agentrt__rd_key(r, &pairs, "path") || !agentrt__rd_name(r, &f->path, &f->path_bytes) ||
        !agentrt__rd_key(r, &pairs, "size") || !agentrt__rd_uint(r, UINT64_MAX, &f->size))
      return false;
    if (agentrt__rd_key(r, &pairs, "sha256")) {
      if (!agentrt__rd_bytes(r, &f->sha256) || f->sha256.len != 32) return false;
    } else if (!agentrt__rd_key(r, &pairs, "unhashed") || !agentrt__rd_text(r, &f->unhashed) || f->unhashed.len == 0) {
      return false;
    }
  }
  return true;
}

/* agentrt_tool_run runs a native tool the grant registers (tool.run), under
 * the host's OS sandbox. Nothing goes through a shell: quotes, '*', '$' and
 * ';' in an argument reach the tool as they are. The host checks every
 * argument against the tool's schema first: AGENTRT_STATUS_DENIED, with a
 * message naming the argument and the rule, and nothing runs. A tool that
 * ran is AGENTRT_STATUS_OK whatever its exit status: read res->exit_code.
 * AGENTRT_STATUS_FAILED: the sandbox could not be set up and the tool did
 * not run. AGENTRT_STATUS_IN_DOUBT: a crash left a run of a tool the grant
 * does not declare idempotent unknown, and it was not run again. */
static inline agentrt_status_t agentrt_tool_run(const agentrt_tool_request_t *req, agentrt_tool_result_t *res) {
  agentrt__wr w = {0};
  agentrt__resp out;
  bool has_args = req->nargs > 0, has_stdin = req->stdin_data != NULL && req->stdin_len > 0;
  memset(res, 0, sizeof *res);
  /* Canonical order: args (4), name (4, after args bytewise), stdin (5). */
  agentrt__wr_head(&w, 5, 1 + has_args + has_stdin);
  if (has_args) {
    agentrt__wr_cstr(&w, "args");
    agentrt__wr_head(&w, 4, req->nargs);
    for (size_t i = 0; i < req->nargs; i++) agentrt__wr_cstr(&w, req->args[i]);
  }
  agentrt__wr_cstr(&w, "name");
  agentrt__wr_cstr(&w, req->name);
  if (has_stdin) {
    agentrt__wr_cstr(&w, "stdin");
    agentrt__wr_bytes(&w, req->stdin_data, req->stdin_len);
  }
  agentrt_status_t st = agentrt__tool_roundtrip(AGENTRT_OP_TOOL_RUN, &w, &out);
  if (st) return st;
  agentrt__rd r = {out.body, out.body + out.len};
  size_t pairs;
  bool empty;
  bool ok = agentrt__rd_begin(&r, &pairs, &empty);
  if (ok && !empty) {
    ok = agentrt__rd_key(&r, &pairs, "exit") && agentrt__rd_int64(&r, &res->exit_code);
    /* files, limits, signal, timed_out and the *_truncated flags are
     * omitempty: present only when not empty (not false). */
    if (ok && agentrt__rd_key(&r, &pairs, "files")) ok = agentrt__rd_files(&r, &res->files, &res->nfiles);
    if (ok && agentrt__rd_key(&r, &pairs, "limits"))
      ok = agentrt__rd_texts(&r, &res->limits, &res->nlimits) && res->nlimits > 0;
    if (ok && agentrt__rd_key(&r, &pairs, "signal")) ok = agentrt__rd_text(&r, &res->signal) && res->signal.len > 0;
    ok = ok && agentrt__rd_key(&r, &pairs, "stderr") && agentrt__rd_bytes(&r, &res->stderr_data) &&
         agentrt__rd_key(&r, &pairs, "stdout") && agentrt__rd_bytes(&r, &res->stdout_data);
    if (ok && agentrt__rd_key(&r, &pairs, "timed_out")) ok = agentrt__rd_bool(&r, &res->timed_out) && res->timed_out;
    if (ok && agentrt__rd_key(&r, &pairs, "stderr_truncated"))
      ok = agentrt__rd_bool(&r, &res->stderr_truncated) && res->stderr_truncated;
    if (ok && agentrt__rd_key(&r, &pairs, "stdout_truncated"))
      ok = agentrt__rd_bool(&r, &res->stdout_truncated) && res->stdout_truncated;
  }
  if (!ok || !agentrt__rd_end(&r, pairs)) {
    free(res->limits);
    free(res->files);
    memset(res, 0, sizeof *res);
    return agentrt__malformed(&out, "tool.run");
  }
  agentrt__term_str(&res->signal);
  agentrt__term_bytes(&res->stdout_data);
  agentrt__term_bytes(&res->stderr_data);
  for (size_t i = 0; i < res->nlimits; i++) agentrt__term_str(&res->limits[i]);
  for (size_t i = 0; i < res->nfiles; i++) {
    agentrt__term_str(&res->files[i].path);
    agentrt__term_bytes(&res->files[i].sha256);
    agentrt__term_str(&res->files[i].unhashed);
  }
  res->mem_ = out.body;
  return AGENTRT_STATUS_OK;
}

/* ------------------------------------------------------------------------ */
/* The llm capability: agentrt:llm                                          */

/*
 * One model call (llm.complete, abi/SPEC.md section 13), with the parts a
 * tool-calling conversation needs: text, tool calls and tool results.
 * Images, output formats, stop sequences, sampling values and streaming
 * are the Go SDK's (agent.LLMComplete, agent.LLMStream) for now.
 */

/* Roles of a message (abi/llm.go). */
#define AGENTRT_ROLE_SYSTEM "system"
#define AGENTRT_ROLE_USER "user"
#define AGENTRT_ROLE_ASSISTANT "assistant"

/* Types of a part: a zeroed part is a text part. */
typedef enum agentrt_part_type {
  AGENTRT_PART_TEXT = 0,
  AGENTRT_PART_TOOL_CALL = 1,
  AGENTRT_PART_TOOL_RESULT = 2,
} agentrt_part_type_t;

/* agentrt_str makes a view of a C string (NULL: the empty view). */
static inline agentrt_str_t agentrt_str(const char *s) {
  agentrt_str_t v = {s ? s : "", s ? strlen(s) : 0};
  return v;
}

/* A piece of a message, of a type of agentrt_part_type_t; the fields a type
 * does not use stay empty: a text part has text; a tool call (from the
 * assistant) id, name and arguments (JSON text); a tool result (in a user
 * message) the id of the call it answers, text (the tool's output) and
 * is_error. In a response, the views point into the response. */
typedef struct agentrt_llm_part {
  agentrt_part_type_t type;
  agentrt_str_t id, name, text;
  agentrt_bytes_t arguments;
  bool is_error;
} agentrt_llm_part_t;

/* One turn of the conversation: AGENTRT_ROLE_* and its parts (at least one). */
typedef struct agentrt_llm_message {
  const char *role;
  const agentrt_llm_part_t *parts;
  size_t nparts;
} agentrt_llm_message_t;

/* A tool the model may call: its name, the JSON Schema of its arguments
 * (JSON text) and a description (NULL: none). */
typedef struct agentrt_llm_tool {
  const char *name, *schema, *description;
} agentrt_llm_tool_t;

/* The request of one model call. provider NULL is the grant's first;
 * max_output_tokens bounds the answer and must be 1 or more. */
typedef struct agentrt_llm_request {
  const char *model, *provider;
  uint32_t max_output_tokens;
  const agentrt_llm_message_t *messages;
  size_t nmessages;
  const agentrt_llm_tool_t *tools;
  size_t ntools;
} agentrt_llm_request_t;

/* The tokens of a call. The total input is input + cache_read + cache_write;
 * output counts every output token, reasoning included. */
typedef struct agentrt_llm_usage {
  uint64_t input, output, reasoning, cache_read, cache_write;
} agentrt_llm_usage_t;

/* agentrt_llm_usage_add adds v to *u. */
static inline void agentrt_llm_usage_add(agentrt_llm_usage_t *u, const agentrt_llm_usage_t *v) {
  u->input += v->input;
  u->output += v->output;
  u->reasoning += v->reasoning;
  u->cache_read += v->cache_read;
  u->cache_write += v->cache_write;
}

/* The model's answer: its text and tool_call parts in the model's order,
 * and stop_reason, one of "end", "max_tokens", "stop_sequence",
 * "tool_use", "refusal", "content_filter", "pause", "other". provider is
 * the cell's provider that answered and credential the id of the
 * credential it was called with ("env:OPENAI_API_KEY"), never the key
 * (either may be empty). Free with agentrt_llm_response_free. */
typedef struct agentrt_llm_response {
  agentrt_str_t id, model, stop_reason, provider, credential;
  agentrt_llm_usage_t usage;
  agentrt_llm_part_t *content;
  size_t ncontent;
  void *mem_;
} agentrt_llm_response_t;

/* agentrt_llm_response_free releases what agentrt_llm_complete returned. */
static inline void agentrt_llm_response_free(agentrt_llm_response_t *resp) {
  free(resp->content);
  free(resp->mem_);
  memset(resp, 0, sizeof *resp);
}

static inline void agentrt__wr_view(agentrt__wr *w, agentrt_str_t v) { agentrt__wr_text(w, v.data ? v.data : "", v.len); }

/* agentrt__wr_part writes a part, omitting its empty fields. */
static inline void agentrt__wr_part(agentrt__wr *w, const agentrt_llm_part_t *p) {
  bool id = p->id.len > 0, name = p->name.len > 0, text = p->text.len > 0, args = p->arguments.len > 0;
  /* Canonical order: id, name, text, type, is_error, arguments. */
  agentrt__wr_head(w, 5, 1 + id + name + text + p->is_error + args);
  if (id) agentrt__wr_cstr(w, "id"), agentrt__wr_view(w, p->id);
  if (name) agentrt__wr_cstr(w, "name"), agentrt__wr_view(w, p->name);
  if (text) agentrt__wr_cstr(w, "text"), agentrt__wr_view(w, p->text);
  static const char *const types[] = {"text", "tool_call", "tool_result"};
  agentrt__wr_cstr(w, "type");
  /* A type outside the enum is written as "", which the host refuses. */
  agentrt__wr_cstr(w, (unsigned)p->type < 3 ? types[p->type] : "");
  if (p->is_error) agentrt__wr_cstr(w, "is_error"), agentrt__put(w, "\xf5", 1);
  if (args) agentrt__wr_cstr(w, "arguments"), agentrt__wr_bytes(w, p->arguments.data, p->arguments.len);
}

/* agentrt__rd_opt_text reads an omitempty text field: present only when
 * not empty. */
static inline bool agentrt__rd_opt_text(agentrt__rd *r, size_t *pairs, const char *key, agentrt_str_t *v) {
  if (!agentrt__rd_key(r, pairs, key)) return true;
  return agentrt__rd_text(r, v) && v->len > 0;
}

/* agentrt__rd_opt_uint reads an omitempty unsigned field: present only when
 * not 0. */
static inline bool agentrt__rd_opt_uint(agentrt__rd *r, size_t *pairs, const char *key, uint64_t *v) {
  if (!agentrt__rd_key(r, pairs, key)) return true;
  return agentrt__rd_uint(r, UINT64_MAX, v) && *v > 0;
}

/* agentrt__rd_llm_part reads a part of a response: text or tool_call. */
static inline bool agentrt__rd_llm_part(agentrt__rd *r, agentrt_llm_part_t *p) {
  size_t pairs;
  bool empty;
  agentrt_str_t type = {0};
  if (!agentrt__rd_begin(r, &pairs, &empty) || empty) return false;
  if (!agentrt__rd_opt_text(r, &pairs, "id", &p->id) || !agentrt__rd_opt_text(r, &pairs, "name", &p->name) ||
      !agentrt__rd_opt_text(r, &pairs, "text", &p->text) || !agentrt__rd_key(r, &pairs, "type") || !agentrt__rd_text(r, &type))
    return false;
  if (agentrt__rd_key(r, &pairs, "arguments") && (!agentrt__rd_bytes(r, &p->arguments) || p->arguments.len == 0)) return false;
  if (pairs != 0) return false; /* sha256, is_error, media_type: not in a response's parts */
  if (type.len == 4 && memcmp(type.data, "text", 4) == 0) {
    p->type = AGENTRT_PART_TEXT;
    return p->id.len == 0 && p->name.len == 0 && p->arguments.len == 0;
  }
  if (type.len == 9 && memcmp(type.data, "tool_call", 9) == 0) {
    p->type = AGENTRT_PART_TOOL_CALL;
    return p->id.len > 0 && p->name.len > 0 && p->text.len == 0;
  }
  return false;
}

/* agentrt__rd_llm_usage reads a usage map. */
static inline bool agentrt__rd_llm_usage(agentrt__rd *r, agentrt_llm_usage_t *u) {
  size_t pairs;
  bool empty;
  /* Canonical order: input, output, reasoning, cache_read, cache_write. */
  return agentrt__rd_begin(r, &pairs, &empty) && !empty && agentrt__rd_key(r, &pairs, "input") &&
         agentrt__rd_uint(r, UINT64_MAX, &u->input) && agentrt__rd_key(r, &pairs, "output") &&
         agentrt__rd_uint(r, UINT64_MAX, &u->output) && agentrt__rd_opt_uint(r, &pairs, "reasoning", &u->reasoning) &&
         agentrt__rd_opt_uint(r, &pairs, "cache_read", &u->cache_read) &&
         agentrt__rd_opt_uint(r, &pairs, "cache_write", &u->cache_write) && pairs == 0;
}

/* agentrt_llm_complete makes one model call (llm.complete) and returns the
 * whole answer. It is an effect, journaled before it is sent; a call a
 * crash left in doubt is sent again on resume (a model call changes
 * nothing outside its cost). AGENTRT_STATUS_BUDGET: the call's worst case
 * does not fit what is left of a budget ceiling, and nothing was sent; the
 * message names the dimension. AGENTRT_STATUS_FAILED: the provider gave no
 * answer; the message begins with its kind ("rate_limited: ...",
 * abi/SPEC.md section 13.4). */
static inline agentrt_status_t agentrt_llm_complete(const agentrt_llm_request_t *req, agentrt_llm_response_t *resp) {
  agentrt__wr w = {0};
  agentrt__resp out;
  bool tools = req->ntools > 0, provider = req->provider && req->provider[0];
  memset(resp, 0, sizeof *resp);
  /* Canonical order: model, tools (5), messages, provider (8), max_output_tokens (17). */
  agentrt__wr_head(&w, 5, 3 + tools + provider);
  agentrt__wr_cstr(&w, "model");
  agentrt__wr_cstr(&w, req->model);
  if (tools) {
    agentrt__wr_cstr(&w, "tools");
    agentrt__wr_head(&w, 4, req->ntools);
    for (size_t i = 0; i < req->ntools; i++) {
      const agentrt_llm_tool_t *t = &req->tools[i];
      bool desc = t->description && t->description[0];
      const char *schema = t->schema ? t->schema : "";
      /* Canonical order: name, schema, description. */
      agentrt__wr_head(&w, 5, 2 + desc);
      agentrt__wr_cstr(&w, "name");
      agentrt__wr_cstr(&w, t->name);
      agentrt__wr_cstr(&w, "schema");
      agentrt__wr_bytes(&w, schema, strlen(schema));
      if (desc) agentrt__wr_cstr(&w, "description"), agentrt__wr_cstr(&w, t->description);
    }
  }
  agentrt__wr_cstr(&w, "messages");
  agentrt__wr_head(&w, 4, req->nmessages);
  for (size_t i = 0; i < req->nmessages; i++) {
    const agentrt_llm_message_t *m = &req->messages[i];
    agentrt__wr_head(&w, 5, 2);
    agentrt__wr_cstr(&w, "role");
    agentrt__wr_cstr(&w, m->role);
    agentrt__wr_cstr(&w, "content");
    agentrt__wr_head(&w, 4, m->nparts);
    for (size_t j = 0; j < m->nparts; j++) agentrt__wr_part(&w, &m->parts[j]);
  }
  if (provider) agentrt__wr_cstr(&w, "provider"), agentrt__wr_cstr(&w, req->provider);
  agentrt__wr_cstr(&w, "max_output_tokens");
  agentrt__wr_uint(&w, req->max_output_tokens);
  agentrt_status_t st = agentrt__llm_roundtrip(AGENTRT_OP_LLM_COMPLETE, &w, &out);
  if (st) return st;
  agentrt__rd r = {out.body, out.body + out.len};
  size_t pairs;
  bool empty;
  /* Canonical order: id, model, usage, content, provider, credential,
   * stop_reason; provider and credential are omitempty. */
  bool ok = agentrt__rd_begin(&r, &pairs, &empty) && !empty && agentrt__rd_key(&r, &pairs, "id") &&
            agentrt__rd_text(&r, &resp->id) && agentrt__rd_key(&r, &pairs, "model") && agentrt__rd_text(&r, &resp->model) &&
            agentrt__rd_key(&r, &pairs, "usage") && agentrt__rd_llm_usage(&r, &resp->usage) &&
            agentrt__rd_key(&r, &pairs, "content") && agentrt__rd_array(&r, 1, &resp->ncontent);
  if (ok && resp->ncontent > 0) ok = (resp->content = (agentrt_llm_part_t *)calloc(resp->ncontent, sizeof *resp->content)) != NULL;
  for (size_t i = 0; ok && i < resp->ncontent; i++) ok = agentrt__rd_llm_part(&r, &resp->content[i]);
  ok = ok && agentrt__rd_opt_text(&r, &pairs, "provider", &resp->provider) &&
       agentrt__rd_opt_text(&r, &pairs, "credential", &resp->credential) && agentrt__rd_key(&r, &pairs, "stop_reason") &&
       agentrt__rd_text(&r, &resp->stop_reason);
  if (!ok || !agentrt__rd_end(&r, pairs)) {
    free(resp->content);
    memset(resp, 0, sizeof *resp);
    return agentrt__malformed(&out, "llm.complete");
  }
  agentrt__term_str(&resp->id);
  agentrt__term_str(&resp->model);
  agentrt__term_str(&resp->stop_reason);
  agentrt__term_str(&resp->provider);
  agentrt__term_str(&resp->credential);
  for (size_t i = 0; i < resp->ncontent; i++) {
    agentrt_llm_part_t *p = &resp->content[i];
    agentrt__term_str(&p->id);
    agentrt__term_str(&p->name);
    agentrt__term_str(&p->text);
    agentrt__term_bytes(&p->arguments);
  }
  resp->mem_ = out.body;
  return AGENTRT_STATUS_OK;
}

#endif /* AGENTRT_H */
