/*
 * mpi_pingpong.c: the minimal C MPI ping-pong ngauge's MPI latency is checked
 * against (scripts/bench-mpi). Ranks 0 and 1 bounce one message of SIZE bytes with
 * MPI_Send/MPI_Recv on MPI_COMM_WORLD; every round trip is timed on rank 0 with
 * clock_gettime(CLOCK_MONOTONIC_RAW) and half of it recorded.
 *
 *   mpicc -O2 -o mpi_pingpong mpi_pingpong.c
 *   mpirun -np 2 ./mpi_pingpong [SIZE=1] [REPS=100000] [WARMUP=10000]
 *
 * Prints one line: size, reps, min, median, mean of the half round trip in us.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int use_tsc;

/* One reading, in ns (clock) or ticks (tsc). */
static inline double now(void) {
#if defined(__x86_64__)
    if (use_tsc) {
        unsigned aux;
        unsigned long long t = __rdtscp(&aux);
        _mm_lfence();
        return (double)t;
    }
#endif
    return now_ns();
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long bytes = argc > 1 ? atol(argv[1]) : 1;
    long reps = argc > 2 ? atol(argv[2]) : 100000;
    long warmup = argc > 3 ? atol(argv[3]) : 10000;
#if defined(__x86_64__)
    use_tsc = argc <= 4 || strcmp(argv[4], "tsc") == 0;
#endif
    int bad_timer = argc > 4 && strcmp(argv[4], "tsc") != 0 && strcmp(argv[4], "clock") != 0;
    if (size < 2 || bytes < 0 || reps < 1 || warmup < 0 || bad_timer) {
        if (rank == 0)
            fprintf(stderr, "usage: mpirun -np 2 mpi_pingpong [SIZE] [REPS] [WARMUP] [tsc|clock]\n");
        MPI_Finalize();
        return 2;
    }
    char *buf = calloc((size_t)bytes + 1, 1);
    double *half = calloc((size_t)reps, sizeof *half);
    MPI_Barrier(MPI_COMM_WORLD);
    double start_ns = 0, start = 0;
    for (long i = -warmup; i < reps; i++) {
        if (rank == 0) {
            if (i == 0) {
                start_ns = now_ns();
                start = now();
            }
            double t0 = now();
            MPI_Send(buf, (int)bytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(buf, (int)bytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            double t1 = now();
            if (i >= 0) half[i] = (t1 - t0) / 2.0;
        } else if (rank == 1) {
            MPI_Recv(buf, (int)bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, (int)bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
        }
    }
    if (rank == 0) {
        /* Readings per ns over the timed loop (1 for the clock). */
        double per_ns = use_tsc ? (now() - start) / (now_ns() - start_ns) : 1.0;
        double sum = 0;
        for (long i = 0; i < reps; i++) sum += (half[i] /= per_ns);
        qsort(half, (size_t)reps, sizeof *half, cmp);
        printf("size %ld reps %ld min_us %.4f median_us %.4f mean_us %.4f timer %s\n", bytes, reps,
               half[0] / 1e3, half[reps / 2] / 1e3, sum / (double)reps / 1e3,
               use_tsc ? "rdtscp" : "clock_monotonic_raw");
    }
    free(buf);
    free(half);
    MPI_Finalize();
    return 0;
}
