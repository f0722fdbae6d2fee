/* allreduce_mpi.c: the plain-MPI twin of bench/allreduce.lua: MPI_Allreduce (sum, in place)
 * on float32 buffers of 1 KB to 256 MB, timed exactly as the Lua side times
 * torch.distributed.all_reduce.  Prints "ALLREDUCE <bytes> <seconds per call> <bus GB/s>".
 * Built and run by bench/allreduce.run. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, world;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    for (long bytes = 1024; bytes <= 256L << 20; bytes *= 4) {
        long n = bytes / 4;
        /* aligned and written as dplua's torch.zeros(n) is, so that both sides move the same
         * kind of buffer (calloc's is 16 bytes off a page and not yet written) */
        float *buf = NULL;
        if (posix_memalign((void **)&buf, 64, (size_t)n * sizeof(float))) return 1;
        memset(buf, 0, (size_t)n * sizeof(float));
        long iters = (128L << 20) / bytes;                 /* same counts as the Lua side */
        if (iters < 3) iters = 3;
        if (iters > 2000) iters = 2000;
        for (int w = 0; w < 2; w++) MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double samples[5];
        for (int s = 0; s < 5; s++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            for (long i = 0; i < iters; i++)
                MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            double dt = (MPI_Wtime() - t0) / (double)iters;
            MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            samples[s] = dt;
        }
        qsort(samples, 5, sizeof(double), cmp);
        double t = samples[2];
        double busbw = (double)bytes / t * 2.0 * (world - 1) / world / 1e9;
        if (rank == 0) printf("ALLREDUCE %ld %.9g %.6g\n", bytes, t, busbw);
        fflush(stdout);
        free(buf);
    }
    MPI_Finalize();
    return 0;
}
