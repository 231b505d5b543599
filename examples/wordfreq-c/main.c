// wordfreq counts the words of its input, keeps a running total of every
// word it has ever counted in durable kv state, and outputs a JSON summary:
//
//   {"words":N,"distinct":M,"top":[["the",5],...],"total_words":T}
//
// A word is a maximal run of ASCII letters and digits and of non-ASCII
// characters; ASCII letters are lowercased. The input must be UTF-8.
//
// The build constraint below keeps the go command from taking this file for
// cgo source of the directory's Go test; clang reads it as a comment.
//
//go:build ignore

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentrt.h"

#define TOP 10
#define TOTAL_KEY "total_words"

// A word and how often it occurs. Words point into the lowercased copy of
// the input.
typedef struct {
  const char *word;
  size_t len;
  uint64_t count;
} entry;

// An open-addressing hash table of entries; a slot with word == NULL is
// free.
static entry *table;
static size_t nslots, distinct;

static uint64_t fnv1a(const char *s, size_t n) {
  uint64_t h = 14695981039346656037u;
  for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211u;
  return h;
}

static entry *slot(entry *t, size_t size, const char *w, size_t n) {
  size_t i = fnv1a(w, n) & (size - 1);
  while (t[i].word && !(t[i].len == n && memcmp(t[i].word, w, n) == 0)) i = (i + 1) & (size - 1);
  return &t[i];
}

static bool count(const char *w, size_t n) {
  if (2 * (distinct + 1) > nslots) { // grow at half full
    size_t size = nslots ? 2 * nslots : 256;
    entry *t = calloc(size, sizeof *t);
    if (!t) return false;
    for (size_t i = 0; i < nslots; i++)
      if (table[i].word) *slot(t, size, table[i].word, table[i].len) = table[i];
    free(table);
    table = t;
    nslots = size;
  }
  entry *e = slot(table, nslots, w, n);
  if (!e->word) {
    *e = (entry){w, n, 0};
    distinct++;
  }
  e->count++;
  return true;
}

// by_count orders entries by count, most frequent first, then by word in
// byte order, so that ties come out the same on every run.
static int by_count(const void *a, const void *b) {
  const entry *x = a, *y = b;
  if (x->count != y->count) return x->count < y->count ? 1 : -1;
  size_t n = x->len < y->len ? x->len : y->len;
  int c = memcmp(x->word, y->word, n);
  return c ? c : (x->len > y->len) - (x->len < y->len);
}

static bool word_byte(uint8_t c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 0x80;
}

// utf8_valid checks the shape of every sequence: a lead byte and the
// continuation bytes it announces (JSON output must be UTF-8).
static bool utf8_valid(const uint8_t *s, size_t n) {
  for (size_t i = 0; i < n;) {
    size_t k = s[i] < 0x80 ? 0 : s[i] >= 0xc2 && s[i] <= 0xdf ? 1 : s[i] >= 0xe0 && s[i] <= 0xef ? 2 : s[i] >= 0xf0 && s[i] <= 0xf4 ? 3 : 9;
    if (k == 9 || n - i - 1 < k) return false;
    for (size_t j = 1; j <= k; j++)
      if ((s[i + j] & 0xc0) != 0x80) return false;
    i += k + 1;
  }
  return true;
}

// fail logs why the run failed and ends it with exit status 1.
static int fail(const char *what, agentrt_status_t st) {
  agentrt_logf(AGENTRT_LEVEL_ERROR, "%s: %s: %s", what, agentrt_status_name(st), agentrt_errmsg());
  return 1;
}

// A growing output buffer.
typedef struct {
  char *buf;
  size_t len, cap;
} strbuf;

__attribute__((format(printf, 2, 3))) static bool put(strbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) return false;
  if (b->len + (size_t)n + 1 > b->cap) {
    size_t cap = 2 * (b->len + (size_t)n + 1);
    char *p = realloc(b->buf, cap);
    if (!p) return false;
    b->buf = p;
    b->cap = cap;
  }
  va_start(ap, fmt);
  vsnprintf(b->buf + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
  return true;
}

int main(void) {
  agentrt_buf_t input;
  agentrt_status_t st = agentrt_input(&input);
  if (st) return fail("reading the input", st);
  if (!utf8_valid(input.data, input.len)) {
    agentrt_log(AGENTRT_LEVEL_ERROR, "the input is not UTF-8 text");
    return 1;
  }

  char *text = malloc(input.len + 1);
  if (!text) return fail("copying the input", AGENTRT_STATUS_SDK_NOMEM);
  for (size_t i = 0; i <= input.len; i++) {
    char c = (char)input.data[i];
    text[i] = c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
  }
  uint64_t words = 0;
  for (size_t i = 0; i < input.len;) {
    if (!word_byte((uint8_t)text[i])) {
      i++;
      continue;
    }
    size_t start = i;
    while (i < input.len && word_byte((uint8_t)text[i])) i++;
    if (!count(text + start, i - start)) return fail("counting", AGENTRT_STATUS_SDK_NOMEM);
    words++;
  }

  // The running total lives in kv under TOTAL_KEY, as decimal text. The
  // first run finds no key.
  uint64_t total = 0;
  agentrt_buf_t prev;
  st = agentrt_kv_get(TOTAL_KEY, &prev);
  if (st == AGENTRT_STATUS_OK) {
    char *end;
    total = strtoull((const char *)prev.data, &end, 10);
    // strtoull also takes a sign and leading space; the key holds digits.
    bool bad = prev.data[0] < '0' || prev.data[0] > '9' || end != (const char *)prev.data + prev.len;
    agentrt_buf_free(&prev);
    if (bad) {
      agentrt_log(AGENTRT_LEVEL_ERROR, "kv key " TOTAL_KEY " does not hold a decimal number");
      return 1;
    }
  } else if (st != AGENTRT_STATUS_NOT_FOUND) {
    return fail("reading " TOTAL_KEY, st);
  }
  total += words;
  char num[24];
  int n = snprintf(num, sizeof num, "%llu", (unsigned long long)total);
  st = agentrt_kv_put(TOTAL_KEY, num, (size_t)n);
  if (st) return fail("writing " TOTAL_KEY, st);

  // Compact the table into its first `distinct` slots and sort them.
  size_t m = 0;
  for (size_t i = 0; i < nslots; i++)
    if (table[i].word) table[m++] = table[i];
  qsort(table, m, sizeof *table, by_count);

  agentrt_logf(AGENTRT_LEVEL_INFO, "counted %llu words (%zu distinct); %llu in total", (unsigned long long)words,
               distinct, (unsigned long long)total);

  // Words need no JSON escaping: they hold no quote, backslash or control
  // character, and the input is valid UTF-8.
  strbuf out = {0};
  bool ok = put(&out, "{\"words\":%llu,\"distinct\":%zu,\"top\":[", (unsigned long long)words, distinct);
  for (size_t i = 0; ok && i < m && i < TOP; i++)
    ok = put(&out, "%s[\"%.*s\",%llu]", i ? "," : "", (int)table[i].len, table[i].word,
             (unsigned long long)table[i].count);
  ok = ok && put(&out, "],\"total_words\":%llu}", (unsigned long long)total);
  if (!ok) return fail("formatting the output", AGENTRT_STATUS_SDK_NOMEM);
  st = agentrt_set_output(out.buf, out.len);
  if (st) return fail("setting the output", st);
  return 0;
}
