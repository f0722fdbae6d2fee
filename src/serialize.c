/* serialize.c: safetensors and NumPy .npy files (see serialize.h).
 *
 * Layout of this file: reading and writing files, a strict JSON parser (safetensors
 * headers), the safetensors reader and writer, then the .npy reader and writer.  Every
 * length read from a file is checked against the file's real size before it is used.
 */
#include "serialize.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A header larger than this is refused before it is read (the safetensors package uses
 * the same bound). */
#define MAX_HEADER_BYTES (100u * 1024u * 1024u)
#define MAX_JSON_DEPTH 64

/* ================================================================ reading and writing files */

/* Reads exactly n bytes at offset; -1 with errno set (0 for a short file). */
static int read_at(int fd, void *buf, size_t n, off_t offset)
{
    char *p = buf;
    while (n > 0) {
        ssize_t r = pread(fd, p, n, offset);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (r == 0) { errno = 0; return -1; }
        p += r; n -= (size_t)r; offset += r;
    }
    return 0;
}

static int write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w; n -= (size_t)w;
    }
    return 0;
}

static int open_for_reading(const char *kind, const char *path, int64_t *size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return dp_error("cannot open %s file '%s': %s", kind, path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return dp_error("cannot read %s file '%s': %s", kind, path, strerror(e));
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return dp_error("cannot read %s file '%s': it is a directory", kind, path);
    }
    *size = (int64_t)st.st_size;
    return fd;
}

/* A file being written under a temporary name next to its final name. */
typedef struct {
    int fd;
    char *tmp;
    const char *path;
} out_file;

static int out_open(out_file *f, const char *kind, const char *path)
{
    static unsigned counter;
    f->fd = -1; f->tmp = NULL; f->path = path;
    size_t n = strlen(path) + 64;
    f->tmp = malloc(n);
    if (!f->tmp) return dp_error("out of memory writing %s file '%s'", kind, path);
    for (int attempt = 0; attempt < 100; attempt++) {
        unsigned c = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
        snprintf(f->tmp, n, "%s.tmp%ld.%u", path, (long)getpid(), c);
        f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (f->fd >= 0) return 0;
        if (errno != EEXIST) break;
    }
    int e = errno;
    free(f->tmp); f->tmp = NULL;
    return dp_error("cannot write %s file '%s': %s", kind, path, strerror(e));
}

static void out_abandon(out_file *f)
{
    if (f->fd >= 0) close(f->fd);
    if (f->tmp) { unlink(f->tmp); free(f->tmp); }
    f->fd = -1; f->tmp = NULL;
}

static int out_write(out_file *f, const char *kind, const void *buf, size_t n)
{
    if (write_all(f->fd, buf, n) != 0) {
        int e = errno;
        out_abandon(f);
        return dp_error("cannot write %s file '%s': %s", kind, f->path, strerror(e));
    }
    return 0;
}

/* Flushes to disk and renames the temporary file to the final name. */
static int out_commit(out_file *f, const char *kind)
{
    if (fsync(f->fd) != 0 && errno != EINVAL && errno != EROFS) {
        int e = errno;
        out_abandon(f);
        return dp_error("cannot write %s file '%s': %s", kind, f->path, strerror(e));
    }
    if (close(f->fd) != 0) {
        int e = errno;
        f->fd = -1;
        out_abandon(f);
        return dp_error("cannot write %s file '%s': %s", kind, f->path, strerror(e));
    }
    f->fd = -1;
    if (rename(f->tmp, f->path) != 0) {
        int e = errno;
        out_abandon(f);
        return dp_error("cannot write %s file '%s': %s", kind, f->path, strerror(e));
    }
    free(f->tmp); f->tmp = NULL;
    return 0;
}

/* Writes a tensor's elements in row-major order (from any device or layout). */
static int out_write_tensor(out_file *f, const char *kind, dp_tensor *t)
{
    int64_t n = dp_numel(t);
    size_t bytes = (size_t)n * dp_dtype_size(t->dtype);
    if (bytes == 0) return 0;
    if (t->device.type == DP_DEVICE_CPU && dp_is_contiguous(t))
        return out_write(f, kind, dp_data(t), bytes);
    void *buf = malloc(bytes);
    if (!buf) {
        out_abandon(f);
        return dp_error("out of memory writing %s file '%s' (%zu bytes)", kind, f->path, bytes);
    }
    if (dp_to_host(t, buf, t->dtype, n) != 0) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", dp_last_error());
        free(buf);
        out_abandon(f);
        return dp_error("cannot write %s file '%s': %s", kind, f->path, msg);
    }
    int rc = out_write(f, kind, buf, bytes);
    free(buf);
    return rc;
}

/* numel of a shape, or -1 when it overflows int64. */
static int64_t shape_numel(int ndim, const int64_t *sizes)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (sizes[i] < 0) return -1;
        if (sizes[i] != 0 && n > INT64_MAX / sizes[i]) return -1;
        n *= sizes[i];
    }
    return n;
}

/* Bool storage holds 0 or 1; a file may hold any byte. */
static void normalize_bools(dp_tensor *t)
{
    if (t->dtype != DP_BOOL) return;
    unsigned char *p = dp_data(t);
    int64_t n = dp_numel(t);
    for (int64_t i = 0; i < n; i++) p[i] = p[i] != 0;
}

/* ================================================================ JSON */

typedef enum { J_NULL, J_BOOL, J_INT, J_REAL, J_STR, J_ARR, J_OBJ } jtype;

typedef struct jval {
    jtype type;
    bool b;
    int64_t i;          /* J_INT: an integer literal that fits in int64 */
    char *s;            /* J_STR (NUL-terminated; len below) */
    size_t len;
    int64_t n;          /* J_ARR, J_OBJ: number of items */
    struct jval *items;
    char **keys;        /* J_OBJ */
    size_t *key_lens;
} jval;

typedef struct {
    const char *p, *start, *end;
    char err[160];
} jparser;

static void jfree(jval *v)
{
    if (!v) return;
    if (v->type == J_STR) free(v->s);
    if (v->type == J_ARR || v->type == J_OBJ) {
        for (int64_t k = 0; k < v->n; k++) {
            jfree(&v->items[k]);
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
        if (mag > (UINT64_MAX - d) / 10) overflow = true; else mag = mag * 10 + d;
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

static int jappend(jparser *ps, jval *v, int64_t *cap, bool with_keys)
{
    if (v->n < *cap) return 0;
    int64_t nc = *cap ? *cap * 2 : 4;
    jval *ni = realloc(v->items, (size_t)nc * sizeof *ni);
    if (!ni) return jfail(ps, "out of memory");
    v->items = ni;
    if (with_keys) {
        char **nk = realloc(v->keys, (size_t)nc * sizeof *nk);
        if (!nk) return jfail(ps, "out of memory");
        v->keys = nk;
        size_t *nl = realloc(v->key_lens, (size_t)nc * sizeof *nl);
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
            v->n++;   /* counted now so that jfree releases the key */
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

static const jval *jget(const jval *obj, const char *key)
{
    for (int64_t k = 0; k < obj->n; k++)
        if (strcmp(obj->keys[k], key) == 0 && strlen(key) == obj->key_lens[k]) return &obj->items[k];
    return NULL;
}

/* Appends to a growing string buffer; -1 on out of memory. */
typedef struct {
    char *s;
    size_t len, cap;
} sbuf;

static int sb_add(sbuf *b, const char *s, size_t n)
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

static int sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int sb_printf(sbuf *b, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp) return -1;
    return sb_add(b, tmp, (size_t)n);
}

static int sb_json_string(sbuf *b, const char *s)
{
    if (sb_add(b, "\"", 1) != 0) return -1;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            char e[2] = { '\\', (char)*p };
            if (sb_add(b, e, 2) != 0) return -1;
        } else if (*p < 0x20) {
            if (sb_printf(b, "\\u%04x", *p) != 0) return -1;
        } else if (sb_add(b, (const char *)p, 1) != 0) {
            return -1;
        }
    }
    return sb_add(b, "\"", 1);
}

/* ================================================================ safetensors */

static const struct { const char *name; dp_dtype dtype; } st_dtypes[] = {
    { "F32", DP_FLOAT32 }, { "F64", DP_FLOAT64 }, { "I64", DP_INT64 }, { "BOOL", DP_BOOL },
};

static const char *st_dtype_name(dp_dtype dt)
{
    for (size_t k = 0; k < sizeof st_dtypes / sizeof st_dtypes[0]; k++)
        if (st_dtypes[k].dtype == dt) return st_dtypes[k].name;
    return NULL;
}

void dp_safetensors_free(dp_safetensors *st)
{
    if (!st) return;
    for (int64_t k = 0; k < st->ntensors; k++) {
        free(st->tensors[k].name);
        dp_tensor_release(st->tensors[k].tensor);
    }
    free(st->tensors);
    for (int64_t k = 0; k < st->nmeta; k++) {
        free(st->meta_keys[k]);
        free(st->meta_values[k]);
    }
    free(st->meta_keys);
    free(st->meta_values);
    memset(st, 0, sizeof *st);
}

typedef struct {
    int64_t entry;          /* index into the header object */
    dp_dtype dtype;
    int ndim;
    int64_t sizes[DP_MAX_DIMS];
    int64_t begin, end;
} st_info;

static int cmp_info_begin(const void *a, const void *b)
{
    const st_info *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* Reads a JSON array of non-negative integers into out[0..max). */
static int st_int_array(const char *path, const char *name, const char *field, const jval *v,
                        int max, int64_t *out, int *count)
{
    if (!v || v->type != J_ARR)
        return dp_error("safetensors file '%s': tensor '%s' has no '%s' list in the header", path, name, field);
    if (v->n > max)
        return dp_error("safetensors file '%s': tensor '%s' has %ld entries in '%s' (at most %d)",
                        path, name, (long)v->n, field, max);
    for (int64_t k = 0; k < v->n; k++) {
        if (v->items[k].type != J_INT || v->items[k].i < 0)
            return dp_error("safetensors file '%s': tensor '%s': '%s' must hold non-negative integers",
                            path, name, field);
        out[k] = v->items[k].i;
    }
    *count = (int)v->n;
    return 0;
}

/* Checks one header entry and fills info. */
static int st_check_entry(const char *path, const char *name, const jval *e, int64_t data_size, st_info *info)
{
    if (e->type != J_OBJ)
        return dp_error("safetensors file '%s': the header entry for '%s' is not an object", path, name);
    const jval *dt = jget(e, "dtype");
    if (!dt || dt->type != J_STR)
        return dp_error("safetensors file '%s': tensor '%s' has no dtype string in the header", path, name);
    bool found = false;
    for (size_t k = 0; k < sizeof st_dtypes / sizeof st_dtypes[0]; k++)
        if (strcmp(dt->s, st_dtypes[k].name) == 0) { info->dtype = st_dtypes[k].dtype; found = true; }
    if (!found)
        return dp_error("safetensors file '%s': tensor '%s' has dtype '%.32s', which dplua does not read "
                        "(it reads F32, F64, I64 and BOOL)", path, name, dt->s);
    if (st_int_array(path, name, "shape", jget(e, "shape"), DP_MAX_DIMS, info->sizes, &info->ndim) != 0)
        return -1;
    int64_t off[2]; int noff;
    const jval *ov = jget(e, "data_offsets");
    if (ov && ov->type == J_ARR && ov->n != 2)
        return dp_error("safetensors file '%s': tensor '%s': data_offsets must be [begin, end]", path, name);
    if (st_int_array(path, name, "data_offsets", ov, 2, off, &noff) != 0) return -1;
    info->begin = off[0]; info->end = off[1];
    if (info->begin > info->end)
        return dp_error("safetensors file '%s': tensor '%s': data_offsets [%ld, %ld] end before they begin",
                        path, name, (long)info->begin, (long)info->end);
    if (info->end > data_size)
        return dp_error("safetensors file '%s': tensor '%s': data_offsets [%ld, %ld] lie outside the %ld bytes "
                        "of data in the file (truncated?)", path, name, (long)info->begin, (long)info->end,
                        (long)data_size);
    int64_t numel = shape_numel(info->ndim, info->sizes);
    int64_t esize = (int64_t)dp_dtype_size(info->dtype);
    char shp[128];
    dp_shape_str(info->ndim, info->sizes, shp, sizeof shp);
    if (numel < 0 || numel > INT64_MAX / esize || numel * esize != info->end - info->begin)
        return dp_error("safetensors file '%s': tensor '%s' of shape %s and dtype %s needs %s bytes but its "
                        "data_offsets [%ld, %ld] span %ld", path, name, shp, dt->s,
                        numel < 0 || numel > INT64_MAX / esize ? "too many" : "a different number of",
                        (long)info->begin, (long)info->end, (long)(info->end - info->begin));
    return 0;
}

static int st_fail(dp_safetensors *out, jval *root, int fd, st_info *infos)
{
    jfree(root);
    free(infos);
    if (fd >= 0) close(fd);
    dp_safetensors_free(out);
    return -1;
}

int dp_safetensors_load(const char *path, dp_safetensors *out)
{
    memset(out, 0, sizeof *out);
    int64_t fsize;
    int fd = open_for_reading("safetensors", path, &fsize);
    if (fd < 0) return -1;
    jval root = {0};
    st_info *infos = NULL;
    unsigned char head[8];
    if (fsize < 8 || read_at(fd, head, 8, 0) != 0) {
        dp_error("safetensors file '%s' is too short (%ld bytes): a safetensors file starts with an "
                 "8-byte header length", path, (long)fsize);
        return st_fail(out, &root, fd, infos);
    }
    if (memcmp(head, "\x93NUMPY", 6) == 0) {
        dp_error("'%s' is a NumPy .npy file, not safetensors (read it with torch.load_npy)", path);
        return st_fail(out, &root, fd, infos);
    }
    if (memcmp(head, "PK\x03\x04", 4) == 0 || head[0] == 0x80) {
        dp_error("'%s' is not a safetensors file (it looks like a Python pickle or zip archive, "
                 "as PyTorch's torch.save writes)", path);
        return st_fail(out, &root, fd, infos);
    }
    uint64_t hlen = 0;
    for (int k = 7; k >= 0; k--) hlen = (hlen << 8) | head[k];
    if (hlen > (uint64_t)(fsize - 8)) {
        dp_error("safetensors file '%s': the header length %llu is more than the %ld bytes that follow it "
                 "(truncated, or not a safetensors file)", path, (unsigned long long)hlen, (long)(fsize - 8));
        return st_fail(out, &root, fd, infos);
    }
    if (hlen > MAX_HEADER_BYTES) {
        dp_error("safetensors file '%s': the header length %llu is larger than the %u bytes allowed",
                 path, (unsigned long long)hlen, MAX_HEADER_BYTES);
        return st_fail(out, &root, fd, infos);
    }
    if (hlen < 2) {
        dp_error("safetensors file '%s': the header is %llu bytes long, too short for a JSON object",
                 path, (unsigned long long)hlen);
        return st_fail(out, &root, fd, infos);
    }
    char *hdr = malloc(hlen);
    if (!hdr) {
        dp_error("safetensors file '%s': out of memory reading a %llu-byte header", path, (unsigned long long)hlen);
        return st_fail(out, &root, fd, infos);
    }
    if (read_at(fd, hdr, hlen, 8) != 0) {
        dp_error("safetensors file '%s': cannot read the header: %s", path, errno ? strerror(errno) : "file too short");
        free(hdr);
        return st_fail(out, &root, fd, infos);
    }
    jparser ps = { hdr, hdr, hdr + hlen, {0} };
    jskip_ws(&ps);
    if (ps.p >= ps.end || *ps.p != '{') {
        dp_error("'%s' is not a safetensors file: its header does not start with a JSON object", path);
        free(hdr);
        return st_fail(out, &root, fd, infos);
    }
    if (jparse_value(&ps, &root, 0) != 0) {
        dp_error("safetensors file '%s': the header is not valid JSON: %s", path, ps.err);
        free(hdr);
        return st_fail(out, &root, fd, infos);
    }
    jskip_ws(&ps);
    if (ps.p != ps.end) {
        jfail(&ps, "unexpected text after the JSON object");
        dp_error("safetensors file '%s': the header is not valid JSON: %s", path, ps.err);
        free(hdr);
        return st_fail(out, &root, fd, infos);
    }
    free(hdr);

    int64_t data_start = 8 + (int64_t)hlen, data_size = fsize - data_start;
    infos = calloc((size_t)root.n + 1, sizeof *infos);
    if (!infos) { dp_error("out of memory"); return st_fail(out, &root, fd, infos); }
    int64_t nt = 0;
    for (int64_t k = 0; k < root.n; k++) {
        const char *name = root.keys[k];
        if (strlen(name) != root.key_lens[k]) {
            dp_error("safetensors file '%s': a tensor name contains a NUL character", path);
            return st_fail(out, &root, fd, infos);
        }
        for (int64_t j = 0; j < k; j++)
            if (strcmp(root.keys[j], name) == 0) {
                dp_error("safetensors file '%s': the header names '%s' twice", path, name);
                return st_fail(out, &root, fd, infos);
            }
        if (strcmp(name, "__metadata__") == 0) {
            const jval *m = &root.items[k];
            if (m->type != J_OBJ) {
                dp_error("safetensors file '%s': __metadata__ must be an object of strings", path);
                return st_fail(out, &root, fd, infos);
            }
            out->meta_keys = calloc((size_t)m->n + 1, sizeof(char *));
            out->meta_values = calloc((size_t)m->n + 1, sizeof(char *));
            if (!out->meta_keys || !out->meta_values) { dp_error("out of memory"); return st_fail(out, &root, fd, infos); }
            for (int64_t j = 0; j < m->n; j++) {
                if (m->items[j].type != J_STR || strlen(m->keys[j]) != m->key_lens[j] ||
                    strlen(m->items[j].s) != m->items[j].len) {
                    dp_error("safetensors file '%s': __metadata__ must map strings to strings (entry '%s' does not)",
                             path, m->keys[j]);
                    return st_fail(out, &root, fd, infos);
                }
                out->meta_keys[j] = strdup(m->keys[j]);
                out->meta_values[j] = strdup(m->items[j].s);
                out->nmeta = j + 1;
                if (!out->meta_keys[j] || !out->meta_values[j]) { dp_error("out of memory"); return st_fail(out, &root, fd, infos); }
            }
            continue;
        }
        infos[nt].entry = k;
        if (st_check_entry(path, name, &root.items[k], data_size, &infos[nt]) != 0)
            return st_fail(out, &root, fd, infos);
        nt++;
    }
    /* Overlapping byte ranges mean the header lies about where tensors are. */
    st_info *sorted = malloc(((size_t)nt + 1) * sizeof *sorted);
    if (!sorted) { dp_error("out of memory"); return st_fail(out, &root, fd, infos); }
    memcpy(sorted, infos, (size_t)nt * sizeof *sorted);
    qsort(sorted, (size_t)nt, sizeof *sorted, cmp_info_begin);
    for (int64_t k = 1; k < nt; k++) {
        if (sorted[k].begin < sorted[k - 1].end && sorted[k].begin < sorted[k].end) {
            dp_error("safetensors file '%s': the data of tensors '%s' [%ld, %ld] and '%s' [%ld, %ld] overlap",
                     path, root.keys[sorted[k - 1].entry], (long)sorted[k - 1].begin, (long)sorted[k - 1].end,
                     root.keys[sorted[k].entry], (long)sorted[k].begin, (long)sorted[k].end);
            free(sorted);
            return st_fail(out, &root, fd, infos);
        }
    }
    free(sorted);

    out->tensors = calloc((size_t)nt + 1, sizeof *out->tensors);
    if (!out->tensors) { dp_error("out of memory"); return st_fail(out, &root, fd, infos); }
    for (int64_t k = 0; k < nt; k++) {
        st_info *in = &infos[k];
        const char *name = root.keys[in->entry];
        dp_tensor *t = dp_empty(in->ndim, in->sizes, in->dtype, dp_cpu());
        if (!t) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", dp_last_error());
            dp_error("safetensors file '%s': cannot allocate tensor '%s': %s", path, name, msg);
            return st_fail(out, &root, fd, infos);
        }
        out->tensors[k].tensor = t;
        out->tensors[k].name = strdup(name);
        out->ntensors = k + 1;
        if (!out->tensors[k].name) { dp_error("out of memory"); return st_fail(out, &root, fd, infos); }
        size_t bytes = (size_t)(in->end - in->begin);
        if (bytes > 0 && read_at(fd, dp_data(t), bytes, (off_t)(data_start + in->begin)) != 0) {
            dp_error("safetensors file '%s': cannot read the data of tensor '%s': %s", path, name,
                     errno ? strerror(errno) : "file too short");
            return st_fail(out, &root, fd, infos);
        }
        normalize_bools(t);
    }
    jfree(&root);
    free(infos);
    close(fd);
    return 0;
}

/* Larger elements first, then by name (the safetensors package's order): with the data
 * section 8-byte aligned, every tensor's data is then aligned to its element size. */
static int cmp_named(const void *a, const void *b)
{
    const dp_named_tensor *const *x = a, *const *y = b;
    size_t sx = dp_dtype_size((*x)->tensor->dtype), sy = dp_dtype_size((*y)->tensor->dtype);
    if (sx != sy) return sx > sy ? -1 : 1;
    return strcmp((*x)->name, (*y)->name);
}

static int cmp_names(const void *a, const void *b)
{
    const dp_named_tensor *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

int dp_safetensors_save(const char *path, int64_t n, const dp_named_tensor *tensors,
                        int64_t nmeta, const char *const *meta_keys, const char *const *meta_values)
{
    const char *kind = "safetensors";
    const dp_named_tensor **order = malloc(((size_t)n + 1) * sizeof *order);
    if (!order) return dp_error("out of memory writing safetensors file '%s'", path);
    for (int64_t k = 0; k < n; k++) {
        if (!tensors[k].name || !tensors[k].tensor) {
            free(order);
            return dp_error("cannot write safetensors file '%s': entry %ld has no name or tensor", path, (long)k + 1);
        }
        if (strcmp(tensors[k].name, "__metadata__") == 0) {
            free(order);
            return dp_error("cannot write safetensors file '%s': '__metadata__' is reserved and cannot name a tensor", path);
        }
        if (!st_dtype_name(tensors[k].tensor->dtype)) {
            free(order);
            return dp_error("cannot write safetensors file '%s': tensor '%s' has an unsupported dtype", path, tensors[k].name);
        }
        order[k] = &tensors[k];
    }
    qsort(order, (size_t)n, sizeof *order, cmp_names);
    for (int64_t k = 1; k < n; k++)
        if (strcmp(order[k]->name, order[k - 1]->name) == 0) {
            int rc = dp_error("cannot write safetensors file '%s': the name '%s' is used twice", path, order[k]->name);
            free(order);
            return rc;
        }
    qsort(order, (size_t)n, sizeof *order, cmp_named);

    sbuf h = {0};
    int bad = sb_add(&h, "{", 1);
    if (nmeta > 0) {
        bad |= sb_add(&h, "\"__metadata__\":{", 16);
        for (int64_t k = 0; k < nmeta; k++) {
            if (k) bad |= sb_add(&h, ",", 1);
            bad |= sb_json_string(&h, meta_keys[k]);
            bad |= sb_add(&h, ":", 1);
            bad |= sb_json_string(&h, meta_values[k]);
        }
        bad |= sb_add(&h, "}", 1);
        if (n > 0) bad |= sb_add(&h, ",", 1);
    }
    int64_t offset = 0;
    for (int64_t k = 0; k < n && !bad; k++) {
        dp_tensor *t = order[k]->tensor;
        int64_t bytes = dp_numel(t) * (int64_t)dp_dtype_size(t->dtype);
        if (k) bad |= sb_add(&h, ",", 1);
        bad |= sb_json_string(&h, order[k]->name);
        bad |= sb_printf(&h, ":{\"dtype\":\"%s\",\"shape\":[", st_dtype_name(t->dtype));
        for (int d = 0; d < t->ndim; d++) bad |= sb_printf(&h, d ? ",%ld" : "%ld", (long)t->sizes[d]);
        bad |= sb_printf(&h, "],\"data_offsets\":[%ld,%ld]}", (long)offset, (long)(offset + bytes));
        offset += bytes;
    }
    bad |= sb_add(&h, "}", 1);
    /* The data starts 8-byte aligned, as the safetensors package writes it. */
    while (!bad && (h.len % 8) != 0) bad |= sb_add(&h, " ", 1);
    if (bad) {
        free(h.s); free(order);
        return dp_error("out of memory writing safetensors file '%s'", path);
    }
    unsigned char lenbuf[8];
    for (int k = 0; k < 8; k++) lenbuf[k] = (unsigned char)((uint64_t)h.len >> (8 * k));

    out_file f;
    if (out_open(&f, kind, path) != 0) { free(h.s); free(order); return -1; }
    int rc = out_write(&f, kind, lenbuf, 8);
    if (rc == 0) rc = out_write(&f, kind, h.s, h.len);
    for (int64_t k = 0; k < n && rc == 0; k++) rc = out_write_tensor(&f, kind, order[k]->tensor);
    if (rc == 0) rc = out_commit(&f, kind);
    free(h.s);
    free(order);
    return rc;
}

/* ================================================================ .npy */

static const struct { const char *descr; dp_dtype dtype; } npy_dtypes[] = {
    { "<f4", DP_FLOAT32 }, { "<f8", DP_FLOAT64 }, { "<i8", DP_INT64 }, { "|b1", DP_BOOL },
};

typedef struct {
    const char *p, *end;
    const char *path;
} pyparser;

static void py_ws(pyparser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')) ps->p++;
}

/* A quoted Python string literal without escapes, copied into out (truncated to n-1). */
static int py_string(pyparser *ps, char *out, size_t n)
{
    if (ps->p >= ps->end || (*ps->p != '\'' && *ps->p != '"')) return -1;
    char q = *ps->p++;
    size_t len = 0;
    while (ps->p < ps->end && *ps->p != q) {
        if (*ps->p == '\\' || *ps->p == '\n') return -1;
        if (len + 1 < n) out[len++] = *ps->p;
        ps->p++;
    }
    if (ps->p >= ps->end) return -1;
    ps->p++;
    out[len] = 0;
    return 0;
}

static int npy_fail(const char *path, const char *what)
{
    return dp_error("npy file '%s': malformed header (%s)", path, what);
}

/* Parses the header dict: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } */
static int npy_parse_header(const char *path, const char *hdr, size_t len, char *descr, size_t descr_n,
                            int *fortran, int *ndim, int64_t *sizes)
{
    pyparser ps = { hdr, hdr + len, path };
    bool have_descr = false, have_fortran = false, have_shape = false;
    py_ws(&ps);
    if (ps.p >= ps.end || *ps.p != '{') return npy_fail(path, "it does not start with '{'");
    ps.p++;
    for (;;) {
        py_ws(&ps);
        if (ps.p < ps.end && *ps.p == '}') { ps.p++; break; }
        char key[32];
        if (py_string(&ps, key, sizeof key) != 0) return npy_fail(path, "expected a quoted key");
        py_ws(&ps);
        if (ps.p >= ps.end || *ps.p != ':') return npy_fail(path, "expected ':' after a key");
        ps.p++;
        py_ws(&ps);
        if (strcmp(key, "descr") == 0) {
            if (py_string(&ps, descr, descr_n) != 0)
                return npy_fail(path, "'descr' is not a simple type string (structured arrays are not supported)");
            have_descr = true;
        } else if (strcmp(key, "fortran_order") == 0) {
            size_t left = (size_t)(ps.end - ps.p);
            if (left >= 4 && memcmp(ps.p, "True", 4) == 0) { *fortran = 1; ps.p += 4; }
            else if (left >= 5 && memcmp(ps.p, "False", 5) == 0) { *fortran = 0; ps.p += 5; }
            else return npy_fail(path, "'fortran_order' is not True or False");
            have_fortran = true;
        } else if (strcmp(key, "shape") == 0) {
            if (ps.p >= ps.end || (*ps.p != '(' && *ps.p != '[')) return npy_fail(path, "'shape' is not a tuple");
            char close = *ps.p == '(' ? ')' : ']';
            ps.p++;
            *ndim = 0;
            for (;;) {
                py_ws(&ps);
                if (ps.p < ps.end && *ps.p == close) { ps.p++; break; }
                if (ps.p >= ps.end || *ps.p < '0' || *ps.p > '9')
                    return npy_fail(path, "'shape' must hold non-negative integers");
                int64_t v = 0;
                while (ps.p < ps.end && *ps.p >= '0' && *ps.p <= '9') {
                    int d = *ps.p - '0';
                    if (v > (INT64_MAX - d) / 10) return npy_fail(path, "a size in 'shape' is too large");
                    v = v * 10 + d;
                    ps.p++;
                }
                if (ps.p < ps.end && *ps.p == 'L') ps.p++;   /* Python 2 long */
                if (*ndim >= DP_MAX_DIMS)
                    return dp_error("npy file '%s': the array has more than %d dimensions, which dplua does not support",
                                    path, DP_MAX_DIMS);
                sizes[(*ndim)++] = v;
                py_ws(&ps);
                if (ps.p < ps.end && *ps.p == ',') { ps.p++; continue; }
                if (ps.p < ps.end && *ps.p == close) { ps.p++; break; }
                return npy_fail(path, "bad 'shape' tuple");
            }
            have_shape = true;
        } else {
            return dp_error("npy file '%s': malformed header (unknown key '%s')", path, key);
        }
        py_ws(&ps);
        if (ps.p < ps.end && *ps.p == ',') { ps.p++; continue; }
        if (ps.p < ps.end && *ps.p == '}') { ps.p++; break; }
        return npy_fail(path, "expected ',' or '}'");
    }
    py_ws(&ps);
    if (ps.p != ps.end) return npy_fail(path, "text after the dictionary");
    if (!have_descr || !have_fortran || !have_shape)
        return npy_fail(path, !have_descr ? "no 'descr'" : !have_fortran ? "no 'fortran_order'" : "no 'shape'");
    return 0;
}

dp_tensor *dp_npy_load(const char *path)
{
    int64_t fsize;
    int fd = open_for_reading("npy", path, &fsize);
    if (fd < 0) return NULL;
    unsigned char pre[12];
    dp_tensor *t = NULL;
    char *hdr = NULL;
    if (fsize < 10 || read_at(fd, pre, fsize < 12 ? 10 : 12, 0) != 0) {
        dp_error("npy file '%s' is too short (%ld bytes) to hold a .npy header", path, (long)fsize);
        goto fail;
    }
    if (memcmp(pre, "\x93NUMPY", 6) != 0) {
        dp_error("'%s' is not a NumPy .npy file (it does not start with \\x93NUMPY)", path);
        goto fail;
    }
    int major = pre[6], minor = pre[7];
    int64_t hlen, hstart;
    if (major == 1) {
        hlen = pre[8] | (pre[9] << 8);
        hstart = 10;
    } else if (major == 2 || major == 3) {
        if (fsize < 12) {
            dp_error("npy file '%s' is too short (%ld bytes) to hold a version %d.%d header", path, (long)fsize, major, minor);
            goto fail;
        }
        hlen = (int64_t)pre[8] | ((int64_t)pre[9] << 8) | ((int64_t)pre[10] << 16) | ((int64_t)pre[11] << 24);
        hstart = 12;
    } else {
        dp_error("npy file '%s' has format version %d.%d; dplua reads versions 1.0, 2.0 and 3.0", path, major, minor);
        goto fail;
    }
    if (hlen > fsize - hstart) {
        dp_error("npy file '%s': the header length %ld is more than the %ld bytes that follow it (truncated?)",
                 path, (long)hlen, (long)(fsize - hstart));
        goto fail;
    }
    hdr = malloc((size_t)hlen + 1);
    if (!hdr) { dp_error("npy file '%s': out of memory reading the header", path); goto fail; }
    if (hlen > 0 && read_at(fd, hdr, (size_t)hlen, hstart) != 0) {
        dp_error("npy file '%s': cannot read the header: %s", path, errno ? strerror(errno) : "file too short");
        goto fail;
    }
    hdr[hlen] = 0;
    char descr[32] = "";
    int fortran = 0, ndim = 0;
    int64_t sizes[DP_MAX_DIMS];
    if (npy_parse_header(path, hdr, (size_t)hlen, descr, sizeof descr, &fortran, &ndim, sizes) != 0) goto fail;
    dp_dtype dt = DP_FLOAT32;
    bool found = false;
    for (size_t k = 0; k < sizeof npy_dtypes / sizeof npy_dtypes[0]; k++)
        if (strcmp(descr, npy_dtypes[k].descr) == 0) { dt = npy_dtypes[k].dtype; found = true; }
    if (!found && strcmp(descr, "<b1") == 0) { dt = DP_BOOL; found = true; }
    if (!found) {
        if (descr[0] == '>')
            dp_error("npy file '%s' holds big-endian data ('%s'); dplua reads little-endian <f4, <f8, <i8 and |b1",
                     path, descr);
        else
            dp_error("npy file '%s' has dtype '%s', which dplua does not read (it reads <f4, <f8, <i8 and |b1; "
                     "convert with astype first)", path, descr);
        goto fail;
    }
    if (fortran) {
        dp_error("npy file '%s' is stored in Fortran order; dplua reads C-order arrays "
                 "(save np.ascontiguousarray(a) instead)", path);
        goto fail;
    }
    int64_t numel = shape_numel(ndim, sizes);
    int64_t esize = (int64_t)dp_dtype_size(dt);
    int64_t data_start = hstart + hlen, have = fsize - data_start;
    char shp[128];
    dp_shape_str(ndim, sizes, shp, sizeof shp);
    if (numel < 0 || numel > INT64_MAX / esize) {
        dp_error("npy file '%s': the shape %s in the header is too large", path, shp);
        goto fail;
    }
    if (numel * esize != have) {
        dp_error("npy file '%s': the header's shape %s and dtype %s need %ld bytes of data but the file has %ld%s",
                 path, shp, descr, (long)(numel * esize), (long)have, have < numel * esize ? " (truncated?)" : "");
        goto fail;
    }
    t = dp_empty(ndim, sizes, dt, dp_cpu());
    if (!t) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", dp_last_error());
        dp_error("npy file '%s': %s", path, msg);
        goto fail;
    }
    if (have > 0 && read_at(fd, dp_data(t), (size_t)have, data_start) != 0) {
        dp_error("npy file '%s': cannot read the data: %s", path, errno ? strerror(errno) : "file too short");
        goto fail;
    }
    normalize_bools(t);
    free(hdr);
    close(fd);
    return t;
fail:
    dp_tensor_release(t);
    free(hdr);
    close(fd);
    return NULL;
}

int dp_npy_save(const char *path, dp_tensor *t)
{
    const char *kind = "npy";
    const char *descr = NULL;
    for (size_t k = 0; k < sizeof npy_dtypes / sizeof npy_dtypes[0]; k++)
        if (npy_dtypes[k].dtype == t->dtype) descr = npy_dtypes[k].descr;
    if (!descr) return dp_error("cannot write npy file '%s': unsupported dtype", path);
    sbuf h = {0};
    int bad = sb_printf(&h, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int d = 0; d < t->ndim; d++)
        bad |= sb_printf(&h, d ? " %ld," : "%ld,", (long)t->sizes[d]);
    if (t->ndim > 1) h.len--, h.s[h.len] = 0;   /* (2, 3) but (3,) */
    bad |= sb_add(&h, "), }", 4);
    /* Version 1.0 (2-byte length) when it fits; the whole preamble is padded with spaces and
     * a newline to a multiple of 64 bytes, as NumPy does. */
    int major = 1;
    size_t pre = 10;
    size_t total = pre + h.len + 1;
    size_t padded = (total + 63) / 64 * 64;
    if (padded - pre > 65535) {
        major = 2; pre = 12;
        total = pre + h.len + 1;
        padded = (total + 63) / 64 * 64;
    }
    while (!bad && pre + h.len + 1 < padded) bad |= sb_add(&h, " ", 1);
    bad |= sb_add(&h, "\n", 1);
    if (bad) { free(h.s); return dp_error("out of memory writing npy file '%s'", path); }
    unsigned char preamble[12] = { 0x93, 'N', 'U', 'M', 'P', 'Y', (unsigned char)major, 0 };
    for (size_t k = 0; k < pre - 8; k++) preamble[8 + k] = (unsigned char)(h.len >> (8 * k));
    out_file f;
    if (out_open(&f, kind, path) != 0) { free(h.s); return -1; }
    int rc = out_write(&f, kind, preamble, pre);
    if (rc == 0) rc = out_write(&f, kind, h.s, h.len);
    if (rc == 0) rc = out_write_tensor(&f, kind, t);
    if (rc == 0) rc = out_commit(&f, kind);
    free(h.s);
    return rc;
}
