/* npy.c: reading and writing NumPy .npy files (see serialize.h).  A file is the magic
 * "\x93NUMPY", a version, a little-endian header length, a header that is a Python dict
 * literal ({'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }) padded to 64 bytes,
 * and the raw C-order data.  The reader parses just that dict (quoted strings without
 * escapes, True/False, a tuple of integers) and checks that the data is exactly as long as
 * the shape and dtype say; the writer writes what NumPy writes (version 1.0 when the header
 * fits in it).
 */
#include "serialize_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct { const char *descr; dp_dtype dtype; } npy_dtypes[] = {
    { "<f4", DP_FLOAT32 }, { "<f8", DP_FLOAT64 }, { "<i8", DP_INT64 }, { "|b1", DP_BOOL }, { "<f2", DP_FLOAT16 },
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
                    if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, *ps.p - '0', &v))
                        return npy_fail(path, "a size in 'shape' is too large");
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
    int fd = dp_open_for_reading("npy", path, &fsize);
    if (fd < 0) return NULL;
    unsigned char pre[12];
    dp_tensor *t = NULL;
    char *hdr = NULL;
    if (fsize < 10 || dp_read_at(fd, pre, fsize < 12 ? 10 : 12, 0) != 0) {
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
    if (hlen > 0 && dp_read_at(fd, hdr, (size_t)hlen, hstart) != 0) {
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
    int64_t data_start = hstart + hlen, have = fsize - data_start;
    char shp[192];
    dp_shape_str(ndim, sizes, shp, sizeof shp);
    int64_t bytes = shape_bytes(ndim, sizes, dp_dtype_size(dt));
    if (bytes < 0) {
        dp_error("npy file '%s': the shape %s in the header is too large for dtype %s (its size in bytes "
                 "does not fit in 64 bits)", path, shp, descr);
        goto fail;
    }
    if (bytes != have) {
        dp_error("npy file '%s': the header's shape %s and dtype %s need %ld bytes of data but the file has %ld%s",
                 path, shp, descr, (long)bytes, (long)have, have < bytes ? " (truncated?)" : "");
        goto fail;
    }
    t = dp_empty(ndim, sizes, dt, dp_cpu());
    if (!t) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", dp_last_error());
        dp_error("npy file '%s': %s", path, msg);
        goto fail;
    }
    if (have > 0 && dp_read_at(fd, dp_data(t), (size_t)have, data_start) != 0) {
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
    if (!descr) return dp_error("cannot write npy file '%s': NumPy has no %s dtype", path, dp_dtype_name(t->dtype));
    dp_sbuf h = {0};
    int bad = dp_sb_printf(&h, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int d = 0; d < t->ndim; d++)
        bad |= dp_sb_printf(&h, d ? " %ld," : "%ld,", (long)t->sizes[d]);
    if (t->ndim > 1) h.len--, h.s[h.len] = 0;   /* (2, 3) but (3,) */
    bad |= dp_sb_add(&h, "), }", 4);
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
    while (!bad && pre + h.len + 1 < padded) bad |= dp_sb_add(&h, " ", 1);
    bad |= dp_sb_add(&h, "\n", 1);
    if (bad) { free(h.s); return dp_error("out of memory writing npy file '%s'", path); }
    unsigned char preamble[12] = { 0x93, 'N', 'U', 'M', 'P', 'Y', (unsigned char)major, 0 };
    for (size_t k = 0; k < pre - 8; k++) preamble[8 + k] = (unsigned char)(h.len >> (8 * k));
    dp_out_file f;
    if (dp_out_open(&f, kind, path) != 0) { free(h.s); return -1; }
    int rc = dp_out_write(&f, kind, preamble, pre);
    if (rc == 0) rc = dp_out_write(&f, kind, h.s, h.len);
    if (rc == 0) rc = dp_out_write_tensor(&f, kind, t);
    if (rc == 0) rc = dp_out_commit(&f, kind);
    free(h.s);
    return rc;
}
