/* nccl_test.cpp: the emulated NCCL (nccl.cpp) between forked ranks, each on its own
 * emulated GPU unless a case says otherwise.  Every collective, data type and reduction
 * against values worked out here in double, in and out of place, in several chunks; stream
 * order; a rank that reads its result while the other is blocked elsewhere (the progress
 * thread); and the failures that NCCL turns into hangs: two ranks on one GPU, different
 * calls on different ranks, a rank that exits or never comes.  Built into
 * build-emu/nccl_test, run by spec/cudaemu/run; ends with "N passed, N failed". */
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "include/cuda_runtime.h"
#include "include/nccl.h"
#include "../../src/half.h"

namespace {

struct failure {
    std::string msg;
};

[[noreturn]] void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void fail(const char *fmt, ...)
{
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    throw failure{ buf };
}

#define CHECK_CUDA(e)                                                                              \
    do {                                                                                           \
        cudaError_t r_ = (e);                                                                      \
        if (r_ != cudaSuccess) fail("%s:%d: %s: %s", __FILE__, __LINE__, #e, cudaGetErrorString(r_)); \
    } while (0)
#define CHECK_NCCL(e)                                                                              \
    do {                                                                                           \
        ncclResult_t r_ = (e);                                                                     \
        if (r_ != ncclSuccess)                                                                     \
            fail("%s:%d: %s: %s: %s", __FILE__, __LINE__, #e, ncclGetErrorString(r_), ncclGetLastError(NULL)); \
    } while (0)

double now()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------------- element values */

size_t esize(ncclDataType_t t)
{
    switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
    }
}

bool is_float(ncclDataType_t t) { return t >= ncclFloat16; }
bool is_unsigned(ncclDataType_t t) { return t == ncclUint8 || t == ncclUint32 || t == ncclUint64; }

void put(ncclDataType_t t, void *p, double v)
{
    switch (t) {
    case ncclInt8: { int8_t x = (int8_t)(int64_t)v; memcpy(p, &x, 1); break; }
    case ncclUint8: { uint8_t x = (uint8_t)(int64_t)v; memcpy(p, &x, 1); break; }
    case ncclInt32: { int32_t x = (int32_t)(int64_t)v; memcpy(p, &x, 4); break; }
    case ncclUint32: { uint32_t x = (uint32_t)(int64_t)v; memcpy(p, &x, 4); break; }
    case ncclInt64: { int64_t x = (int64_t)v; memcpy(p, &x, 8); break; }
    case ncclUint64: { uint64_t x = (uint64_t)(int64_t)v; memcpy(p, &x, 8); break; }
    case ncclFloat16: { uint16_t x = dp_float_to_f16((float)v); memcpy(p, &x, 2); break; }
    case ncclBfloat16: { uint16_t x = dp_float_to_bf16((float)v); memcpy(p, &x, 2); break; }
    case ncclFloat32: { float x = (float)v; memcpy(p, &x, 4); break; }
    default: { double x = v; memcpy(p, &x, 8); break; }
    }
}

double get(ncclDataType_t t, const void *p)
{
    switch (t) {
    case ncclInt8: { int8_t x; memcpy(&x, p, 1); return x; }
    case ncclUint8: { uint8_t x; memcpy(&x, p, 1); return x; }
    case ncclInt32: { int32_t x; memcpy(&x, p, 4); return x; }
    case ncclUint32: { uint32_t x; memcpy(&x, p, 4); return x; }
    case ncclInt64: { int64_t x; memcpy(&x, p, 8); return (double)x; }
    case ncclUint64: { uint64_t x; memcpy(&x, p, 8); return (double)x; }
    case ncclFloat16: { uint16_t x; memcpy(&x, p, 2); return dp_f16_to_float(x); }
    case ncclBfloat16: { uint16_t x; memcpy(&x, p, 2); return dp_bf16_to_float(x); }
    case ncclFloat32: { float x; memcpy(&x, p, 4); return x; }
    default: { double x; memcpy(&x, p, 8); return x; }
    }
}

/* rank r's element i: small integers (exact in every type), non-negative for unsigned types */
double value(ncclDataType_t t, int r, size_t i)
{
    int v = (int)((i * 7 + (size_t)r * 3) % 11);
    return is_unsigned(t) ? v + 1 : v - 5 + (v == 5 ? 6 : 0);   /* never 0: products stay informative */
}

double expected(ncclDataType_t t, ncclRedOp_t op, int n, size_t i, size_t offset_rank_elems = 0)
{
    double acc = value(t, 0, i + offset_rank_elems);
    for (int r = 1; r < n; r++) {
        double x = value(t, r, i + offset_rank_elems);
        switch (op) {
        case ncclSum: case ncclAvg: acc += x; break;
        case ncclProd: acc *= x; break;
        case ncclMax: acc = x > acc ? x : acc; break;
        case ncclMin: acc = x < acc ? x : acc; break;
        default: break;
        }
    }
    if (op == ncclAvg) acc = is_float(t) ? acc / n : trunc(acc / n);
    return acc;
}

void close_to(ncclDataType_t t, double got, double want, const char *what, size_t i)
{
    double tol = t == ncclFloat16 || t == ncclBfloat16 ? 1e-2 : t == ncclFloat32 ? 1e-6 : 1e-12;
    if (!is_float(t)) {   /* integers wrap: the expected value modulo the type's range */
        char tmp[8];
        put(t, tmp, want);
        want = get(t, tmp);
        tol = 0;
    }
    if (fabs(got - want) > tol * (1 + fabs(want))) fail("%s: element %zu is %g, expected %g", what, i, got, want);
}

/* ---------------------------------------------------------------- device buffers */

struct dbuf {
    void *p = NULL;
    size_t bytes = 0;
    explicit dbuf(size_t n)
    {
        bytes = n;
        CHECK_CUDA(cudaMalloc(&p, n ? n : 1));
    }
    ~dbuf() { cudaFree(p); }
    void upload(const std::vector<char> &h, cudaStream_t s) { CHECK_CUDA(cudaMemcpyAsync(p, h.data(), bytes, cudaMemcpyHostToDevice, s)); }
    std::vector<char> download(cudaStream_t s)
    {
        std::vector<char> h(bytes);
        CHECK_CUDA(cudaMemcpyAsync(h.data(), p, bytes, cudaMemcpyDeviceToHost, s));   /* pageable: waits */
        CHECK_CUDA(cudaStreamSynchronize(s));
        return h;
    }
};

std::vector<char> values(ncclDataType_t t, int r, size_t n, size_t from = 0)
{
    std::vector<char> h(n * esize(t));
    for (size_t i = 0; i < n; i++) put(t, h.data() + i * esize(t), value(t, r, from + i));
    return h;
}

/* ---------------------------------------------------------------- forked ranks */

struct ctx {
    int rank, n;
    ncclUniqueId id;
    ncclComm_t comm = NULL;
    cudaStream_t s = NULL;
    int pipe_to[8][2];   /* pipe_to[r]: what rank r reads */
};

ncclComm_t init(ctx &c, int device)
{
    CHECK_CUDA(cudaSetDevice(device));
    CHECK_CUDA(cudaStreamCreateWithFlags(&c.s, cudaStreamNonBlocking));
    CHECK_NCCL(ncclCommInitRank(&c.comm, c.n, c.id, c.rank));
    return c.comm;
}

typedef void (*case_fn)(ctx &c);

/* Runs fn in n forked ranks; true when every rank exits 0 within `limit` seconds. */
bool run_ranks(int n, case_fn fn, double limit, const char *env = NULL)
{
    ctx c;
    c.n = n;
    ncclGetUniqueId(&c.id);
    for (int r = 0; r < n; r++)
        if (pipe(c.pipe_to[r]) != 0) return false;
    std::vector<pid_t> pids;
    for (int r = 0; r < n; r++) {
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid == 0) {
            if (env) putenv((char *)env);
            c.rank = r;
            int rc = 0;
            try {
                fn(c);
            } catch (const failure &f) {
                fprintf(stderr, "  rank %d: %s\n", r, f.msg.c_str());
                rc = 1;
            }
            fflush(stderr);
            _exit(rc);
        }
        pids.push_back(pid);
    }
    /* reaped as they end (waitpid(-1)): a rank that exited must not linger as a zombie,
     * which its peers would take for alive */
    bool ok = true;
    size_t left = pids.size();
    double deadline = now() + limit;
    while (left > 0) {
        int st = 0;
        pid_t w = waitpid(-1, &st, WNOHANG);
        if (w > 0) {
            left--;
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) ok = false;
        } else if (now() > deadline) {
            fprintf(stderr, "  a rank did not finish within %g s\n", limit);
            for (pid_t p : pids) kill(p, SIGKILL);
            while (waitpid(-1, &st, 0) > 0) {}
            return false;
        } else {
            usleep(10000);
        }
    }
    for (int r = 0; r < n; r++) close(c.pipe_to[r][0]), close(c.pipe_to[r][1]);
    return ok;
}

const ncclDataType_t TYPES[] = { ncclInt8, ncclUint8, ncclInt32, ncclUint32, ncclInt64, ncclUint64,
                                 ncclFloat16, ncclBfloat16, ncclFloat32, ncclFloat64 };
const ncclRedOp_t OPS[] = { ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg };

/* ---------------------------------------------------------------- the cases */

void all_reduce_every_type_and_op(ctx &c)
{
    init(c, c.rank);
    const size_t n = 37;
    for (ncclDataType_t t : TYPES)
        for (ncclRedOp_t op : OPS) {
            dbuf send(n * esize(t)), recv(n * esize(t));
            send.upload(values(t, c.rank, n), c.s);
            CHECK_NCCL(ncclAllReduce(send.p, recv.p, n, t, op, c.comm, c.s));
            std::vector<char> h = recv.download(c.s);
            char what[64];
            snprintf(what, sizeof what, "type %d op %d", (int)t, (int)op);
            for (size_t i = 0; i < n; i++) close_to(t, get(t, h.data() + i * esize(t)), expected(t, op, c.n, i), what, i);
        }
    CHECK_NCCL(ncclCommDestroy(c.comm));
}

/* in place, several chunks of the 1 MiB slot: 700000 floats */
void large_in_place(ctx &c)
{
    init(c, c.rank);
    const size_t n = 700000;
    dbuf buf(n * 4);
    buf.upload(values(ncclFloat32, c.rank, n), c.s);
    CHECK_NCCL(ncclAllReduce(buf.p, buf.p, n, ncclFloat32, ncclSum, c.comm, c.s));
    std::vector<char> h = buf.download(c.s);
    for (size_t i = 0; i < n; i++) close_to(ncclFloat32, get(ncclFloat32, h.data() + i * 4), expected(ncclFloat32, ncclSum, c.n, i), "sum", i);
    /* all_gather and reduce_scatter over several chunks too */
    const size_t m = 300000;
    dbuf mine(m * 4), all(m * 4 * c.n), part(m * 4);
    mine.upload(values(ncclFloat32, c.rank, m), c.s);
    CHECK_NCCL(ncclAllGather(mine.p, all.p, m, ncclFloat32, c.comm, c.s));
    h = all.download(c.s);
    for (int r = 0; r < c.n; r++)
        for (size_t i = 0; i < m; i++) close_to(ncclFloat32, get(ncclFloat32, h.data() + (r * m + i) * 4), value(ncclFloat32, r, i), "gathered", i);
    std::vector<char> src(m * 4 * c.n);
    for (int q = 0; q < c.n; q++)   /* block q of rank r: values of rank r at q * m ... */
        for (size_t i = 0; i < m; i++) put(ncclFloat32, src.data() + (q * m + i) * 4, value(ncclFloat32, c.rank, q * m + i));
    all.upload(src, c.s);
    CHECK_NCCL(ncclReduceScatter(all.p, part.p, m, ncclFloat32, ncclMax, c.comm, c.s));
    h = part.download(c.s);
    for (size_t i = 0; i < m; i++)
        close_to(ncclFloat32, get(ncclFloat32, h.data() + i * 4), expected(ncclFloat32, ncclMax, c.n, i, c.rank * m), "scattered", i);
    CHECK_NCCL(ncclCommDestroy(c.comm));
}

void broadcast_reduce_gather_scatter(ctx &c)
{
    init(c, c.rank);
    const size_t n = 11;
    for (ncclDataType_t t : { ncclInt64, ncclFloat16, ncclFloat64 }) {
        size_t es = esize(t);
        for (int root = 0; root < c.n; root++) {
            dbuf b(n * es);
            b.upload(values(t, c.rank, n), c.s);
            CHECK_NCCL(ncclBroadcast(b.p, b.p, n, t, root, c.comm, c.s));
            std::vector<char> h = b.download(c.s);
            for (size_t i = 0; i < n; i++) close_to(t, get(t, h.data() + i * es), value(t, root, i), "broadcast", i);
            dbuf send(n * es), recv(n * es);
            send.upload(values(t, c.rank, n), c.s);
            recv.upload(values(t, 99, n), c.s);
            CHECK_NCCL(ncclReduce(send.p, recv.p, n, t, ncclProd, root, c.comm, c.s));
            h = recv.download(c.s);
            for (size_t i = 0; i < n; i++)   /* only the root's recvbuff is written */
                close_to(t, get(t, h.data() + i * es), c.rank == root ? expected(t, ncclProd, c.n, i) : value(t, 99, i),
                         "reduce", i);
        }
        dbuf send(n * es), all(n * es * c.n), part(n * es);
        send.upload(values(t, c.rank, n), c.s);
        CHECK_NCCL(ncclAllGather(send.p, all.p, n, t, c.comm, c.s));
        std::vector<char> h = all.download(c.s);
        for (int r = 0; r < c.n; r++)
            for (size_t i = 0; i < n; i++) close_to(t, get(t, h.data() + (r * n + i) * es), value(t, r, i), "all_gather", i);
        all.upload(values(t, c.rank, n * c.n), c.s);
        CHECK_NCCL(ncclReduceScatter(all.p, part.p, n, t, ncclSum, c.comm, c.s));
        h = part.download(c.s);
        for (size_t i = 0; i < n; i++)
            close_to(t, get(t, h.data() + i * es), expected(t, ncclSum, c.n, i, c.rank * n), "reduce_scatter", i);
    }
    /* count 0 is a call like any other */
    CHECK_NCCL(ncclAllReduce(NULL, NULL, 0, ncclFloat32, ncclSum, c.comm, c.s));
    CHECK_CUDA(cudaStreamSynchronize(c.s));
    CHECK_NCCL(ncclGroupStart());
    dbuf a(16), b(16);
    a.upload(values(ncclFloat32, c.rank, 4), c.s);
    b.upload(values(ncclFloat32, c.rank, 4, 4), c.s);
    CHECK_NCCL(ncclAllReduce(a.p, a.p, 4, ncclFloat32, ncclSum, c.comm, c.s));
    CHECK_NCCL(ncclAllReduce(b.p, b.p, 4, ncclFloat32, ncclMin, c.comm, c.s));
    CHECK_NCCL(ncclGroupEnd());
    std::vector<char> ha = a.download(c.s), hb = b.download(c.s);
    for (size_t i = 0; i < 4; i++) {
        close_to(ncclFloat32, get(ncclFloat32, ha.data() + i * 4), expected(ncclFloat32, ncclSum, c.n, i), "group sum", i);
        close_to(ncclFloat32, get(ncclFloat32, hb.data() + i * 4), expected(ncclFloat32, ncclMin, c.n, i + 4), "group min", i);
    }
    int count = 0, dev = -1, rank = -1;
    CHECK_NCCL(ncclCommCount(c.comm, &count));
    CHECK_NCCL(ncclCommCuDevice(c.comm, &dev));
    CHECK_NCCL(ncclCommUserRank(c.comm, &rank));
    if (count != c.n || dev != c.rank || rank != c.rank) fail("count %d device %d rank %d", count, dev, rank);
    CHECK_NCCL(ncclCommDestroy(c.comm));
}

/* The call runs in stream order: after a copy queued before it on another stream that
 * its stream waits for, and before a copy queued after it; nothing runs before a wait. */
void stream_order(ctx &c)
{
    init(c, c.rank);
    cudaStream_t other;
    CHECK_CUDA(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
    const size_t n = 8;
    dbuf buf(n * 8), snap(n * 8), zero(n * 8);
    zero.upload(std::vector<char>(n * 8, 0), other);
    CHECK_CUDA(cudaStreamSynchronize(other));
    buf.upload(values(ncclFloat64, c.rank, n), other);   /* queued on `other` */
    cudaEvent_t e;
    CHECK_CUDA(cudaEventCreateWithFlags(&e, 0));
    CHECK_CUDA(cudaEventRecord(e, other));
    CHECK_CUDA(cudaStreamWaitEvent(c.s, e, 0));
    CHECK_NCCL(ncclAllReduce(buf.p, buf.p, n, ncclFloat64, ncclSum, c.comm, c.s));
    CHECK_CUDA(cudaMemcpyAsync(snap.p, buf.p, n * 8, cudaMemcpyDeviceToDevice, c.s));
    CHECK_CUDA(cudaMemcpyAsync(buf.p, zero.p, n * 8, cudaMemcpyDeviceToDevice, c.s));
    std::vector<char> h = snap.download(c.s);
    for (size_t i = 0; i < n; i++) close_to(ncclFloat64, get(ncclFloat64, h.data() + i * 8), expected(ncclFloat64, ncclSum, c.n, i), "in stream order", i);
    h = buf.download(c.s);
    for (size_t i = 0; i < n; i++) close_to(ncclFloat64, get(ncclFloat64, h.data() + i * 8), 0, "zeroed after", i);
    CHECK_CUDA(cudaEventDestroy(e));
    CHECK_NCCL(ncclCommDestroy(c.comm));
    CHECK_CUDA(cudaStreamDestroy(other));
}

/* Rank 0 reads its result at once; rank 1 queues the call and then blocks in a read that
 * rank 0 answers only after its result came: a GPU runs rank 1's call by itself. */
void progress_without_waiting(ctx &c)
{
    init(c, c.rank);
    dbuf buf(4 * 4);
    buf.upload(values(ncclFloat32, c.rank, 4), c.s);
    CHECK_NCCL(ncclAllReduce(buf.p, buf.p, 4, ncclFloat32, ncclSum, c.comm, c.s));
    char byte = 'x';
    if (c.rank == 0) {
        buf.download(c.s);
        for (int r = 1; r < c.n; r++)
            if (write(c.pipe_to[r][1], &byte, 1) != 1) fail("write");
    } else if (read(c.pipe_to[c.rank][0], &byte, 1) != 1) {
        fail("read");
    }
    std::vector<char> h = buf.download(c.s);
    for (size_t i = 0; i < 4; i++) close_to(ncclFloat32, get(ncclFloat32, h.data() + i * 4), expected(ncclFloat32, ncclSum, c.n, i), "sum", i);
    CHECK_NCCL(ncclCommDestroy(c.comm));
}

void expect_text(const char *text, const char *want)
{
    if (!strstr(text, want)) fail("expected a message with \"%s\", got: %s", want, text);
}

void duplicate_gpu(ctx &c)
{
    CHECK_CUDA(cudaSetDevice(c.rank == 2 ? 1 : 0));   /* ranks 0 and 1 on GPU 0 */
    ncclComm_t comm;
    ncclResult_t r = ncclCommInitRank(&comm, c.n, c.id, c.rank);
    if (r != ncclInvalidUsage) fail("ncclCommInitRank returned %d, expected ncclInvalidUsage", (int)r);
    expect_text(ncclGetLastError(NULL), "Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 0000:01:00.0");
}

/* The call fails on the device, reported at the next synchronisation with msg in it; the
 * communicator and the device stay failed. */
void expect_failed(ctx &c, void *p, const char *msg)
{
    cudaError_t e = cudaStreamSynchronize(c.s);
    if (e != cudaErrorLaunchTimeout) fail("cudaStreamSynchronize returned %d (%s), expected cudaErrorLaunchTimeout", (int)e, cudaGetErrorString(e));
    expect_text(cudaGetErrorString(e), msg);
    expect_text(cudaGetErrorString(e), "NCCL");
    ncclResult_t a;
    CHECK_NCCL(ncclCommGetAsyncError(c.comm, &a));
    if (a == ncclSuccess) fail("ncclCommGetAsyncError: no error");
    if (ncclAllReduce(p, p, 1, ncclFloat32, ncclSum, c.comm, c.s) == ncclSuccess) fail("a call after the failure succeeded");
    if (cudaMemsetAsync(p, 0, 4, c.s) != cudaErrorLaunchTimeout) fail("the device still works after the failure");
    ncclCommAbort(c.comm);
}

void mismatch(ctx &c)
{
    init(c, c.rank);
    dbuf buf(64);
    CHECK_NCCL(ncclAllReduce(buf.p, buf.p, c.rank == 1 ? 5 : 4, ncclFloat32, ncclSum, c.comm, c.s));
    expect_failed(c, buf.p, "rank 0 called ncclAllReduce #1 (count 4, ncclFloat32, ncclSum); rank 1 called "
                            "ncclAllReduce #1 (count 5, ncclFloat32, ncclSum)");
}

void mismatch_call(ctx &c)
{
    init(c, c.rank);
    dbuf buf(64);
    if (c.rank == 0) CHECK_NCCL(ncclBroadcast(buf.p, buf.p, 4, ncclFloat64, 0, c.comm, c.s));
    else CHECK_NCCL(ncclAllReduce(buf.p, buf.p, 4, ncclFloat64, ncclMax, c.comm, c.s));
    expect_failed(c, buf.p, "rank 0 called ncclBroadcast #1 (count 4, ncclFloat64, root 0); rank 1 called ncclAllReduce");
}

/* rank 1 exits: rank 0 learns it at once, not after the timeout (60 s here) */
void peer_exits(ctx &c)
{
    init(c, c.rank);
    if (c.rank == 1) _exit(0);
    dbuf buf(16);
    double t0 = now();
    CHECK_NCCL(ncclAllReduce(buf.p, buf.p, 4, ncclFloat32, ncclSum, c.comm, c.s));
    expect_failed(c, buf.p, "rank 1 (pid ");
    if (now() - t0 > 10) fail("took %g s to notice", now() - t0);
}

void peer_destroys(ctx &c)
{
    init(c, c.rank);
    dbuf buf(16);
    if (c.rank == 1) {
        CHECK_NCCL(ncclCommDestroy(c.comm));
        return;
    }
    CHECK_NCCL(ncclAllReduce(buf.p, buf.p, 4, ncclFloat32, ncclSum, c.comm, c.s));
    expect_failed(c, buf.p, "rank 1 destroyed its communicator");
}

/* rank 1 stays but never calls: DPLUA_EMU_NCCL_TIMEOUT=1 */
void peer_never_calls(ctx &c)
{
    init(c, c.rank);
    dbuf buf(16);
    if (c.rank == 1) {
        char byte;
        if (read(c.pipe_to[1][0], &byte, 1) != 1) fail("read");
        return;
    }
    double t0 = now();
    CHECK_NCCL(ncclAllReduce(buf.p, buf.p, 4, ncclFloat32, ncclSum, c.comm, c.s));
    expect_failed(c, buf.p, "rank(s) 1 did not come within 1 s (DPLUA_EMU_NCCL_TIMEOUT)");
    if (now() - t0 > 5) fail("took %g s", now() - t0);
    char byte = 'x';
    if (write(c.pipe_to[1][1], &byte, 1) != 1) fail("write");
}

/* init: a rank that never comes (timeout 1 s), ranks told different nranks, bad arguments */
void init_failures(ctx &c)
{
    CHECK_CUDA(cudaSetDevice(c.rank));
    ncclComm_t comm;
    if (c.rank == 0) {
        ncclResult_t r = ncclCommInitRank(&comm, 3, c.id, 0);   /* rank 2 of 3 never comes */
        if (r == ncclSuccess) fail("init without rank 2 succeeded");
        expect_text(ncclGetLastError(NULL), "did not come within 1 s");
        ncclUniqueId bad;
        memset(&bad, 7, sizeof bad);
        if (ncclCommInitRank(&comm, 2, bad, 0) != ncclInvalidArgument) fail("a made-up id was taken");
        if (ncclCommInitRank(&comm, 2, c.id, 2) != ncclInvalidArgument) fail("rank 2 of 2 was taken");
        dbuf buf(16);
        init(c, 0);   /* nranks 1: a communicator of one */
        std::vector<char> host(16);
        if (ncclAllReduce(host.data(), host.data(), 4, ncclFloat32, ncclSum, c.comm, c.s) != ncclInvalidArgument)
            fail("host memory was taken");
        expect_text(ncclGetLastError(NULL), "is not inside device memory of CUDA device 0");
        if (ncclAllReduce(buf.p, buf.p, 5, ncclFloat32, ncclSum, c.comm, c.s) != ncclInvalidArgument)
            fail("a count past the buffer was taken");
        CHECK_CUDA(cudaSetDevice(1));
        if (ncclAllReduce(buf.p, buf.p, 4, ncclFloat32, ncclSum, c.comm, c.s) != ncclInvalidUsage)
            fail("a call with another device current was taken");
        CHECK_CUDA(cudaSetDevice(0));
        CHECK_NCCL(ncclAllReduce(buf.p, buf.p, 4, ncclFloat32, ncclSum, c.comm, c.s));
        CHECK_CUDA(cudaStreamSynchronize(c.s));
        CHECK_NCCL(ncclCommDestroy(c.comm));
    }
}

void nranks_mismatch(ctx &c)
{
    CHECK_CUDA(cudaSetDevice(c.rank));
    ncclComm_t comm;
    if (c.rank == 1) usleep(200000);   /* rank 0 sets the size first */
    ncclResult_t r = ncclCommInitRank(&comm, c.rank == 0 ? 2 : 3, c.id, c.rank);
    if (c.rank == 1) {
        if (r != ncclInvalidUsage) fail("nranks 3 against 2 returned %d", (int)r);
        expect_text(ncclGetLastError(NULL), "rank 1 was given nranks 3, another rank 2");
    } else if (r == ncclSuccess) {
        fail("rank 0 got a communicator without rank 1");
    }
}

struct test_case {
    const char *name;
    int ranks;
    case_fn fn;
    const char *env;
};

}   // namespace

int main()
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    setenv("DPLUA_EMU_GPUS", "3", 1);   /* a GPU per rank (the ranks read it after the fork) */
    static char t1[] = "DPLUA_EMU_NCCL_TIMEOUT=1", t2[] = "DPLUA_EMU_NCCL_TIMEOUT=2";
    const test_case cases[] = {
        { "all_reduce: every data type and op, 2 ranks", 2, all_reduce_every_type_and_op, NULL },
        { "all_reduce: every data type and op, 3 ranks", 3, all_reduce_every_type_and_op, NULL },
        { "all_reduce in place, all_gather, reduce_scatter over several chunks", 2, large_in_place, NULL },
        { "broadcast, reduce from each root, all_gather, reduce_scatter, count 0, a group; 3 ranks", 3,
          broadcast_reduce_gather_scatter, NULL },
        { "calls run in stream order, behind an event of another stream", 2, stream_order, NULL },
        { "a rank blocked elsewhere still completes the call another rank waits in", 2, progress_without_waiting, NULL },
        { "two ranks on one GPU: Duplicate GPU detected, on every rank", 3, duplicate_gpu, NULL },
        { "different counts: an error naming both calls, the device lost", 2, mismatch, NULL },
        { "different collectives: an error naming both calls", 2, mismatch_call, NULL },
        { "a rank that exits: the other learns it at once", 2, peer_exits, NULL },
        { "a rank that destroys its communicator: the other learns it", 2, peer_destroys, NULL },
        { "a rank that never calls: DPLUA_EMU_NCCL_TIMEOUT", 2, peer_never_calls, t1 },
        { "init: a missing rank times out; bad ids, ranks and buffers are refused", 1, init_failures, t1 },
        { "init: ranks given different nranks", 2, nranks_mismatch, t2 },
    };
    int passed = 0, failed = 0;
    for (const test_case &tc : cases) {
        bool ok = run_ranks(tc.ranks, tc.fn, 60, tc.env);
        printf("%s %s\n", ok ? "PASS" : "FAIL", tc.name);
        ok ? passed++ : failed++;
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
