// The matmul template's planner: which ops and shapes it takes, the variant defines, and the push
// constants (sizes, leading dimensions, batch strides with 0 for broadcast, the epilogue's terms),
// and the autotuner that times the tile variants.
#include "backends/vulkan/vulkan_templates.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <set>

#include "backends/matmul_problem.h"
#include "backends/template_util.h"
#include "backends/vulkan/vulkan_norm_template.h"
#include "core/support/error.h"
#include "core/support/log.h"

namespace kiln::vulkan {
namespace {

const char kMatmulTemplate[] =
#include "matmul.comp.inc"
    ;
const char kRowSpan[] =
#include "row_span.glsl.inc"
    ;

// KILN_AUTOTUNE=1: every matmul autotunes, eager ones included, not only those of compiles that ask.
bool autotune_everywhere() {
  static const bool on = [] {
    const char* env = std::getenv("KILN_AUTOTUNE");
    return env != nullptr && std::string_view(env) == "1";
  }();
  return on;
}

// Whether the vec4 variant can run the problem: A row-major, and every row start and batch offset
// of A and B on a whole vec4 (K, and N unless B is transposed, the leading dims, batch strides and
// first elements multiples of 4).
bool vec4_fits(const MatmulProblem& p, const MatmulTile& t) {
  if (t.shared || p.trans_a || p.k % 4 != 0) return false;
  if (!p.trans_b && (p.n % 4 != 0 || t.tn % 4 != 0)) return false;
  for (int64_t stride : {p.lda, p.ldb, p.a_batch0, p.a_batch1, p.b_batch0, p.b_batch1, p.a_offset, p.b_offset})
    if (stride % 4 != 0) return false;
  return true;
}

// Whether reading views in place (strided inputs) would cost the vec4 loads the row-major
// operands get: a transposed A, or rows or a first element off a vec4 boundary. On lavapipe that
// measured slower than copying the view first (kiln-bench-train's MLP step), so the template
// declines and the views stay copies.
bool strided_reads_lose_vec4(const OpRun& run, const MatmulProblem& p, const MatmulTile& tile) {
  bool strided = false;
  std::vector<BufferView> row_major(run.inputs.begin(), run.inputs.end());
  for (BufferView& v : row_major) {
    strided = strided || !v.row_major();
    v.strides.clear();
    v.offset = 0;
  }
  if (!strided || !tile.vec4 || vec4_fits(p, tile)) return false;
  std::optional<MatmulProblem> copied = decode_matmul(OpRun{run.kind, run.attrs, row_major, run.outputs});
  return copied && vec4_fits(*copied, tile);
}

// The launch of one tile variant; nullopt when the grid exceeds the dispatch limits. A vec4 tile
// the problem does not allow runs with scalar loads.
std::optional<TemplateLaunch> matmul_launch(const MatmulProblem& problem, MatmulTile tile, int n_inputs) {
  const MatmulProblem* p = &problem;
  if (tile.vec4 && !vec4_fits(problem, tile)) tile.vec4 = false;
  const int64_t batch = p->batch0 * p->batch1;
  const int64_t groups_x = (p->n + tile.bn - 1) / tile.bn, groups_y = (p->m + tile.bm - 1) / tile.bm;
  if (groups_x > 65535 || groups_y > 65535 || batch > 65535) return std::nullopt;
  TemplateLaunch launch;
  launch.name = std::string("matmul_tiled_f32") + (p->trans_a ? "_ta" : "") + (p->trans_b ? "_tb" : "") +
                (p->has_c ? "_c" : "");
  launch.source = matmul_source(tile, p->trans_a, p->trans_b, p->has_c);
  launch.args = {0, 1};
  if (p->has_c) launch.args.push_back(2);
  launch.args.push_back(n_inputs);  // the output
  launch.push_constants = templates::bytes_of(matmul_params(*p));
  launch.groups = {uint32_t(groups_x), uint32_t(groups_y), uint32_t(batch)};
  return launch;
}

// Problems whose sizes round up to the same powers of two (and share layout flags) share a tuning.
std::string shape_class(const MatmulProblem& p) {
  auto pow2 = [](int64_t v) {
    int64_t r = 1;
    while (r < v) r *= 2;
    return std::to_string(r);
  };
  return "m" + pow2(p.m) + "_n" + pow2(p.n) + "_k" + pow2(p.k) + "_b" + pow2(p.batch0 * p.batch1) +
         (p.trans_a ? "_ta" : "") + (p.trans_b ? "_tb" : "") + (p.has_c ? "_c" : "");
}

}  // namespace

MatmulTile default_matmul_tile(const DeviceCaps& caps) {
  MatmulTile t;
  if (caps.is_cpu) {
    // Measured on lavapipe 22.3 (kiln-bench tiles, BENCHMARKS.md): a storage-buffer or shared load
    // is a per-lane scalar loop there, a texel-buffer read a gather, so A and B are read as rgba32f
    // texels (4 floats per gather) into the biggest register tile; staging through shared memory
    // only adds loads and barriers.
    t.tm = 8;
    t.tn = 8;
    t.shared = false;
    t.texel = true;
    t.vec4 = true;
  }
  while ((t.bm / t.tm) * (t.bn / t.tn) > int(caps.max_workgroup_invocations) && t.bm > t.tm) t.bm /= 2;
  return t;
}

std::string glsl_define(const char* name, int value) {
  return std::string("#define ") + name + " " + std::to_string(value) + "\n";
}

std::string insert_row_span(const std::string& shader) {
  const std::string hook = "// KILN_ROW_SPAN\n";
  const size_t at = shader.find(hook);
  if (at == std::string::npos) throw Error("vulkan: a template shader has no '// KILN_ROW_SPAN' line");
  return shader.substr(0, at) + kRowSpan + shader.substr(at + hook.size());
}

std::string matmul_source(const MatmulTile& t, bool trans_a, bool trans_b, bool has_c) {
  std::string s = "#version 450\n";
  auto define = [&](const char* name, int value) { s += glsl_define(name, value); };
  define("BM", t.bm);
  define("BN", t.bn);
  define("BK", t.bk);
  define("TM", t.tm);
  define("TN", t.tn);
  define("TRANS_A", trans_a);
  define("TRANS_B", trans_b);
  define("HAS_C", has_c);
  define("USE_SHARED", t.shared);
  define("TEXEL", t.texel);
  define("VEC4", t.vec4 && !t.shared);
  s += "#line 1\n";
  s += kMatmulTemplate;
  return s;
}

std::vector<MatmulTile> matmul_bench_tiles() {
  using Shape = std::array<int, 4>;  // bm, bn, tm, tn
  std::vector<MatmulTile> tiles;
  // Scalar storage-buffer loads, direct and through shared memory (the GPU default is here).
  for (auto [bm, bn, tm, tn] : std::vector<Shape>{{32, 32, 4, 4}, {64, 64, 4, 4}, {64, 64, 8, 4},
                                                  {64, 64, 8, 8}, {32, 64, 4, 8}, {16, 64, 2, 8}})
    for (bool shared : {false, true}) tiles.push_back({bm, bn, 16, tm, tn, shared});
  // Texel-buffer reads, scalar and vec4 (lavapipe's fastest, BENCHMARKS.md), and vec4 storage loads.
  for (auto [bm, bn, tm, tn] : std::vector<Shape>{{64, 64, 8, 8}, {32, 64, 4, 8}})
    tiles.push_back({bm, bn, 16, tm, tn, false, true, false});
  tiles.push_back({64, 64, 16, 4, 4, true, true, false});
  for (auto [bm, bn, tm, tn] : std::vector<Shape>{{64, 64, 8, 4}, {64, 64, 8, 8}, {32, 64, 8, 8},
                                                  {128, 64, 16, 8}, {64, 128, 8, 16}})
    tiles.push_back({bm, bn, 16, tm, tn, false, true, true});
  for (auto [bm, bn, tm, tn] : std::vector<Shape>{{64, 64, 8, 8}, {128, 64, 16, 8}})
    tiles.push_back({bm, bn, 16, tm, tn, false, false, true});
  return tiles;
}

std::vector<MatmulTile> matmul_tile_candidates(const DeviceCaps& caps) {
  std::vector<MatmulTile> tiles;
  for (const MatmulTile& t : matmul_bench_tiles())
    if ((t.bm / t.tm) * (t.bn / t.tn) <= int(caps.max_workgroup_invocations)) tiles.push_back(t);
  return tiles;
}

std::string describe(const MatmulTile& t) {
  return "bm=" + std::to_string(t.bm) + " bn=" + std::to_string(t.bn) + " bk=" + std::to_string(t.bk) +
         " tm=" + std::to_string(t.tm) + " tn=" + std::to_string(t.tn) + " shared=" + std::to_string(t.shared) +
         " texel=" + std::to_string(t.texel) + " vec4=" + std::to_string(t.vec4);
}

MatmulTile MatmulAutotuner::choose(
    const std::string& shape_class, const DeviceCaps& caps,
    const std::function<std::optional<TemplateLaunch>(const MatmulTile&)>& launch_for,
    const std::vector<size_t>& arg_bytes) {
  std::lock_guard lock(mutex_);
  if (auto it = chosen_.find(shape_class); it != chosen_.end()) return it->second;
  const std::vector<MatmulTile> candidates = matmul_tile_candidates(caps);
  const std::string key = "autotune|matmul_f32|" + device_key_ + "|" + shape_class;
  auto remember = [&](const MatmulTile& t, const std::string& how) {
    chosen_[shape_class] = t;
    stats_.last = shape_class + " -> " + describe(t);
    log::info("max-autotune: matmul " + shape_class + " on " + backend_.name() + ": " + describe(t) + " (" +
              how + ")");
    return t;
  };
  if (auto bytes = disk_.load("autotune", key); bytes && bytes->size() == 8 * sizeof(int32_t)) {
    int32_t v[8];
    std::memcpy(v, bytes->data(), sizeof v);
    MatmulTile t{v[0], v[1], v[2], v[3], v[4], v[5] != 0, v[6] != 0, v[7] != 0};
    for (const MatmulTile& c : candidates)
      if (describe(c) == describe(t) && launch_for(t)) {
        ++stats_.disk_hits;
        return remember(t, "from the disk cache");
      }
    log::debug("disk cache: autotune entry for " + shape_class + " names no current candidate; retuning");
  }

  std::vector<std::unique_ptr<Buffer>> scratch;
  std::vector<Buffer*> buffers;
  for (size_t bytes : arg_bytes) {
    scratch.push_back(backend_.alloc(std::max<size_t>(bytes, 4)));
    std::vector<uint8_t> zeros(std::max<size_t>(bytes, 4), 0);  // no NaNs or denormals in the timing
    backend_.upload(*scratch.back(), zeros.data(), zeros.size());
    buffers.push_back(scratch.back().get());
  }
  std::unique_ptr<Stream> stream = backend_.create_stream();
  const MatmulTile fallback = default_matmul_tile(caps);
  MatmulTile best = fallback;
  double best_s = 1e300, default_s = -1;
  std::string table;
  std::set<std::string> timed;  // sources: a vec4 tile the problem does not allow repeats a scalar one
  for (const MatmulTile& t : candidates) {
    std::optional<TemplateLaunch> launch = launch_for(t);
    if (!launch || !timed.insert(launch->source).second) continue;
    std::unique_ptr<CompiledKernel> program = backend_.compile({launch->name, "glsl", launch->source});
    Launch l{program.get(), buffers, {}, launch->push_constants, launch->groups};
    stream->launch(l);  // warm-up: first-run costs (pipeline creation, page faults) are not the tile's
    stream->sync();
    double s = 1e300;
    for (int rep = 0; rep < 3; ++rep) {
      auto t0 = std::chrono::steady_clock::now();
      stream->launch(l);
      stream->sync();
      s = std::min(s, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    table += "\n  " + describe(t) + ": " + std::to_string(s * 1e3) + " ms";
    if (describe(t) == describe(fallback)) default_s = s;
    if (s < best_s) {
      best_s = s;
      best = t;
    }
  }
  log::debug("max-autotune: timings for matmul " + shape_class + ":" + table);
  ++stats_.timed;
  const int32_t v[8] = {best.bm, best.bn, best.bk, best.tm, best.tn, best.shared ? 1 : 0,
                        best.texel ? 1 : 0, best.vec4 ? 1 : 0};
  disk_.store("autotune", key, std::span(reinterpret_cast<const uint8_t*>(v), sizeof v));
  return remember(best, "timed " + std::to_string(best_s * 1e3) + " ms, default tile " +
                            (default_s < 0 ? std::string("not a candidate")
                                           : std::to_string(default_s * 1e3) + " ms"));
}

AutotuneStats MatmulAutotuner::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

TemplatePlanner glsl_template_planner(const TemplateOptions& options) {
  return [options](const OpRun& run, const DeviceCaps& caps) -> std::optional<TemplateLaunch> {
    // Softmax, layer_norm and innermost-axis reductions: the row templates (vulkan_norm_template.h).
    if (is_norm_template_op(run.kind)) return norm_template_launch(run, caps);
    if (run.kind != OpKind::MatMul && run.kind != OpKind::Linear && run.kind != OpKind::Gemm)
      return std::nullopt;
    for (const BufferView& v : run.inputs)
      if (v.dtype != DType::F32) return std::nullopt;
    if (run.outputs.size() != 1 || run.outputs[0].dtype != DType::F32) return std::nullopt;
    std::optional<MatmulProblem> p = decode_matmul(run);
    if (!p) return std::nullopt;
    fold_batch_into_rows(*p);  // the epilogue reads operands at the result's element: rows may fold
    if (p->m == 0 || p->n == 0 || p->flops() < options.matmul_min_flops) return std::nullopt;
    if (!matmul_fits_i32(*p)) return std::nullopt;
    if (strided_reads_lose_vec4(run, *p, default_matmul_tile(caps))) return std::nullopt;
    const int n_inputs = int(run.inputs.size());
    if (options.force_tile) return matmul_launch(*p, options.tile, n_inputs);
    if (options.autotuner && (run.max_autotune || autotune_everywhere())) {
      std::vector<size_t> arg_bytes;
      std::vector<int> slots = {0, 1};  // the launch's args: a, b, (c,) out
      if (p->has_c) slots.push_back(2);
      slots.push_back(n_inputs);
      for (int slot : slots) {
        const BufferView& v = slot < n_inputs ? run.inputs[size_t(slot)] : run.outputs[0];
        int64_t numel = 1;
        for (int64_t d : v.dims) numel *= d;
        arg_bytes.push_back(size_t(numel) * 4);
      }
      const MatmulTile tile = options.autotuner->choose(
          shape_class(*p), caps, [&](const MatmulTile& t) { return matmul_launch(*p, t, n_inputs); },
          arg_bytes);
      return matmul_launch(*p, tile, n_inputs);
    }
    return matmul_launch(*p, default_matmul_tile(caps), n_inputs);
  };
}

}  // namespace kiln::vulkan
