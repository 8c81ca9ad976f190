// The CUDA templates' planner: which ops and shapes each template takes, the variant #defines, the
// parameter struct (mirroring the one in the template's source) and the grid.
#include "backends/cuda/cuda_templates.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <regex>
#include <tuple>
#include <vector>

#include "backends/conv_problem.h"
#include "backends/matmul_problem.h"
#include "backends/template_util.h"

namespace kiln::cuda {
namespace {

using namespace kiln::templates;

const char kCommon[] =
#include "common.cuh.inc"
    ;
const char kGemmTile[] =
#include "gemm_tile.cuh.inc"
    ;
const char kMatmulParams[] =
#include "matmul_params.cuh.inc"
    ;
const char kMatmulF32[] =
#include "matmul_f32.cu.inc"
    ;
const char kMatmulWmma[] =
#include "matmul_wmma.cu.inc"
    ;
const char kConv2d[] =
#include "conv2d_f32.cu.inc"
    ;
const char kRows[] =
#include "rows.cu.inc"
    ;

// Mirrors RowParams in shaders/cuda/rows.cu.
struct CudaRowParams {
  int32_t rows, n;
  float eps;
};

constexpr int64_t kMaxGridYZ = 65535;

// Builds a template's text: a name line, the variant's #defines, then the files it is made of, each
// after a #line naming it, so NVRTC's messages and the PTX's line table point into shaders/cuda.
class Source {
 public:
  explicit Source(const std::string& name) { text_ = "// kiln CUDA template " + name + "\n"; }
  Source& define(const char* name, int64_t value) {
    text_ += std::string("#define ") + name + " " + std::to_string(value) + "\n";
    return *this;
  }
  Source& file(const char* name, const char* body) {
    text_ += std::string("#line 1 \"") + name + "\"\n" + body;
    if (!text_.empty() && text_.back() != '\n') text_ += '\n';
    return *this;
  }
  std::string str() const { return text_; }

 private:
  std::string text_;
};

std::optional<TemplateLaunch> matmul_template(const OpRun& run, int sm) {
  const DType t = run.outputs.empty() ? DType::F32 : run.outputs[0].dtype;
  const bool tensor_cores = (t == DType::F16 || t == DType::BF16) && sm >= 80;
  if (!all_dtype(run, t) || (t != DType::F32 && !tensor_cores)) return std::nullopt;
  std::optional<MatmulProblem> p = decode_matmul(run);
  if (p) fold_batch_into_rows(*p);  // the epilogue reads operands at the result's element: rows may fold
  if (!p || p->m == 0 || p->n == 0 || p->flops() < kMatmulMinFlops || !matmul_fits_i32(*p))
    return std::nullopt;

  // Tile: 128x128 (8x8 registers per thread) once there are enough of them to fill the device,
  // else 64x64 (4x4) so small products still spread over many blocks. Tensor cores: 64x64.
  int bm = 64, bn = 64, bk = 16, tm = 4, tn = 4;
  const int64_t big_tiles = ((p->m + 127) / 128) * ((p->n + 127) / 128) * p->batch();
  if (!tensor_cores && big_tiles >= 128) {
    bm = bn = 128;
    bk = 8;
    tm = tn = 8;
  }
  const int64_t grid_x = (p->n + bn - 1) / bn, grid_y = (p->m + bm - 1) / bm;
  if (grid_y > kMaxGridYZ || p->batch() > kMaxGridYZ) return std::nullopt;

  TemplateLaunch launch;
  launch.language = "cuda";
  std::string flags = std::string(p->trans_a ? "_ta" : "") + (p->trans_b ? "_tb" : "") + (p->has_c ? "_c" : "");
  if (tensor_cores) {
    launch.name = std::string("cuda_matmul_wmma_") + (t == DType::BF16 ? "bf16" : "f16") + flags;
    launch.source = Source(launch.name)
                        .define("BF16", t == DType::BF16)
                        .define("TRANS_A", p->trans_a)
                        .define("TRANS_B", p->trans_b)
                        .define("HAS_C", p->has_c)
                        .file("matmul_params.cuh", kMatmulParams)
                        .file("matmul_wmma.cu", kMatmulWmma)
                        .str();
  } else {
    const bool async = sm >= 80;
    launch.name = "cuda_matmul_f32_" + std::to_string(bm) + "x" + std::to_string(bn) + (async ? "_async" : "") + flags;
    launch.source = Source(launch.name)
                        .define("BM", bm)
                        .define("BN", bn)
                        .define("BK", bk)
                        .define("TM", tm)
                        .define("TN", tn)
                        .define("THREADS", (bm / tm) * (bn / tn))
                        .define("ASYNC", async)
                        .define("TRANS_A", p->trans_a)
                        .define("TRANS_B", p->trans_b)
                        .define("HAS_C", p->has_c)
                        // Copies walk the operand's contiguous dim.
                        .define("A_M_FASTEST", p->trans_a)
                        .define("B_N_FASTEST", !p->trans_b)
                        .file("common.cuh", kCommon)
                        .file("gemm_tile.cuh", kGemmTile)
                        .file("matmul_params.cuh", kMatmulParams)
                        .file("matmul_f32.cu", kMatmulF32)
                        .str();
  }
  const int n_inputs = int(run.inputs.size());
  launch.args = {0, 1};
  if (p->has_c) launch.args.push_back(2);
  launch.args.push_back(n_inputs);  // the output
  launch.push_constants = bytes_of(matmul_params(*p));
  launch.groups = {uint32_t(grid_x), uint32_t(grid_y), uint32_t(p->batch())};
  return launch;
}

std::optional<TemplateLaunch> conv_template(const OpRun& run, int sm) {
  const std::optional<ConvProblem> problem = decode_conv(run);
  if (!problem || problem->channels_last) return std::nullopt;  // channels-last: the generic kernel
  const ConvParams& p = problem->params;
  const int kh = problem->kh, kw = problem->kw;
  const bool has_bias = problem->has_bias;

  // GEMM rows are the group's output channels, columns its pixels: a narrow group (depthwise: one
  // channel) takes a short, wide tile instead of wasting most of a 64x64 one. 256 threads each.
  struct Tile {
    int bm, bn, tm, tn;
  };
  const Tile tile = p.og > 32 ? Tile{64, 64, 4, 4}
                    : p.og > 8 ? Tile{32, 128, 4, 4}
                    : p.og > 1 ? Tile{8, 128, 2, 2}
                               : Tile{1, 256, 1, 1};
  const int64_t pixels = int64_t(p.oh) * p.ow;
  const int64_t grid_x = (pixels + tile.bn - 1) / tile.bn, grid_y = (p.og + tile.bm - 1) / tile.bm;
  const int64_t grid_z = problem->batch * p.groups;
  if (grid_x > INT32_MAX || grid_y > kMaxGridYZ || grid_z > kMaxGridYZ) return std::nullopt;

  const bool async = sm >= 80;
  TemplateLaunch launch;
  launch.language = "cuda";
  launch.name = "cuda_conv2d_f32_" + std::to_string(kh) + "x" + std::to_string(kw) + "_" + std::to_string(tile.bm) +
                "x" + std::to_string(tile.bn) + (async ? "_async" : "") + (has_bias ? "_bias" : "");
  launch.source = Source(launch.name)
                      .define("BM", tile.bm)
                      .define("BN", tile.bn)
                      .define("BK", 16)
                      .define("TM", tile.tm)
                      .define("TN", tile.tn)
                      .define("THREADS", (tile.bm / tile.tm) * (tile.bn / tile.tn))
                      .define("ASYNC", async)
                      .define("KH", kh)
                      .define("KW", kw)
                      .define("HAS_BIAS", has_bias)
                      .define("A_M_FASTEST", 0)  // filters are contiguous along k
                      .define("B_N_FASTEST", 1)  // neighbouring pixels are (mostly) neighbours in x
                      .file("common.cuh", kCommon)
                      .file("gemm_tile.cuh", kGemmTile)
                      .file("conv2d_f32.cu", kConv2d)
                      .str();
  launch.args = {0, 1};
  if (has_bias) launch.args.push_back(2);
  launch.args.push_back(int(run.inputs.size()));
  launch.push_constants = bytes_of(p);
  launch.groups = {uint32_t(grid_x), uint32_t(grid_y), uint32_t(grid_z)};
  return launch;
}

enum RowOp { kRowSum = 0, kRowMean = 1, kRowMax = 2, kRowMin = 3, kRowSoftmax = 4, kRowLogSoftmax = 5, kRowLayerNorm = 6 };

// rows x n for a reduction whose reduced dims are exactly the innermost ones (size-1 dims
// ignored); nothing otherwise.
std::optional<std::pair<int64_t, int64_t>> innermost_reduction(const OpRun& run) {
  const auto& dims = run.inputs[0].dims;
  const int64_t rank = int64_t(dims.size());
  std::vector<bool> reduced(dims.size(), false);
  const std::vector<int64_t> list = run.attrs.get_ints("dims");
  if (list.empty()) reduced.assign(dims.size(), true);
  for (int64_t d : list) {
    if (d < -rank || d >= rank) return std::nullopt;
    reduced[size_t(d < 0 ? d + rank : d)] = true;
  }
  int64_t rows = 1, n = 1;
  bool in_reduced_suffix = false;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 1) continue;
    if (reduced[i]) {
      in_reduced_suffix = true;
      n *= dims[i];
    } else {
      if (in_reduced_suffix) return std::nullopt;  // a kept dim inside: not one row per output
      rows *= dims[i];
    }
  }
  return std::make_pair(rows, n);
}

std::optional<TemplateLaunch> rows_template(const OpRun& run) {
  if (run.inputs.empty() || run.outputs.size() != 1 || !all_dtype(run, DType::F32)) return std::nullopt;
  const auto& dims = run.inputs[0].dims;
  const int64_t rank = int64_t(dims.size());
  int op = 0;
  int64_t rows = 1, n = 1;
  float eps = 0;
  switch (run.kind) {
    case OpKind::Sum: case OpKind::Mean: case OpKind::ReduceMax: case OpKind::ReduceMin: {
      op = run.kind == OpKind::Sum ? kRowSum : run.kind == OpKind::Mean ? kRowMean
           : run.kind == OpKind::ReduceMax ? kRowMax : kRowMin;
      auto shape = innermost_reduction(run);
      if (!shape) return std::nullopt;
      std::tie(rows, n) = *shape;
      // Short rows: the generic kernel's one thread per output wastes less than a block per row.
      if (n < 32) return std::nullopt;
      break;
    }
    case OpKind::Softmax: case OpKind::LogSoftmax: {
      op = run.kind == OpKind::Softmax ? kRowSoftmax : kRowLogSoftmax;
      int64_t dim = run.attrs.get_int("dim");
      if (rank == 0) return std::nullopt;
      if (dim < 0) dim += rank;
      for (int64_t i = 0; i < rank; ++i) (i < dim ? rows : n) *= dims[size_t(i)];
      for (int64_t i = dim + 1; i < rank; ++i)
        if (dims[size_t(i)] != 1) return std::nullopt;  // not the innermost axis: lines are strided
      break;
    }
    case OpKind::LayerNorm: {
      op = kRowLayerNorm;
      int64_t axis = run.attrs.get_int("axis");
      if (axis < 0) axis += rank;
      if (axis < 0 || axis >= rank) return std::nullopt;
      for (int64_t i = 0; i < rank; ++i) (i < axis ? rows : n) *= dims[size_t(i)];
      eps = float(run.attrs.get_float("eps"));
      break;
    }
    default: return std::nullopt;
  }
  if (rows == 0 || n == 0 || !fits_i32(rows * n)) return std::nullopt;
  const int threads = int(std::min<int64_t>(1024, std::max<int64_t>(32, pow2_at_least((n + 3) / 4))));
  const bool weight = op == kRowLayerNorm && run.inputs.size() >= 2;
  const bool bias = op == kRowLayerNorm && run.inputs.size() >= 3;
  static const char* const names[] = {"sum", "mean", "max", "min", "softmax", "log_softmax", "layer_norm"};
  TemplateLaunch launch;
  launch.language = "cuda";
  launch.name = std::string("cuda_rows_") + names[op] + "_f32_t" + std::to_string(threads) + (weight ? "_w" : "") +
                (bias ? "_b" : "");
  launch.source = Source(launch.name)
                      .define("OP", op)
                      .define("THREADS", threads)
                      .define("HAS_WEIGHT", weight)
                      .define("HAS_BIAS", bias)
                      .file("common.cuh", kCommon)
                      .file("rows.cu", kRows)
                      .str();
  for (int i = 0; i < int(run.inputs.size()); ++i) launch.args.push_back(i);
  launch.args.push_back(int(run.inputs.size()));
  launch.push_constants = bytes_of(CudaRowParams{int32_t(rows), int32_t(n), eps});
  launch.groups = {uint32_t(rows), 1, 1};
  return launch;
}

}  // namespace

std::optional<TemplateLaunch> plan_cuda_template(const OpRun& run, const DeviceCaps&, int sm) {
  switch (run.kind) {
    case OpKind::MatMul: case OpKind::Linear: case OpKind::Gemm: return matmul_template(run, sm);
    case OpKind::Conv: return conv_template(run, sm);
    case OpKind::Sum: case OpKind::Mean: case OpKind::ReduceMax: case OpKind::ReduceMin:
    case OpKind::Softmax: case OpKind::LogSoftmax: case OpKind::LayerNorm:
      return rows_template(run);
    default: return std::nullopt;
  }
}

bool cuda_entry_point(const std::string& source, std::string* name, unsigned* block) {
  static const std::regex entry(R"(__launch_bounds__\((\w+)\)\s+(\w+)\()");
  std::smatch m;
  if (!std::regex_search(source, m, entry)) return false;
  std::string size = m[1].str();
  if (size.find_first_not_of("0123456789") != std::string::npos) {
    std::smatch d;
    const std::regex define("#define " + size + R"( (\d+)\b)");
    if (!std::regex_search(source, d, define)) return false;
    size = d[1].str();
  }
  *name = m[2].str();
  *block = unsigned(std::stoul(size));
  return true;
}

}  // namespace kiln::cuda
