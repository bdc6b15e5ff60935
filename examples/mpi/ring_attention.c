/* Attention over one long sequence split across MPI ranks, with libattn doing the math and
 * attn_merge folding the partial results exactly.
 *
 * ring:   rank r holds queries, keys and values [r*C, (r+1)*C) of a causal sequence of P*C tokens.
 *         The K/V chunks travel around the ring (rank r sends to r+1, receives from r-1) with
 *         non-blocking sends and receives that overlap the computation. At step s rank r holds
 *         the chunk of rank (r - s) mod P: a chunk from the past is attended with no mask, its
 *         own chunk with the causal rule, chunks from the future are skipped. Each step is one
 *         libattn call giving (out, lse); attn_merge folds it into the rank's result.
 * decode: every rank holds the same few queries (the last tokens) and a shard of the KV cache;
 *         each computes its partial (out, lse) and rank 0 folds them, in rank order, with
 *         attn_merge: split-KV decode across machines.
 *
 * Rank 0 gathers the result and checks it against one single-process libattn call over the whole
 * sequence: max relative error (|got - want| / max(1, |want|)) <= 1e-6, and a second run of the
 * same ring gives the same bits. Exit status 0 when both hold.
 *
 *   mpirun -np 4 ./attn_mpi_ring [--tokens-per-rank C] [--heads H] [--dim D] [--reps R]
 *   across machines: mpirun -np 8 --hostfile hosts ./attn_mpi_ring   (hosts: "node1 slots=4" ...)
 */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <attn.h>

#define CHECK_ATTN(call)                                                                           \
    do {                                                                                           \
        attn_status st_ = (call);                                                                  \
        if (st_ != ATTN_OK) {                                                                      \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, attn_last_error());      \
            MPI_Abort(MPI_COMM_WORLD, 2);                                                          \
        }                                                                                          \
    } while (0)

typedef struct {
    size_t heads, dim, chunk; /* per-rank chunk of tokens */
    int rank, size;
} Setup;

static float *alloc_floats(size_t n) {
    float *p = (float *)malloc(n * sizeof(float) + 1);
    if (!p) {
        fprintf(stderr, "out of memory (%zu floats)\n", n);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    return p;
}

/* Deterministic inputs of global token t, head h, element x (the same on every rank). */
static float value_of(unsigned which, size_t h, size_t t, size_t x) {
    uint32_t s = (uint32_t)(which * 2654435761u) ^ (uint32_t)(h * 40503u) ^
                 (uint32_t)(t * 2246822519u) ^ (uint32_t)(x * 3266489917u);
    s ^= s >> 15;
    s *= 2246822519u;
    s ^= s >> 13;
    return (float)(s % 20001u) / 10000.0f - 1.0f;
}

/* x[h][i][d] for global tokens [t0, t0 + n) */
static void fill(float *x, unsigned which, size_t heads, size_t t0, size_t n, size_t dim) {
    for (size_t h = 0; h < heads; ++h)
        for (size_t i = 0; i < n; ++i)
            for (size_t d = 0; d < dim; ++d)
                x[(h * n + i) * dim + d] = value_of(which, h, t0 + i, d);
}

/* One call: nq queries against nk keys, causal rule `causal`; out [H][nq][D], lse [H][nq]. */
static void attend(const Setup *s, size_t nq, size_t nk, attn_causal causal, const float *q,
                   const float *k, const float *v, float *out, float *lse) {
    attn_desc *desc = NULL;
    attn_args *args = NULL;
    CHECK_ATTN(attn_desc_create(&desc, 1, s->heads, s->heads, nq, nk, s->dim));
    CHECK_ATTN(attn_desc_set_causal(desc, causal));
    CHECK_ATTN(attn_args_create(&args));
    CHECK_ATTN(attn_args_set_f32(args, ATTN_Q, q, s->heads * nq * s->dim));
    CHECK_ATTN(attn_args_set_f32(args, ATTN_K, k, s->heads * nk * s->dim));
    CHECK_ATTN(attn_args_set_f32(args, ATTN_V, v, s->heads * nk * s->dim));
    CHECK_ATTN(attn_args_set_out_f32(args, ATTN_OUT, out, s->heads * nq * s->dim));
    CHECK_ATTN(attn_args_set_out_f32(args, ATTN_LSE, lse, s->heads * nq));
    CHECK_ATTN(attn_run(desc, ATTN_OP_FORWARD, args));
    attn_args_destroy(args);
    attn_desc_destroy(desc);
}

/* acc <- merge(acc, part) for [H][nq] rows. */
static void fold(const Setup *s, size_t nq, float *acc, float *acc_lse, float *part,
                 float *part_lse) {
    attn_desc *desc = NULL;
    attn_args *a = NULL, *p = NULL;
    CHECK_ATTN(attn_desc_create(&desc, 1, s->heads, s->heads, nq, 1, s->dim));
    CHECK_ATTN(attn_args_create(&a));
    CHECK_ATTN(attn_args_create(&p));
    CHECK_ATTN(attn_args_set_out_f32(a, ATTN_OUT, acc, s->heads * nq * s->dim));
    CHECK_ATTN(attn_args_set_out_f32(a, ATTN_LSE, acc_lse, s->heads * nq));
    CHECK_ATTN(attn_args_set_out_f32(p, ATTN_OUT, part, s->heads * nq * s->dim));
    CHECK_ATTN(attn_args_set_out_f32(p, ATTN_LSE, part_lse, s->heads * nq));
    CHECK_ATTN(attn_merge(desc, a, p));
    attn_args_destroy(a);
    attn_args_destroy(p);
    attn_desc_destroy(desc);
}

/* Ring attention of this rank's queries; out [H][C][D]. Returns the seconds of the ring. */
static double ring(const Setup *s, const float *q, const float *k, const float *v, float *out,
                   float *lse, double *bytes_per_step) {
    const size_t C = s->chunk, kv = s->heads * C * s->dim;
    float *buf[2] = {alloc_floats(2 * kv), alloc_floats(2 * kv)}; /* K then V */
    float *part = alloc_floats(s->heads * C * s->dim), *part_lse = alloc_floats(s->heads * C);
    memcpy(buf[0], k, kv * sizeof(float));
    memcpy(buf[0] + kv, v, kv * sizeof(float));
    const int next = (s->rank + 1) % s->size, prev = (s->rank + s->size - 1) % s->size;
    *bytes_per_step = 2.0 * (double)kv * sizeof(float);
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    for (int step = 0; step < s->size; ++step) {
        const int src = (s->rank - step + s->size) % s->size; /* owner of the chunk we hold */
        float *cur = buf[step % 2], *nxt = buf[(step + 1) % 2];
        MPI_Request req[2];
        const int more = step + 1 < s->size;
        if (more) { /* pass our chunk on while computing with it */
            MPI_Irecv(nxt, (int)(2 * kv), MPI_FLOAT, prev, step, MPI_COMM_WORLD, &req[0]);
            MPI_Isend(cur, (int)(2 * kv), MPI_FLOAT, next, step, MPI_COMM_WORLD, &req[1]);
        }
        if (src == s->rank) { /* own chunk: the causal rule; the first step fills the result */
            attend(s, C, C, ATTN_CAUSAL_TOP_LEFT, q, cur, cur + kv, out, lse);
        } else if (src < s->rank) { /* a chunk from the past: every key visible */
            attend(s, C, C, ATTN_CAUSAL_NONE, q, cur, cur + kv, part, part_lse);
            fold(s, C, out, lse, part, part_lse);
        } /* src > rank: the future, skipped */
        if (more) MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
    }
    const double secs = MPI_Wtime() - t0;
    free(buf[0]);
    free(buf[1]);
    free(part);
    free(part_lse);
    return secs;
}

/* Split-KV decode: the last nq tokens' queries against this rank's KV shard, folded on rank 0 in
 * rank order. out (rank 0) [H][nq][D]. */
static void decode(const Setup *s, size_t nq, const float *q, const float *k, const float *v,
                   float *out, float *lse) {
    const size_t C = s->chunk, rows = s->heads * nq, n = rows * s->dim;
    float *po = alloc_floats(n), *pl = alloc_floats(rows);
    /* the queries are the last nq tokens: only the last shard holds keys after some of them */
    const attn_causal c = s->rank == s->size - 1 ? ATTN_CAUSAL_BOTTOM_RIGHT : ATTN_CAUSAL_NONE;
    attend(s, nq, C, c, q, k, v, po, pl);
    float *all = NULL;
    if (s->rank == 0) all = alloc_floats((size_t)s->size * (n + rows));
    float *mine = alloc_floats(n + rows);
    memcpy(mine, po, n * sizeof(float));
    memcpy(mine + n, pl, rows * sizeof(float));
    MPI_Gather(mine, (int)(n + rows), MPI_FLOAT, all, (int)(n + rows), MPI_FLOAT, 0,
               MPI_COMM_WORLD);
    if (s->rank == 0) {
        memcpy(out, all, n * sizeof(float));
        memcpy(lse, all + n, rows * sizeof(float));
        for (int r = 1; r < s->size; ++r) {
            float *pr = all + (size_t)r * (n + rows);
            fold(s, nq, out, lse, pr, pr + n);
        }
        free(all);
    }
    free(mine);
    free(po);
    free(pl);
}

static double max_rel_err(const float *got, const float *want, size_t n) {
    double worst = 0.0;
    for (size_t i = 0; i < n; ++i) {
        const double w = want[i], e = fabs((double)got[i] - w) / (fabs(w) > 1.0 ? fabs(w) : 1.0);
        if (!(e <= worst)) worst = e; /* NaN counts */
    }
    return worst;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    Setup s = {4, 64, 256, 0, 1};
    int reps = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &s.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &s.size);
    for (int i = 1; i + 1 < argc; i += 2) {
        const size_t x = (size_t)strtoull(argv[i + 1], NULL, 10);
        if (!strcmp(argv[i], "--tokens-per-rank"))
            s.chunk = x;
        else if (!strcmp(argv[i], "--heads"))
            s.heads = x;
        else if (!strcmp(argv[i], "--dim"))
            s.dim = x;
        else if (!strcmp(argv[i], "--reps"))
            reps = (int)x;
    }
    const size_t C = s.chunk, N = C * (size_t)s.size, H = s.heads, D = s.dim;
    const size_t t0 = (size_t)s.rank * C;
    float *q = alloc_floats(H * C * D), *k = alloc_floats(H * C * D), *v = alloc_floats(H * C * D);
    fill(q, 1, H, t0, C, D);
    fill(k, 2, H, t0, C, D);
    fill(v, 3, H, t0, C, D);
    float *out = alloc_floats(H * C * D), *lse = alloc_floats(H * C);
    float *out2 = alloc_floats(H * C * D), *lse2 = alloc_floats(H * C);
    double bytes = 0, best = 1e30;
    for (int r = 0; r < reps; ++r) {
        const double t = ring(&s, q, k, v, out, lse, &bytes);
        if (t < best) best = t;
    }
    ring(&s, q, k, v, out2, lse2, &bytes);
    int same = memcmp(out, out2, H * C * D * sizeof(float)) == 0 &&
               memcmp(lse, lse2, H * C * sizeof(float)) == 0;
    double slowest = 0;
    MPI_Reduce(&best, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    int all_same = 0;
    MPI_Reduce(&same, &all_same, 1, MPI_INT, MPI_LAND, 0, MPI_COMM_WORLD);

    /* gather the ring result: rank r's rows are tokens [r*C, (r+1)*C) of every head */
    float *ring_all = s.rank == 0 ? alloc_floats((size_t)s.size * H * C * D) : NULL;
    MPI_Gather(out, (int)(H * C * D), MPI_FLOAT, ring_all, (int)(H * C * D), MPI_FLOAT, 0,
               MPI_COMM_WORLD);

    /* split-KV decode of the last 4 tokens */
    const size_t nq = C < 4 ? C : 4;
    float *dq = alloc_floats(H * nq * D), *dout = alloc_floats(H * nq * D),
          *dlse = alloc_floats(H * nq);
    fill(dq, 1, H, N - nq, nq, D);
    decode(&s, nq, dq, k, v, dout, dlse);

    int status = 0;
    if (s.rank == 0) {
        float *fq = alloc_floats(H * N * D), *fk = alloc_floats(H * N * D),
              *fv = alloc_floats(H * N * D);
        float *fo = alloc_floats(H * N * D), *fl = alloc_floats(H * N);
        fill(fq, 1, H, 0, N, D);
        fill(fk, 2, H, 0, N, D);
        fill(fv, 3, H, 0, N, D);
        const double t1 = MPI_Wtime();
        attend(&s, N, N, ATTN_CAUSAL_TOP_LEFT, fq, fk, fv, fo, fl);
        const double single = MPI_Wtime() - t1;
        /* ring_all is [rank][H][C][D]; the single call [H][N][D] */
        double ring_err = 0;
        for (int r = 0; r < s.size; ++r)
            for (size_t h = 0; h < H; ++h) {
                const double e = max_rel_err(ring_all + (((size_t)r * H + h) * C) * D,
                                             fo + (h * N + (size_t)r * C) * D, C * D);
                if (!(e <= ring_err)) ring_err = e;
            }
        /* decode reference: the last nq queries over all N keys */
        float *ro = alloc_floats(H * nq * D), *rl = alloc_floats(H * nq);
        attend(&s, nq, N, ATTN_CAUSAL_BOTTOM_RIGHT, dq, fk, fv, ro, rl);
        const double dec_err = max_rel_err(dout, ro, H * nq * D);
        printf("ranks %d, %zu tokens (%zu per rank), heads %zu, head_dim %zu, causal\n", s.size, N,
               C, H, D);
        printf("ring: %d steps, %.0f bytes of K+V sent per rank per step; slowest rank %.3f ms "
               "(best of %d), single call on rank 0 %.3f ms\n",
               s.size, bytes, slowest * 1e3, reps, single * 1e3);
        printf("ring vs single call: max rel err %.3g; second run bit-identical: %s\n", ring_err,
               all_same ? "yes" : "NO");
        printf("split-KV decode (%zu queries, %d shards) vs single call: max rel err %.3g\n", nq,
               s.size, dec_err);
        status = ring_err <= 1e-6 && dec_err <= 1e-6 && all_same ? 0 : 1;
        printf("%s\n", status == 0 ? "OK" : "FAILED");
        free(fq), free(fk), free(fv), free(fo), free(fl), free(ro), free(rl), free(ring_all);
    }
    MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(q), free(k), free(v), free(out), free(lse), free(out2), free(lse2);
    free(dq), free(dout), free(dlse);
    MPI_Finalize();
    return status;
}
