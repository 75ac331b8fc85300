/* Open MPI's MPI_Allreduce (floats, sum), timed as weft-allreduce times its ring:
 * exactness checked at each size, then enough calls on zeros for ~0.2 s, rank 0 printing
 * the time per call. Same arguments and --csv lines ("mpi,BYTES,RANKS,US"), so that
 * bench/allreduce_vs_mpi.py runs both the same way (C++ only for the build; the calls are
 * MPI's C API):
 *   mpirun -np 4 build/bench/weft-allreduce-mpi 1K 64K 4M 32M --csv */
#include <mpi.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

static size_t bytes_of(const char* s)
{
    char* end = nullptr;
    const size_t n = std::strtoull(s, &end, 10);
    const int unit = std::toupper(static_cast<unsigned char>(*end));
    return unit == 'K' ? n << 10 : unit == 'M' ? n << 20 : unit == 'G' ? n << 30 : n;
}

int main(int argc, char** argv)
{
    MPI_Init(&argc, &argv);
    int me = 0, n = 1, csv = 0, wrong = 0, count_sizes = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    size_t sizes[64], max = 0;
    for (int i = 1; i < argc && count_sizes < 64; ++i) {
        if (strcmp(argv[i], "--csv") == 0)
            csv = 1;
        else
            sizes[count_sizes++] = bytes_of(argv[i]);
    }
    for (int i = 0; i < count_sizes; ++i)
        max = sizes[i] > max ? sizes[i] : max;
    std::vector<float> buffer(max / sizeof(float) + 1);
    float* d = buffer.data();
    for (int s = 0; s < count_sizes; ++s) {
        const size_t count = sizes[s] / sizeof(float);
        for (size_t i = 0; i < count; ++i)
            d[i] = static_cast<float>(static_cast<size_t>(me + 1) * (i % 13 + 1));
        MPI_Allreduce(MPI_IN_PLACE, d, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        for (size_t i = 0; i < count; ++i)
            wrong += d[i] != static_cast<float>(static_cast<size_t>(n * (n + 1) / 2) * (i % 13 + 1));
        std::memset(d, 0, count * sizeof(float));
        size_t iters = (64u << 20) / (sizes[s] ? sizes[s] : 1);
        iters = iters < 5 ? 5 : iters > 2000 ? 2000 : iters;
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        for (size_t k = 0; k < iters; ++k)
            MPI_Allreduce(MPI_IN_PLACE, d, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        const double us = (MPI_Wtime() - t0) * 1e6 / static_cast<double>(iters);
        if (me == 0)
            std::printf(csv ? "mpi,%zu,%d,%g\n" : "MPI_Allreduce of %zu B over %d ranks: %g us per call\n",
                   sizes[s], n, us);
        std::fflush(stdout);
    }
    std::printf("rank %d of %d: MPI_Allreduce %s at every size\n", me, n, wrong ? "WRONG" : "verified");
    MPI_Finalize();
    return wrong ? 1 : 0;
}
