/* serialize_internal.h: what the file-format code shares (not installed).
 *
 * The readers and writers of safetensors (safetensors.c) and .npy (npy.c) stand on two
 * helpers: atomic_file.c, which opens files for reading and writes a file under a
 * temporary name that is renamed into place only once it is complete, and json.c, a
 * strict JSON parser for safetensors headers plus the growing string buffer both writers
 * build their headers in.  The small shape helpers below are used by both readers.
 */
#ifndef DP_SERIALIZE_INTERNAL_H
#define DP_SERIALIZE_INTERNAL_H

#include <sys/types.h>

#include "serialize.h"

/* ---------------------------------------------------------------- files (atomic_file.c) */

/* Reads exactly n bytes at offset; -1 with errno set (0 for a short file). */
int dp_read_at(int fd, void *buf, size_t n, off_t offset);
/* Opens path for reading ("kind" names the format in messages); returns the descriptor and
 * the file's size, or -1 with the error set. */
int dp_open_for_reading(const char *kind, const char *path, int64_t *size);

/* A file being written under a temporary name next to its final name. */
typedef struct {
    int fd;
    char *tmp;          /* the temporary file, in target's folder */
    char *target;       /* the name it is renamed to: path, or where path's symlinks lead */
    const char *path;   /* the name the caller gave, for messages */
} dp_out_file;

/* dp_out_open refuses a path that is not a regular file (after following symbolic links).
 * Every dp_out_* function that fails has already abandoned the file (closed it and removed
 * the temporary), so the caller only frees what it holds itself. */
int dp_out_open(dp_out_file *f, const char *kind, const char *path);
int dp_out_write(dp_out_file *f, const char *kind, const void *buf, size_t n);
/* Writes a tensor's elements in row-major order (from any device or layout). */
int dp_out_write_tensor(dp_out_file *f, const char *kind, dp_tensor *t);
/* Flushes to disk and renames the temporary file to the final name. */
int dp_out_commit(dp_out_file *f, const char *kind);
void dp_out_abandon(dp_out_file *f);

/* ---------------------------------------------------------------- JSON (json.c) */

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

/* Parses the n bytes at s as one JSON value (whitespace around it allowed) into *out.
 * On failure returns -1 and writes into err what was wrong at which byte; *out is then
 * already released.  Strings and keys never hold a NUL (raw or escaped, it is an error). */
int dp_json_parse(const char *s, size_t n, jval *out, char *err, size_t errn);
void dp_json_free(jval *v);
/* The value under key in an object (the first one when a key repeats), or NULL. */
const jval *dp_json_get(const jval *obj, const char *key);

/* A growing NUL-terminated string buffer; the functions return -1 on out of memory. */
typedef struct {
    char *s;
    size_t len, cap;
} dp_sbuf;

int dp_sb_add(dp_sbuf *b, const char *s, size_t n);
int dp_sb_printf(dp_sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s as a quoted JSON string. */
int dp_sb_json_string(dp_sbuf *b, const char *s);

/* ---------------------------------------------------------------- shapes */

/* The byte count of a C-order array of this shape, or -1 when the shape is too large.  As
 * in NumPy, the byte count of the sizes with zeros taken as 1 must fit in int64 (and
 * size_t): a tensor with a zero size still gets strides that are products of its other
 * sizes, so (0, 2^62, 4) is refused although it holds no element. */
static inline int64_t shape_bytes(int ndim, const int64_t *sizes, size_t esize)
{
    int64_t numel = 1, span = (int64_t)esize;
    for (int i = 0; i < ndim; i++) {
        if (sizes[i] < 0) return -1;
        if (__builtin_mul_overflow(numel, sizes[i], &numel)) return -1;
        if (sizes[i] > 0 && __builtin_mul_overflow(span, sizes[i], &span)) return -1;
    }
    if ((uint64_t)span > SIZE_MAX) return -1;
    return numel * (int64_t)esize;   /* at most span */
}

/* Bool storage holds 0 or 1; a file may hold any byte. */
static inline void normalize_bools(dp_tensor *t)
{
    if (t->dtype != DP_BOOL) return;
    unsigned char *p = dp_data(t);
    int64_t n = dp_numel(t);
    for (int64_t i = 0; i < n; i++) p[i] = p[i] != 0;
}

#endif
