/* determ.c: PyTorch's torch.use_deterministic_algorithms and torch.backends.cudnn's flags.
 * The flags are process-wide, as PyTorch's global context.  A backend reads them through
 * dp_backend_host (registry.c) and picks a deterministic kernel where one exists; an op with
 * none calls dp_alert_not_deterministic, which fails or, with warn_only, warns. */
#include <stdatomic.h>
#include <stdio.h>

#include "internal.h"

enum { DET_OFF = 0, DET_ON, DET_WARN };

static atomic_int g_mode;                 /* DET_* */
static atomic_bool g_cudnn_deterministic, g_cudnn_benchmark;

void dp_use_deterministic_algorithms(bool mode, bool warn_only)
{
    atomic_store(&g_mode, !mode ? DET_OFF : warn_only ? DET_WARN : DET_ON);
}

bool dp_deterministic_algorithms(void) { return atomic_load(&g_mode) != DET_OFF; }
bool dp_deterministic_algorithms_warn_only(void) { return atomic_load(&g_mode) == DET_WARN; }

void dp_set_cudnn_deterministic(bool on) { atomic_store(&g_cudnn_deterministic, on); }
bool dp_cudnn_deterministic(void) { return atomic_load(&g_cudnn_deterministic); }
void dp_set_cudnn_benchmark(bool on) { atomic_store(&g_cudnn_benchmark, on); }
bool dp_cudnn_benchmark(void) { return atomic_load(&g_cudnn_benchmark); }

/* cuDNN picks deterministic algorithms under either flag, as PyTorch's convolutions do */
bool dp_cudnn_wants_deterministic(void) { return dp_cudnn_deterministic() || dp_deterministic_algorithms(); }

int dp_alert_not_deterministic(const char *caller)
{
    int mode = atomic_load(&g_mode);
    if (mode == DET_OFF) return 0;
    if (mode == DET_WARN) {
        fprintf(stderr, "UserWarning: %s does not have a deterministic implementation, but you set "
                        "'torch.use_deterministic_algorithms(true, {warn_only=true})'.\n", caller);
        return 0;
    }
    return dp_error("%s does not have a deterministic implementation, but you set "
                    "'torch.use_deterministic_algorithms(true)'. You can turn off determinism just for this "
                    "operation, or you can use the 'warn_only=true' option, if that's acceptable for your "
                    "application.", caller);
}
