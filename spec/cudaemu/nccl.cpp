/* nccl.cpp: NCCL's calls (include/nccl.h) on the CUDA emulation, between the processes of
 * one machine.  Emulated device memory is host memory, so a collective moves its bytes
 * through a POSIX shared-memory segment with plain copies and sums.
 *
 * Communicators.  ncclGetUniqueId names a segment; every rank's ncclCommInitRank opens it
 * (the first creates it), registers its pid and its GPU's bus id, and waits for the
 * others; once all are there rank 0 unlinks the name (the mappings stay).  Two ranks on
 * one GPU are refused as NCCL refuses them ("Duplicate GPU detected").
 *
 * Collectives run in stream order: each call queues its operation on its stream, and the
 * operation meets the other ranks' when the stream runs it.  The emulation's streams run
 * only when something waits for them, and a GPU would run them by itself, so each
 * communicator has a progress thread that runs this rank's queued collectives as soon as
 * another rank waits in one (a rank that reads a result early would otherwise wait for a
 * rank blocked in MPI behind it).  Each operation goes in chunks of one slot: every rank
 * writes its part into its slot, all meet at a barrier, every rank computes its result from
 * the slots in rank order (the same bytes on every rank), and all meet again.
 *
 * Failures.  NCCL hangs where a rank is missing; the emulation reports instead: a call
 * whose arguments differ between ranks (the first barrier compares them), a rank that
 * exited, destroyed its communicator or failed, or DPLUA_EMU_NCCL_TIMEOUT seconds (default
 * 60) without the other ranks.  The message goes to stderr, ncclCommGetAsyncError returns
 * an error, and the device is lost as after a kernel fault (cudaErrorLaunchTimeout, whose
 * string carries the message): the results would be garbage, so nothing runs after it.
 * ncclSend and ncclRecv are not emulated (they fail with ncclInvalidUsage). */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <deque>
#include <mutex>
#include <thread>

#include "include/cuda_runtime.h"
#include "include/nccl.h"
#include "../../src/half.h"

namespace {

const char ID_MAGIC[16] = "dplua-emu-nccl1";
const size_t SLOT_BYTES = 1 << 20;   /* one chunk per rank */
const int MAX_RANKS = 256;

struct emu_id {
    char magic[16];
    char name[64];   /* the shared-memory segment */
};
static_assert(sizeof(emu_id) <= sizeof(ncclUniqueId), "the emulation's id must fit ncclUniqueId");

enum { K_ALL_REDUCE, K_BROADCAST, K_REDUCE, K_ALL_GATHER, K_REDUCE_SCATTER };
const char *kind_name(int k)
{
    static const char *n[] = { "ncclAllReduce", "ncclBroadcast", "ncclReduce", "ncclAllGather",
                               "ncclReduceScatter" };
    return n[k];
}

/* What a rank calls: compared between ranks at each call's first barrier. */
struct op_desc {
    uint64_t seq;   /* the communicator's calls, counted from 1 */
    int32_t kind, dtype, op, root;
    uint64_t count;
};

enum { R_ABSENT, R_JOINED, R_LEFT, R_FAILED };

/* One rank's part of the segment (its slot follows the rank table). */
struct alignas(64) shm_rank {
    std::atomic<uint64_t> arrived;   /* barriers passed */
    std::atomic<uint64_t> want;      /* the call it runs now (its seq), 0 none */
    std::atomic<int32_t> state;
    int32_t pid, device;
    char bus[32];
    op_desc desc;
    char msg[384];                   /* why it failed (R_FAILED) */
};

struct shm_header {
    std::atomic<uint32_t> doorbell;  /* bumped (and woken) at every change */
    std::atomic<int32_t> nranks;     /* set by the first rank to come */
};

size_t segment_bytes(int nranks)
{
    return 4096 + sizeof(shm_rank) * (size_t)nranks + SLOT_BYTES * (size_t)nranks;
}

struct pending {
    uint64_t seq;
    cudaStream_t stream;
    uint64_t mark;   /* the stream's queue up to and with the call */
};

}   // namespace

struct emu_nccl_comm {
    int rank, nranks, device;
    char *base;
    size_t bytes;
    shm_header *hdr;
    shm_rank *ranks;
    uint64_t next_seq = 1;             /* the next call's seq */
    uint64_t barriers = 0;             /* barriers this rank passed */
    std::atomic<uint64_t> ran{ 0 };    /* the last call this rank started to run */
    std::atomic<int> async_error{ ncclSuccess };
    std::mutex mu;                     /* guards queue */
    std::deque<pending> queue;         /* calls queued, not known to have run */
    std::thread progress;
    std::atomic<bool> stop{ false };

    char *slot(int r) { return base + 4096 + sizeof(shm_rank) * (size_t)nranks + SLOT_BYTES * (size_t)r; }
};

namespace {

/* ---------------------------------------------------------------- messages */

std::mutex g_err_mu;
char g_last_error[1024];

void vset_error(const char *fmt, va_list ap)
{
    char buf[1024];
    vsnprintf(buf, sizeof buf, fmt, ap);
    std::lock_guard<std::mutex> lock(g_err_mu);
    memcpy(g_last_error, buf, sizeof buf);
}

/* Records the message ncclGetLastError returns and prints it (as NCCL_DEBUG=WARN does);
 * returns r. */
ncclResult_t nccl_fail(ncclResult_t r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
ncclResult_t nccl_fail(ncclResult_t r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vset_error(fmt, ap);
    va_end(ap);
    std::lock_guard<std::mutex> lock(g_err_mu);
    fprintf(stderr, "cudaemu: NCCL WARN %s\n", g_last_error);
    return r;
}

double now()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

double timeout_seconds()
{
    static double t = [] {
        const char *s = getenv("DPLUA_EMU_NCCL_TIMEOUT");
        char *end;
        double v = s && *s ? strtod(s, &end) : 60;
        if (s && *s && (*end || !(v > 0))) {
            fprintf(stderr, "cudaemu: DPLUA_EMU_NCCL_TIMEOUT=%s is not a positive number of seconds; using 60\n", s);
            v = 60;
        }
        return v;
    }();
    return t;
}

/* ---------------------------------------------------------------- waiting */

void ring(shm_header *h)
{
    h->doorbell.fetch_add(1);
    syscall(SYS_futex, (uint32_t *)&h->doorbell, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

/* Sleeps until the doorbell moves from `seen` (or `secs` pass). */
void doze(shm_header *h, uint32_t seen, double secs)
{
    struct timespec ts;
    ts.tv_sec = (time_t)secs;
    ts.tv_nsec = (long)((secs - (double)ts.tv_sec) * 1e9);
    syscall(SYS_futex, (uint32_t *)&h->doorbell, FUTEX_WAIT, seen, &ts, NULL, 0);
}

/* A process that exited, also one its parent has not reaped yet (a zombie), is not alive. */
bool pid_alive(int pid)
{
    if (pid <= 0) return true;
    if (kill(pid, 0) != 0 && errno == ESRCH) return false;
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return true;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *paren = strrchr(buf, ')');   /* "pid (comm) S ..." */
    return !(paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X'));
}

/* Why rank r cannot come any more, or NULL. */
const char *gone(emu_nccl_comm *c, int r, char *buf, size_t len)
{
    shm_rank &p = c->ranks[r];
    int st = p.state.load();
    if (st == R_FAILED) snprintf(buf, len, "rank %d failed: %s", r, p.msg);
    else if (st == R_LEFT) snprintf(buf, len, "rank %d destroyed its communicator (ncclCommDestroy/ncclCommAbort)", r);
    else if (st != R_ABSENT && !pid_alive(p.pid)) snprintf(buf, len, "rank %d (pid %d) exited", r, p.pid);
    else return NULL;
    return buf;
}

/* Waits until every rank has passed barrier `b`.  Fails
 * with a message naming the ranks missing, in `what`. */
bool barrier_wait(emu_nccl_comm *c, uint64_t b, const char *what, char *err, size_t errlen)
{
    double deadline = now() + timeout_seconds();
    for (;;) {
        uint32_t seen = c->hdr->doorbell.load();
        char missing[256] = "", why[512];
        size_t n = 0;
        for (int r = 0; r < c->nranks; r++) {
            if (c->ranks[r].arrived.load() >= b) continue;
            if (gone(c, r, why, sizeof why)) {
                snprintf(err, errlen, "%s on rank %d: %s while rank %d waits for it", what, c->rank, why, c->rank);
                return false;
            }
            if (n < sizeof missing - 8) n += snprintf(missing + n, sizeof missing - n, "%s%d", n ? ", " : "", r);
        }
        if (!missing[0]) return true;
        double left = deadline - now();
        if (left <= 0) {
            snprintf(err, errlen, "%s on rank %d: rank(s) %s did not come within %g s (DPLUA_EMU_NCCL_TIMEOUT); "
                     "every rank must make the same calls in the same order (NCCL would hang here)", what, c->rank,
                     missing, timeout_seconds());
            return false;
        }
        doze(c->hdr, seen, left < 0.1 ? left : 0.1);   /* wakes now and then to see whether a peer exited */
    }
}

bool barrier(emu_nccl_comm *c, const char *what, char *err, size_t errlen)
{
    uint64_t b = ++c->barriers;
    c->ranks[c->rank].arrived.store(b);
    ring(c->hdr);
    return barrier_wait(c, b, what, err, errlen);
}

/* ---------------------------------------------------------------- element types */

size_t type_size(int dt)
{
    switch (dt) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    }
    return 0;
}

const char *type_name(int dt)
{
    switch (dt) {
    case ncclInt8: return "ncclInt8";
    case ncclUint8: return "ncclUint8";
    case ncclInt32: return "ncclInt32";
    case ncclUint32: return "ncclUint32";
    case ncclInt64: return "ncclInt64";
    case ncclUint64: return "ncclUint64";
    case ncclFloat16: return "ncclFloat16";
    case ncclBfloat16: return "ncclBfloat16";
    case ncclFloat32: return "ncclFloat32";
    case ncclFloat64: return "ncclFloat64";
    }
    return "?";
}

const char *op_name(int op)
{
    static const char *n[] = { "ncclSum", "ncclProd", "ncclMax", "ncclMin", "ncclAvg" };
    return op >= 0 && op < 5 ? n[op] : "?";
}

/* Element access by type (float16 and bfloat16 computed in float32, rounded once).
 * Integers wrap (computed unsigned); floats as the type; avg of floats multiplies each
 * input by 1/nranks before summing, avg of integers divides the sum, as NCCL does. */
template <typename T> struct arith {
    typedef T acc;
    static const size_t size = sizeof(T);
    static acc load(const void *p) { T v; memcpy(&v, p, sizeof v); return v; }
    static void store(void *p, acc v) { T x = v; memcpy(p, &x, sizeof x); }
};
template <bool BF> struct half_arith {
    typedef float acc;
    static const size_t size = 2;
    static acc load(const void *p)
    {
        uint16_t b;
        memcpy(&b, p, 2);
        return BF ? dp_bf16_to_float(b) : dp_f16_to_float(b);
    }
    static void store(void *p, acc v)
    {
        uint16_t b = BF ? dp_float_to_bf16(v) : dp_float_to_f16(v);
        memcpy(p, &b, 2);
    }
};

template <typename T> T wrap_add(T a, T b)
{
    if constexpr (std::is_integral<T>::value) return (T)((typename std::make_unsigned<T>::type)a + (typename std::make_unsigned<T>::type)b);
    else return a + b;
}
template <typename T> T wrap_mul(T a, T b)
{
    if constexpr (std::is_integral<T>::value) return (T)((typename std::make_unsigned<T>::type)a * (typename std::make_unsigned<T>::type)b);
    else return a * b;
}

/* out[i] = op over ranks of in[r] + i * stride_r, for n elements */
template <typename A>
void reduce_into(void *out, const char *const *in, int nranks, size_t n, int op)
{
    typedef typename A::acc V;
    const size_t es = A::size;
    for (size_t i = 0; i < n; i++) {
        V scale = (V)1;
        bool premul = op == ncclAvg && std::is_floating_point<V>::value;
        if (premul) scale = (V)(1.0 / nranks);
        V acc = A::load(in[0] + i * es);
        if (premul) acc = acc * scale;
        for (int r = 1; r < nranks; r++) {
            V x = A::load(in[r] + i * es);
            switch (op) {
            case ncclSum: acc = wrap_add(acc, x); break;
            case ncclProd: acc = wrap_mul(acc, x); break;
            case ncclMax: acc = x > acc || acc != acc ? x : acc; break;   /* fmax: a NaN loses, as in NCCL */
            case ncclMin: acc = x < acc || acc != acc ? x : acc; break;
            case ncclAvg: acc = premul ? acc + x * scale : wrap_add(acc, x); break;
            }
        }
        if (op == ncclAvg && !premul) {
            if constexpr (std::is_integral<V>::value) acc = (V)(acc / (V)nranks);
        }
        A::store((char *)out + i * es, acc);
    }
}

void reduce_any(int dt, void *out, const char *const *in, int nranks, size_t n, int op)
{
    switch (dt) {
    case ncclInt8: reduce_into<arith<int8_t>>(out, in, nranks, n, op); break;
    case ncclUint8: reduce_into<arith<uint8_t>>(out, in, nranks, n, op); break;
    case ncclInt32: reduce_into<arith<int32_t>>(out, in, nranks, n, op); break;
    case ncclUint32: reduce_into<arith<uint32_t>>(out, in, nranks, n, op); break;
    case ncclInt64: reduce_into<arith<int64_t>>(out, in, nranks, n, op); break;
    case ncclUint64: reduce_into<arith<uint64_t>>(out, in, nranks, n, op); break;
    case ncclFloat16: reduce_into<half_arith<false>>(out, in, nranks, n, op); break;
    case ncclBfloat16: reduce_into<half_arith<true>>(out, in, nranks, n, op); break;
    case ncclFloat32: reduce_into<arith<float>>(out, in, nranks, n, op); break;
    case ncclFloat64: reduce_into<arith<double>>(out, in, nranks, n, op); break;
    }
}

/* ---------------------------------------------------------------- running a call */

void describe(const op_desc &d, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s #%llu (count %llu, %s", kind_name(d.kind), (unsigned long long)d.seq,
                     (unsigned long long)d.count, type_name(d.dtype));
    if (d.kind != K_BROADCAST && d.kind != K_ALL_GATHER) n += snprintf(buf + n, len - n, ", %s", op_name(d.op));
    if (d.kind == K_BROADCAST || d.kind == K_REDUCE) n += snprintf(buf + n, len - n, ", root %d", d.root);
    snprintf(buf + n, len - n, ")");
}

/* The call failed on this rank: the others learn it, the device is lost. */
void fail_call(emu_nccl_comm *c, const char *msg, ncclResult_t r)
{
    shm_rank &me = c->ranks[c->rank];
    snprintf(me.msg, sizeof me.msg, "%s", msg);
    me.state.store(R_FAILED);
    ring(c->hdr);
    int none = ncclSuccess;
    c->async_error.compare_exchange_strong(none, (int)r);
    {
        std::lock_guard<std::mutex> lock(g_err_mu);
        snprintf(g_last_error, sizeof g_last_error, "%s", msg);
    }
    char full[640];
    snprintf(full, sizeof full, "NCCL: %s", msg);
    emu::device_lost(c->device, full);
}

bool same_call(emu_nccl_comm *c, const char *what, char *err, size_t errlen)
{
    const op_desc &mine = c->ranks[0].desc;
    bool same = true;
    for (int r = 1; r < c->nranks && same; r++) {
        const op_desc &d = c->ranks[r].desc;
        same = d.seq == mine.seq && d.kind == mine.kind && d.dtype == mine.dtype && d.count == mine.count &&
               d.op == mine.op && d.root == mine.root;
    }
    if (same) return true;
    int n = snprintf(err, errlen, "%s on rank %d: the ranks made different calls (NCCL would hang or compute "
                     "garbage):", what, c->rank);
    for (int r = 0; r < c->nranks && n < (int)errlen; r++) {
        char d[160];
        describe(c->ranks[r].desc, d, sizeof d);
        n += snprintf(err + n, errlen - n, "%s rank %d called %s", r ? ";" : "", r, d);
    }
    return false;
}

/* Runs call d (in stream order) with every rank. */
void run_call(emu_nccl_comm *c, op_desc d, const char *send, char *recv)
{
    if (c->async_error.load() != ncclSuccess) return;
    c->ran.store(d.seq);
    shm_rank &me = c->ranks[c->rank];
    me.desc = d;
    me.want.store(d.seq);
    ring(c->hdr);
    char what[200], err[1024];
    describe(d, what, sizeof what);
    size_t es = type_size(d.dtype), n = c->nranks;
    size_t per = SLOT_BYTES / es / (d.kind == K_REDUCE_SCATTER ? n : 1);   /* elements per chunk */
    const char *in[MAX_RANKS];
    for (size_t r = 0; r < n; r++) in[r] = c->slot((int)r);
    size_t done = 0;
    bool first = true;
    while (first || done < d.count) {
        size_t m = d.count - done < per ? d.count - done : per;
        char *mine = c->slot(c->rank);
        switch (m > 0 ? d.kind : -1) {   /* count 0: the barriers only (the buffers may be NULL) */
        case K_ALL_REDUCE: case K_REDUCE: case K_ALL_GATHER: memcpy(mine, send + done * es, m * es); break;
        case K_BROADCAST: if (c->rank == d.root) memcpy(mine, send + done * es, m * es); break;
        case K_REDUCE_SCATTER:
            for (size_t r = 0; r < n; r++) memcpy(mine + r * m * es, send + (r * d.count + done) * es, m * es);
            break;
        }
        if (!barrier(c, what, err, sizeof err)) return fail_call(c, err, ncclRemoteError);
        if (first && !same_call(c, what, err, sizeof err)) return fail_call(c, err, ncclInvalidUsage);
        switch (m > 0 ? d.kind : -1) {
        case K_ALL_REDUCE: reduce_any(d.dtype, recv + done * es, in, (int)n, m, d.op); break;
        case K_REDUCE: if (c->rank == d.root) reduce_any(d.dtype, recv + done * es, in, (int)n, m, d.op); break;
        case K_BROADCAST: memcpy(recv + done * es, in[d.root], m * es); break;
        case K_ALL_GATHER:
            for (size_t r = 0; r < n; r++) memcpy(recv + (r * d.count + done) * es, in[r], m * es);
            break;
        case K_REDUCE_SCATTER: {
            const char *part[MAX_RANKS];
            for (size_t r = 0; r < n; r++) part[r] = in[r] + c->rank * m * es;
            reduce_any(d.dtype, recv + done * es, part, (int)n, m, d.op);
            break;
        }
        }
        if (!barrier(c, what, err, sizeof err)) return fail_call(c, err, ncclRemoteError);
        done += m;
        first = false;
    }
    me.want.store(0);
    std::lock_guard<std::mutex> lock(c->mu);
    while (!c->queue.empty() && c->queue.front().seq <= d.seq) c->queue.pop_front();
}

/* Runs this rank's queued calls up to the latest one another rank waits in: the GPU would
 * have run them by itself. */
void progress_loop(emu_nccl_comm *c)
{
    while (!c->stop.load()) {
        uint32_t seen = c->hdr->doorbell.load();
        uint64_t wanted = 0;
        for (int r = 0; r < c->nranks; r++)
            if (r != c->rank && c->ranks[r].want.load() > wanted) wanted = c->ranks[r].want.load();
        if (wanted > c->ran.load() && c->async_error.load() == ncclSuccess) {
            std::deque<pending> todo;   /* taken off the queue: a call the device skipped is not retried */
            {
                std::lock_guard<std::mutex> lock(c->mu);
                while (!c->queue.empty() && c->queue.front().seq <= wanted) {
                    todo.push_back(c->queue.front());
                    c->queue.pop_front();
                }
            }
            for (const pending &p : todo) emu::stream_run(p.stream, p.mark);
            if (!todo.empty()) continue;
        }
        doze(c->hdr, seen, 0.05);
    }
}

/* Checks a call's arguments (what NCCL checks when it is called) and queues it. */
ncclResult_t enqueue(const char *fn, int kind, const void *send, void *recv, size_t count, ncclDataType_t dt,
                     int op, int root, ncclComm_t c, cudaStream_t s)
{
    if (!c) return nccl_fail(ncclInvalidArgument, "%s: comm is NULL", fn);
    if (c->async_error.load() != ncclSuccess)
        return nccl_fail(ncclInvalidUsage, "%s: the communicator failed earlier (ncclCommGetAsyncError): %s", fn,
                         c->ranks[c->rank].msg);
    if (type_size(dt) == 0) return nccl_fail(ncclInvalidArgument, "%s: invalid data type %d", fn, (int)dt);
    if ((kind == K_ALL_REDUCE || kind == K_REDUCE || kind == K_REDUCE_SCATTER) && (op < 0 || op >= ncclNumOps))
        return nccl_fail(ncclInvalidArgument, "%s: invalid reduction operation %d", fn, op);
    if ((kind == K_BROADCAST || kind == K_REDUCE) && (root < 0 || root >= c->nranks))
        return nccl_fail(ncclInvalidArgument, "%s: root %d is not a rank of %d", fn, root, c->nranks);
    if (!s) return nccl_fail(ncclInvalidUsage, "%s: the legacy default stream (0) is not emulated; pass a stream", fn);
    if (emu::current_device() != c->device)   /* NCCL runs on the communicator's device */
        return nccl_fail(ncclInvalidUsage, "%s: the communicator is on CUDA device %d but device %d is current", fn,
                         c->device, emu::current_device());
    size_t es = type_size(dt), n = c->nranks;
    size_t send_n = kind == K_REDUCE_SCATTER ? count * n : count;
    size_t recv_n = kind == K_ALL_GATHER ? count * n : count;
    bool needs_recv = kind != K_REDUCE || c->rank == root;
    bool needs_send = kind != K_BROADCAST || c->rank == root;
    int dev = -1;
    if (count > 0 && needs_send && (!emu::device_memory(send, send_n * es, &dev) || dev != c->device))
        return nccl_fail(ncclInvalidArgument, "%s: sendbuff %p (%zu bytes) is not inside device memory of CUDA "
                         "device %d", fn, send, send_n * es, c->device);
    if (count > 0 && needs_recv && (!emu::device_memory(recv, recv_n * es, &dev) || dev != c->device))
        return nccl_fail(ncclInvalidArgument, "%s: recvbuff %p (%zu bytes) is not inside device memory of CUDA "
                         "device %d", fn, recv, recv_n * es, c->device);
    op_desc d = { c->next_seq++, kind, (int32_t)dt, op, root, (uint64_t)count };
    emu::submit(s, [c, d, send, recv]() { run_call(c, d, (const char *)send, (char *)recv); });
    {
        std::lock_guard<std::mutex> lock(c->mu);
        if (c->ran.load() < d.seq) c->queue.push_back(pending{ d.seq, s, emu::stream_queued(s) });
    }
    ring(c->hdr);   /* a peer may already wait for it: the progress thread looks again */
    return ncclSuccess;
}

}   // namespace

extern "C" {

ncclResult_t ncclGetVersion(int *version)
{
    *version = NCCL_MAJOR * 10000 + NCCL_MINOR * 100 + NCCL_PATCH;
    return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    static std::atomic<unsigned> counter{ 0 };
    memset(id, 0, sizeof *id);
    emu_id e;
    memset(&e, 0, sizeof e);
    memcpy(e.magic, ID_MAGIC, sizeof e.magic);
    unsigned long long salt = 0;
    int fd = open("/dev/urandom", O_RDONLY);
    if (fd < 0 || read(fd, &salt, sizeof salt) != (ssize_t)sizeof salt) salt = (unsigned long long)(now() * 1e9);
    if (fd >= 0) close(fd);
    snprintf(e.name, sizeof e.name, "/dplua-emu-nccl-%d-%u-%llx", (int)getpid(), counter.fetch_add(1), salt);
    memcpy(id, &e, sizeof e);
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *out, int nranks, ncclUniqueId id, int rank)
{
    *out = NULL;
    emu_id e;
    memcpy(&e, &id, sizeof e);
    if (memcmp(e.magic, ID_MAGIC, sizeof e.magic) != 0 || !memchr(e.name, 0, sizeof e.name))
        return nccl_fail(ncclInvalidArgument, "ncclCommInitRank: the unique id was not made by ncclGetUniqueId");
    if (nranks < 1 || nranks > MAX_RANKS)
        return nccl_fail(ncclInvalidArgument, "ncclCommInitRank: nranks %d is not in 1..%d", nranks, MAX_RANKS);
    if (rank < 0 || rank >= nranks)
        return nccl_fail(ncclInvalidArgument, "ncclCommInitRank: rank %d is not in 0..%d", rank, nranks - 1);
    int device = emu::current_device();
    char bus[32];
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, device) != cudaSuccess)
        return nccl_fail(ncclUnhandledCudaError, "ncclCommInitRank: no CUDA device %d", device);
    /* the segment grows to the largest size asked for, never shrinks under another rank */
    int fd = shm_open(e.name, O_RDWR | O_CREAT, 0600);
    if (fd < 0) return nccl_fail(ncclSystemError, "ncclCommInitRank: shm_open(%s): %s", e.name, strerror(errno));
    size_t bytes = segment_bytes(nranks);
    struct stat st;
    bool sized = flock(fd, LOCK_EX) == 0 && fstat(fd, &st) == 0 &&
                 ((size_t)st.st_size >= bytes || ftruncate(fd, (off_t)bytes) == 0);
    flock(fd, LOCK_UN);
    char *base = sized ? (char *)mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : (char *)MAP_FAILED;
    int mapped_errno = errno;
    close(fd);
    if (base == MAP_FAILED) {
        shm_unlink(e.name);
        return nccl_fail(ncclSystemError, "ncclCommInitRank: cannot size or map %zu bytes of shared memory %s: %s",
                         bytes, e.name, strerror(mapped_errno));
    }
    emu_nccl_comm *c = new emu_nccl_comm;
    c->rank = rank;
    c->nranks = nranks;
    c->device = device;
    c->base = base;
    c->bytes = bytes;
    c->hdr = (shm_header *)base;
    c->ranks = (shm_rank *)(base + 4096);
    auto undo = [&](ncclResult_t r) {
        munmap(c->base, c->bytes);
        delete c;
        return r;
    };
    int expect = 0;
    if (!c->hdr->nranks.compare_exchange_strong(expect, nranks) && expect != nranks) {
        ncclResult_t r = nccl_fail(ncclInvalidUsage, "ncclCommInitRank: rank %d was given nranks %d, another rank %d "
                                   "(every rank must pass the same nranks)", rank, nranks, expect);
        return undo(r);
    }
    shm_rank &me = c->ranks[rank];
    int absent = R_ABSENT;
    me.pid = (int)getpid();
    if (!me.state.compare_exchange_strong(absent, R_JOINED)) {
        ncclResult_t r = nccl_fail(ncclInvalidUsage, "ncclCommInitRank: rank %d joined twice (two processes called "
                                   "ncclCommInitRank with rank %d)", rank, rank);
        return undo(r);
    }
    me.device = device;
    snprintf(me.bus, sizeof me.bus, "%s", bus);
    char err[1024];
    bool all = barrier(c, "ncclCommInitRank", err, sizeof err);
    if (rank == 0 || !all) shm_unlink(e.name);   /* everyone has it mapped (or nobody will come) */
    if (!all) {
        me.state.store(R_LEFT);
        ring(c->hdr);
        return undo(nccl_fail(ncclSystemError, "%s", err));
    }
    for (int a = 0; a < nranks; a++)
        for (int b = a + 1; b < nranks; b++)
            if (strcmp(c->ranks[a].bus, c->ranks[b].bus) == 0) {
                me.state.store(R_LEFT);
                return undo(nccl_fail(ncclInvalidUsage, "Duplicate GPU detected : rank %d and rank %d both on CUDA "
                                      "device %s", a, b, c->ranks[a].bus));
            }
    c->progress = std::thread(progress_loop, c);
    *out = c;
    return ncclSuccess;
}

/* Runs what is queued (the calls complete with the other ranks), then leaves. */
static ncclResult_t leave(ncclComm_t c, bool finish)
{
    if (!c) return nccl_fail(ncclInvalidArgument, "ncclCommDestroy: comm is NULL");
    if (finish) {
        std::deque<pending> todo;
        {
            std::lock_guard<std::mutex> lock(c->mu);
            todo = c->queue;
        }
        for (const pending &p : todo) emu::stream_run(p.stream, p.mark);
    }
    c->stop.store(true);
    shm_rank &me = c->ranks[c->rank];
    int joined = R_JOINED;
    me.state.compare_exchange_strong(joined, R_LEFT);
    ring(c->hdr);
    if (c->progress.joinable()) c->progress.join();
    munmap(c->base, c->bytes);
    delete c;
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) { return leave(comm, true); }
ncclResult_t ncclCommAbort(ncclComm_t comm) { return leave(comm, false); }

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *async_error)
{
    if (!comm) return nccl_fail(ncclInvalidArgument, "ncclCommGetAsyncError: comm is NULL");
    *async_error = (ncclResult_t)comm->async_error.load();
    return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
    if (!comm) return nccl_fail(ncclInvalidArgument, "ncclCommCount: comm is NULL");
    *count = comm->nranks;
    return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device)
{
    if (!comm) return nccl_fail(ncclInvalidArgument, "ncclCommCuDevice: comm is NULL");
    *device = comm->device;
    return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
    if (!comm) return nccl_fail(ncclInvalidArgument, "ncclCommUserRank: comm is NULL");
    *rank = comm->rank;
    return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

/* The last failure's message (one per process, as NCCL keeps it). */
const char *ncclGetLastError(ncclComm_t comm)
{
    (void)comm;
    return g_last_error;
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t s)
{
    return enqueue("ncclAllReduce", K_ALL_REDUCE, send, recv, count, dt, op, 0, comm, s);
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t dt, int root,
                           ncclComm_t comm, cudaStream_t s)
{
    return enqueue("ncclBroadcast", K_BROADCAST, send, recv, count, dt, 0, root, comm, s);
}

ncclResult_t ncclReduce(const void *send, void *recv, size_t count, ncclDataType_t dt, ncclRedOp_t op, int root,
                        ncclComm_t comm, cudaStream_t s)
{
    return enqueue("ncclReduce", K_REDUCE, send, recv, count, dt, op, root, comm, s);
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t count, ncclDataType_t dt, ncclComm_t comm,
                           cudaStream_t s)
{
    return enqueue("ncclAllGather", K_ALL_GATHER, send, recv, count, dt, 0, 0, comm, s);
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t s)
{
    return enqueue("ncclReduceScatter", K_REDUCE_SCATTER, send, recv, count, dt, op, 0, comm, s);
}

ncclResult_t ncclSend(const void *send, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm, cudaStream_t s)
{
    (void)send; (void)count; (void)dt; (void)peer; (void)comm; (void)s;
    return nccl_fail(ncclInvalidUsage, "ncclSend is not emulated (spec/cudaemu/nccl.cpp has the collectives only)");
}

ncclResult_t ncclRecv(void *recv, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm, cudaStream_t s)
{
    (void)recv; (void)count; (void)dt; (void)peer; (void)comm; (void)s;
    return nccl_fail(ncclInvalidUsage, "ncclRecv is not emulated (spec/cudaemu/nccl.cpp has the collectives only)");
}

/* Collectives of a group run one after another in the order they were called, which is
 * what the group launches together. */
static thread_local int t_group_depth = 0;

ncclResult_t ncclGroupStart(void)
{
    t_group_depth++;
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void)
{
    if (t_group_depth == 0) return nccl_fail(ncclInvalidUsage, "ncclGroupEnd: no ncclGroupStart");
    t_group_depth--;
    return ncclSuccess;
}

}   // extern "C"
