/* autograd.c: the graph (nodes with input edges and saved tensors), the backward pass in
 * topological order, gradient accumulation into leaves and the grad-ready hook. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* This thread's grad mode, and the session that loaded it from a context.  A session
 * number is handed out once, to one thread, so a context whose session equals this
 * thread's was entered here last and has not run anywhere since: its mode is already the
 * thread's (including an engine-internal no-grad stretch a callback runs in).  Any other
 * context is loaded again, whether another context ran here in between or this one ran on
 * another thread; numbers are never reused, so a closed context or an exited thread can't
 * be mistaken for a live one. */
static _Thread_local bool g_no_grad;
static _Thread_local uint64_t g_session;
static _Atomic uint64_t g_sessions;

bool dp_grad_enabled(void) { return !g_no_grad; }
void dp_set_grad_enabled(bool on) { g_no_grad = !on; }

void dp_grad_context_enter(dp_grad_context *c)
{
    if (c->session != 0 && c->session == g_session) return;
    c->session = g_session = atomic_fetch_add_explicit(&g_sessions, 1, memory_order_relaxed) + 1;
    g_no_grad = !c->enabled;
}

void dp_grad_context_set(dp_grad_context *c, bool on)
{
    dp_grad_context_enter(c);
    c->enabled = on;
    g_no_grad = !on;
}

bool dp_needs_grad(int n, dp_tensor *const *inputs)
{
    if (g_no_grad) return false;
    for (int i = 0; i < n; i++) if (inputs[i] && inputs[i]->requires_grad) return true;
    return false;
}

dp_node *dp_node_new(const char *name, dp_backward_fn fn, int n, dp_tensor *const *inputs)
{
    dp_node *node = calloc(1, sizeof *node + sizeof(dp_edge) * (size_t)n);
    if (!node) { dp_error("out of memory"); return NULL; }
    node->refcount = 1;
    node->name = name;
    node->backward = fn;
    node->n_inputs = n;
    for (int i = 0; i < n; i++) {
        dp_tensor *t = inputs[i];
        dp_edge *e = &node->in[i];
        if (!t) continue;
        e->ndim = t->ndim;
        memcpy(e->sizes, t->sizes, sizeof e->sizes);
        e->dtype = t->dtype;
        e->device = t->device;
        if (!t->requires_grad) continue;
        if (t->grad_fn) { e->fn = t->grad_fn; dp_node_retain(e->fn); }
        else { e->leaf = t; dp_tensor_retain(t); }
    }
    return node;
}

void dp_node_save(dp_node *node, int slot, dp_tensor *t)
{
    dp_tensor_retain(t);
    node->saved[slot] = t;
    node->saved_version[slot] = t->storage->version;
}

dp_tensor *dp_saved(dp_node *n, int slot)
{
    dp_tensor *t = n->saved[slot];
    if (t && t->storage->version != n->saved_version[slot]) {
        dp_error("one of the tensors needed for gradient computation has been modified by an inplace "
                 "operation (in %s: saved at version %llu, now at version %llu)", n->name,
                 (unsigned long long)n->saved_version[slot], (unsigned long long)t->storage->version);
        return NULL;
    }
    return t;
}

void dp_attach(dp_tensor *out, dp_node *node)
{
    out->grad_fn = node;
    out->requires_grad = true;
}

void dp_node_retain(dp_node *n) { if (n) __atomic_add_fetch(&n->refcount, 1, __ATOMIC_RELAXED); }

static void node_free_saved(dp_node *n)
{
    for (int i = 0; i < DP_MAX_SAVED; i++) { dp_tensor_release(n->saved[i]); n->saved[i] = NULL; }
}

/* Releasing a long chain recursively could overflow the stack: nodes whose count drops to
 * zero go on a list linked through next_in_order, each exactly once. */
void dp_node_release(dp_node *n)
{
    if (!n || __atomic_sub_fetch(&n->refcount, 1, __ATOMIC_ACQ_REL) != 0) return;
    n->next_in_order = NULL;
    dp_node *stack = n;
    while (stack) {
        dp_node *x = stack;
        stack = x->next_in_order;
        node_free_saved(x);
        if (x->user_free) x->user_free(x->user);
        dp_tensor_release(x->grad_acc);
        dp_tensor_release(x->retained_grad);
        for (int i = 0; i < x->n_inputs; i++) {
            dp_tensor_release(x->in[i].leaf);
            dp_node *c = x->in[i].fn;
            if (c && __atomic_sub_fetch(&c->refcount, 1, __ATOMIC_ACQ_REL) == 0) { c->next_in_order = stack; stack = c; }
        }
        free(x);
    }
}

const char *dp_node_name(const dp_node *n) { return n->name; }

int dp_set_requires_grad(dp_tensor *t, bool on)
{
    if (t->grad_fn && !on)
        return dp_error("you can only change requires_grad flags of leaf tensors; use detach() to get a tensor "
                        "that does not require grad");
    if (on && !dp_dtype_is_float(t->dtype))
        return dp_error("only tensors of floating point dtype can require gradients (got %s)", dp_dtype_name(t->dtype));
    t->requires_grad = on;
    return 0;
}

int dp_set_data(dp_tensor *t, dp_tensor *src)
{
    if (t->grad_fn) return dp_error("set_data: only a leaf tensor can take new data");
    if (t->requires_grad && !dp_dtype_is_float(src->dtype))
        return dp_error("set_data: a tensor that requires grad can't take %s data", dp_dtype_name(src->dtype));
    dp_tensor *g = NULL;
    if (t->grad && (!dp_device_eq(t->grad->device, src->device) || t->grad->dtype != src->dtype)) {
        bool was = dp_grad_enabled();
        dp_set_grad_enabled(false);
        g = dp_to(t->grad, src->device, src->dtype, false);
        dp_set_grad_enabled(was);
        if (!g) return -1;
    }
    dp_storage_retain(src->storage);
    dp_storage_release(t->storage);
    t->storage = src->storage;
    t->device = src->device;
    t->dtype = src->dtype;
    t->ndim = src->ndim;
    t->offset = src->offset;
    memcpy(t->sizes, src->sizes, sizeof t->sizes);
    memcpy(t->strides, src->strides, sizeof t->strides);
    if (g) { dp_set_grad(t, g); dp_tensor_release(g); }
    return 0;
}

void dp_set_grad(dp_tensor *leaf, dp_tensor *g)
{
    if (g) dp_tensor_retain(g);
    dp_tensor_release(leaf->grad);
    leaf->grad = g;
}

void dp_set_grad_ready_hook(dp_tensor *leaf, dp_grad_ready_fn fn, void *ctx)
{
    leaf->grad_ready = fn;
    leaf->grad_ready_ctx = ctx;
}

/* acc += g; acc may be NULL (then it takes a private copy of g). */
static int accumulate(dp_tensor **acc, dp_tensor *g)
{
    if (dp_grad_enabled()) {   /* a create_graph pass: the sums are recorded, nothing changes in place */
        dp_tensor *sum = *acc ? dp_binary(DP_ADD, *acc, g) : g;
        if (!sum) return -1;
        if (!*acc) dp_tensor_retain(g);
        dp_tensor_release(*acc);
        *acc = sum;
        return 0;
    }
    if (!*acc) {
        if (g->refcount == 1 && dp_is_contiguous(g) && !g->requires_grad) { dp_tensor_retain(g); *acc = g; return 0; }
        bool was = dp_grad_enabled();
        dp_set_grad_enabled(false);
        *acc = dp_clone(g);
        dp_set_grad_enabled(was);
        return *acc ? 0 : -1;
    }
    if (!dp_same_shape(*acc, g)) {
        dp_tensor *sum = dp_binary(DP_ADD, *acc, g);   /* broadcasting accumulation */
        if (!sum) return -1;
        dp_tensor_release(*acc);
        *acc = sum;
        return 0;
    }
    return dp_axpy_(*acc, 1.0, g);
}

static int accumulate_leaf(dp_tensor *leaf, dp_tensor *g)
{
    char a[128], b[128];
    if (!dp_device_eq(leaf->device, g->device) || leaf->dtype != g->dtype || !dp_same_shape(leaf, g))
        return dp_error("internal: gradient %s %s for a leaf of shape %s %s", dp_shape_str(g->ndim, g->sizes, a, sizeof a),
                        dp_dtype_name(g->dtype), dp_shape_str(leaf->ndim, leaf->sizes, b, sizeof b), dp_dtype_name(leaf->dtype));
    if (leaf->grad) return dp_axpy_(leaf->grad, 1.0, g);
    return accumulate(&leaf->grad, g);
}

/* What torch.autograd.grad asks of a backward pass: instead of accumulating into the
 * leaves' .grad (and running their hooks), the gradients of the n tensors `of` (leaves or
 * not) are accumulated into out[0..n-1]. */
typedef struct {
    int n;
    dp_tensor *const *of;
    dp_tensor **out;
} capture;

static int capture_leaf(const capture *c, dp_tensor *leaf, dp_tensor *g)
{
    for (int j = 0; j < c->n; j++)
        if (c->of[j] == leaf && accumulate(&c->out[j], g)) return -1;
    return 0;
}

static int capture_node(const capture *c, dp_node *x, dp_tensor *g)
{
    for (int j = 0; j < c->n; j++)
        if (c->of[j]->grad_fn == x && accumulate(&c->out[j], g)) return -1;
    return 0;
}

static int run_backward(dp_tensor *root, dp_tensor *grad, bool retain_graph, bool create_graph, const capture *want);

/* t:retain_grad(): a non-leaf's .grad is the gradient that reached its node, accumulated
 * over backward passes as a leaf's (a copy of its own, never the engine's buffer) */
static int retain_node_grad(dp_node *x, dp_tensor *g)
{
    if (x->retained_grad && dp_same_shape(x->retained_grad, g)) return dp_axpy_(x->retained_grad, 1.0, g);
    bool was = dp_grad_enabled();
    dp_set_grad_enabled(false);
    dp_tensor *copy = dp_clone(g);
    dp_set_grad_enabled(was);
    if (!copy) return -1;
    dp_tensor_release(x->retained_grad);
    x->retained_grad = copy;
    return 0;
}

int dp_retain_grad(dp_tensor *t)
{
    if (!t->requires_grad) return dp_error("can't retain_grad on Tensor that has requires_grad=False");
    if (t->grad_fn) t->grad_fn->retains_grad = true;   /* a leaf keeps its .grad anyway */
    return 0;
}

bool dp_retains_grad(const dp_tensor *t) { return t->grad_fn && t->grad_fn->retains_grad; }

dp_tensor *dp_retained_grad(const dp_tensor *t) { return t->grad_fn ? t->grad_fn->retained_grad : NULL; }

static _Atomic bool g_detect_anomaly;
void dp_set_detect_anomaly(bool on) { g_detect_anomaly = on; }
bool dp_detect_anomaly(void) { return g_detect_anomaly; }

/* Anomaly mode: fails when gradient i (0-based) that node x returned holds a NaN. */
static int check_anomaly(const dp_node *x, dp_tensor *g, int i)
{
    if (!g || !dp_dtype_is_float(g->dtype)) return 0;
    dp_tensor *h = dp_to(g, dp_cpu(), DP_FLOAT64, false);
    dp_tensor *c = h ? dp_contiguous(h) : NULL;
    dp_tensor_release(h);
    if (!c) return -1;
    const double *v = dp_data(c);
    int64_t n = dp_numel(c);
    bool nan = false;
    for (int64_t k = 0; k < n && !nan; k++) nan = v[k] != v[k];
    dp_tensor_release(c);
    if (nan) return dp_error("Function '%s' returned nan values in its %dth output (anomaly detection; outputs "
                             "counted from 1)", x->name, i + 1);
    return 0;
}

int dp_backward(dp_tensor *root, dp_tensor *grad, bool retain_graph)
{
    return run_backward(root, grad, retain_graph, false, NULL);
}

int dp_grad(dp_tensor *root, dp_tensor *grad, bool retain_graph, int n, dp_tensor *const *inputs, dp_tensor **out)
{
    return dp_grad_graph(root, grad, retain_graph, false, n, inputs, out);
}

int dp_grad_graph(dp_tensor *root, dp_tensor *grad, bool retain_graph, bool create_graph, int n,
                  dp_tensor *const *inputs, dp_tensor **out)
{
    for (int j = 0; j < n; j++) {
        out[j] = NULL;
        if (!inputs[j]->requires_grad)
            return dp_error("grad: input %d does not require grad (one of the differentiated tensors does not require grad)", j + 1);
    }
    capture c = { n, inputs, out };
    int rc = run_backward(root, grad, retain_graph, create_graph, &c);
    if (rc) for (int j = 0; j < n; j++) { dp_tensor_release(out[j]); out[j] = NULL; }
    return rc;
}

static int run_backward(dp_tensor *root, dp_tensor *grad, bool retain_graph, bool create_graph, const capture *want)
{
    char a[128], b[128];
    if (!root->requires_grad)
        return dp_error("element 0 of tensors does not require grad and does not have a grad_fn");
    dp_tensor *g0;
    if (grad) {
        if (!dp_same_shape(grad, root))
            return dp_error("the gradient has shape %s but the tensor has shape %s", dp_shape_str(grad->ndim, grad->sizes, a, sizeof a),
                            dp_shape_str(root->ndim, root->sizes, b, sizeof b));
        if (dp_check_same_device(2, (dp_tensor *const[]){ root, grad })) return -1;
        g0 = dp_to(grad, root->device, root->dtype, false);
    } else {
        if (dp_numel(root) != 1)
            return dp_error("grad can be implicitly created only for scalar outputs (the tensor has shape %s); "
                            "pass a gradient to backward()", dp_shape_str(root->ndim, root->sizes, a, sizeof a));
        g0 = dp_ones(root->ndim, root->sizes, root->dtype, root->device);
    }
    if (!g0) return -1;
    bool was = dp_grad_enabled();
    dp_set_grad_enabled(create_graph && was);   /* create_graph: the backward formulas record */
    int rc = 0;
    if (!root->grad_fn) {          /* a leaf */
        if (want) rc = capture_leaf(want, root, g0);
        else {
            rc = accumulate_leaf(root, g0);
            if (!rc && root->grad_ready) root->grad_ready(root->grad_ready_ctx, root);
        }
        dp_tensor_release(g0);
        dp_set_grad_enabled(was);
        return rc;
    }
    /* 1. collect the graph (iterative DFS) and count dependencies and leaf uses */
    size_t cap = 64, n = 0, top = 0;
    dp_node **order = malloc(cap * sizeof *order), **stack = malloc(cap * sizeof *stack);
    if (!order || !stack) { free(order); free(stack); dp_tensor_release(g0); dp_set_grad_enabled(was); return dp_error("out of memory"); }
    dp_node *r = root->grad_fn;
    r->visit = 1; r->deps = 0;
    stack[top++] = r;
    while (top) {
        dp_node *x = stack[--top];
        if (n == cap || top + (size_t)x->n_inputs >= cap) {
            size_t ncap = cap * 2 + (size_t)x->n_inputs;
            dp_node **o2 = realloc(order, ncap * sizeof *order);
            if (o2) order = o2;
            dp_node **s2 = o2 ? realloc(stack, ncap * sizeof *stack) : NULL;
            if (s2) stack = s2;
            if (!o2 || !s2) { order[n++] = x; rc = dp_error("out of memory"); break; }
            cap = ncap;
        }
        order[n++] = x;
        if (x->freed) {
            rc = dp_error("trying to backward through the graph a second time (or directly access saved tensors "
                          "after they have already been freed); specify retain_graph=true the first time you call backward");
        }
        for (int i = 0; i < x->n_inputs; i++) {
            dp_node *c = x->in[i].fn;
            if (c) {
                if (!c->visit) { c->visit = 1; c->deps = 0; stack[top++] = c; }
                c->deps++;
            }
            if (x->in[i].leaf) x->in[i].leaf->grad_ready_pending++;
        }
    }
    /* 2. Kahn's order from the root */
    dp_node **ready = stack;
    top = 0;
    if (!rc) { r->grad_acc = g0; dp_tensor_retain(g0); ready[top++] = r; }
    while (top && !rc) {
        dp_node *x = ready[--top];
        dp_tensor *g = x->grad_acc;
        x->grad_acc = NULL;
        if (want && capture_node(want, x, g)) { rc = -1; dp_tensor_release(g); break; }
        if (!want && x->retains_grad && retain_node_grad(x, g)) { rc = -1; dp_tensor_release(g); break; }
        dp_tensor *gin[64] = { 0 };
        dp_tensor **gins = x->n_inputs <= 64 ? gin : calloc((size_t)x->n_inputs, sizeof *gins);
        if (!gins) { rc = dp_error("out of memory"); dp_tensor_release(g); break; }
        rc = x->backward(x, g, gins);
        /* create_graph: a backward that is not recorded (reductions, views, indexing,
         * matmul ...) would make the higher derivatives silently wrong */
        for (int i = 0; !rc && create_graph && g->requires_grad && i < x->n_inputs; i++)
            if (gins[i] && !gins[i]->requires_grad)
                rc = dp_error("create_graph: the backward of %s is not differentiable yet (double backward "
                              "works through the elementwise ops only)", x->name);
        dp_tensor_release(g);
        for (int i = 0; !rc && g_detect_anomaly && i < x->n_inputs; i++) rc = check_anomaly(x, gins[i], i);
        for (int i = 0; i < x->n_inputs; i++) {
            dp_edge *e = &x->in[i];
            if (!rc && gins[i] && (e->fn || e->leaf)) {
                if (!dp_device_eq(gins[i]->device, e->device) || gins[i]->dtype != e->dtype) {
                    dp_tensor *moved = dp_to(gins[i], e->device, e->dtype, false);
                    dp_tensor_release(gins[i]);
                    gins[i] = moved;
                    if (!moved) { rc = -1; continue; }
                }
                if (e->fn) rc = accumulate(&e->fn->grad_acc, gins[i]);
                else if (want) rc = capture_leaf(want, e->leaf, gins[i]);
                else rc = accumulate_leaf(e->leaf, gins[i]);
            }
            if (e->fn && --e->fn->deps == 0 && !rc) ready[top++] = e->fn;
            if (e->leaf && --e->leaf->grad_ready_pending == 0 && !rc && !want && e->leaf->grad_ready)
                e->leaf->grad_ready(e->leaf->grad_ready_ctx, e->leaf);
            dp_tensor_release(gins[i]);
        }
        if (gins != gin) free(gins);
    }
    /* 3. reset bookkeeping; free saved tensors unless asked to keep them */
    for (size_t i = 0; i < n; i++) {
        dp_node *x = order[i];
        x->visit = 0;
        x->deps = 0;
        dp_tensor_release(x->grad_acc);
        x->grad_acc = NULL;
        for (int k = 0; k < x->n_inputs; k++) if (x->in[k].leaf) x->in[k].leaf->grad_ready_pending = 0;
        if (!retain_graph && !rc) { node_free_saved(x); x->freed = true; }
    }
    free(order);
    free(stack);
    dp_tensor_release(g0);
    dp_set_grad_enabled(was);
    return rc;
}
