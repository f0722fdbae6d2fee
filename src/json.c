/* json.c: a strict JSON parser for safetensors headers, and the string buffer
 * the safetensors and .npy writers build their headers in.  The header comes from an
 * untrusted file, so the parser never reads past the end it is given, bounds its nesting
 * depth (no stack overflow from "[[[[..."), refuses NULs in strings (names are C strings
 * further on) and unpaired surrogates, and keeps integers exact: a number is J_INT only
 * when it is an integer literal that fits in int64, which is all a header may hold.
 */
#include "serialize_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_JSON_DEPTH 64

/* ---------------------------------------------------------------- parsing */

typedef struct {
    const char *p, *start, *end;
    char err[160];
} jparser;

void dp_json_free(jval *v)
{
    if (!v) return;
    if (v->type == J_STR) free(v->s);
    if (v->type == J_ARR || v->type == J_OBJ) {
        for (int64_t k = 0; k < v->n; k++) {
            dp_json_free(&v->items[k]);
            if (v->keys) free(v->keys[k]);
        }
        free(v->items);
        free(v->keys);
        free(v->key_lens);
    }
    memset(v, 0, sizeof *v);
}

static int jfail(jparser *ps, const char *what)
{
    if (!ps->err[0])
        snprintf(ps->err, sizeof ps->err, "%s at byte %ld of the header", what,
                 (long)(ps->p - ps->start));
    return -1;
}

static void jskip_ws(jparser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int jparse_hex4(jparser *ps, unsigned *out)
{
    if (ps->end - ps->p < 4) return jfail(ps, "truncated \\u escape");
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        int h = hexval(ps->p[k]);
        if (h < 0) return jfail(ps, "bad \\u escape");
        v = v * 16 + (unsigned)h;
    }
    ps->p += 4;
    *out = v;
    return 0;
}

/* Parses a string (ps->p at the opening quote) into a malloc'd UTF-8 buffer. */
static int jparse_string(jparser *ps, char **out, size_t *out_len)
{
    ps->p++;  /* opening quote */
    size_t cap = 16, len = 0;
    char *buf = malloc(cap);
    if (!buf) return jfail(ps, "out of memory");
    for (;;) {
        if (ps->p >= ps->end) { free(buf); return jfail(ps, "unterminated string"); }
        unsigned char c = (unsigned char)*ps->p;
        char tmp[4];
        size_t tn = 0;
        if (c == '"') { ps->p++; break; }
        if (c < 0x20) { free(buf); return jfail(ps, "control character in string"); }
        if (c != '\\') {
            tmp[0] = (char)c; tn = 1; ps->p++;
        } else {
            ps->p++;
            if (ps->p >= ps->end) { free(buf); return jfail(ps, "unterminated string"); }
            char e = *ps->p++;
            switch (e) {
            case '"': tmp[0] = '"'; tn = 1; break;
            case '\\': tmp[0] = '\\'; tn = 1; break;
            case '/': tmp[0] = '/'; tn = 1; break;
            case 'b': tmp[0] = '\b'; tn = 1; break;
            case 'f': tmp[0] = '\f'; tn = 1; break;
            case 'n': tmp[0] = '\n'; tn = 1; break;
            case 'r': tmp[0] = '\r'; tn = 1; break;
            case 't': tmp[0] = '\t'; tn = 1; break;
            case 'u': {
                unsigned cp;
                if (jparse_hex4(ps, &cp) != 0) { free(buf); return -1; }
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    unsigned lo;
                    if (ps->end - ps->p < 2 || ps->p[0] != '\\' || ps->p[1] != 'u') {
                        free(buf); return jfail(ps, "unpaired surrogate in \\u escape");
                    }
                    ps->p += 2;
                    if (jparse_hex4(ps, &lo) != 0) { free(buf); return -1; }
                    if (lo < 0xDC00 || lo > 0xDFFF) { free(buf); return jfail(ps, "unpaired surrogate in \\u escape"); }
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    free(buf); return jfail(ps, "unpaired surrogate in \\u escape");
                }
                if (cp == 0) { free(buf); return jfail(ps, "NUL character in string"); }
                if (cp < 0x80) { tmp[0] = (char)cp; tn = 1; }
                else if (cp < 0x800) { tmp[0] = (char)(0xC0 | (cp >> 6)); tmp[1] = (char)(0x80 | (cp & 0x3F)); tn = 2; }
                else if (cp < 0x10000) {
                    tmp[0] = (char)(0xE0 | (cp >> 12)); tmp[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
                    tmp[2] = (char)(0x80 | (cp & 0x3F)); tn = 3;
                } else {
                    tmp[0] = (char)(0xF0 | (cp >> 18)); tmp[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
                    tmp[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); tmp[3] = (char)(0x80 | (cp & 0x3F)); tn = 4;
                }
                break;
            }
            default: free(buf); return jfail(ps, "bad escape in string");
            }
        }
        if (len + tn + 1 > cap) {
            while (len + tn + 1 > cap) cap *= 2;
            char *nb = realloc(buf, cap);
            if (!nb) { free(buf); return jfail(ps, "out of memory"); }
            buf = nb;
        }
        memcpy(buf + len, tmp, tn);
        len += tn;
    }
    buf[len] = 0;
    *out = buf;
    *out_len = len;
    return 0;
}

static int jparse_number(jparser *ps, jval *v)
{
    const char *s = ps->p;
    bool neg = false, integral = true;
    if (ps->p < ps->end && *ps->p == '-') { neg = true; ps->p++; }
    if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9') return jfail(ps, "bad number");
    if (*ps->p == '0' && ps->p + 1 < ps->end && ps->p[1] >= '0' && ps->p[1] <= '9')
        return jfail(ps, "bad number (leading zero)");
    uint64_t mag = 0;
    bool overflow = false;
    while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
        unsigned d = (unsigned)(*ps->p - '0');
        if (__builtin_mul_overflow(mag, 10, &mag) || __builtin_add_overflow(mag, d, &mag)) overflow = true;
        ps->p++;
    }
    if (ps->p < ps->end && *ps->p == '.') {
        integral = false; ps->p++;
        if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9') return jfail(ps, "bad number");
        while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') ps->p++;
    }
    if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
        integral = false; ps->p++;
        if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-')) ps->p++;
        if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9') return jfail(ps, "bad number");
        while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') ps->p++;
    }
    if (integral && !overflow && (neg ? mag <= (uint64_t)INT64_MAX + 1 : mag <= (uint64_t)INT64_MAX)) {
        v->type = J_INT;
        v->i = neg ? (int64_t)(0 - mag) : (int64_t)mag;
    } else {
        (void)s;
        v->type = J_REAL;   /* its value is never needed: only integers are valid here */
    }
    return 0;
}

static int jparse_value(jparser *ps, jval *v, int depth);

/* realloc(p, n * size), or NULL (p untouched) when that overflows. */
static void *realloc_array(void *p, int64_t n, size_t size)
{
    size_t bytes;
    if (n < 0 || __builtin_mul_overflow((size_t)n, size, &bytes)) return NULL;
    return realloc(p, bytes);
}

static int jappend(jparser *ps, jval *v, int64_t *cap, bool with_keys)
{
    if (v->n < *cap) return 0;
    int64_t nc;
    if (__builtin_mul_overflow(*cap ? *cap : 2, 2, &nc)) return jfail(ps, "out of memory");
    jval *ni = realloc_array(v->items, nc, sizeof *ni);
    if (!ni) return jfail(ps, "out of memory");
    v->items = ni;
    if (with_keys) {
        char **nk = realloc_array(v->keys, nc, sizeof *nk);
        if (!nk) return jfail(ps, "out of memory");
        v->keys = nk;
        size_t *nl = realloc_array(v->key_lens, nc, sizeof *nl);
        if (!nl) return jfail(ps, "out of memory");
        v->key_lens = nl;
    }
    *cap = nc;
    return 0;
}

static int jparse_container(jparser *ps, jval *v, int depth, bool object)
{
    char close = object ? '}' : ']';
    v->type = object ? J_OBJ : J_ARR;
    int64_t cap = 0;
    ps->p++;
    jskip_ws(ps);
    if (ps->p < ps->end && *ps->p == close) { ps->p++; return 0; }
    for (;;) {
        if (jappend(ps, v, &cap, object) != 0) return -1;
        jval *item = &v->items[v->n];
        memset(item, 0, sizeof *item);
        if (object) {
            jskip_ws(ps);
            if (ps->p >= ps->end || *ps->p != '"') return jfail(ps, "expected a string key");
            char *key; size_t klen;
            if (jparse_string(ps, &key, &klen) != 0) return -1;
            v->keys[v->n] = key;
            v->key_lens[v->n] = klen;
            v->n++;   /* counted now so that dp_json_free releases the key */
            jskip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') return jfail(ps, "expected ':'");
            ps->p++;
            if (jparse_value(ps, item, depth + 1) != 0) return -1;
        } else {
            v->n++;
            if (jparse_value(ps, item, depth + 1) != 0) return -1;
        }
        jskip_ws(ps);
        if (ps->p >= ps->end) return jfail(ps, object ? "unterminated object" : "unterminated array");
        if (*ps->p == ',') { ps->p++; continue; }
        if (*ps->p == close) { ps->p++; return 0; }
        return jfail(ps, object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static int jparse_value(jparser *ps, jval *v, int depth)
{
    memset(v, 0, sizeof *v);
    if (depth > MAX_JSON_DEPTH) return jfail(ps, "nesting too deep");
    jskip_ws(ps);
    if (ps->p >= ps->end) return jfail(ps, "unexpected end");
    char c = *ps->p;
    if (c == '{') return jparse_container(ps, v, depth, true);
    if (c == '[') return jparse_container(ps, v, depth, false);
    if (c == '"') { v->type = J_STR; return jparse_string(ps, &v->s, &v->len); }
    if (c == '-' || (c >= '0' && c <= '9')) return jparse_number(ps, v);
    size_t left = (size_t)(ps->end - ps->p);
    if (left >= 4 && memcmp(ps->p, "true", 4) == 0) { v->type = J_BOOL; v->b = true; ps->p += 4; return 0; }
    if (left >= 5 && memcmp(ps->p, "false", 5) == 0) { v->type = J_BOOL; ps->p += 5; return 0; }
    if (left >= 4 && memcmp(ps->p, "null", 4) == 0) { v->type = J_NULL; ps->p += 4; return 0; }
    return jfail(ps, "unexpected character");
}

int dp_json_parse(const char *s, size_t n, jval *out, char *err, size_t errn)
{
    jparser ps = { s, s, s + n, {0} };
    int rc = jparse_value(&ps, out, 0);
    if (rc == 0) {
        jskip_ws(&ps);
        if (ps.p != ps.end) rc = jfail(&ps, "unexpected text after the JSON object");
    }
    if (rc != 0) {
        dp_json_free(out);
        snprintf(err, errn, "%s", ps.err);
    }
    return rc;
}

const jval *dp_json_get(const jval *obj, const char *key)
{
    for (int64_t k = 0; k < obj->n; k++)
        if (strcmp(obj->keys[k], key) == 0 && strlen(key) == obj->key_lens[k]) return &obj->items[k];
    return NULL;
}

/* ---------------------------------------------------------------- writing */

int dp_sb_add(dp_sbuf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (b->len + n + 1 > nc) nc *= 2;
        char *ns = realloc(b->s, nc);
        if (!ns) return -1;
        b->s = ns; b->cap = nc;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
    return 0;
}

int dp_sb_printf(dp_sbuf *b, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp) return -1;
    return dp_sb_add(b, tmp, (size_t)n);
}

int dp_sb_json_string(dp_sbuf *b, const char *s)
{
    if (dp_sb_add(b, "\"", 1) != 0) return -1;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            char e[2] = { '\\', (char)*p };
            if (dp_sb_add(b, e, 2) != 0) return -1;
        } else if (*p < 0x20) {
            if (dp_sb_printf(b, "\\u%04x", *p) != 0) return -1;
        } else if (dp_sb_add(b, (const char *)p, 1) != 0) {
            return -1;
        }
    }
    return dp_sb_add(b, "\"", 1);
}
