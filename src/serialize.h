/* serialize.h: reading and writing tensors in the safetensors and NumPy .npy formats.
 *
 * Both parsers treat the file as untrusted: every size, offset and shape in a header is
 * checked against the file before anything is read, so a truncated or lying file fails
 * with a message naming the file and the problem instead of reading out of bounds.
 * Writers write to a temporary file in the destination folder and rename() it into
 * place, so the final name never holds a half-written file.  A destination that is a
 * symbolic link is written through (the file it points to is replaced, the link stays);
 * one that is not a regular file (a FIFO, a device node, a directory) is refused.
 * Loaded tensors are contiguous CPU tensors.
 * The code: safetensors.c and npy.c, over atomic_file.c and json.c
 * (serialize_internal.h).
 */
#ifndef DP_SERIALIZE_H
#define DP_SERIALIZE_H

#include "dp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One named tensor, as the safetensors functions pass them. */
typedef struct {
    char *name;
    dp_tensor *tensor;
} dp_named_tensor;

/* The contents of a safetensors file.  metadata holds the __metadata__ entries (string to
 * string) as nmeta key/value pairs. */
typedef struct {
    int64_t ntensors;
    dp_named_tensor *tensors;
    int64_t nmeta;
    char **meta_keys;
    char **meta_values;
} dp_safetensors;

/* Writes n named tensors (any device, any layout; names unique, any UTF-8) and optional
 * metadata pairs (nmeta may be 0).  Tensors are stored largest dtype first, then by name. */
int dp_safetensors_save(const char *path, int64_t n, const dp_named_tensor *tensors,
                        int64_t nmeta, const char *const *meta_keys, const char *const *meta_values);
/* Reads a file into *out (zeroed first); release it with dp_safetensors_free. */
int dp_safetensors_load(const char *path, dp_safetensors *out);
void dp_safetensors_free(dp_safetensors *st);

/* NumPy .npy: <f4, <f8, <i8, |b1 in C order. */
int dp_npy_save(const char *path, dp_tensor *t);
dp_tensor *dp_npy_load(const char *path);

#ifdef __cplusplus
}
#endif
#endif
