/* autograd_custom.c: nodes whose backward is someone else's function (torch.autograd.Function
 * in Lua): the engine keeps the edges, the shapes and the checks; the binding supplies the
 * backward and the release of what it needs for it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct {
    dp_custom_backward_fn fn;
    void (*free_fn)(void *user);
    void *user;
    char name[64];
} custom;

static void custom_free(void *p)
{
    custom *c = p;
    if (c->free_fn) c->free_fn(c->user);
    free(c);
}

static int custom_backward(dp_node *n, dp_tensor *g, dp_tensor **gin)
{
    char a[128], b[128];
    custom *c = n->user;
    if (c->fn(c->user, g, n->n_inputs, gin)) {
        for (int i = 0; i < n->n_inputs; i++) { dp_tensor_release(gin[i]); gin[i] = NULL; }
        return -1;
    }
    for (int i = 0; i < n->n_inputs; i++) {
        dp_edge *e = &n->in[i];
        if (!gin[i]) continue;
        if (!e->fn && !e->leaf) { dp_tensor_release(gin[i]); gin[i] = NULL; continue; }
        if (gin[i]->ndim != e->ndim || memcmp(gin[i]->sizes, e->sizes, sizeof(int64_t) * (size_t)e->ndim) != 0 ||
            !dp_dtype_is_float(gin[i]->dtype)) {
            int rc = dp_error("%s: backward returned an invalid gradient at index %d - got %s %s but expected shape %s (%s)",
                              n->name, i + 1, dp_shape_str(gin[i]->ndim, gin[i]->sizes, a, sizeof a),
                              dp_dtype_name(gin[i]->dtype), dp_shape_str(e->ndim, e->sizes, b, sizeof b), dp_dtype_name(e->dtype));
            for (int k = 0; k < n->n_inputs; k++) { dp_tensor_release(gin[k]); gin[k] = NULL; }
            return rc;
        }
    }
    return 0;
}

int dp_custom_attach(dp_tensor *out, const char *name, int n, dp_tensor *const *inputs,
                     dp_custom_backward_fn fn, void (*free_fn)(void *user), void *user)
{
    if (out->grad_fn || out->requires_grad) return dp_error("%s: the output already has a history", name);
    if (!dp_needs_grad(n, inputs)) return 0;
    if (!dp_dtype_is_float(out->dtype))
        return dp_error("%s: an output that requires grad must be floating point, got %s", name, dp_dtype_name(out->dtype));
    custom *c = calloc(1, sizeof *c);
    if (!c) return dp_error("out of memory");
    dp_node *node = dp_node_new(c->name, custom_backward, n, inputs);
    if (!node) { free(c); return -1; }
    c->fn = fn;
    snprintf(c->name, sizeof c->name, "%s", name);
    node->user = c;
    node->user_free = custom_free;
    /* only now does the node own the binding's user: a failure above leaves it to the caller */
    c->free_fn = free_fn;
    c->user = user;
    dp_attach(out, node);
    return 1;
}
