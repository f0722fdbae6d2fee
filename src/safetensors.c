/* safetensors.c: reading and writing safetensors files (see serialize.h).  A file is an
 * 8-byte little-endian header length, a JSON header that maps each tensor's name to its
 * dtype, shape and [begin, end) byte range in the data section, and the data section.
 * The reader checks the whole header before it allocates a tensor: known dtypes, shapes
 * whose sizes fit, byte ranges that match the shape, lie inside the file and do not
 * overlap, names used once.  The writer stores tensors largest dtype first, then by name,
 * as the safetensors package does.
 */
#include "serialize_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A header larger than this is refused before it is read (the safetensors package uses
 * the same bound). */
#define MAX_HEADER_BYTES (100u * 1024u * 1024u)

/* The dtypes written, and read as they are. */
static const struct { const char *name; dp_dtype dtype; } st_dtypes[] = {
    { "F32", DP_FLOAT32 }, { "F64", DP_FLOAT64 }, { "I64", DP_INT64 }, { "BOOL", DP_BOOL },
    { "F16", DP_FLOAT16 }, { "BF16", DP_BFLOAT16 },
};

/* The dtypes only read, converted to one dplua has: smaller integers to int64 (so Hugging
 * Face files load). */
typedef enum { ST_I8 = 1, ST_I16, ST_I32, ST_U8 } st_convert;
static const struct { const char *name; st_convert kind; int size; dp_dtype dtype; } st_read_dtypes[] = {
    { "I8", ST_I8, 1, DP_INT64 },
    { "I16", ST_I16, 2, DP_INT64 }, { "I32", ST_I32, 4, DP_INT64 }, { "U8", ST_U8, 1, DP_INT64 },
};

static const char *st_dtype_name(dp_dtype dt)
{
    for (size_t k = 0; k < sizeof st_dtypes / sizeof st_dtypes[0]; k++)
        if (st_dtypes[k].dtype == dt) return st_dtypes[k].name;
    return NULL;
}

/* n little-endian elements of kind in src into dst (int64) */
static void st_convert_data(st_convert kind, const unsigned char *src, void *dst, int64_t n)
{
    int64_t *i64 = dst;
    for (int64_t k = 0; k < n; k++) {
        const unsigned char *s = src;
        switch (kind) {
        case ST_I8: i64[k] = (int8_t)s[k]; break;
        case ST_U8: i64[k] = s[k]; break;
        case ST_I16: i64[k] = (int16_t)(uint16_t)(s[2 * k] | s[2 * k + 1] << 8); break;
        case ST_I32:
            i64[k] = (int32_t)((uint32_t)s[4 * k] | (uint32_t)s[4 * k + 1] << 8 | (uint32_t)s[4 * k + 2] << 16 |
                               (uint32_t)s[4 * k + 3] << 24);
            break;
        }
    }
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
    dp_dtype dtype;         /* what the tensor will be */
    st_convert convert;     /* 0: the file holds dtype; else the file's dtype, converted */
    int file_size;          /* bytes per element in the file */
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
    const jval *dt = dp_json_get(e, "dtype");
    if (!dt || dt->type != J_STR)
        return dp_error("safetensors file '%s': tensor '%s' has no dtype string in the header", path, name);
    bool found = false;
    info->convert = 0;
    for (size_t k = 0; k < sizeof st_dtypes / sizeof st_dtypes[0]; k++)
        if (strcmp(dt->s, st_dtypes[k].name) == 0) {
            info->dtype = st_dtypes[k].dtype;
            info->file_size = (int)dp_dtype_size(info->dtype);
            found = true;
        }
    for (size_t k = 0; k < sizeof st_read_dtypes / sizeof st_read_dtypes[0]; k++)
        if (strcmp(dt->s, st_read_dtypes[k].name) == 0) {
            info->dtype = st_read_dtypes[k].dtype;
            info->convert = st_read_dtypes[k].kind;
            info->file_size = st_read_dtypes[k].size;
            found = true;
        }
    if (!found)
        return dp_error("safetensors file '%s': tensor '%s' has dtype '%.32s', which dplua does not read "
                        "(it reads F32, F64, I64, BOOL, and F16, BF16 as float32, I8, I16, I32, U8 as int64)",
                        path, name, dt->s);
    if (st_int_array(path, name, "shape", dp_json_get(e, "shape"), DP_MAX_DIMS, info->sizes, &info->ndim) != 0)
        return -1;
    int64_t off[2]; int noff;
    const jval *ov = dp_json_get(e, "data_offsets");
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
    char shp[192];
    dp_shape_str(info->ndim, info->sizes, shp, sizeof shp);
    int64_t bytes = shape_bytes(info->ndim, info->sizes, (size_t)info->file_size);
    if (bytes < 0)
        return dp_error("safetensors file '%s': tensor '%s' of shape %s and dtype %s is too large (its size "
                        "in bytes does not fit in 64 bits)", path, name, shp, dt->s);
    if (bytes != info->end - info->begin)
        return dp_error("safetensors file '%s': tensor '%s' of shape %s and dtype %s needs %ld bytes but its "
                        "data_offsets [%ld, %ld] span %ld", path, name, shp, dt->s, (long)bytes,
                        (long)info->begin, (long)info->end, (long)(info->end - info->begin));
    return 0;
}

static int st_fail(dp_safetensors *out, jval *root, int fd, st_info *infos)
{
    dp_json_free(root);
    free(infos);
    if (fd >= 0) close(fd);
    dp_safetensors_free(out);
    return -1;
}

/* The index of the first key that repeats an earlier one (root->n when none does, -1 out
 * of memory).  A hash set of the keys seen so far keeps this linear: comparing each name
 * with every earlier one took 18 s for a header of 60,000 tensors.  The hash is seeded
 * from an address, which ASLR varies, so that a file cannot be made to collide on purpose. */
static int64_t first_repeated_key(const jval *root)
{
    size_t cap = 16;
    while (cap < (size_t)root->n * 2) cap *= 2;
    int64_t *slots = calloc(cap, sizeof *slots);   /* index + 1 of the key there, 0 when empty */
    if (!slots) return -1;
    uint64_t seed = (uint64_t)(uintptr_t)slots * 0x9E3779B97F4A7C15u;
    int64_t found = root->n;
    for (int64_t k = 0; k < root->n && found == root->n; k++) {
        uint64_t h = 0xcbf29ce484222325u ^ seed;    /* FNV-1a */
        for (size_t i = 0; i < root->key_lens[k]; i++) {
            h ^= (unsigned char)root->keys[k][i];
            h *= 0x100000001b3u;
        }
        h ^= h >> 33; h *= 0xff51afd7ed558ccdu; h ^= h >> 33;
        for (size_t at = (size_t)h & (cap - 1);; at = (at + 1) & (cap - 1)) {
            if (slots[at] == 0) { slots[at] = k + 1; break; }
            const int64_t j = slots[at] - 1;
            if (root->key_lens[j] == root->key_lens[k] &&
                memcmp(root->keys[j], root->keys[k], root->key_lens[k]) == 0) {
                found = k;
                break;
            }
        }
    }
    free(slots);
    return found;
}

/* What another format the file is, when it is not a safetensors file (NULL when it may be
 * one).  The first 8 bytes of a safetensors file are the header length, so its first byte
 * can be anything: 0x80, the start of a Python pickle, is the low byte of every header
 * length of 128 mod 256, about one file in 32 since writers pad the header to 8 bytes.  So
 * a file whose length field is plausible (the header fits in the file and starts with '{',
 * which neither a pickle nor a zip archive nor a .npy file can give) is always taken for
 * safetensors, and the other formats are recognised by their full signatures only when it
 * is not: a pickle by 0x80 and a protocol byte 2 to 5, a zip archive by PK\3\4, a .npy
 * file by \x93NUMPY. */
static const char *st_other_format(int fd, int64_t fsize, const unsigned char head[8], uint64_t hlen)
{
    if (hlen >= 2 && hlen <= (uint64_t)(fsize - 8)) {
        unsigned char first;
        if (dp_read_at(fd, &first, 1, 8) == 0 && first == '{') return NULL;
    }
    if (memcmp(head, "\x93NUMPY", 6) == 0)
        return "it is a NumPy .npy file: read it with torch.load_npy";
    if (memcmp(head, "PK\x03\x04", 4) == 0)
        return "it is a zip archive, as PyTorch's torch.save writes by default: dplua cannot read "
               "PyTorch's pickled checkpoints; save the state_dict with safetensors.torch.save_file instead";
    if (head[0] == 0x80 && head[1] >= 2 && head[1] <= 5)
        return "it is a Python pickle, as PyTorch's torch.save writes with _use_new_zipfile_serialization=False: "
               "dplua cannot read PyTorch's pickled checkpoints; save the state_dict with "
               "safetensors.torch.save_file instead";
    return NULL;
}

int dp_safetensors_load(const char *path, dp_safetensors *out)
{
    memset(out, 0, sizeof *out);
    int64_t fsize;
    int fd = dp_open_for_reading("safetensors", path, &fsize);
    if (fd < 0) return -1;
    jval root = {0};
    st_info *infos = NULL;
    unsigned char head[8];
    if (fsize < 8 || dp_read_at(fd, head, 8, 0) != 0) {
        dp_error("safetensors file '%s' is too short (%ld bytes): a safetensors file starts with an "
                 "8-byte header length", path, (long)fsize);
        return st_fail(out, &root, fd, infos);
    }
    uint64_t hlen = 0;
    for (int k = 7; k >= 0; k--) hlen = (hlen << 8) | head[k];
    const char *other = st_other_format(fd, fsize, head, hlen);
    if (other) {
        dp_error("'%s' is not a safetensors file (%s)", path, other);
        return st_fail(out, &root, fd, infos);
    }
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
    if (dp_read_at(fd, hdr, hlen, 8) != 0) {
        dp_error("safetensors file '%s': cannot read the header: %s", path, errno ? strerror(errno) : "file too short");
        free(hdr);
        return st_fail(out, &root, fd, infos);
    }
    size_t lead = 0;
    while (lead < hlen && (hdr[lead] == ' ' || hdr[lead] == '\t' || hdr[lead] == '\n' || hdr[lead] == '\r')) lead++;
    if (lead == hlen || hdr[lead] != '{') {
        dp_error("'%s' is not a safetensors file: its header does not start with a JSON object", path);
        free(hdr);
        return st_fail(out, &root, fd, infos);
    }
    char err[160];
    if (dp_json_parse(hdr, hlen, &root, err, sizeof err) != 0) {
        dp_error("safetensors file '%s': the header is not valid JSON: %s", path, err);
        free(hdr);
        return st_fail(out, &root, fd, infos);
    }
    free(hdr);

    int64_t data_start = 8 + (int64_t)hlen, data_size = fsize - data_start;
    infos = calloc((size_t)root.n + 1, sizeof *infos);
    if (!infos) { dp_error("out of memory"); return st_fail(out, &root, fd, infos); }
    int64_t repeated = first_repeated_key(&root);
    if (repeated < 0) { dp_error("out of memory"); return st_fail(out, &root, fd, infos); }
    int64_t nt = 0;
    for (int64_t k = 0; k < root.n; k++) {
        const char *name = root.keys[k];
        if (strlen(name) != root.key_lens[k]) {
            dp_error("safetensors file '%s': a tensor name contains a NUL character", path);
            return st_fail(out, &root, fd, infos);
        }
        if (k == repeated) {
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
    st_info *sorted = calloc((size_t)nt + 1, sizeof *sorted);
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
        void *raw = in->convert && bytes > 0 ? malloc(bytes) : dp_data(t);
        if (!raw) { dp_error("out of memory reading tensor '%s'", name); return st_fail(out, &root, fd, infos); }
        if (bytes > 0 && dp_read_at(fd, raw, bytes, (off_t)(data_start + in->begin)) != 0) {
            dp_error("safetensors file '%s': cannot read the data of tensor '%s': %s", path, name,
                     errno ? strerror(errno) : "file too short");
            if (raw != dp_data(t)) free(raw);
            return st_fail(out, &root, fd, infos);
        }
        if (raw != dp_data(t)) {
            st_convert_data(in->convert, raw, dp_data(t), dp_numel(t));
            free(raw);
        }
        normalize_bools(t);
    }
    dp_json_free(&root);
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

    dp_sbuf h = {0};
    int bad = dp_sb_add(&h, "{", 1);
    if (nmeta > 0) {
        bad |= dp_sb_add(&h, "\"__metadata__\":{", 16);
        for (int64_t k = 0; k < nmeta; k++) {
            if (k) bad |= dp_sb_add(&h, ",", 1);
            bad |= dp_sb_json_string(&h, meta_keys[k]);
            bad |= dp_sb_add(&h, ":", 1);
            bad |= dp_sb_json_string(&h, meta_values[k]);
        }
        bad |= dp_sb_add(&h, "}", 1);
        if (n > 0) bad |= dp_sb_add(&h, ",", 1);
    }
    int64_t offset = 0;
    for (int64_t k = 0; k < n && !bad; k++) {
        dp_tensor *t = order[k]->tensor;
        int64_t bytes = dp_numel(t) * (int64_t)dp_dtype_size(t->dtype);
        if (k) bad |= dp_sb_add(&h, ",", 1);
        bad |= dp_sb_json_string(&h, order[k]->name);
        bad |= dp_sb_printf(&h, ":{\"dtype\":\"%s\",\"shape\":[", st_dtype_name(t->dtype));
        for (int d = 0; d < t->ndim; d++) bad |= dp_sb_printf(&h, d ? ",%ld" : "%ld", (long)t->sizes[d]);
        bad |= dp_sb_printf(&h, "],\"data_offsets\":[%ld,%ld]}", (long)offset, (long)(offset + bytes));
        offset += bytes;
    }
    bad |= dp_sb_add(&h, "}", 1);
    /* The data starts 8-byte aligned, as the safetensors package writes it. */
    while (!bad && (h.len % 8) != 0) bad |= dp_sb_add(&h, " ", 1);
    if (bad) {
        free(h.s); free(order);
        return dp_error("out of memory writing safetensors file '%s'", path);
    }
    unsigned char lenbuf[8];
    for (int k = 0; k < 8; k++) lenbuf[k] = (unsigned char)((uint64_t)h.len >> (8 * k));

    dp_out_file f;
    if (dp_out_open(&f, kind, path) != 0) { free(h.s); free(order); return -1; }
    int rc = dp_out_write(&f, kind, lenbuf, 8);
    if (rc == 0) rc = dp_out_write(&f, kind, h.s, h.len);
    for (int64_t k = 0; k < n && rc == 0; k++) rc = dp_out_write_tensor(&f, kind, order[k]->tensor);
    if (rc == 0) rc = dp_out_commit(&f, kind);
    free(h.s);
    free(order);
    return rc;
}
