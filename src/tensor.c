/* tensor.c: refcounted storage under strided views; creation; views and their backward
 * passes; reading values back. */
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static atomic_bool g_made;
static atomic_size_t g_host_bytes;
static atomic_size_t g_bytes_ever;
static atomic_uint_least64_t g_bytes_copied;

/* The byte counters only pace the Lua collector, so each thread adds to them in batches
 * (a locked add per small tensor was a tenth of the cost of making one); a thread reads the
 * global count plus its own pending part. */
#define COUNT_BATCH ((int64_t)64 << 10)
static _Thread_local int64_t g_pending_ever, g_pending_host;

static void count_bytes(int64_t allocated, int64_t host_delta)
{
    if (!atomic_load_explicit(&g_made, memory_order_relaxed)) atomic_store(&g_made, true);
    g_pending_ever += allocated;
    g_pending_host += host_delta;
    if (g_pending_ever >= COUNT_BATCH) {
        atomic_fetch_add(&g_bytes_ever, (size_t)g_pending_ever);
        g_pending_ever = 0;
    }
    if (g_pending_host >= COUNT_BATCH || g_pending_host <= -COUNT_BATCH) {
        atomic_fetch_add(&g_host_bytes, (size_t)g_pending_host);   /* wraps back for a negative delta */
        g_pending_host = 0;
    }
}

bool dp_tensors_made(void) { return atomic_load(&g_made); }
size_t dp_host_bytes_in_use(void) { return atomic_load(&g_host_bytes) + (size_t)g_pending_host; }
size_t dp_total_bytes_allocated_ever(void) { return atomic_load(&g_bytes_ever) + (size_t)g_pending_ever; }
uint64_t dp_bytes_copied_between_devices(void) { return atomic_load(&g_bytes_copied); }
void dp_count_copied(uint64_t n) { atomic_fetch_add(&g_bytes_copied, n); }

/* Zeroes a header with plain 16-byte stores: GCC would turn a memset (or a struct
 * assignment) of this size into `rep stos`, whose start-up cost and the store-forwarding
 * stalls of the reads that follow dominate making a small tensor. */
typedef long long zero16 __attribute__((vector_size(16), aligned(8)));
_Static_assert(sizeof(dp_tensor) % 8 == 0 && sizeof(dp_storage) % 8 == 0, "headers are zeroed 8 bytes at a time");
__attribute__((optimize("no-tree-loop-distribute-patterns"))) static void zero_header(void *p, size_t n)
{
    zero16 *w = p;
    for (size_t i = 0; i < n / 16; i++) w[i] = (zero16){ 0, 0 };
    if (n % 16) *(int64_t *)((char *)p + n - 8) = 0;
}

/* ---------------------------------------------------------------- storage */

/* Small host storages live in the same block as their header, and freed tensor headers
 * and small storages are kept on per-thread free lists: making a small tensor costs no
 * malloc in a steady loop. */
#define INLINE_MAX 256
#define FREELIST_MAX 4096
static void inline_deleter(void *ctx, void *data) { (void)ctx; (void)data; }

typedef struct free_block { struct free_block *next; } free_block;
static _Thread_local free_block *g_free_storages, *g_free_tensors;
static _Thread_local int g_n_free_storages, g_n_free_tensors;

/* When a thread ends, its free lists go back to the system. */
static pthread_key_t g_free_key;
static pthread_once_t g_free_once = PTHREAD_ONCE_INIT;

static void free_list(free_block *b)
{
    while (b) { free_block *next = b->next; free(b); b = next; }
}

static void thread_lists_free(void *unused)
{
    (void)unused;
    /* hand this thread's pending byte counts back */
    atomic_fetch_add(&g_bytes_ever, (size_t)g_pending_ever);
    atomic_fetch_add(&g_host_bytes, (size_t)g_pending_host);
    g_pending_ever = g_pending_host = 0;
    free_list(g_free_storages);
    free_list(g_free_tensors);
    g_free_storages = g_free_tensors = NULL;
    g_n_free_storages = g_n_free_tensors = 0;
}

static void free_key_make(void) { pthread_key_create(&g_free_key, thread_lists_free); }

static void *pop_block(free_block **list, int *n)
{
    free_block *b = *list;
    if (b) { *list = b->next; (*n)--; }
    return b;
}

static bool push_block(free_block **list, int *n, void *p)
{
    if (*n >= FREELIST_MAX) return false;
    if (*n == 0) {   /* make sure this thread's lists are handed back when it ends */
        pthread_once(&g_free_once, free_key_make);
        pthread_setspecific(g_free_key, (void *)1);
    }
    free_block *b = p;
    b->next = *list;
    *list = b;
    (*n)++;
    return true;
}

dp_storage *dp_storage_new(dp_device dev, size_t nbytes)
{
    if (dev.type == DP_DEVICE_CPU && nbytes <= INLINE_MAX) {
        if (dev.index >= dp_cpu_device_count() && dp_device_check(dev)) return NULL;
        size_t head = (sizeof(dp_storage) + 63) & ~(size_t)63;
        dp_storage *s = pop_block(&g_free_storages, &g_n_free_storages);
        if (!s) s = aligned_alloc(64, head + INLINE_MAX);
        if (!s) { dp_error("out of memory"); return NULL; }
        zero_header(s, sizeof *s);
        s->refcount = 1;
        s->device = dev;
        s->nbytes = nbytes;
        s->data = (char *)s + head;
        s->deleter = inline_deleter;
        count_bytes((int64_t)nbytes, (int64_t)nbytes);
        return s;
    }
    const dp_backend *be = dp_backend_for(dev);
    if (!be) return NULL;
    dp_storage *s = calloc(1, sizeof *s);
    if (!s) { dp_error("out of memory"); return NULL; }
    s->refcount = 1;
    s->device = dev;
    s->nbytes = nbytes;
    if (nbytes) {
        s->data = be->alloc(dev, nbytes);
        if (!s->data) {               /* let the collector free what it can, then retry once */
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", dp_last_error());
            dp_run_oom_hook();
            if (be->empty_cache) be->empty_cache();
            s->data = be->alloc(dev, nbytes);
            if (!s->data) { dp_error("%s", msg); free(s); return NULL; }
            dp_clear_error();   /* the retry worked: the first failure is no error */
        }
    }
    count_bytes((int64_t)nbytes, dev.type == DP_DEVICE_CPU ? (int64_t)nbytes : 0);
    return s;
}

static void pinned_deleter(void *ctx, void *data) { (void)ctx; dp_pinned_free(data); }

dp_storage *dp_storage_new_pinned(dp_device dev, size_t nbytes)
{
    if (dev.type != DP_DEVICE_CPU) { dp_error("pinned memory is host memory: asked for it on a CUDA device"); return NULL; }
    if (dp_device_check(dev)) return NULL;
    void *p = dp_pinned_alloc(nbytes);
    if (!p) return NULL;
    dp_storage *s = calloc(1, sizeof *s);
    if (!s) { dp_pinned_free(p); dp_error("out of memory"); return NULL; }
    s->refcount = 1;
    s->device = dev;
    s->nbytes = nbytes;
    s->data = p;
    s->deleter = pinned_deleter;
    count_bytes((int64_t)nbytes, (int64_t)nbytes);
    return s;
}

bool dp_storage_is_pinned(const dp_storage *s) { return s && s->deleter == pinned_deleter; }

void dp_storage_retain(dp_storage *s) { __atomic_add_fetch(&s->refcount, 1, __ATOMIC_RELAXED); }

void dp_storage_release(dp_storage *s)
{
    if (!s || __atomic_sub_fetch(&s->refcount, 1, __ATOMIC_ACQ_REL) != 0) return;
    if (s->device.type == DP_DEVICE_CPU) count_bytes(0, -(int64_t)s->nbytes);
    if (s->deleter == inline_deleter) {
        if (!push_block(&g_free_storages, &g_n_free_storages, s)) free(s);
        return;
    }
    if (s->deleter) s->deleter(s->deleter_ctx, s->data);
    else if (s->data) dp_backend_for(s->device)->free(s->device, s->data, s->nbytes);
    free(s);
}

/* ---------------------------------------------------------------- tensors */

void dp_tensor_retain(dp_tensor *t) { __atomic_add_fetch(&t->refcount, 1, __ATOMIC_RELAXED); }

void dp_tensor_release(dp_tensor *t)
{
    if (!t || __atomic_sub_fetch(&t->refcount, 1, __ATOMIC_ACQ_REL) != 0) return;
    dp_tensor_release(t->grad);
    dp_node_release(t->grad_fn);
    dp_storage_release(t->storage);
    if (!push_block(&g_free_tensors, &g_n_free_tensors, t)) free(t);
}

/* A zeroed tensor header. */
static dp_tensor *tensor_header(void)
{
    dp_tensor *t = pop_block(&g_free_tensors, &g_n_free_tensors);
    if (t) zero_header(t, sizeof *t);
    else t = calloc(1, sizeof *t);
    if (!t) dp_error("out of memory");
    return t;
}

/* Fills strides for a contiguous layout; the shape has passed dp_shape_numel.  As PyTorch's,
 * a zero size counts as 1 in the strides of the dimensions before it ([2, 0, 3] has strides
 * [3, 3, 1], not [0, 3, 1]): a stride 0 would make an empty tensor look like an expanded view. */
int64_t dp_contiguous_strides(int ndim, const int64_t *sizes, int64_t *strides)
{
    int64_t n = 1, stride = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        strides[d] = stride;
        stride *= sizes[d] ? sizes[d] : 1;
        n *= sizes[d];
    }
    return n;
}

/* Zero sizes are skipped in the product, as NumPy does: a shape such as [0, 2^62, 2^62] is
 * refused too, so that no partial product (a stride, the count of a slice of it) can
 * overflow either. */
int64_t dp_shape_numel(int ndim, const int64_t *sizes, size_t elem_size)
{
    if (ndim < 0 || ndim > DP_MAX_DIMS) {
        dp_error("tensors have at most %d dimensions, got %d", DP_MAX_DIMS, ndim);
        return -1;
    }
    int64_t n = 1, bytes;
    bool empty = false;
    for (int d = 0; d < ndim; d++) {
        if (sizes[d] < 0) { dp_error("negative size %lld in dimension %d", (long long)sizes[d], d + 1); return -1; }
        if (sizes[d] == 0) { empty = true; continue; }
        if (__builtin_mul_overflow(n, sizes[d], &n)) goto too_large;
    }
    if (__builtin_mul_overflow(n, (int64_t)(elem_size ? elem_size : 1), &bytes) || (uint64_t)bytes > PTRDIFF_MAX
        || (uint64_t)bytes > SIZE_MAX) goto too_large;
    return empty ? 0 : n;
too_large:;
    char b[512];
    dp_error("a tensor of shape %s is too large: its element count times %zu bytes per element overflows "
             "the addressable size", dp_shape_str(ndim, sizes, b, sizeof b), elem_size);
    return -1;
}

int dp_check_count(int64_t n, size_t elem_size, const char *what)
{
    int64_t bytes;
    if (n < 0) return dp_error("%s: the count must be non-negative, got %lld", what, (long long)n);
    if (__builtin_mul_overflow(n, (int64_t)(elem_size ? elem_size : 1), &bytes) || (uint64_t)bytes > PTRDIFF_MAX
        || (uint64_t)bytes > SIZE_MAX)
        return dp_error("%s: %lld elements of %zu bytes are too large for the addressable size", what, (long long)n,
                        elem_size);
    return 0;
}

int64_t dp_numel(const dp_tensor *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->sizes[d];
    return n;
}

bool dp_is_contiguous(const dp_tensor *t)
{
    if (dp_numel(t) == 0) return true;   /* as PyTorch: an empty tensor has no layout to break */
    int64_t expect = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->sizes[d] != 1 && t->strides[d] != expect) return false;
        expect *= t->sizes[d];
    }
    return true;
}

void *dp_data(const dp_tensor *t)
{
    return (char *)t->storage->data + t->offset * (int64_t)dp_dtype_size(t->dtype);
}

bool dp_same_shape(const dp_tensor *a, const dp_tensor *b)
{
    if (a->ndim != b->ndim) return false;
    for (int d = 0; d < a->ndim; d++) if (a->sizes[d] != b->sizes[d]) return false;
    return true;
}

char *dp_shape_str(int ndim, const int64_t *sizes, char *buf, size_t n)
{
    size_t len = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < ndim && len < n; d++)
        len += (size_t)snprintf(buf + len, n - len, "%s%lld", d ? ", " : "", (long long)sizes[d]);
    if (len < n) snprintf(buf + len, n - len, "]");
    return buf;
}

dp_view dp_view_of(const dp_tensor *t)
{
    dp_view v;
    v.data = dp_data(t);
    v.dtype = t->dtype;
    v.ndim = t->ndim;
    memcpy(v.sizes, t->sizes, sizeof v.sizes);
    memcpy(v.strides, t->strides, sizeof v.strides);
    v.device = t->device;
    return v;
}

dp_tensor *dp_empty(int ndim, const int64_t *sizes, dp_dtype dt, dp_device dev)
{
    if ((unsigned)dt >= DP_NDTYPES) { dp_error("invalid dtype %d", (int)dt); return NULL; }
    if (dp_shape_numel(ndim, sizes, dp_dtype_size(dt)) < 0) return NULL;
    dp_tensor *t = tensor_header();
    if (!t) return NULL;
    t->refcount = 1;
    t->dtype = dt;
    t->ndim = ndim;
    if (ndim) memcpy(t->sizes, sizes, sizeof(int64_t) * (size_t)ndim);
    int64_t n = dp_contiguous_strides(ndim, sizes, t->strides);
    t->storage = dp_storage_new(dev, (size_t)n * dp_dtype_size(dt));
    if (!t->storage) { if (!push_block(&g_free_tensors, &g_n_free_tensors, t)) free(t); return NULL; }
    t->device = dev;
    return t;
}

/* A contiguous tensor of t's shape and dtype in pinned memory, holding t's values. */
dp_tensor *dp_pin_memory(dp_tensor *t)
{
    if (t->device.type != DP_DEVICE_CPU) {
        char buf[32];
        dp_error("pin_memory: only CPU tensors can be pinned, this one is on %s", dp_device_str(t->device, buf));
        return NULL;
    }
    if (dp_storage_is_pinned(t->storage)) { dp_tensor_retain(t); return t; }
    dp_tensor *out = tensor_header();
    if (!out) return NULL;
    out->refcount = 1;
    out->dtype = t->dtype;
    out->ndim = t->ndim;
    if (t->ndim) memcpy(out->sizes, t->sizes, sizeof(int64_t) * (size_t)t->ndim);
    int64_t n = dp_contiguous_strides(t->ndim, t->sizes, out->strides);
    out->storage = dp_storage_new_pinned(t->device, (size_t)n * dp_dtype_size(t->dtype));
    if (!out->storage) { if (!push_block(&g_free_tensors, &g_n_free_tensors, out)) free(out); return NULL; }
    out->device = t->device;
    if (dp_copy_raw(out, t)) { dp_tensor_release(out); return NULL; }
    return out;
}

bool dp_is_pinned(const dp_tensor *t) { return dp_storage_is_pinned(t->storage); }

dp_tensor *dp_full(int ndim, const int64_t *sizes, double value, dp_dtype dt, dp_device dev)
{
    dp_tensor *t = dp_empty(ndim, sizes, dt, dev);
    if (t && dp_numel(t)) {
        dp_view v = dp_view_of(t);
        if (dp_backend_for(dev)->fill(&v, value)) { dp_tensor_release(t); return NULL; }
    }
    return t;
}

dp_tensor *dp_zeros(int ndim, const int64_t *sizes, dp_dtype dt, dp_device dev) { return dp_full(ndim, sizes, 0, dt, dev); }
dp_tensor *dp_ones(int ndim, const int64_t *sizes, dp_dtype dt, dp_device dev) { return dp_full(ndim, sizes, 1, dt, dev); }

dp_tensor *dp_from_host(const void *src, dp_dtype src_dt, int ndim, const int64_t *sizes, dp_dtype dt, dp_device dev)
{
    dp_tensor *host = dp_empty(ndim, sizes, src_dt, dp_cpu());
    if (!host) return NULL;
    if (dp_numel(host)) memcpy(dp_data(host), src, (size_t)dp_numel(host) * dp_dtype_size(src_dt));
    if (src_dt == dt && dp_device_eq(dev, host->device)) return host;
    dp_tensor *out = dp_empty(ndim, sizes, dt, dev);
    if (out && dp_copy_raw(out, host)) { dp_tensor_release(out); out = NULL; }
    dp_tensor_release(host);
    return out;
}

dp_tensor *dp_arange(double start, double stop, double step, dp_dtype dt, dp_device dev)
{
    if (step == 0) { dp_error("arange: step must be nonzero"); return NULL; }
    if ((step > 0 && start > stop) || (step < 0 && start < stop)) {
        dp_error("arange: upper bound %g and lower bound %g inconsistent with step sign %g", stop, start, step);
        return NULL;
    }
    double count = ceil((stop - start) / step);
    if (!(count < 0x1p62)) {   /* NaN too: a count a double cannot even hold exactly */
        dp_error("arange: %g elements from %g to %g by %g are too large", count, start, stop, step);
        return NULL;
    }
    int64_t n = count > 0 ? (int64_t)count : 0;
    if (dp_check_count(n, sizeof(double), "arange") || dp_shape_numel(1, &n, dp_dtype_size(dt)) < 0) return NULL;
    double *vals = malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (!vals) { dp_error("out of memory"); return NULL; }
    for (int64_t i = 0; i < n; i++) vals[i] = start + (double)i * step;
    dp_tensor *t = dp_from_host(vals, DP_FLOAT64, 1, &n, dt, dev);
    free(vals);
    return t;
}

dp_tensor *dp_eye(int64_t n, int64_t m, dp_dtype dt, dp_device dev)
{
    if (n < 0 || m < 0) { dp_error("eye: sizes must be non-negative, got %lld x %lld", (long long)n, (long long)m); return NULL; }
    int64_t sizes[2] = { n, m };
    dp_tensor *t = dp_zeros(2, sizes, dt, dp_cpu());
    if (!t) return NULL;
    int64_t k = n < m ? n : m, step = m + 1;   /* the diagonal as one strided view, filled once */
    dp_tensor *diag = k ? dp_make_view(t, 1, &k, &step, 0) : NULL;
    if (k && (!diag || dp_fill_(diag, 1))) { dp_tensor_release(diag); dp_tensor_release(t); return NULL; }
    dp_tensor_release(diag);
    if (dp_device_eq(dev, t->device)) return t;
    dp_tensor *out = dp_to(t, dev, dt, false);
    dp_tensor_release(t);
    return out;
}

/* ---------------------------------------------------------------- views */

/* A view's shape passes dp_shape_numel as a new tensor's does (an expand to 2^62 elements is
 * refused, not left for a kernel to overflow on), and the elements it reaches must have
 * offsets that fit. */
static int check_view(int ndim, const int64_t *sizes, const int64_t *strides, int64_t offset, dp_dtype dt)
{
    int64_t n = dp_shape_numel(ndim, sizes, dp_dtype_size(dt));
    if (n <= 0 || !strides) return n < 0 ? -1 : 0;
    int64_t lo = offset, hi = offset, step;
    for (int d = 0; d < ndim; d++) {
        if (__builtin_mul_overflow(sizes[d] - 1, strides[d], &step)
            || __builtin_add_overflow(step < 0 ? lo : hi, step, step < 0 ? &lo : &hi)) {
            char b[256];
            return dp_error("a view of shape %s with these strides is too large: its element offsets overflow",
                            dp_shape_str(ndim, sizes, b, sizeof b));
        }
    }
    if (lo < 0) return dp_error("a view reaches before the start of its storage (offset %lld)", (long long)lo);
    return 0;
}

dp_tensor *dp_make_view(dp_tensor *t, int ndim, const int64_t *sizes, const int64_t *strides, int64_t offset)
{
    if (check_view(ndim, sizes, strides, offset, t->dtype)) return NULL;
    dp_tensor *v = tensor_header();
    if (!v) return NULL;
    v->refcount = 1;
    v->dtype = t->dtype;
    v->ndim = ndim;
    if (ndim) {
        memcpy(v->sizes, sizes, sizeof(int64_t) * (size_t)ndim);
        if (strides) memcpy(v->strides, strides, sizeof(int64_t) * (size_t)ndim);
        else dp_contiguous_strides(ndim, sizes, v->strides);
    }
    v->offset = offset;
    v->storage = t->storage;
    dp_storage_retain(t->storage);
    v->device = t->device;
    return v;
}

dp_tensor *dp_alias(dp_tensor *t) { return dp_make_view(t, t->ndim, t->sizes, t->strides, t->offset); }

dp_tensor *dp_detach(dp_tensor *t) { return dp_alias(t); }

static int check_dim(const dp_tensor *t, int dim, const char *op)
{
    if (dim < 0 || dim >= t->ndim) {
        if (t->ndim == 0) return dp_error("%s: dimension %d is out of range for a 0-dimensional tensor", op, dim + 1);
        return dp_error("%s: dimension %d is out of range (the tensor has %d dimension%s)", op, dim + 1,
                        t->ndim, t->ndim == 1 ? "" : "s");
    }
    return 0;
}

/* Backward of every view that only rearranges elements: reshape the gradient back. */
static int reshape_backward(dp_node *n, dp_tensor *g, dp_tensor **gin)
{
    gin[0] = dp_reshape(g, n->in[0].ndim, n->in[0].sizes);
    return gin[0] ? 0 : -1;
}

/* Backward of select and slice (ip: dim, start, step or 0 for select, length): the gradient
   lands in a zero tensor of the input's shape. */
static int slice_backward(dp_node *n, dp_tensor *g, dp_tensor **gin)
{
    dp_tensor *z = dp_zeros(n->in[0].ndim, n->in[0].sizes, g->dtype, g->device);
    if (!z) return -1;
    dp_tensor *part = n->ip[2] ? dp_slice(z, (int)n->ip[0], n->ip[1], n->ip[3], n->ip[2])
                               : dp_select(z, (int)n->ip[0], n->ip[1]);
    int rc = part ? dp_copy_raw(part, g) : -1;
    dp_tensor_release(part);
    if (rc) { dp_tensor_release(z); return -1; }
    gin[0] = z;
    return 0;
}

static int transpose_backward(dp_node *n, dp_tensor *g, dp_tensor **gin)
{
    gin[0] = dp_transpose(g, (int)n->ip[0], (int)n->ip[1]);
    return gin[0] ? 0 : -1;
}

static int permute_backward(dp_node *n, dp_tensor *g, dp_tensor **gin)
{
    int inv[DP_MAX_DIMS];
    for (int d = 0; d < g->ndim; d++) inv[n->ip[d]] = d;
    gin[0] = dp_permute(g, inv);
    return gin[0] ? 0 : -1;
}

static int expand_backward(dp_node *n, dp_tensor *g, dp_tensor **gin)
{
    gin[0] = dp_sum_to(g, n->in[0].ndim, n->in[0].sizes);
    return gin[0] ? 0 : -1;
}

/* Wraps a fresh view v of t into the graph. */
static dp_tensor *record_view(dp_tensor *v, dp_tensor *t, const char *name, dp_backward_fn fn, const int64_t *ip, int nip)
{
    if (v && dp_needs_grad(1, &t)) {
        dp_node *node = dp_node_new(name, fn, 1, &t);
        if (!node) { dp_tensor_release(v); return NULL; }
        for (int i = 0; i < nip; i++) node->ip[i] = ip[i];
        dp_attach(v, node);
        v->storage->graph_views = true;
    }
    return v;
}

dp_tensor *dp_select(dp_tensor *t, int dim, int64_t index)
{
    if (check_dim(t, dim, "select")) return NULL;
    if (index < 0 || index >= t->sizes[dim]) {
        dp_error("index %lld is out of range for dimension %d with size %lld", (long long)index + 1, dim + 1,
                 (long long)t->sizes[dim]);
        return NULL;
    }
    int64_t sizes[DP_MAX_DIMS], strides[DP_MAX_DIMS];
    for (int d = 0, k = 0; d < t->ndim; d++)
        if (d != dim) { sizes[k] = t->sizes[d]; strides[k++] = t->strides[d]; }
    dp_tensor *v = dp_make_view(t, t->ndim - 1, sizes, strides, t->offset + index * t->strides[dim]);
    int64_t ip[4] = { dim, index, 0, 0 };
    return record_view(v, t, "SelectBackward0", slice_backward, ip, 4);
}

/* The geometry of t's diagonal of the planes (d1, d2) with an offset, as the last dim of a
 * view (PyTorch's torch.diagonal); *n is its length. */
static int diagonal_geometry(const dp_tensor *t, int64_t offset, int d1, int d2, int64_t *sizes, int64_t *strides,
                             int64_t *start, int64_t *n)
{
    if (t->ndim < 2) return dp_error("diagonal: expected a tensor with at least 2 dimensions, got %d", t->ndim);
    if (check_dim(t, d1, "diagonal") || check_dim(t, d2, "diagonal")) return -1;
    if (d1 == d2) return dp_error("diagonal: dim1 and dim2 cannot be the same dimension (%d)", d1 + 1);
    int64_t h = t->sizes[d1], w = t->sizes[d2];
    int64_t len = offset >= 0 ? (w - offset < h ? w - offset : h) : (h + offset < w ? h + offset : w);
    if (len < 0) len = 0;
    int k = 0;
    for (int d = 0; d < t->ndim; d++)
        if (d != d1 && d != d2) { sizes[k] = t->sizes[d]; strides[k++] = t->strides[d]; }
    sizes[k] = len;
    strides[k] = t->strides[d1] + t->strides[d2];
    *start = t->offset;
    if (len > 0) *start += offset >= 0 ? offset * t->strides[d2] : -offset * t->strides[d1];
    *n = len;
    return 0;
}

/* Backward of diagonal (ip: offset, dim1, dim2): the gradient on the diagonal of zeros. */
static int diagonal_backward(dp_node *n, dp_tensor *g, dp_tensor **gin)
{
    dp_tensor *z = dp_zeros(n->in[0].ndim, n->in[0].sizes, g->dtype, g->device);
    if (!z) return -1;
    int64_t sizes[DP_MAX_DIMS], strides[DP_MAX_DIMS], start, len;
    int rc = diagonal_geometry(z, n->ip[0], (int)n->ip[1], (int)n->ip[2], sizes, strides, &start, &len);
    dp_tensor *part = rc ? NULL : dp_make_view(z, z->ndim - 1, sizes, strides, start);
    rc = part ? dp_copy_raw(part, g) : -1;
    dp_tensor_release(part);
    if (rc) { dp_tensor_release(z); return -1; }
    gin[0] = z;
    return 0;
}

dp_tensor *dp_diagonal(dp_tensor *t, int64_t offset, int d1, int d2)
{
    int64_t sizes[DP_MAX_DIMS], strides[DP_MAX_DIMS], start, len;
    if (diagonal_geometry(t, offset, d1, d2, sizes, strides, &start, &len)) return NULL;
    dp_tensor *v = dp_make_view(t, t->ndim - 1, sizes, strides, start);
    int64_t ip[3] = { offset, d1, d2 };
    return record_view(v, t, "DiagonalBackward0", diagonal_backward, ip, 3);
}

/* Backward of unfold (ip: dim, size, step, windows): each offset k inside a window gathers
   the gradient of every window's k-th element, a strided slice of the input's dim, so that
   overlapping windows add up. */
static int unfold_backward(dp_node *n, dp_tensor *g, dp_tensor **gin)
{
    int dim = (int)n->ip[0];
    int64_t size = n->ip[1], step = n->ip[2], windows = n->ip[3];
    if (n->in[0].ndim == 0) {   /* a 0-dim input: its one window is itself */
        gin[0] = dp_reshape(g, 0, NULL);
        return gin[0] ? 0 : -1;
    }
    dp_tensor *z = dp_zeros(n->in[0].ndim, n->in[0].sizes, g->dtype, g->device);
    if (!z) return -1;
    int rc = 0;
    for (int64_t k = 0; k < size && windows > 0 && !rc; k++) {
        dp_tensor *part = dp_slice(z, dim, k, windows, step), *gk = dp_select(g, g->ndim - 1, k);
        rc = part && gk ? dp_binary_(DP_ADD, part, gk) : -1;
        dp_tensor_release(part);
        dp_tensor_release(gk);
    }
    if (rc) { dp_tensor_release(z); return -1; }
    gin[0] = z;
    return 0;
}

dp_tensor *dp_unfold(dp_tensor *t, int dim, int64_t size, int64_t step)
{
    int nd = t->ndim ? t->ndim : 1;
    if (dim < 0 || dim >= nd) { dp_error("unfold: dimension %d is out of range for a %d-D tensor", dim + 1, t->ndim); return NULL; }
    int64_t len = t->ndim ? t->sizes[dim] : 1, stride = t->ndim ? t->strides[dim] : 1;
    if (size < 0 || size > len) {
        dp_error("unfold: size %lld is larger than dimension %d's size %lld", (long long)size, dim + 1, (long long)len);
        return NULL;
    }
    if (step <= 0) { dp_error("unfold: step must be positive, got %lld", (long long)step); return NULL; }
    int64_t windows = (len - size) / step + 1;
    int64_t sizes[DP_MAX_DIMS], strides[DP_MAX_DIMS];
    if (t->ndim + 1 > DP_MAX_DIMS) { dp_error("unfold: the result would have more than %d dimensions", DP_MAX_DIMS); return NULL; }
    memcpy(sizes, t->sizes, sizeof(int64_t) * (size_t)t->ndim);
    memcpy(strides, t->strides, sizeof(int64_t) * (size_t)t->ndim);
    int rd = t->ndim ? t->ndim : 0;
    if (t->ndim) { sizes[dim] = windows; strides[dim] = stride * step; }
    sizes[rd] = size;
    strides[rd] = stride;
    dp_tensor *v = dp_make_view(t, rd + 1, sizes, strides, t->offset);
    int64_t ip[4] = { dim, size, step, windows };
    return record_view(v, t, "UnfoldBackward0", unfold_backward, ip, 4);
}

dp_tensor *dp_narrow(dp_tensor *t, int dim, int64_t start, int64_t length)
{
    return dp_slice(t, dim, start, length, 1);
}

/* length elements of dim from start, every step-th (PyTorch's t[start:start+length*step:step]) */
dp_tensor *dp_slice(dp_tensor *t, int dim, int64_t start, int64_t length, int64_t step)
{
    if (check_dim(t, dim, "narrow")) return NULL;
    if (step < 1) {
        dp_error("slice step must be positive, got %lld", (long long)step);
        return NULL;
    }
    if (start < 0 || length < 0 || start > t->sizes[dim] ||
        (length > 0 && (start >= t->sizes[dim] || (length - 1) > (t->sizes[dim] - start - 1) / step))) {
        if (step == 1)
            dp_error("narrow: start %lld and length %lld are out of range for dimension %d with size %lld",
                     (long long)start + 1, (long long)length, dim + 1, (long long)t->sizes[dim]);
        else
            dp_error("slice: start %lld, length %lld and step %lld are out of range for dimension %d with size %lld",
                     (long long)start + 1, (long long)length, (long long)step, dim + 1, (long long)t->sizes[dim]);
        return NULL;
    }
    int64_t sizes[DP_MAX_DIMS], strides[DP_MAX_DIMS];
    memcpy(sizes, t->sizes, sizeof sizes);
    memcpy(strides, t->strides, sizeof strides);
    sizes[dim] = length;
    strides[dim] *= step;
    dp_tensor *v = dp_make_view(t, t->ndim, sizes, strides, t->offset + start * t->strides[dim]);
    int64_t ip[4] = { dim, start, step, length };
    return record_view(v, t, "SliceBackward0", slice_backward, ip, 4);
}

/* Resolves one -1 and checks the element count. */
static int infer_sizes(const dp_tensor *t, int ndim, const int64_t *in, int64_t *out)
{
    if (ndim > DP_MAX_DIMS) return dp_error("tensors have at most %d dimensions, got %d", DP_MAX_DIMS, ndim);
    int64_t known = 1, n = dp_numel(t);
    int infer = -1;
    for (int d = 0; d < ndim; d++) {
        out[d] = in[d];
        if (in[d] == -1) {
            if (infer >= 0) return dp_error("only one dimension can be inferred (-1)");
            infer = d;
        } else if (in[d] < 0) {
            return dp_error("invalid shape dimension %lld", (long long)in[d]);
        } else if (__builtin_mul_overflow(known, in[d], &known)) {
            char a[128];
            return dp_error("shape '%s' is too large: its element count overflows", dp_shape_str(ndim, in, a, sizeof a));
        }
    }
    char a[128], b[128];
    if (infer >= 0) {
        if (known == 0 || n % known) {
            dp_error("shape '%s' is invalid for input of size %lld", dp_shape_str(ndim, in, a, sizeof a), (long long)n);
            return -1;
        }
        out[infer] = n / known;
    } else if (known != n) {
        dp_error("shape '%s' is invalid for input of size %lld (input shape %s)", dp_shape_str(ndim, in, a, sizeof a),
                 (long long)n, dp_shape_str(t->ndim, t->sizes, b, sizeof b));
        return -1;
    }
    /* an empty input takes any shape with a zero in it: its strides must still fit */
    return dp_shape_numel(ndim, out, dp_dtype_size(t->dtype)) < 0 ? -1 : 0;
}

/* Strides for viewing t with new sizes without a copy, or false when impossible
 * (the algorithm of PyTorch's computeStride). */
static bool view_strides(const dp_tensor *t, int ndim, const int64_t *sizes, int64_t *strides)
{
    if (dp_numel(t) == 0 || t->ndim == 0) { dp_contiguous_strides(ndim, sizes, strides); return true; }
    int view_d = ndim - 1;
    int64_t chunk_base_stride = t->strides[t->ndim - 1], tensor_numel = 1, view_numel = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        tensor_numel *= t->sizes[d];
        if (d == 0 || (t->sizes[d - 1] != 1 && t->strides[d - 1] != tensor_numel * chunk_base_stride)) {
            while (view_d >= 0 && (view_numel < tensor_numel || sizes[view_d] == 1)) {
                strides[view_d] = view_numel * chunk_base_stride;
                view_numel *= sizes[view_d];
                view_d--;
            }
            if (view_numel != tensor_numel) return false;
            if (d > 0) { chunk_base_stride = t->strides[d - 1]; tensor_numel = 1; view_numel = 1; }
        }
    }
    return view_d == -1;
}

dp_tensor *dp_view_sizes(dp_tensor *t, int ndim, const int64_t *in_sizes)
{
    int64_t sizes[DP_MAX_DIMS], strides[DP_MAX_DIMS];
    if (infer_sizes(t, ndim, in_sizes, sizes)) return NULL;
    if (!view_strides(t, ndim, sizes, strides)) {
        dp_error("view size is not compatible with input tensor's size and stride (at least one dimension "
                 "spans across two contiguous subspaces); use reshape instead");
        return NULL;
    }
    dp_tensor *v = dp_make_view(t, ndim, sizes, strides, t->offset);
    return record_view(v, t, "ViewBackward0", reshape_backward, NULL, 0);
}

dp_tensor *dp_reshape(dp_tensor *t, int ndim, const int64_t *in_sizes)
{
    int64_t sizes[DP_MAX_DIMS], strides[DP_MAX_DIMS];
    if (infer_sizes(t, ndim, in_sizes, sizes)) return NULL;
    if (view_strides(t, ndim, sizes, strides)) {
        dp_tensor *v = dp_make_view(t, ndim, sizes, strides, t->offset);
        return record_view(v, t, "ViewBackward0", reshape_backward, NULL, 0);
    }
    dp_tensor *c = dp_contiguous(t);
    if (!c) return NULL;
    dp_tensor *v = dp_view_sizes(c, ndim, sizes);
    dp_tensor_release(c);
    return v;
}

dp_tensor *dp_transpose(dp_tensor *t, int d0, int d1)
{
    int64_t ip[2] = { d0, d1 };
    if (t->ndim == 0 && (d0 == 0 || d0 == -1) && (d1 == 0 || d1 == -1))   /* the tensor itself, still a view */
        return record_view(dp_alias(t), t, "TransposeBackward0", transpose_backward, ip, 2);
    if (check_dim(t, d0, "transpose") || check_dim(t, d1, "transpose")) return NULL;
    int64_t sizes[DP_MAX_DIMS], strides[DP_MAX_DIMS];
    memcpy(sizes, t->sizes, sizeof sizes);
    memcpy(strides, t->strides, sizeof strides);
    sizes[d0] = t->sizes[d1]; sizes[d1] = t->sizes[d0];
    strides[d0] = t->strides[d1]; strides[d1] = t->strides[d0];
    dp_tensor *v = dp_make_view(t, t->ndim, sizes, strides, t->offset);
    return record_view(v, t, "TransposeBackward0", transpose_backward, ip, 2);
}

dp_tensor *dp_permute(dp_tensor *t, const int *perm)
{
    int64_t sizes[DP_MAX_DIMS], strides[DP_MAX_DIMS], ip[DP_MAX_DIMS];
    bool seen[DP_MAX_DIMS] = { false };
    for (int d = 0; d < t->ndim; d++) {
        int p = perm[d];
        if (p < 0 || p >= t->ndim || seen[p]) {
            dp_error("permute: the dimensions must be a permutation of 1..%d (got %d at position %d)", t->ndim, p + 1, d + 1);
            return NULL;
        }
        seen[p] = true;
        sizes[d] = t->sizes[p];
        strides[d] = t->strides[p];
        ip[d] = p;
    }
    dp_tensor *v = dp_make_view(t, t->ndim, sizes, strides, t->offset);
    return record_view(v, t, "PermuteBackward0", permute_backward, ip, t->ndim);
}

dp_tensor *dp_unsqueeze(dp_tensor *t, int dim)
{
    if (dim < 0 || dim > t->ndim) {
        dp_error("unsqueeze: dimension %d is out of range (expected 1 to %d)", dim + 1, t->ndim + 1);
        return NULL;
    }
    if (t->ndim >= DP_MAX_DIMS) { dp_error("tensors have at most %d dimensions", DP_MAX_DIMS); return NULL; }
    int64_t sizes[DP_MAX_DIMS], strides[DP_MAX_DIMS];
    for (int d = 0, k = 0; d <= t->ndim; d++) {
        if (d == dim) {
            sizes[d] = 1;
            strides[d] = dim < t->ndim ? t->sizes[dim] * t->strides[dim] : 1;
        } else { sizes[d] = t->sizes[k]; strides[d] = t->strides[k]; k++; }
    }
    dp_tensor *v = dp_make_view(t, t->ndim + 1, sizes, strides, t->offset);
    return record_view(v, t, "UnsqueezeBackward0", reshape_backward, NULL, 0);
}

dp_tensor *dp_squeeze(dp_tensor *t, int dim)
{
    if (dim >= 0 && t->ndim > 0 && check_dim(t, dim, "squeeze")) return NULL;
    int64_t sizes[DP_MAX_DIMS], strides[DP_MAX_DIMS];
    int k = 0;
    for (int d = 0; d < t->ndim; d++) {
        bool drop = t->sizes[d] == 1 && (dim < 0 || d == dim);
        if (!drop) { sizes[k] = t->sizes[d]; strides[k++] = t->strides[d]; }
    }
    dp_tensor *v = dp_make_view(t, k, sizes, strides, t->offset);
    return record_view(v, t, "SqueezeBackward0", reshape_backward, NULL, 0);
}

dp_tensor *dp_expand(dp_tensor *t, int ndim, const int64_t *want)
{
    char a[128], b[128];
    if (ndim < t->ndim || ndim > DP_MAX_DIMS) {
        dp_error("expand: the number of sizes provided (%d) must be greater or equal to the number of "
                 "dimensions in the tensor (%d)", ndim, t->ndim);
        return NULL;
    }
    int64_t sizes[DP_MAX_DIMS], strides[DP_MAX_DIMS];
    int off = ndim - t->ndim;
    for (int d = 0; d < ndim; d++) {
        int src = d - off;
        int64_t have = src >= 0 ? t->sizes[src] : 1;
        int64_t w = want[d];
        if (w == -1) {
            if (src < 0) { dp_error("expand: -1 is not allowed in a leading, non-existing dimension %d", d + 1); return NULL; }
            w = have;
        }
        if (have == w) { sizes[d] = w; strides[d] = src >= 0 ? t->strides[src] : 0; }
        else if (have == 1) { sizes[d] = w; strides[d] = 0; }
        else {
            dp_error("expand: the expanded size of the tensor (%lld) must match the existing size (%lld) at "
                     "non-singleton dimension %d; target sizes %s, tensor sizes %s", (long long)w, (long long)have,
                     d + 1, dp_shape_str(ndim, want, a, sizeof a), dp_shape_str(t->ndim, t->sizes, b, sizeof b));
            return NULL;
        }
    }
    dp_tensor *v = dp_make_view(t, ndim, sizes, strides, t->offset);
    return record_view(v, t, "ExpandBackward0", expand_backward, NULL, 0);
}

dp_tensor *dp_flatten(dp_tensor *t, int start, int end)
{
    if (t->ndim == 0) { int64_t one = 1; return dp_reshape(t, 1, &one); }
    if (check_dim(t, start, "flatten") || check_dim(t, end, "flatten")) return NULL;
    if (start > end) { dp_error("flatten: start dimension %d comes after end dimension %d", start + 1, end + 1); return NULL; }
    int64_t sizes[DP_MAX_DIMS];
    int k = 0;
    for (int d = 0; d < start; d++) sizes[k++] = t->sizes[d];
    int64_t m = 1;
    for (int d = start; d <= end; d++) m *= t->sizes[d];
    sizes[k++] = m;
    for (int d = end + 1; d < t->ndim; d++) sizes[k++] = t->sizes[d];
    return dp_reshape(t, k, sizes);
}

/* ---------------------------------------------------------------- reading values */

int dp_to_host(dp_tensor *t, void *out, dp_dtype dt, int64_t n)
{
    if (n != dp_numel(t)) return dp_error("expected %lld elements, the tensor has %lld", (long long)n, (long long)dp_numel(t));
    if (n == 0) return 0;
    dp_tensor *host = dp_empty(t->ndim, t->sizes, dt, dp_cpu());
    if (!host) return -1;
    int rc = dp_copy_raw(host, t);
    if (!rc) memcpy(out, dp_data(host), (size_t)n * dp_dtype_size(dt));
    dp_tensor_release(host);
    return rc;
}

int dp_to_doubles(dp_tensor *t, double *out, int64_t n) { return dp_to_host(t, out, DP_FLOAT64, n); }

int dp_item(dp_tensor *t, double *out)
{
    if (dp_numel(t) != 1) {
        char b[128];
        return dp_error("a tensor with %lld elements (shape %s) cannot be converted to a number; item() needs exactly one",
                        (long long)dp_numel(t), dp_shape_str(t->ndim, t->sizes, b, sizeof b));
    }
    return dp_to_doubles(t, out, 1);
}
