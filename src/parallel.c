/* parallel.c: scatter, broadcast (coalesced, with reusable replicas), gather and
 * reduce-add over devices, built from differentiable ops so autograd needs nothing new. */
#include "parallel.h"

#include <stdlib.h>
#include <string.h>

/* Device-to-device copies between CUDA devices may run on the streams; anything that
 * touches host memory is left to dp_to's own judgement. */
static bool async_between(dp_device a, dp_device b)
{
    return a.type == DP_DEVICE_CUDA && b.type == DP_DEVICE_CUDA;
}

static void release_all(dp_tensor **ts, int n)
{
    for (int i = 0; i < n; i++) {
        dp_tensor_release(ts[i]);
        ts[i] = NULL;
    }
}

int dp_scatter_sizes(int64_t n, int ndev, int64_t *sizes)
{
    if (ndev < 1)
        return dp_error("scatter: need at least one device, got %d", ndev);
    if (n < 1)
        return dp_error("scatter: cannot split a dimension of size %lld over devices", (long long)n);
    int64_t chunk = n / ndev + (n % ndev != 0);   /* ceil without n + ndev - 1 overflowing */
    int count = 0;
    for (int64_t start = 0; start < n; start += chunk)
        sizes[count++] = n - start < chunk ? n - start : chunk;
    return count;
}

int dp_scatter(dp_tensor *t, int dim, int ndev, const dp_device *devs, dp_tensor **out, int *nout)
{
    char shape[128];
    if (!t)
        return dp_error("scatter: no tensor given");
    if (dim < 0 || dim >= t->ndim)
        return dp_error("scatter: dim %d is out of range for a tensor of %d dimensions (size %s)",
                        dim + 1, t->ndim, dp_shape_str(t->ndim, t->sizes, shape, sizeof shape));
    if (ndev < 1)
        return dp_error("scatter: need at least one device, got %d", ndev);
    int64_t *sizes = malloc(sizeof *sizes * (size_t)ndev);
    if (!sizes)
        return dp_error("scatter: out of memory");
    int count = dp_scatter_sizes(t->sizes[dim], ndev, sizes);
    if (count < 0) {
        free(sizes);
        return -1;
    }
    int64_t start = 0;
    for (int i = 0; i < count; i++) {
        dp_tensor *piece = dp_narrow(t, dim, start, sizes[i]);
        out[i] = piece ? dp_to(piece, devs[i], t->dtype, async_between(t->device, devs[i])) : NULL;
        dp_tensor_release(piece);
        if (!out[i]) {
            release_all(out, i);
            free(sizes);
            return -1;
        }
        start += sizes[i];
    }
    free(sizes);
    *nout = count;
    return 0;
}

/* ------------------------------------------------------------------ broadcast */

/* The n parts joined along dim (one part: itself), as a new reference. */
static dp_tensor *cat_or_one(int n, dp_tensor **parts, int dim)
{
    if (n > 1) return dp_cat(n, parts, dim);
    dp_tensor_retain(parts[0]);
    return parts[0];
}

/* ts[idx[0..k-1]] flattened and joined into one 1-D tensor (differentiable). */
static dp_tensor *flatten_join(dp_tensor *const *ts, const int *idx, int k)
{
    dp_tensor **flats = calloc((size_t)k, sizeof *flats);
    if (!flats) {
        dp_error("broadcast: out of memory");
        return NULL;
    }
    dp_tensor *joined = NULL;
    int64_t minus_one = -1;
    int made = 0;
    for (; made < k; made++) {
        flats[made] = dp_reshape(ts[idx[made]], 1, &minus_one);
        if (!flats[made])
            goto done;
    }
    joined = cat_or_one(k, flats, 0);
done:
    release_all(flats, made);
    free(flats);
    return joined;
}

/* Cuts the 1-D tensor flat back into tensors shaped as ts[idx[j]]: out[idx[j]] (views). */
static int split_views(dp_tensor *flat, dp_tensor *const *ts, const int *idx, int k, dp_tensor **out)
{
    int64_t off = 0;
    for (int j = 0; j < k; j++) {
        dp_tensor *src = ts[idx[j]];
        int64_t numel = dp_numel(src);
        dp_tensor *piece = dp_narrow(flat, 0, off, numel);
        dp_tensor *shaped = piece ? dp_view_sizes(piece, src->ndim, src->sizes) : NULL;
        dp_tensor_release(piece);
        if (!shaped) {
            for (int m = 0; m < j; m++) {
                dp_tensor_release(out[idx[m]]);
                out[idx[m]] = NULL;
            }
            return -1;
        }
        out[idx[j]] = shaped;
        off += numel;
    }
    return 0;
}

/* When reuse[idx[0..k-1]] are contiguous pieces laid end to end in one storage (as
 * fresh_replicas made them), a 1-D tensor over all of them; else NULL without an error. */
static dp_tensor *reusable_flat(dp_tensor *const *reuse, const int *idx, int k)
{
    dp_tensor *first = reuse[idx[0]];
    int64_t expect = first->offset, total = 0;
    for (int j = 0; j < k; j++) {
        dp_tensor *r = reuse[idx[j]];
        if (!r || r->storage != first->storage || r->dtype != first->dtype ||
            r->offset != expect || !dp_is_contiguous(r))
            return NULL;
        expect += dp_numel(r);
        total += dp_numel(r);
    }
    if ((size_t)(first->offset + total) * dp_dtype_size(first->dtype) > first->storage->nbytes)
        return NULL;
    /* A fresh alias belongs to us alone, so widening its shape to the whole run is safe. */
    dp_tensor *flat = dp_alias(first);
    if (!flat)
        return NULL;
    flat->ndim = 1;
    flat->sizes[0] = total;
    flat->strides[0] = 1;
    return flat;
}

static int broadcast_check(int n, dp_tensor *const *ts, int ndev, const dp_device *devs,
                           dp_tensor *const *reuse)
{
    char a[32], b[32], s1[128], s2[128];
    if (n < 1 || ndev < 1)
        return dp_error("broadcast: need at least one tensor and one device (got %d and %d)", n, ndev);
    for (int i = 0; i < n; i++) {
        if (!ts[i])
            return dp_error("broadcast: tensor %d is missing", i + 1);
        if (!dp_device_eq(ts[i]->device, ts[0]->device))
            return dp_error("broadcast: all tensors must be on one device, but tensor %d is on %s "
                            "and tensor 1 on %s", i + 1, dp_device_str(ts[i]->device, a),
                            dp_device_str(ts[0]->device, b));
    }
    for (int d = 0; d < ndev; d++) {
        if (dp_device_check(devs[d]) < 0)
            return -1;
        for (int e = 0; e < d; e++)
            if (dp_device_eq(devs[d], devs[e]))
                return dp_error("broadcast: device %s is listed twice", dp_device_str(devs[d], a));
    }
    if (!reuse)
        return 0;
    for (int d = 0; d < ndev; d++) {
        if (dp_device_eq(devs[d], ts[0]->device))
            continue;
        for (int i = 0; i < n; i++) {
            dp_tensor *r = reuse[d * n + i];
            if (!r)
                return dp_error("broadcast: no replica of tensor %d to reuse on %s", i + 1,
                                dp_device_str(devs[d], a));
            if (!dp_device_eq(r->device, devs[d]) || !dp_same_shape(r, ts[i]) || r->dtype != ts[i]->dtype)
                return dp_error("broadcast: the replica of tensor %d to reuse is %s %s on %s, "
                                "but the tensor is %s %s; it must match on %s",
                                i + 1, dp_dtype_name(r->dtype), dp_shape_str(r->ndim, r->sizes, s1, sizeof s1),
                                dp_device_str(r->device, a), dp_dtype_name(ts[i]->dtype),
                                dp_shape_str(ts[i]->ndim, ts[i]->sizes, s2, sizeof s2),
                                dp_device_str(devs[d], b));
        }
    }
    return 0;
}

/* Memory for the replicas of ts[idx[0..k-1]] (one dtype) on dev: one new flat buffer,
 * returned, and views of it in dst[idx[j]]. */
static dp_tensor *fresh_replicas(dp_tensor *const *ts, const int *idx, int k, dp_device dev, dp_tensor **dst)
{
    int64_t total = 0;
    for (int j = 0; j < k; j++)
        total += dp_numel(ts[idx[j]]);
    dp_tensor *flat = dp_empty(1, &total, ts[idx[0]]->dtype, dev);
    if (flat && split_views(flat, ts, idx, k, dst) < 0) {
        dp_tensor_release(flat);
        flat = NULL;
    }
    return flat;
}

/* The replicas of the tensors ts[idx[0..k-1]] (one dtype) on dev, into out[idx[j]].
 *
 * Values travel into dst (the reused replicas, or fresh memory); autograd links each
 * replica to its original separately (to_reuse), so the backward pass returns every
 * gradient by itself instead of through one large joined buffer.  When everything must be
 * copied and a CUDA device is involved, the values travel as one joined buffer: one
 * transfer instead of one per tensor. */
static int broadcast_group(dp_tensor *const *ts, const int *idx, int k, dp_device dev,
                           dp_tensor **flat_src, dp_tensor *const *reuse, const bool *changed,
                           dp_tensor **out)
{
    dp_tensor **fresh = NULL, *flat_dst = NULL;
    dp_tensor *const *dst = reuse;
    bool copy_all = true;
    if (reuse) {
        for (int j = 0; j < k; j++)
            copy_all = copy_all && changed[idx[j]];
    } else {
        int n = 0;
        for (int j = 0; j < k; j++)
            n = idx[j] + 1 > n ? idx[j] + 1 : n;
        fresh = calloc((size_t)n, sizeof *fresh);
        if (!fresh)
            return dp_error("broadcast: out of memory");
        bool was = dp_grad_enabled();
        dp_set_grad_enabled(false);
        flat_dst = fresh_replicas(ts, idx, k, dev, fresh);
        dp_set_grad_enabled(was);
        if (!flat_dst) {
            free(fresh);
            return -1;
        }
        dst = fresh;
    }

    int rc = 0;
    bool joined = copy_all && k > 1 &&
                  (dev.type == DP_DEVICE_CUDA || ts[idx[0]]->device.type == DP_DEVICE_CUDA);
    if (joined) {
        if (!flat_dst)
            flat_dst = reusable_flat(dst, idx, k);
        joined = flat_dst != NULL;
    }
    if (joined) {
        bool was = dp_grad_enabled();
        dp_set_grad_enabled(false);
        if (!*flat_src)
            *flat_src = flatten_join(ts, idx, k);
        rc = *flat_src ? dp_copy_(flat_dst, *flat_src) : -1;
        dp_set_grad_enabled(was);
    }
    for (int j = 0; j < k && rc == 0; j++) {
        int i = idx[j];
        out[i] = dp_to_reuse(ts[i], dst[i], !joined && (copy_all || changed[i]));
        if (!out[i]) {
            for (int m = 0; m < j; m++) {
                dp_tensor_release(out[idx[m]]);
                out[idx[m]] = NULL;
            }
            rc = -1;
        }
    }
    dp_tensor_release(flat_dst);
    if (fresh) {
        for (int j = 0; j < k; j++)
            dp_tensor_release(fresh[idx[j]]);
        free(fresh);
    }
    return rc;
}

int dp_broadcast_coalesced(int n, dp_tensor *const *ts, int ndev, const dp_device *devs,
                           dp_tensor *const *reuse, const bool *changed, dp_tensor **out)
{
    if (broadcast_check(n, ts, ndev, devs, reuse) < 0)
        return -1;
    int *idx = malloc(sizeof *idx * (size_t)n);
    if (!idx)
        return dp_error("broadcast: out of memory");
    for (int i = 0; i < ndev * n; i++)
        out[i] = NULL;
    dp_tensor *flat_src[DP_NDTYPES] = { NULL };  /* joined once per dtype, shared by devices */
    int rc = 0;
    for (int d = 0; d < ndev && rc == 0; d++) {
        dp_tensor **dev_out = out + (size_t)d * n;
        if (dp_device_eq(devs[d], ts[0]->device)) {
            for (int i = 0; i < n; i++) {
                dp_tensor_retain(ts[i]);
                dev_out[i] = ts[i];
            }
            continue;
        }
        for (int dt = 0; dt < DP_NDTYPES && rc == 0; dt++) {
            int k = 0;
            for (int i = 0; i < n; i++)
                if ((int)ts[i]->dtype == dt)
                    idx[k++] = i;
            if (k > 0)
                rc = broadcast_group(ts, idx, k, devs[d], &flat_src[dt],
                                     reuse ? reuse + (size_t)d * n : NULL, changed, dev_out);
        }
    }
    for (int dt = 0; dt < DP_NDTYPES; dt++)
        dp_tensor_release(flat_src[dt]);
    free(idx);
    if (rc < 0)
        release_all(out, ndev * n);
    return rc;
}

/* ------------------------------------------------------------------ gather, reduce */

dp_tensor *dp_gather(int n, dp_tensor *const *ts, dp_device dev, int dim)
{
    char s1[128], s2[128], a[32], b[32];
    if (n < 1) {
        dp_error("gather: no tensors to gather");
        return NULL;
    }
    if (dp_device_check(dev) < 0)
        return NULL;
    for (int i = 0; i < n; i++) {
        if (!ts[i]) {
            dp_error("gather: tensor %d is missing", i + 1);
            return NULL;
        }
        if (ts[i]->ndim == 0) {
            dp_error("gather: the output on %s is a 0-dimensional tensor, which cannot be "
                     "concatenated along dim %d", dp_device_str(ts[i]->device, a), dim + 1);
            return NULL;
        }
        if (dim < 0 || dim >= ts[i]->ndim) {
            dp_error("gather: dim %d is out of range for an output of %d dimensions (size %s)", dim + 1,
                     ts[i]->ndim, dp_shape_str(ts[i]->ndim, ts[i]->sizes, s1, sizeof s1));
            return NULL;
        }
        bool same = ts[i]->ndim == ts[0]->ndim && ts[i]->dtype == ts[0]->dtype;
        for (int k = 0; same && k < ts[i]->ndim; k++)
            same = k == dim || ts[i]->sizes[k] == ts[0]->sizes[k];
        if (!same) {
            dp_error("gather: outputs cannot be concatenated along dim %d: %s %s on %s and %s %s on %s "
                     "(they may differ only along dim %d)", dim + 1,
                     dp_dtype_name(ts[0]->dtype), dp_shape_str(ts[0]->ndim, ts[0]->sizes, s1, sizeof s1),
                     dp_device_str(ts[0]->device, a),
                     dp_dtype_name(ts[i]->dtype), dp_shape_str(ts[i]->ndim, ts[i]->sizes, s2, sizeof s2),
                     dp_device_str(ts[i]->device, b), dim + 1);
            return NULL;
        }
    }
    dp_tensor **moved = calloc((size_t)n, sizeof *moved);
    if (!moved) {
        dp_error("gather: out of memory");
        return NULL;
    }
    dp_tensor *result = NULL;
    int made = 0;
    for (; made < n; made++) {
        moved[made] = dp_to(ts[made], dev, ts[made]->dtype, async_between(ts[made]->device, dev));
        if (!moved[made])
            goto done;
    }
    result = cat_or_one(n, moved, dim);
done:
    release_all(moved, made);
    free(moved);
    return result;
}

int dp_reduce_add_coalesced(int ndev, int n, dp_tensor *const *ts, dp_device dev, dp_tensor **out)
{
    char s1[128], s2[128];
    if (ndev < 1 || n < 1)
        return dp_error("reduce_add: need at least one list and one tensor (got %d and %d)", ndev, n);
    if (dp_device_check(dev) < 0)
        return -1;
    for (int d = 0; d < ndev; d++)
        for (int i = 0; i < n; i++) {
            dp_tensor *t = ts[(size_t)d * n + i];
            if (!t)
                return dp_error("reduce_add: tensor %d of list %d is missing", i + 1, d + 1);
            if (!dp_same_shape(t, ts[i]) || t->dtype != ts[i]->dtype)
                return dp_error("reduce_add: tensor %d is %s %s in list 1 but %s %s in list %d",
                                i + 1, dp_dtype_name(ts[i]->dtype),
                                dp_shape_str(ts[i]->ndim, ts[i]->sizes, s1, sizeof s1),
                                dp_dtype_name(t->dtype), dp_shape_str(t->ndim, t->sizes, s2, sizeof s2), d + 1);
        }
    int *idx = malloc(sizeof *idx * (size_t)n);
    if (!idx)
        return dp_error("reduce_add: out of memory");
    for (int i = 0; i < n; i++)
        out[i] = NULL;
    int rc = 0;
    for (int dt = 0; dt < DP_NDTYPES && rc == 0; dt++) {
        int k = 0;
        for (int i = 0; i < n; i++)
            if ((int)ts[i]->dtype == dt)
                idx[k++] = i;
        if (k == 0)
            continue;
        dp_tensor *sum = NULL;
        for (int d = 0; d < ndev && rc == 0; d++) {
            /* one buffer per list, one transfer per list, then one add on dev */
            dp_tensor *flat = flatten_join(ts + (size_t)d * n, idx, k);
            dp_tensor *moved = flat ? dp_to(flat, dev, flat->dtype, async_between(flat->device, dev)) : NULL;
            dp_tensor_release(flat);
            if (!moved) {
                rc = -1;
                break;
            }
            if (!sum) {
                sum = moved;
                continue;
            }
            dp_tensor *next = dp_binary(DP_ADD, sum, moved);
            dp_tensor_release(moved);
            dp_tensor_release(sum);
            sum = next;
            if (!sum)
                rc = -1;
        }
        if (rc == 0)
            rc = split_views(sum, ts, idx, k, out);
        dp_tensor_release(sum);
    }
    free(idx);
    if (rc < 0)
        release_all(out, n);
    return rc;
}
