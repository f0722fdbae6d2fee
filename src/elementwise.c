/* elementwise.c: the op table's elementwise ops (ops.def): dtype promotion and
 * broadcasting, dispatch to the device's backend, recording for autograd (the backward
 * formulas are in derivatives.c), and the in-place forms. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---------------------------------------------------------------- checks and promotion */

int dp_check_same_device(int n, dp_tensor *const *ts)
{
    for (int i = 1; i < n; i++) {
        if (ts[i] && !dp_device_eq(ts[i]->device, ts[0]->device)) {
            char a[32], b[32];
            return dp_error("expected all tensors to be on the same device, but found at least two devices, %s and %s",
                            dp_device_str(ts[0]->device, a), dp_device_str(ts[i]->device, b));
        }
    }
    return 0;
}

static int dtype_rank(dp_dtype d)
{
    return d == DP_BOOL ? 0 : d == DP_INT64 ? 1 : dp_dtype_is_half(d) ? 2 : d == DP_FLOAT32 ? 3 : 4;
}
static int dtype_category(dp_dtype d) { return d == DP_BOOL ? 0 : d == DP_INT64 ? 1 : 2; }

/* float16 with bfloat16 is float32, as in PyTorch (neither holds the other) */
dp_dtype dp_promote(dp_dtype a, dp_dtype b)
{
    if (a != b && dp_dtype_is_half(a) && dp_dtype_is_half(b)) return DP_FLOAT32;
    return dtype_rank(a) >= dtype_rank(b) ? a : b;
}

/* PyTorch's rule: a 0-dim operand only decides the dtype when it is of a higher category. */
static dp_dtype promote_tensors(const dp_tensor *a, const dp_tensor *b)
{
    if ((a->ndim == 0) != (b->ndim == 0)) {
        const dp_tensor *dim = a->ndim ? a : b, *zero = a->ndim ? b : a;
        /* int64 tensor + float64 0-d tensor is float64, bool tensor + int64 0-d tensor int64 */
        return dtype_category(zero->dtype) <= dtype_category(dim->dtype) ? dim->dtype : zero->dtype;
    }
    return dp_promote(a->dtype, b->dtype);
}

int dp_broadcast_shape(int na, const int64_t *sa, int nb, const int64_t *sb, int *nout, int64_t *sout)
{
    int n = na > nb ? na : nb;
    for (int i = 0; i < n; i++) {
        int ia = na - n + i, ib = nb - n + i;
        int64_t x = ia >= 0 ? sa[ia] : 1, y = ib >= 0 ? sb[ib] : 1;
        if (x != y && x != 1 && y != 1) {
            char a[128], b[128];
            return dp_error("The size of tensor a (%lld) must match the size of tensor b (%lld) at non-singleton "
                            "dimension %d (shapes %s and %s)", (long long)x, (long long)y, i + 1,
                            dp_shape_str(na, sa, a, sizeof a), dp_shape_str(nb, sb, b, sizeof b));
        }
        sout[i] = x == 1 ? y : x;
    }
    *nout = n;
    return 0;
}

dp_view dp_broadcast_view(const dp_tensor *t, int ndim, const int64_t *sizes)
{
    dp_view v = dp_view_of(t);
    v.ndim = ndim;
    for (int d = 0; d < ndim; d++) {
        int src = d - (ndim - t->ndim);
        v.sizes[d] = sizes[d];
        v.strides[d] = src >= 0 && t->sizes[src] == sizes[d] ? t->strides[src] : 0;
    }
    return v;
}

void dp_bump_version(dp_tensor *t) { t->storage->version++; }

int dp_check_inplace(dp_tensor *t, const char *op)
{
    if (!dp_grad_enabled() || !t->requires_grad) return 0;
    if (!t->grad_fn)
        return dp_error("a leaf tensor that requires grad is being used in an in-place operation (%s); "
                        "wrap it in torch.no_grad or use the out-of-place form", op);
    return dp_error("in-place operation %s on a tensor that requires grad is not supported; use the "
                    "out-of-place form", op);
}

/* ---------------------------------------------------------------- the op table as data */

static const dp_op_info op_table[] = {
#define DP_UNARY_OP(NAME, lua, BIND, node, RULE, SAVE, formula) \
    { DP_OP_UNARY, DP_##NAME, lua, ROW_BIND_##BIND, node, NULL, #RULE, NULL, #SAVE },
#define DP_BINARY_OP(NAME, lua, BIND, node, KIND, BOOLS, SAVE, formula) \
    { DP_OP_BINARY, DP_##NAME, lua, ROW_BIND_##BIND, node, NULL, #KIND, #BOOLS, #SAVE },
#define DP_REDUCE_OP(NAME, lua, BIND, node_all, node_dim, KIND) \
    { DP_OP_REDUCE, DP_##NAME, lua, ROW_BIND_##BIND, node_all, node_dim, #KIND, NULL, NULL },
#define ROW_BIND_AUTO "auto"
#define ROW_BIND_OWN "own"
#define ROW_BIND_NONE "none"
#include "ops.def"
};
#define N_ROWS ((int)(sizeof op_table / sizeof op_table[0]))
_Static_assert(N_ROWS == DP_NUNARY + DP_NBINARY + DP_NREDUCE, "every op has one row");

const dp_op_info *dp_op_table(int *n)
{
    *n = N_ROWS;
    return op_table;
}

/* rows are in family order (unary, binary, reduce), each in enum order */
const dp_op_info *dp_op_find(dp_op_family family, int op)
{
    static const int first[] = { 0, DP_NUNARY, DP_NUNARY + DP_NBINARY };
    static const int count[] = { DP_NUNARY, DP_NBINARY, DP_NREDUCE };
    if ((unsigned)family > DP_OP_REDUCE || op < 0 || op >= count[family]) return NULL;
    return &op_table[first[family] + op];
}

/* The facts the dispatch needs, as flags, from the same rows. */
enum {
    RULE_FLOAT = 1, RULE_NOBOOL = 2, RULE_SAME = 4, RULE_FLOATONLY = 8, SAVES_IN = 16, SAVES_OUT = 32, SAVES_BOTH = 64,
    BOOLS_KEEP = 128, BOOLS_NONE = 256, BOOLS_NOBOOL = 512, KIND_FLOAT = 1024, KIND_FLOATONLY = 2048, KIND_CMP = 4096,
    SAVES_CROSS = 8192, SAVES_FOR_B = 16384,
};
#define FLAG_RULE_FLOAT RULE_FLOAT
#define FLAG_RULE_FLOATONLY RULE_FLOATONLY
#define FLAG_KIND_ARITH 0
#define FLAG_KIND_FLOAT KIND_FLOAT
#define FLAG_KIND_FLOATONLY KIND_FLOATONLY
#define FLAG_KIND_CMP KIND_CMP
#define FLAG_RULE_KEEP 0
#define FLAG_RULE_SAME RULE_SAME
#define FLAG_RULE_NOBOOL RULE_NOBOOL
#define FLAG_SAVE_NONE 0
#define FLAG_SAVE_IN SAVES_IN
#define FLAG_SAVE_OUT SAVES_OUT
#define FLAG_SAVE_BOTH SAVES_BOTH
#define FLAG_SAVE_CROSS SAVES_CROSS
#define FLAG_SAVE_FOR_B SAVES_FOR_B
#define FLAG_BOOLS_KEEP BOOLS_KEEP
#define FLAG_BOOLS_INT 0
#define FLAG_BOOLS_NONE BOOLS_NONE
#define FLAG_BOOLS_NOBOOL BOOLS_NOBOOL
static const unsigned int unary_flags[DP_NUNARY] = {
#define DP_UNARY_OP(NAME, lua, BIND, node, RULE, SAVE, formula) [DP_##NAME] = FLAG_RULE_##RULE | FLAG_SAVE_##SAVE,
#include "ops.def"
};
static const unsigned int binary_flags[DP_NBINARY] = {
#define DP_BINARY_OP(NAME, lua, BIND, node, KIND, BOOLS, SAVE, formula) \
    [DP_##NAME] = FLAG_KIND_##KIND | FLAG_BOOLS_##BOOLS | FLAG_SAVE_##SAVE,
#include "ops.def"
};

/* A node for an op with the one input in (not yet attached: the caller fills its
 * parameters and saved tensors, then attaches it to *out), or NULL when the op records
 * nothing: no node name, no input that wants a gradient, or an error, which releases *out. */
static dp_node *record1(dp_tensor **out, const char *node_name, dp_backward_fn fn, dp_tensor *in)
{
    if (!*out || !node_name || !dp_needs_grad(1, &in)) return NULL;
    dp_node *node = dp_node_new(node_name, fn, 1, &in);
    if (!node) {
        dp_tensor_release(*out);
        *out = NULL;
    }
    return node;
}

/* ---------------------------------------------------------------- binary */

static bool is_comparison(dp_binary_op op) { return binary_flags[op] & KIND_CMP; }

/* A 0-dim tensor on cpu:0, which joins a tensor on any device (PyTorch's CPU scalars). */
static bool cpu_scalar(const dp_tensor *t) { return t->ndim == 0 && t->device.type == DP_DEVICE_CPU && t->device.index == 0; }

static dp_tensor *record_binary(dp_tensor *out, dp_binary_op op, dp_tensor *a, dp_tensor *b)
{
    const char *node_name = op_table[DP_NUNARY + op].node;
    if (out && node_name && dp_needs_grad(2, (dp_tensor *const[]){ a, b })) {
        dp_node *node = dp_node_new(node_name, dp_binary_backward, 2, (dp_tensor *const[]){ a, b });
        if (!node) { dp_tensor_release(out); return NULL; }
        node->ip[0] = op;
        /* what the row's SAVE says; a tensor backward will not read is not saved, so a later
         * in-place write to it does not fail the backward (as in PyTorch) */
        unsigned f = binary_flags[op];
        bool save_a = (f & SAVES_BOTH) || ((f & SAVES_CROSS) && b->requires_grad) || ((f & SAVES_FOR_B) && b->requires_grad);
        bool save_b = (f & SAVES_BOTH) || ((f & SAVES_CROSS) && a->requires_grad) || ((f & SAVES_FOR_B) && b->requires_grad);
        if (save_a) dp_node_save(node, 0, a);
        if (save_b) dp_node_save(node, 1, b);
        dp_attach(out, node);
    }
    return out;
}

/* Refuses bool operands where the op's row says so (da, db: the operands' dtypes). */
static int check_bools(dp_binary_op op, dp_dtype da, dp_dtype db)
{
    unsigned f = binary_flags[op];
    if ((f & BOOLS_NOBOOL) && (da == DP_BOOL || db == DP_BOOL))
        return dp_error("%s with a bool tensor is not supported; if you are trying to invert a mask, use the '~' or "
                        "logical_not() operator instead", op == DP_SUB ? "subtraction, the '-' operator," : op_table[DP_NUNARY + op].name);
    if ((f & BOOLS_NONE) && da == DP_BOOL && db == DP_BOOL)
        return dp_error("%s of two bool tensors is not supported", op_table[DP_NUNARY + op].name);
    return 0;
}

/* The compute dtype of a binary op whose operands promote to ct; -1 with the message set. */
static int compute_dtype(dp_binary_op op, dp_dtype ct, dp_dtype *out)
{
    /* bool + bool is a logical or, bool * bool a logical and, as in PyTorch */
    if (ct == DP_BOOL && !(binary_flags[op] & BOOLS_KEEP)) ct = DP_INT64;
    if ((binary_flags[op] & KIND_FLOATONLY) && !dp_dtype_is_float(ct))
        return dp_error("%s is not implemented for %s operands (convert them to a floating dtype)",
                        op_table[DP_NUNARY + op].name, dp_dtype_name(ct));
    /* int64 / int64 is the default dtype, as in PyTorch */
    if ((binary_flags[op] & KIND_FLOAT) && !dp_dtype_is_float(ct)) ct = dp_default_dtype();
    *out = ct;
    return 0;
}

dp_tensor *dp_binary(dp_binary_op op, dp_tensor *a, dp_tensor *b)
{
    dp_tensor *ac = NULL, *bc = NULL, *out = NULL;
    if ((unsigned)op >= DP_NBINARY) { dp_error("invalid binary op %d", (int)op); return NULL; }
    /* the common case first: same shape, dtype and device, no conversion needed */
    if (a->dtype == b->dtype && dp_dtype_is_float(a->dtype) && dp_device_eq(a->device, b->device) && dp_same_shape(a, b)) {
        out = dp_empty(a->ndim, a->sizes, is_comparison(op) ? DP_BOOL : a->dtype, a->device);
        if (out && dp_numel(out)) {
            dp_view o = dp_view_of(out), va = dp_view_of(a), vb = dp_view_of(b);
            if (dp_backend_for(a->device)->binary(op, &o, &va, &vb)) { dp_tensor_release(out); return NULL; }
        }
        return record_binary(out, op, a, b);
    }
    /* a 0-dim CPU tensor may join a tensor on any device, as in PyTorch */
    dp_tensor *moved = NULL;
    if (!dp_device_eq(a->device, b->device)) {
        if (cpu_scalar(b)) b = moved = dp_to(b, a->device, b->dtype, false);
        else if (cpu_scalar(a)) a = moved = dp_to(a, b->device, a->dtype, false);
        else { dp_check_same_device(2, (dp_tensor *const[]){ a, b }); return NULL; }
        if (!moved) return NULL;
    }
    int nd;
    int64_t sizes[DP_MAX_DIMS];
    dp_dtype ct = dp_default_dtype();
    if (dp_broadcast_shape(a->ndim, a->sizes, b->ndim, b->sizes, &nd, sizes)) goto done;
    if (check_bools(op, a->dtype, b->dtype) || compute_dtype(op, promote_tensors(a, b), &ct)) goto done;
    ac = dp_to(a, a->device, ct, false);
    bc = ac ? dp_to(b, b->device, ct, false) : NULL;
    if (!bc) goto done;
    out = dp_empty(nd, sizes, is_comparison(op) ? DP_BOOL : ct, a->device);
    if (!out) goto done;
    if (dp_numel(out)) {
        dp_view o = dp_view_of(out), va = dp_broadcast_view(ac, nd, sizes), vb = dp_broadcast_view(bc, nd, sizes);
        if (dp_backend_for(a->device)->binary(op, &o, &va, &vb)) { dp_tensor_release(out); out = NULL; goto done; }
    }
    out = record_binary(out, op, ac, bc);
done:
    dp_tensor_release(ac);
    dp_tensor_release(bc);
    dp_tensor_release(moved);
    return out;
}

dp_tensor *dp_binary_scalar(dp_binary_op op, dp_tensor *a, double s, bool reverse)
{
    if ((unsigned)op >= DP_NBINARY) { dp_error("invalid binary op %d", (int)op); return NULL; }
    if (check_bools(op, a->dtype, DP_INT64)) return NULL;
    dp_dtype ct = a->dtype;
    bool s_int = s == floor(s) && fabs(s) < 9.2e18;
    /* an integer tensor with a fractional number: the default dtype, as PyTorch's result_type */
    if (!dp_dtype_is_float(ct) && !s_int) ct = dp_default_dtype();
    /* a bool tensor meets a number as int64: true > -2 compares 1 with -2 */
    if (ct == DP_BOOL) ct = DP_INT64;
    if (compute_dtype(op, ct, &ct)) return NULL;
    if (op == DP_POW && ct == DP_INT64 && !reverse && s < 0) {
        dp_error("integers to negative integer powers are not allowed");
        return NULL;
    }
    dp_tensor *ac = dp_to(a, a->device, ct, false);
    if (!ac) return NULL;
    dp_tensor *out = dp_empty(a->ndim, a->sizes, is_comparison(op) ? DP_BOOL : ct, a->device);
    if (out && dp_numel(out)) {
        dp_view o = dp_view_of(out), v = dp_view_of(ac);
        if (dp_backend_for(a->device)->binary_scalar(op, &o, &v, s, reverse)) { dp_tensor_release(out); out = NULL; }
    }
    dp_node *node = record1(&out, op_table[DP_NUNARY + op].node, dp_scalar_backward, ac);
    if (node) {
        node->ip[0] = op;
        node->ip[1] = reverse;
        node->p[0] = s;
        if (binary_flags[op] & SAVES_BOTH || (reverse && (binary_flags[op] & SAVES_FOR_B))) dp_node_save(node, 0, ac);
        dp_attach(out, node);
    }
    dp_tensor_release(ac);
    return out;
}

/* ---------------------------------------------------------------- unary */

/* The compute dtype of a unary op on dtype dt; -1 with the message set. */
static int unary_dtype(dp_unary_op op, dp_dtype dt, dp_dtype *out)
{
    if ((unary_flags[op] & RULE_FLOATONLY) && !dp_dtype_is_float(dt))
        return dp_error("%s is not implemented for %s tensors (convert to a floating dtype first)", op_table[op].name,
                        dp_dtype_name(dt));
    if ((unary_flags[op] & RULE_FLOAT) && !dp_dtype_is_float(dt)) dt = dp_default_dtype();   /* sqrt(int64) */
    if (dt == DP_BOOL) {
        if (unary_flags[op] & RULE_NOBOOL) {
            if (op == DP_NEG) return dp_error("negation, the '-' operator, on a bool tensor is not supported");
            return dp_error("%s on a bool tensor is not supported", op_table[op].name);
        }
        dt = DP_INT64;
    }
    *out = dt;
    return 0;
}

dp_tensor *dp_unary(dp_unary_op op, dp_tensor *a, double p0, double p1)
{
    if ((unsigned)op >= DP_NUNARY) { dp_error("invalid unary op %d", (int)op); return NULL; }
    dp_dtype ct = a->dtype;
    if (unary_dtype(op, a->dtype, &ct)) return NULL;
    dp_tensor *ac = dp_to(a, a->device, ct, false);
    if (!ac) return NULL;
    dp_tensor *out = dp_empty(a->ndim, a->sizes, ct, a->device);
    if (out && dp_numel(out)) {
        dp_view o = dp_view_of(out), v = dp_view_of(ac);
        if (dp_backend_for(a->device)->unary(op, &o, &v, p0, p1)) { dp_tensor_release(out); out = NULL; }
    }
    if (out && (unary_flags[op] & RULE_SAME) && a->dtype == DP_BOOL) {   /* computed as int64 */
        dp_tensor *b = NO_GRAD(dp_to(out, out->device, DP_BOOL, false));
        dp_tensor_release(out);
        out = b;
    }
    dp_node *node = record1(&out, op_table[op].node, dp_unary_backward, ac);
    if (node) {
        node->ip[0] = op;
        node->p[0] = p0;
        node->p[1] = p1;
        if (unary_flags[op] & SAVES_IN) dp_node_save(node, 0, ac);
        if (unary_flags[op] & SAVES_OUT) dp_node_save(node, 1, out);
        dp_attach(out, node);
    }
    dp_tensor_release(ac);
    return out;
}

/* ---------------------------------------------------------------- where */

/* t on dev: a 0-dim CPU tensor joins a tensor on any device, as in binary ops */
static dp_tensor *join_device(dp_tensor *t, dp_device dev)
{
    if (dp_device_eq(t->device, dev)) { dp_tensor_retain(t); return t; }
    if (cpu_scalar(t)) return dp_to(t, dev, t->dtype, false);
    char a[32], b[32];
    dp_error("where: expected all tensors to be on the same device, but found %s and %s", dp_device_str(dev, a),
             dp_device_str(t->device, b));
    return NULL;
}

dp_tensor *dp_where(dp_tensor *cond, dp_tensor *a, dp_tensor *b)
{
    if (cond->dtype != DP_BOOL) {
        dp_error("where: the condition must be a bool tensor, got %s", dp_dtype_name(cond->dtype));
        return NULL;
    }
    /* the device: the first operand that is not a 0-dim CPU tensor */
    dp_tensor *const all[3] = { cond, a, b };
    dp_device dev = cond->device;
    for (int i = 0; i < 3; i++)
        if (!cpu_scalar(all[i])) { dev = all[i]->device; break; }
    int nd, nd2;
    int64_t s1[DP_MAX_DIMS], sizes[DP_MAX_DIMS];
    if (dp_broadcast_shape(cond->ndim, cond->sizes, a->ndim, a->sizes, &nd, s1) ||
        dp_broadcast_shape(nd, s1, b->ndim, b->sizes, &nd2, sizes))
        return NULL;
    dp_dtype ct = promote_tensors(a, b);
    dp_tensor *cc = join_device(cond, dev), *am = cc ? join_device(a, dev) : NULL, *bm = am ? join_device(b, dev) : NULL;
    dp_tensor *ac = bm ? dp_to(am, dev, ct, false) : NULL, *bc = ac ? dp_to(bm, dev, ct, false) : NULL;
    dp_tensor *out = bc ? dp_empty(nd2, sizes, ct, dev) : NULL;
    if (out && dp_numel(out)) {
        dp_view o = dp_view_of(out), vc = dp_broadcast_view(cc, nd2, sizes), va = dp_broadcast_view(ac, nd2, sizes),
                vb = dp_broadcast_view(bc, nd2, sizes);
        if (dp_backend_for(dev)->where(&o, &vc, &va, &vb)) { dp_tensor_release(out); out = NULL; }
    }
    if (out && dp_needs_grad(2, (dp_tensor *const[]){ ac, bc })) {
        dp_node *node = dp_node_new("WhereBackward0", dp_where_backward, 2, (dp_tensor *const[]){ ac, bc });
        if (!node) { dp_tensor_release(out); out = NULL; }
        else {
            dp_node_save(node, 0, cc);
            dp_attach(out, node);
        }
    }
    dp_tensor_release(cc); dp_tensor_release(am); dp_tensor_release(bm);
    dp_tensor_release(ac); dp_tensor_release(bc);
    return out;
}

/* ---------------------------------------------------------------- in-place */

/* Refuses in-place writes autograd depends on, and writes to a tensor whose elements share
 * memory (an expanded view): the result would depend on the order of the writes, and on a
 * GPU the writes race.  A view with no elements shares nothing. */
static int expand_check(dp_tensor *self, const char *op)
{
    if (dp_numel(self) == 0) return 0;
    for (int d = 0; d < self->ndim; d++)
        if (self->strides[d] == 0 && self->sizes[d] > 1)
            return dp_error("unsupported operation: more than one element of the written-to tensor refers to a single "
                            "memory location (%s on an expanded view). Please clone() the tensor before performing the "
                            "operation.", op);
    return 0;
}

static int inplace_check(dp_tensor *self, const char *op)
{
    return dp_check_inplace(self, op) || expand_check(self, op) ? -1 : 0;
}

/* How the elements of a and b lie in memory, as PyTorch's get_overlap_status judges them: in
 * other storages or byte ranges (NO), the same elements in the same layout (FULL), dense
 * layouts whose byte ranges meet (PARTIAL), or layouts with gaps or repeats whose byte
 * ranges meet (TOO_HARD: whether an element is shared is not worked out).  Every write that
 * reads another tensor asks this of the tensor it writes (dp_check_write_overlap,
 * dp_index_write_source, dp_check_index_overlap below). */
static bool dense(const dp_tensor *t)   /* non-overlapping and dense, in any dim order */
{
    int64_t sz[DP_MAX_DIMS], st[DP_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < t->ndim; d++)
        if (t->sizes[d] != 1) { sz[n] = t->sizes[d]; st[n++] = t->strides[d]; }
    for (int i = 1; i < n; i++)   /* by stride, smallest first */
        for (int j = i; j > 0 && st[j] < st[j - 1]; j--) {
            int64_t a = st[j]; st[j] = st[j - 1]; st[j - 1] = a;
            a = sz[j]; sz[j] = sz[j - 1]; sz[j - 1] = a;
        }
    int64_t expect = 1;
    for (int i = 0; i < n; i++) {
        if (st[i] != expect) return false;
        expect *= sz[i];
    }
    return true;
}

static bool same_layout(const dp_tensor *a, const dp_tensor *b)
{
    if (a->offset != b->offset || a->ndim != b->ndim || a->dtype != b->dtype) return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->sizes[d] != b->sizes[d] || (a->sizes[d] != 1 && a->strides[d] != b->strides[d])) return false;
    return true;
}

/* the bytes of storage t's elements span: [*lo, *hi) */
static void byte_extent(const dp_tensor *t, int64_t *lo, int64_t *hi)
{
    int64_t first = t->offset, last = t->offset;
    for (int d = 0; d < t->ndim; d++) {
        int64_t span = (t->sizes[d] - 1) * t->strides[d];
        if (span < 0) first += span; else last += span;
    }
    int64_t size = (int64_t)dp_dtype_size(t->dtype);
    *lo = first * size;
    *hi = (last + 1) * size;
}

dp_overlap dp_overlap_of(const dp_tensor *a, const dp_tensor *b)
{
    if (a->storage != b->storage || dp_numel(a) == 0 || dp_numel(b) == 0) return DP_OVERLAP_NO;
    int64_t alo, ahi, blo, bhi;
    byte_extent(a, &alo, &ahi);
    byte_extent(b, &blo, &bhi);
    if (ahi <= blo || bhi <= alo) return DP_OVERLAP_NO;
    if (!dense(a) || !dense(b)) return DP_OVERLAP_TOO_HARD;
    return same_layout(a, b) ? DP_OVERLAP_FULL : DP_OVERLAP_PARTIAL;
}

static int overlap_error(const char *op, const char *what)
{
    return dp_error("unsupported operation: some elements of the input tensor and the written-to tensor refer to a "
                    "single memory location (%s: the %s and the tensor written to share memory). Please clone() the "
                    "tensor before performing the operation.", op, what);
}

/* An elementwise write to dst that reads src (copy_, a += b): refused when the elements
 * partly overlap, as in PyTorch (the result would depend on the order of the writes, and a
 * GPU copy of overlapping ranges is undefined); the same elements in the same layout
 * (a += a) are fine, and layouts with gaps are not judged, as in PyTorch. */
int dp_check_write_overlap(const dp_tensor *dst, const dp_tensor *src, const char *op)
{
    return dp_overlap_of(dst, src) == DP_OVERLAP_PARTIAL ? overlap_error(op, "source") : 0;
}

/* What an index write (index_put_, scatter_ and the ops made of them) into dst reads in
 * place of src: src itself (retained) when it shares no memory with dst, else an error as
 * in PyTorch, which refuses any source in dst's memory, the same elements included.  Two
 * cases read a private copy instead: a one-element source, which PyTorch reads once as a
 * fill value (t[mask] = t[1], index_fill_ with an element of t), and layouts with gaps or
 * repeats, which PyTorch does not judge and whose result would depend on the order of the
 * writes.  NULL with the message set on failure. */
dp_tensor *dp_index_write_source(const dp_tensor *dst, dp_tensor *src, const char *op, const char *what)
{
    dp_overlap o = dp_overlap_of(dst, src);
    if (o == DP_OVERLAP_NO) { dp_tensor_retain(src); return src; }
    if (o == DP_OVERLAP_TOO_HARD || dp_numel(src) == 1) return dp_clone(src);
    overlap_error(op, what);
    return NULL;
}

/* An index of an index write that shares memory with the tensor written: refused, as in
 * PyTorch (the engine reads the indices before it writes, but a program that PyTorch refuses
 * should not pass here).  Layouts with gaps are not judged, as in PyTorch. */
int dp_check_index_overlap(const dp_tensor *dst, const dp_tensor *index, const char *op)
{
    dp_overlap o = dp_overlap_of(dst, index);
    return o == DP_OVERLAP_FULL || o == DP_OVERLAP_PARTIAL ? overlap_error(op, "index") : 0;
}

/* In-place arithmetic that autograd must see runs out of place on self's old value and self
 * adopts the result (dp_inplace_old, dp_inplace_adopt, shared with index.c's writes). */
typedef struct {
    enum { IP_UNARY, IP_BINARY, IP_SCALAR, IP_FILL, IP_COPY } kind;
    int op;
    dp_tensor *other;
    double p0, p1;
} inplace_op;

/* Backward of fill_ and copy_ on a tracked tensor (FillBackward0, CopyBackwards): zeros for
 * self's old value, the gradient itself for copy_'s source (already in self's layout). */
static int overwrite_backward(dp_node *n, dp_tensor *g, dp_tensor **gin)
{
    if (DP_NEEDS_INPUT(n, 0) && !(gin[0] = dp_zeros(n->in[0].ndim, n->in[0].sizes, g->dtype, g->device))) return -1;
    if (n->n_inputs > 1 && DP_NEEDS_INPUT(n, 1)) { gin[1] = g; dp_tensor_retain(g); }
    return 0;
}

/* The new contents of fill_ (src NULL) or copy_, with a node that links them to self's old
 * value and to the source. */
static dp_tensor *overwritten(dp_tensor *self, dp_tensor *old, const inplace_op *o)
{
    dp_tensor *src = NULL, *values;
    if (o->kind == IP_COPY) {
        dp_tensor *conv = dp_to(o->other, self->device, self->dtype, false);
        src = conv ? dp_expand(conv, self->ndim, self->sizes) : NULL;
        dp_tensor_release(conv);
        if (!src) return NULL;
        values = NO_GRAD(dp_clone(src));
    } else {
        values = dp_full(self->ndim, self->sizes, o->p0, self->dtype, self->device);
    }
    dp_tensor *in[2] = { old, src };
    int n = src ? 2 : 1;
    if (values && dp_needs_grad(n, in)) {
        dp_node *node = dp_node_new(src ? "CopyBackwards" : "FillBackward0", overwrite_backward, n, in);
        if (node) dp_attach(values, node);
        else { dp_tensor_release(values); values = NULL; }
    }
    dp_tensor_release(src);
    return values;
}

bool dp_inplace_tracked(const dp_tensor *self, const dp_tensor *other)
{
    return dp_grad_enabled() && (self->requires_grad || (other && other->requires_grad));
}

dp_tensor *dp_inplace_old(dp_tensor *self, const char *name, bool *swap)
{
    if (self->requires_grad && !self->grad_fn) return dp_check_inplace(self, name), NULL;   /* a leaf */
    if (self->storage->graph_views)
        return dp_error("in-place operation %s on a tensor that requires grad and shares its memory with a view "
                        "autograd recorded is not supported; use the out-of-place form", name), NULL;
    *swap = __atomic_load_n(&self->refcount, __ATOMIC_ACQUIRE) == 1
            && __atomic_load_n(&self->storage->refcount, __ATOMIC_ACQUIRE) == 1;
    dp_tensor *old = *swap ? dp_alias(self) : NO_GRAD(dp_clone(self));
    if (old && self->requires_grad) {
        old->requires_grad = true;
        old->grad_fn = self->grad_fn;
        dp_node_retain(old->grad_fn);
    }
    return old;
}

int dp_inplace_adopt(dp_tensor *self, dp_tensor *r, bool swap)
{
    if (r && r->dtype != self->dtype) {
        dp_tensor *c = dp_to(r, r->device, self->dtype, false);
        dp_tensor_release(r);
        r = c;
    }
    if (!r) return -1;
    if (swap) {
        dp_storage *was = self->storage;
        dp_storage_retain(r->storage);
        self->storage = r->storage;
        self->offset = r->offset;
        memcpy(self->strides, r->strides, sizeof(int64_t) * (size_t)r->ndim);
        dp_storage_release(was);   /* the old value lives on in old, if the node saved it */
    } else if (dp_copy_raw(self, r)) {
        dp_tensor_release(r);
        return -1;
    }
    dp_node_release(self->grad_fn);
    self->grad_fn = r->grad_fn;
    dp_node_retain(self->grad_fn);
    self->requires_grad = self->grad_fn != NULL;
    dp_tensor_release(r);
    return 0;
}

static int inplace_recorded(dp_tensor *self, const char *name, const inplace_op *o)
{
    bool swap;
    dp_tensor *old = dp_inplace_old(self, name, &swap);
    if (!old) return -1;
    dp_tensor *r = o->kind == IP_UNARY    ? dp_unary((dp_unary_op)o->op, old, o->p0, o->p1)
                 : o->kind == IP_BINARY   ? dp_binary((dp_binary_op)o->op, old, o->other)
                 : o->kind == IP_SCALAR   ? dp_binary_scalar((dp_binary_op)o->op, old, o->p0, false)
                                          : overwritten(self, old, o);
    dp_tensor_release(old);
    return dp_inplace_adopt(self, r, swap);
}

int dp_binary_(dp_binary_op op, dp_tensor *self, dp_tensor *other)
{
    const char *name = op_table[DP_NUNARY + op].name;
    bool tracked = dp_inplace_tracked(self, other);
    if (dp_check_write_overlap(self, other, name)) return -1;
    if ((tracked ? expand_check(self, name) : inplace_check(self, name)) || check_bools(op, self->dtype, other->dtype))
        return -1;
    if (other->ndim > 0 || other->device.type != DP_DEVICE_CPU) {
        if (dp_check_same_device(2, (dp_tensor *const[]){ self, other })) return -1;
    }
    int nd;
    int64_t sizes[DP_MAX_DIMS];
    if (dp_broadcast_shape(self->ndim, self->sizes, other->ndim, other->sizes, &nd, sizes)) return -1;
    if (nd != self->ndim || memcmp(sizes, self->sizes, sizeof(int64_t) * (size_t)nd)) {
        char a[128], b[128];
        return dp_error("output with shape %s doesn't match the broadcast shape %s", dp_shape_str(self->ndim, self->sizes, a, sizeof a),
                        dp_shape_str(nd, sizes, b, sizeof b));
    }
    bool float_result = binary_flags[op] & (KIND_FLOAT | KIND_FLOATONLY);
    if (!dp_dtype_is_float(self->dtype) && (dp_dtype_is_float(other->dtype) || float_result))
        return dp_error("result type %s can't be cast to the desired output type %s",
                        dp_dtype_name(float_result ? dp_default_dtype() : other->dtype), dp_dtype_name(self->dtype));
    if (tracked) return inplace_recorded(self, name, &(inplace_op){ IP_BINARY, op, other, 0, 0 });
    dp_tensor *oc = NO_GRAD(dp_to(other, self->device, self->dtype, false));
    if (!oc) return -1;
    dp_view o = dp_view_of(self), vb = dp_broadcast_view(oc, nd, sizes);
    int rc = dp_numel(self) ? dp_backend_for(self->device)->binary(op, &o, &o, &vb) : 0;
    dp_tensor_release(oc);
    if (!rc) dp_bump_version(self);
    return rc;
}

int dp_binary_scalar_(dp_binary_op op, dp_tensor *self, double s)
{
    const char *name = op_table[DP_NUNARY + op].name;
    bool tracked = dp_inplace_tracked(self, NULL);
    if ((tracked ? expand_check(self, name) : inplace_check(self, name)) || check_bools(op, self->dtype, DP_INT64))
        return -1;
    if (!dp_dtype_is_float(self->dtype) && ((binary_flags[op] & (KIND_FLOAT | KIND_FLOATONLY)) || s != floor(s)))
        return dp_error("result type %s can't be cast to the desired output type %s", dp_dtype_name(dp_default_dtype()),
                        dp_dtype_name(self->dtype));
    if (tracked) return inplace_recorded(self, name, &(inplace_op){ IP_SCALAR, op, NULL, s, 0 });
    dp_view o = dp_view_of(self);
    int rc = dp_numel(self) ? dp_backend_for(self->device)->binary_scalar(op, &o, &o, s, false) : 0;
    if (!rc) dp_bump_version(self);
    return rc;
}

int dp_unary_(dp_unary_op op, dp_tensor *self, double p0, double p1)
{
    if ((unsigned)op >= DP_NUNARY) return dp_error("invalid unary op %d", (int)op);
    bool tracked = dp_inplace_tracked(self, NULL);
    if (tracked ? expand_check(self, op_table[op].name) : inplace_check(self, op_table[op].name)) return -1;
    dp_dtype ct;
    if (unary_dtype(op, self->dtype, &ct)) return -1;
    if (ct != self->dtype) {
        if (!((unary_flags[op] & RULE_SAME) && self->dtype == DP_BOOL))
            return dp_error("result type %s can't be cast to the desired output type %s (%s_)", dp_dtype_name(ct),
                            dp_dtype_name(self->dtype), op_table[op].name);
        if (tracked) return dp_error("%s_ on a bool tensor that requires grad is not supported", op_table[op].name);
        dp_tensor *r = NO_GRAD(dp_unary(op, self, p0, p1));   /* a bool result computed as int64 */
        int rc = r ? dp_copy_(self, r) : -1;
        dp_tensor_release(r);
        return rc;
    }
    if (tracked) return inplace_recorded(self, op_table[op].name, &(inplace_op){ IP_UNARY, op, NULL, p0, p1 });
    dp_view o = dp_view_of(self);
    int rc = dp_numel(self) ? dp_backend_for(self->device)->unary(op, &o, &o, p0, p1) : 0;
    if (!rc) dp_bump_version(self);
    return rc;
}

int dp_fill_(dp_tensor *self, double value)
{
    if (dp_inplace_tracked(self, NULL))
        return expand_check(self, "fill_") ? -1 : inplace_recorded(self, "fill_", &(inplace_op){ IP_FILL, 0, NULL, value, 0 });
    if (inplace_check(self, "fill_")) return -1;
    dp_view o = dp_view_of(self);
    int rc = dp_numel(self) ? dp_backend_for(self->device)->fill(&o, value) : 0;
    if (!rc) dp_bump_version(self);
    return rc;
}

int dp_copy_(dp_tensor *self, dp_tensor *src)
{
    bool tracked = dp_inplace_tracked(self, src);
    if ((tracked ? expand_check(self, "copy_") : inplace_check(self, "copy_")) || dp_check_write_overlap(self, src, "copy_"))
        return -1;
    int nd;
    int64_t sizes[DP_MAX_DIMS];
    if (dp_broadcast_shape(self->ndim, self->sizes, src->ndim, src->sizes, &nd, sizes)) return -1;
    if (nd != self->ndim || memcmp(sizes, self->sizes, sizeof(int64_t) * (size_t)nd)) {
        char a[128], b[128];
        return dp_error("copy_: the source of shape %s cannot be broadcast to the destination's shape %s",
                        dp_shape_str(src->ndim, src->sizes, a, sizeof a), dp_shape_str(self->ndim, self->sizes, b, sizeof b));
    }
    if (tracked) return inplace_recorded(self, "copy_", &(inplace_op){ IP_COPY, 0, src, 0, 0 });
    if (dp_same_shape(self, src)) return dp_copy_raw(self, src);
    dp_tensor *e = NO_GRAD(dp_expand(src, self->ndim, self->sizes));
    int rc = e ? dp_copy_raw(self, e) : -1;
    dp_tensor_release(e);
    return rc;
}

int dp_axpy_(dp_tensor *self, double alpha, dp_tensor *other)
{
    if (alpha == 1.0) return NO_GRAD(dp_binary_(DP_ADD, self, other));
    dp_tensor *t = NO_GRAD(dp_binary_scalar(DP_MUL, other, alpha, false));
    int rc = t ? NO_GRAD(dp_binary_(DP_ADD, self, t)) : -1;
    dp_tensor_release(t);
    return rc;
}

