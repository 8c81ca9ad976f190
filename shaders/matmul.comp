// Tiled f32 matrix product C = alpha * op(A) op(B) + beta * Cin, batched, compiled at run time
// with the variant's #defines prepended (backends/vulkan/vulkan_templates.cpp); no #version here.
//   BM, BN      output tile of one workgroup          BK   K step per shared-memory stage
//   TM, TN      register tile of one invocation (rows are BM/TM apart, columns BN/TN apart,
//               so neighbouring invocations read neighbouring shared-memory words)
//   TRANS_A     A is stored [K, M] (element (m, k) at k * lda + m), else [M, K]
//   TRANS_B     B is stored [N, K] (element (k, n) at n * ldb + k), else [K, N]
//   HAS_C       add beta * Cin[m * c_row + n * c_col] (strides 0 broadcast: bias rows, columns)
//   USE_SHARED  stage tiles through shared memory (GPUs); 0 reads A and B straight from the
//               buffers, which is faster where shared memory is ordinary cache (CPU devices)
//   TEXEL       read A and B through texel buffers (samplerBuffer, or rgba32f imageBuffer with
//               VEC4): lavapipe gathers those 8 lanes at once, where a storage-buffer load is a
//               loop over the lanes
//   VEC4        (direct loads only) read 4 floats per load: A along K, B along K when TRANS_B,
//               else along N with each invocation owning runs of 4 adjacent columns. Needs !TRANS_A
//               and K, N, leading dimensions and batch strides that are multiples of 4 (the
//               planner checks)
// Batches are the z workgroups: z = b0 * batch1 + b1, with per-operand strides (0 = broadcast).
#extension GL_EXT_scalar_block_layout : enable

#define WG_X (BN / TN)
#define WG_Y (BM / TM)
layout(local_size_x = WG_X, local_size_y = WG_Y, local_size_z = 1) in;

#if TEXEL && VEC4
layout(binding = 0, rgba32f) uniform readonly imageBuffer a_vec;
layout(binding = 1, rgba32f) uniform readonly imageBuffer b_vec;
vec4 a4_at(int i) { return imageLoad(a_vec, i); }
vec4 b4_at(int i) { return imageLoad(b_vec, i); }
#elif TEXEL
layout(binding = 0) uniform samplerBuffer a_tex;
layout(binding = 1) uniform samplerBuffer b_tex;
float a_at(int i) { return texelFetch(a_tex, i).x; }
float b_at(int i) { return texelFetch(b_tex, i).x; }
#elif VEC4
layout(std430, binding = 0) readonly buffer BufA { vec4 a_vec[]; };
layout(std430, binding = 1) readonly buffer BufB { vec4 b_vec[]; };
vec4 a4_at(int i) { return a_vec[i]; }
vec4 b4_at(int i) { return b_vec[i]; }
#else
layout(std430, binding = 0) readonly buffer BufA { float a_data[]; };
layout(std430, binding = 1) readonly buffer BufB { float b_data[]; };
float a_at(int i) { return a_data[i]; }
float b_at(int i) { return b_data[i]; }
#endif
#if HAS_C
layout(std430, binding = 2) readonly buffer BufC { float c_data[]; };
layout(std430, binding = 3) writeonly buffer BufOut { float out_data[]; };
#else
layout(std430, binding = 2) writeonly buffer BufOut { float out_data[]; };
#endif

// A fused epilogue (backends/template_epilogue.cpp) is declared here: its operands' buffers and
// EPILOGUE(v, index, channel), the value to store for result v at that output element.
// KILN_EPILOGUE
#ifndef EPILOGUE
#define EPILOGUE(v, index, channel) (v)
#endif

// Mirrors MatmulParams in backends/matmul_problem.h.
layout(push_constant, scalar) uniform Params {
  int M, N, K;
  int lda, ldb, ldo;
  int batch1;                   // inner batch extent
  int a_batch0, a_batch1;       // element strides of A per outer / inner batch index
  int b_batch0, b_batch1;
  int c_row, c_col;             // Cin strides in elements
  float alpha, beta;
  int a_offset, b_offset;       // the element each operand starts at (a view read in place)
} p;

#if !VEC4
float load_a(int base, int m, int k) {
#if TRANS_A
  return a_at(base + k * p.lda + m);
#else
  return a_at(base + m * p.lda + k);
#endif
}

float load_b(int base, int k, int n) {
#if TRANS_B
  return b_at(base + n * p.ldb + k);
#else
  return b_at(base + k * p.ldb + n);
#endif
}
#endif

// The output row of register-tile row i, and column of register-tile column j.
#define ROW_OF(i) (row0 + ty + (i) * WG_Y)
#if VEC4 && !TRANS_B
#define COL_OF(j) (col0 + (tx + ((j) >> 2) * WG_X) * 4 + ((j) & 3))
#else
#define COL_OF(j) (col0 + tx + (j) * WG_X)
#endif

#if USE_SHARED
shared float tile_a[BK][BM + 1];  // +1: transposed stores do not hit one bank
shared float tile_b[BK][BN + 1];
#endif

void main() {
  const int tx = int(gl_LocalInvocationID.x), ty = int(gl_LocalInvocationID.y);
  const int row0 = int(gl_WorkGroupID.y) * BM, col0 = int(gl_WorkGroupID.x) * BN;
  const int z = int(gl_WorkGroupID.z);
  const int b0 = z / p.batch1, b1 = z - b0 * p.batch1;
  const int a_base = p.a_offset + b0 * p.a_batch0 + b1 * p.a_batch1;
  const int b_base = p.b_offset + b0 * p.b_batch0 + b1 * p.b_batch1;
  const int out_base = z * p.M * p.ldo;

  float acc[TM][TN];
  for (int i = 0; i < TM; ++i)
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.0;

#if USE_SHARED
  const int tid = ty * WG_X + tx;
  const int threads = WG_X * WG_Y;
  for (int k0 = 0; k0 < p.K; k0 += BK) {
    // Out-of-range elements load as zero so the inner loop needs no edge checks.
    for (int e = tid; e < BM * BK; e += threads) {
#if TRANS_A
      int mm = e % BM, kk = e / BM;  // consecutive threads walk M, which is contiguous
#else
      int kk = e % BK, mm = e / BK;  // consecutive threads walk K, which is contiguous
#endif
      int m = row0 + mm, k = k0 + kk;
      tile_a[kk][mm] = (m < p.M && k < p.K) ? load_a(a_base, m, k) : 0.0;
    }
    for (int e = tid; e < BK * BN; e += threads) {
#if TRANS_B
      int kk = e % BK, nn = e / BK;
#else
      int nn = e % BN, kk = e / BN;
#endif
      int k = k0 + kk, n = col0 + nn;
      tile_b[kk][nn] = (k < p.K && n < p.N) ? load_b(b_base, k, n) : 0.0;
    }
    barrier();
    for (int kk = 0; kk < BK; ++kk) {
      float av[TM], bv[TN];
      for (int i = 0; i < TM; ++i) av[i] = tile_a[kk][ty + i * WG_Y];
      for (int j = 0; j < TN; ++j) bv[j] = tile_b[kk][tx + j * WG_X];
      for (int i = 0; i < TM; ++i)
        for (int j = 0; j < TN; ++j) acc[i][j] = fma(av[i], bv[j], acc[i][j]);
    }
    barrier();
  }
#elif VEC4
  // Indices in vec4 units; clamped as below.
  int rows[TM];
  for (int i = 0; i < TM; ++i) rows[i] = (a_base >> 2) + min(ROW_OF(i), p.M - 1) * (p.lda >> 2);
#if TRANS_B
  int cols[TN];
  for (int j = 0; j < TN; ++j) cols[j] = (b_base >> 2) + min(COL_OF(j), p.N - 1) * (p.ldb >> 2);
#else
  int col4[TN / 4];
  for (int g = 0; g < TN / 4; ++g) col4[g] = (b_base >> 2) + min(COL_OF(4 * g) >> 2, (p.N >> 2) - 1);
#endif
  for (int k4 = 0; k4 < (p.K >> 2); ++k4) {
    vec4 av[TM];
    for (int i = 0; i < TM; ++i) av[i] = a4_at(rows[i] + k4);
#if TRANS_B
    vec4 bv[TN];
    for (int j = 0; j < TN; ++j) bv[j] = b4_at(cols[j] + k4);
    for (int kk = 0; kk < 4; ++kk)
      for (int i = 0; i < TM; ++i)
        for (int j = 0; j < TN; ++j) acc[i][j] = fma(av[i][kk], bv[j][kk], acc[i][j]);
#else
    for (int kk = 0; kk < 4; ++kk) {
      const int row_k = (k4 * 4 + kk) * (p.ldb >> 2);
      vec4 bv[TN / 4];
      for (int g = 0; g < TN / 4; ++g) bv[g] = b4_at(col4[g] + row_k);
      for (int i = 0; i < TM; ++i)
        for (int j = 0; j < TN; ++j) acc[i][j] = fma(av[i][kk], bv[j >> 2][j & 3], acc[i][j]);
    }
#endif
  }
#else
  // Clamped indices keep every load in range; the rows and columns they duplicate are never stored.
  int rows[TM], cols[TN];
  for (int i = 0; i < TM; ++i) rows[i] = min(ROW_OF(i), p.M - 1);
  for (int j = 0; j < TN; ++j) cols[j] = min(col0 + tx + j * WG_X, p.N - 1);
  for (int k = 0; k < p.K; ++k) {
    float av[TM], bv[TN];
    for (int i = 0; i < TM; ++i) av[i] = load_a(a_base, rows[i], k);
    for (int j = 0; j < TN; ++j) bv[j] = load_b(b_base, k, cols[j]);
    for (int i = 0; i < TM; ++i)
      for (int j = 0; j < TN; ++j) acc[i][j] = fma(av[i], bv[j], acc[i][j]);
  }
#endif

  for (int i = 0; i < TM; ++i) {
    int m = ROW_OF(i);
    if (m >= p.M) continue;
    for (int j = 0; j < TN; ++j) {
      int n = COL_OF(j);
      if (n >= p.N) continue;
      float v = p.alpha * acc[i][j];
#if HAS_C
      // The reference rounds beta * Cin to f32 before adding the product: same order here.
      v += p.beta * c_data[m * p.c_row + n * p.c_col];
#endif
      out_data[out_base + m * p.ldo + n] = EPILOGUE(v, out_base + m * p.ldo + n, n);
    }
  }
}
