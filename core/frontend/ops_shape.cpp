// Op functions of the shape family (declared in ops.h): PyTorch-style arguments normalized into
// the ONNX-style ops (reshape, permute, slice, concat, split, gather, index_select, expand, pad,
// tile); flatten, squeeze, unsqueeze and embedding are built from them.
#include <algorithm>

#include "core/frontend/dispatch.h"
#include "core/frontend/ops.h"

namespace kiln {
namespace {

using Ints = std::vector<int64_t>;

// Errors the op function finds before it can build the op still read like the op's own.
[[noreturn]] void fail(OpKind kind, const Tensor& x, const Loc& loc, const std::string& why) {
  throw Error(op_error(kind, {x.type()}, provenance_at(loc), why));
}

int64_t dim_for(OpKind kind, const Tensor& x, int64_t dim, int64_t rank, const Loc& loc) {
  try {
    return normalize_axis(dim, rank, "dim");
  } catch (const Error& e) {
    fail(kind, x, loc, e.what());
  }
}

}  // namespace

Tensor reshape(const Tensor& x, const Dims& shape, Loc loc) {
  return run_op1(OpKind::Reshape, {x}, {{"shape", shape.get()}}, loc);
}

Tensor permute(const Tensor& x, const std::vector<int64_t>& dims, Loc loc) {
  return run_op1(OpKind::Permute, {x}, {{"dims", dims}}, loc);
}

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1, Loc loc) {
  const int64_t rank = x.dim();
  Ints perm(static_cast<size_t>(rank));
  for (int64_t i = 0; i < rank; ++i) perm[size_t(i)] = i;
  const int64_t a = dim_for(OpKind::Permute, x, dim0, rank, loc);
  const int64_t b = dim_for(OpKind::Permute, x, dim1, rank, loc);
  if (rank > 0) std::swap(perm[size_t(a)], perm[size_t(b)]);
  return permute(x, perm, loc);
}

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step, Loc loc) {
  return run_op1(OpKind::Slice, {x},
                 {{"axes", Ints{dim}}, {"starts", Ints{start}}, {"ends", Ints{end}},
                  {"steps", Ints{step}}},
                 loc);
}

Tensor concat(const std::vector<Tensor>& tensors, int64_t dim, Loc loc) {
  return run_op1(OpKind::Concat, tensors, {{"dim", dim}}, loc);
}

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim, Loc loc) {
  return concat(tensors, dim, loc);
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim, Loc loc) {
  if (split_size <= 0)
    fail(OpKind::Split, x, loc, "split_size must be positive, got " + std::to_string(split_size));
  const int64_t d = dim_for(OpKind::Split, x, dim, x.dim(), loc);
  if (x.dim() == 0) fail(OpKind::Split, x, loc, "cannot split a 0-d tensor");
  // A symbolic size splits by its traced value; the split op's sum check guards that value.
  const int64_t total = x.shape(d, loc).hint();
  Ints sizes;
  for (int64_t done = 0; done < total; done += split_size)
    sizes.push_back(std::min(split_size, total - done));
  if (sizes.empty()) sizes.push_back(0);  // an empty dim splits into one empty piece
  return split(x, sizes, dim, loc);
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim, Loc loc) {
  return run_op(OpKind::Split, {x}, {{"dim", dim}, {"sizes", sizes}}, loc);
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index, Loc loc) {
  return run_op1(OpKind::Gather, {x, index}, {{"dim", dim}}, loc);
}

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index, Loc loc) {
  return run_op1(OpKind::IndexSelect, {x, index}, {{"dim", dim}}, loc);
}

Tensor expand(const Tensor& x, const Dims& shape, Loc loc) {
  return run_op1(OpKind::Expand, {x}, {{"shape", shape.get()}}, loc);
}

Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, std::string_view mode, double value,
           Loc loc) {
  const size_t rank = size_t(x.dim());
  std::string onnx_mode(mode);
  if (mode == "replicate") onnx_mode = "edge";
  if (onnx_mode != "constant" && onnx_mode != "reflect" && onnx_mode != "edge")
    fail(OpKind::Pad, x, loc,
         "mode must be \"constant\", \"reflect\" or \"replicate\", got \"" + std::string(mode) + "\"");
  if (pads.size() % 2 != 0 || pads.size() > 2 * rank)
    fail(OpKind::Pad, x, loc,
         "pads needs (begin, end) pairs for at most " + std::to_string(rank) +
             " dims, got " + std::to_string(pads.size()) + " values");
  // torch lists pairs from the last dim backwards; ONNX lists all begins, then all ends.
  Ints onnx(2 * rank, 0);
  for (size_t j = 0; j < pads.size() / 2; ++j) {
    const size_t d = rank - 1 - j;
    onnx[d] = pads[2 * j];
    onnx[d + rank] = pads[2 * j + 1];
  }
  return run_op1(OpKind::Pad, {x}, {{"pads", onnx}, {"mode", onnx_mode}, {"value", value}}, loc);
}

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim, Loc loc) {
  const int64_t rank = x.dim();
  if (rank == 0) return reshape(x, Dims{1}, loc);
  const int64_t start = dim_for(OpKind::Reshape, x, start_dim, rank, loc);
  const int64_t end = dim_for(OpKind::Reshape, x, end_dim, rank, loc);
  if (start > end)
    fail(OpKind::Reshape, x, loc, "flatten: start_dim " + std::to_string(start_dim) +
                                      " comes after end_dim " + std::to_string(end_dim));
  const Shape& s = x.shape();
  Shape out(s.begin(), s.begin() + start);
  SymInt merged = 1;
  for (int64_t i = start; i <= end; ++i) merged = merged * s[size_t(i)];
  out.push_back(merged);
  out.insert(out.end(), s.begin() + end + 1, s.end());
  return reshape(x, out, loc);
}

// Only static 1s squeeze: a symbolic dim is taken to be not 1 (as torch.compile assumes), so
// squeezing never records a guard.
Tensor squeeze(const Tensor& x, Loc loc) {
  Shape out;
  for (const SymInt& d : x.shape())
    if (!(d.is_static() && d.value() == 1)) out.push_back(d);
  return reshape(x, out, loc);
}

Tensor squeeze(const Tensor& x, int64_t dim, Loc loc) {
  const int64_t rank = x.dim();
  const int64_t d = dim_for(OpKind::Reshape, x, dim, rank, loc);
  if (rank == 0) return x;
  const Shape& s = x.shape();
  if (!(s[size_t(d)].is_static() && s[size_t(d)].value() == 1)) return x;  // like PyTorch: a no-op
  Shape out = s;
  out.erase(out.begin() + d);
  return reshape(x, out, loc);
}

Tensor unsqueeze(const Tensor& x, int64_t dim, Loc loc) {
  const int64_t d = dim_for(OpKind::Reshape, x, dim, x.dim() + 1, loc);
  Shape out = x.shape();
  out.insert(out.begin() + d, SymInt(1));
  return reshape(x, out, loc);
}

// torch.tile: fewer repeats than dims repeat the trailing dims; more add leading dims of size 1.
Tensor tile(const Tensor& x, const std::vector<int64_t>& repeats, Loc loc) {
  const size_t rank = size_t(x.dim());
  Ints reps = repeats;
  Tensor input = x;
  if (reps.size() < rank) reps.insert(reps.begin(), rank - reps.size(), 1);
  if (reps.size() > rank) {
    Shape lifted(reps.size() - rank, SymInt(1));
    lifted.insert(lifted.end(), x.shape().begin(), x.shape().end());
    input = reshape(x, lifted, loc);
  }
  return run_op1(OpKind::Tile, {input}, {{"repeats", reps}}, loc);
}

Tensor embedding(const Tensor& indices, const Tensor& weight, Loc loc) {
  return index_select(weight, 0, indices, loc);
}

}  // namespace kiln
