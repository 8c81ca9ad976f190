// Kernel IR -> GLSL / CUDA C / C++. Expressions become SSA temporaries in dependency order; values are
// computed in a "compute type" (float for 16-bit floats, bool for bool, uint for u8) and converted
// on load and store, so results match the cpu reference's arithmetic.
#include "core/kernel/emit.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "core/kernel/emit_cpp_vector.h"
#include "core/kernel/emit_prelude.h"
#include "core/kernel/emit_text.h"
#include "core/support/error.h"

namespace kiln::kernel {

std::string cuda_entry_name() { return "kiln_kernel"; }

namespace {

class Printer {
 public:
  Printer(const Kernel& k, const EmitOptions& o) : k_(k), o_(o), d_(o.dialect) {}

  EmittedKernel run() {
    vec4_ = vectorized();
    coop_ = cooperative();
    if (cpp(d_) && !vec4_)
      vector_block_ = cpp_vector_block(k_, [this](int slot) { return param(slot); }, total_elements());
    header();
    if (!k_.segments.empty()) {
      horizontal_body();
    } else {
      if (k_.rank == 0 && !cpp(d_)) line("  int gid = 0;", k_.origins());
      if (vec4_) vec4_prologue(k_.stores);
      for (const CppVectorLine& l : vector_block_) line(l.text, l.origins);
      index_prologue();
      if (k_.kind == KernelKind::Reduce) reduce_loop();
      if (coop_) combine_workgroup();
      store_all(k_.stores);
      if (vec4_) vec4_epilogue(k_.stores);
      if (cpp(d_)) cpp_loop_end();
    }
    line("}");
    EmittedKernel out;
    out.source = src_.str();
    out.line_origins = std::move(origins_);
    out.workgroup_size = cpp(d_) ? 1 : o_.workgroup_size;  // C++: launch "groups" count elements
    out.elements_per_invocation = vec4_ ? 4 : 1;
    out.invocations_per_element = coop_ ? o_.workgroup_size : 1;
    return out;
  }

 private:
  void line(const std::string& text, const std::vector<int>& origins = {}) {
    if (o_.source_line && !glsl(d_)) relocate(origins);
    std::string full = text;
    if (!origins.empty() && o_.describe_origin) {
      full += "  //";
      for (size_t i = 0; i < origins.size() && i < 4; ++i) full += " " + o_.describe_origin(origins[i]);
      if (origins.size() > 4) full += " (+" + std::to_string(origins.size() - 4) + " more)";
    }
    src_ << full << "\n";
    origins_.push_back(origins);
  }

  // Emits `#line` before a line when the place the compiler would assign it is not where its first
  // origin was recorded: the user's file:line, or (no place known) this text's own line, named as
  // NVRTC names the program (kernel name + ".cu"). A directive is a source line too: it gets an
  // entry in line_origins, so the table still maps physical lines.
  void relocate(const std::vector<int>& origins) {
    SourceLine want = origins.empty() ? SourceLine{} : o_.source_line(origins.front());
    const bool user = want.line > 0 && !want.file.empty();
    if (!user && !relocated_) return;
    if (!user) want = {k_.name + ".cu", int(origins_.size()) + 2};  // 1-based, after the directive
    if (!relocated_ || want.file != presumed_.file || want.line != presumed_.line) {
      std::string file;
      for (char c : want.file) {
        if (c == '\\' || c == '"') file += '\\';
        file += c;
      }
      src_ << "#line " << want.line << " \"" << file << "\"\n";
      origins_.push_back(origins);
    }
    relocated_ = user;
    presumed_ = {want.file, want.line + 1};
  }

  void store_all(const std::vector<Store>& stores) {
    for (const Store& s : stores) {
      context_ = collect_origins(s.value);
      std::string v = value(s.value);
      DType t = k_.buffers.at(size_t(s.buffer)).dtype;
      std::string b = "b" + std::to_string(s.buffer);
      line(indent_ + (vec4_ ? "o" + b + "[lane]" : b + "[gid]") + " = " + store_text(t, v, d_) + ";",
           collect_origins(s.value));
    }
  }

  // The invocation's flat index in a GPU dialect: x, plus y rows past the 65535-group limit.
  std::string invocation_index() const {
    if (glsl(d_))
      return "int(gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * " +
             std::to_string(o_.workgroup_size) + "u)";
    return "int((blockIdx.x * blockDim.x + threadIdx.x) + blockIdx.y * gridDim.x * blockDim.x)";
  }

  // A horizontal kernel (kernel.h): each segment's stores in a block of its own, with `gid` the
  // element's offset from the segment's start. GPU dialects branch on the flat index (vec4 kernels
  // on the flat index of their first element: segments start at multiples of 4); C++ runs one loop
  // per segment over its part of the thread's range, so each loop still vectorizes.
  void horizontal_body() {
    const std::vector<int> all = k_.origins();
    auto tag = [&](const std::string& text) { line(text, all); };
    auto p = [this](int slot) { return param(slot); };
    const size_t n = k_.segments.size();
    auto start = [&](size_t i) { return k_.segments[i].start < 0 ? std::string("0") : p(k_.segments[i].start); };
    auto next = [&](size_t i) { return i + 1 == n ? p(0) : start(i + 1); };  // where the next segment starts
    if (cpp(d_)) {
      tag("  if (end > long(" + param(0) + ")) end = long(" + param(0) + ");");
    } else {
      tag("  int hgid = " + invocation_index() + (vec4_ ? " * 4" : "") + ";");
      tag("  if (hgid >= " + param(0) + ") return;");
    }
    for (size_t i = 0; i < n; ++i) {
      const Segment& segment = k_.segments[i];
      std::vector<int> origins;
      for (const Store& s : segment.stores)
        for (int id : collect_origins(s.value)) origins.push_back(id);
      auto seg = [&](const std::string& text) { line(text, origins); };
      const std::string first = start(i), size = p(segment.size);
      if (cpp(d_)) {
        // An int induction variable over the segment's own indices: GCC vectorizes that loop, not
        // one whose index is a long narrowed to int inside it (`int(hgid) - first`).
        const std::string from = "long(" + first + ")", to = "long(" + first + ") + " + size;
        seg("  for (int gid = int(max(begin, " + from + ") - " + from + "), gend = int(min(end, " + to + ") - " + from +
            "); gid < gend; ++gid) {");
        indent_ = "    ";
        store_all(segment.stores);
        seg("  }");
      } else if (vec4_) {
        seg(std::string(i == 0 ? "  if" : "  } else if") + " (hgid < " + next(i) + ") {");
        vec4_prologue(segment.stores, "(hgid" + (segment.start < 0 ? std::string() : " - " + first) + ") >> 2", size);
        index_prologue();
        store_all(segment.stores);
        vec4_epilogue(segment.stores);
      } else {
        seg(std::string(i == 0 ? "  if" : "  } else if") + " (hgid < " + next(i) + ") {");
        seg("    int gid = hgid" + (segment.start < 0 ? std::string() : " - " + first) + ";");
        seg("    if (gid < " + size + ") {");
        indent_ = "      ";
        store_all(segment.stores);
        seg("    }");
      }
      indent_ = "  ";
      names_.clear();  // the segment's temporaries end with its block
      prefetched_.clear();
    }
    if (!cpp(d_)) tag("  }");
  }

  // GLSL reads 32-bit inputs through uniform texel buffers: lavapipe turns a storage-buffer load
  // into a loop over the SIMD lanes but a texelFetch into one gather (BENCHMARKS.md, Vulkan).
  // Kernels with 16-bit float buffers keep storage loads: on lavapipe 22.3 a texel-fetched f32
  // converted to f16 rounded unlike the reference (conformance cast_f32_to_f16).
  bool texel_input(size_t slot) const {
    const BufferSlot& b = k_.buffers.at(slot);
    if (!glsl(d_) || !o_.texel_reads || b.output || (b.dtype != DType::F32 && b.dtype != DType::I32))
      return false;
    for (const BufferSlot& other : k_.buffers)
      if (other.dtype == DType::F16 || other.dtype == DType::BF16) return false;
    return true;
  }

  // See EmitOptions::vec4_pointwise. 16-bit kernels keep storage loads (texel_input), so they stay scalar.
  bool vectorized() const {
    if (!glsl(d_) || !o_.texel_reads || !o_.vec4_pointwise || k_.kind != KernelKind::Pointwise || k_.rank == 0 ||
        (!k_.segments.empty() && k_.segment_alignment % 4 != 0))
      return false;
    for (const BufferSlot& b : k_.buffers) {
      if (b.dtype == DType::F16 || b.dtype == DType::BF16) return false;
      if (b.output && b.dtype != DType::F32 && b.dtype != DType::I32) return false;
    }
    return true;
  }

  // A sum over a long extent into few outputs (a loss, a bias or batch-norm gradient): one
  // workgroup per output, whose invocations stride over the extent and add their partial sums in
  // shared memory, instead of one invocation looping over the whole extent alone. GPU dialects,
  // f32 sums; sizes known at emission (a rank-0 output always qualifies).
  bool cooperative() const {
    if (cpp(d_) || vec4_ || k_.kind != KernelKind::Reduce || !k_.segments.empty() || k_.combiner != OpKind::Sum ||
        k_.accumulator_type != DType::F32 || (o_.workgroup_size & (o_.workgroup_size - 1)) != 0)
      return false;
    if (k_.rank == 0) return true;
    std::optional<int64_t> outputs = 1, extent = static_value(k_.extent);
    for (int d = 0; d < k_.rank && outputs; ++d)
      outputs = static_param(d) ? std::optional<int64_t>(*outputs * *static_param(d)) : std::nullopt;
    return outputs && extent && *outputs <= kMaxCooperativeOutputs && *extent >= kMinCooperativeExtent;
  }
  static constexpr int64_t kMaxCooperativeOutputs = 1024, kMinCooperativeExtent = 1024;

  std::optional<int64_t> static_param(int slot) const {
    if (size_t(slot) >= o_.static_params.size() || !o_.static_params[size_t(slot)]) return std::nullopt;
    return *o_.static_params[size_t(slot)];
  }
  // A size's value where it is a constant or a static param (KernelBuilder::param_for makes one of them).
  std::optional<int64_t> static_value(const ExprRef& e) const {
    if (e && e->kind == ExprKind::Const) return int64_t(e->value);
    if (e && e->kind == ExprKind::Param) return static_param(e->index);
    return std::nullopt;
  }

  // A cooperative reduction's end: the workgroup's partial sums added pairwise in shared memory;
  // invocation 0 stores.
  void combine_workgroup() {
    const std::vector<int> all = k_.origins();
    auto tag = [&](const std::string& text) { line(text, all); };
    const std::string barrier = glsl(d_) ? "barrier();" : "__syncthreads();";
    tag("  kiln_partial[lid] = acc;");
    tag("  " + barrier);
    tag("  for (int s = " + std::to_string(o_.workgroup_size / 2) + "; s > 0; s >>= 1) {");
    tag("    if (lid < s) kiln_partial[lid] += kiln_partial[lid + s];");
    tag("    " + barrier);
    tag("  }");
    tag("  acc = kiln_partial[0];");
    tag("  if (lid != 0) return;");
  }

  static bool is_linear_index(const ExprRef& e) { return e->kind == ExprKind::Coord && e->index < 0; }

  // vec4 kernels: each invocation owns elements [4 * gv, 4 * gv + 4). Inputs read at the element's own
  // index are fetched as one texel before the lane loop; outputs collect in a vec4 stored after it.
  // A horizontal kernel's segment passes its own first vec4 (`gv`) and element count (`total`).
  void vec4_prologue(const std::vector<Store>& stores, const std::string& gv = "", const std::string& total = "") {
    const std::vector<int> all = k_.origins();
    auto tag = [&](const std::string& text) { line(text, all); };
    if (gv.empty()) {
      tag("  int gv = " + invocation_index() + ";");
      tag("  int total = " + total_elements() + ";");
      tag("  if (gv * 4 >= total) return;");
    } else {
      tag("  int gv = " + gv + ";");
      tag("  int total = " + total + ";");
    }
    std::set<int> fetched;
    std::vector<const Expr*> stack;
    for (const Store& s : stores) stack.push_back(s.value.get());
    std::set<const Expr*> seen;
    while (!stack.empty()) {
      const Expr* e = stack.back();
      stack.pop_back();
      if (!seen.insert(e).second) continue;
      if (e->kind == ExprKind::Load && texel_input(size_t(e->index)) && is_linear_index(e->args[0]))
        fetched.insert(e->index);
      for (const ExprRef& a : e->args) stack.push_back(a.get());
    }
    for (int slot : fetched) {
      std::string b = "b" + std::to_string(slot);
      tag("  " + vec4_type(k_.buffers[size_t(slot)].dtype) + " q" + b + " = imageLoad(" + b + ", gv);");
      prefetched_.insert(slot);
    }
    for (const Store& s : stores) {
      std::string b = "b" + std::to_string(s.buffer);
      std::string t = vec4_type(k_.buffers.at(size_t(s.buffer)).dtype);
      tag("  " + t + " o" + b + " = " + t + "(0);");
    }
    tag("  for (int lane = 0; lane < 4; ++lane) {");
    indent_ = "    ";
  }

  // One whole vec4 per output, also at the tensor's end: lanes past it hold 0 and land in padding.
  // Every binding has it: buffers are sized in 16-byte steps and arena values start 256 bytes apart.
  // A branch around a partial store instead cost llvmpipe ~20% of an add's time.
  void vec4_epilogue(const std::vector<Store>& stores) {
    indent_ = "  ";
    line("  }");
    for (const Store& s : stores) {
      std::string b = "b" + std::to_string(s.buffer);
      line("  " + b + "[gv] = o" + b + ";", collect_origins(s.value));
    }
  }

  static std::string vec4_type(DType t) { return t == DType::I32 ? "ivec4" : "vec4"; }

  // Param `slot` as the kernel reads it; the static sizes of a C++ or specialized kernel are
  // literals, so the compiler folds the index divisions by them (EmitOptions::static_params).
  std::string param(int slot) const {
    if ((cpp(d_) || k_.specialized) && size_t(slot) < o_.static_params.size() && o_.static_params[size_t(slot)])
      return std::to_string(*o_.static_params[size_t(slot)]);
    return "pc.p[" + std::to_string(slot) + "]";
  }

  std::string total_elements() const {
    std::string total = param(0);
    for (int d = 1; d < k_.rank; ++d) total += " * " + param(d);
    return total;
  }

  bool uses(DType t) const {
    for (const BufferSlot& b : k_.buffers)
      if (b.dtype == t) return true;
    return used_types_.count(t) != 0;
  }

  void scan(const ExprRef& e) {
    if (!scanned_.insert(e.get()).second) return;
    used_types_.insert(e->type);
    if (e->kind == ExprKind::Coord) innermost_coordinate_ = std::max(innermost_coordinate_, e->index);
    for (const ExprRef& a : e->args) scan(a);
  }

  void header() {
    for (const Store& s : k_.stores) scan(s.value);
    for (const Segment& segment : k_.segments)
      for (const Store& s : segment.stores) scan(s.value);
    if (k_.body) scan(k_.body);
    if (glsl(d_)) glsl_header();
    else if (cpp(d_)) cpp_header();
    else cuda_header();
  }

  std::string entry() const { return o_.entry.empty() ? cuda_entry_name() : o_.entry; }

  void add_lines(const char* text) {
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) line(l);
  }

  void preludes() {
    add_lines(prelude_common());
    if (uses(DType::F64)) add_lines(prelude_f64());
    if (uses(DType::BF16)) add_lines(prelude_bf16());
    if (uses(DType::I64)) add_lines(prelude_i64());
    if (uses(DType::U64)) add_lines(prelude_u64());
  }

  void glsl_header() {
    line("#version 450");
    bool i64 = uses(DType::I64) || uses(DType::U64), f16 = uses(DType::F16);
    bool int16 = uses(DType::BF16) || uses(DType::I16) || uses(DType::U16);
    bool bytes = uses(DType::U8) || uses(DType::I8) || uses(DType::Bool);
    if (i64) line("#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require");
    if (f16 || int16) line("#extension GL_EXT_shader_16bit_storage : require");
    if (f16) line("#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require");
    if (int16) line("#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require");
    if (bytes) {
      line("#extension GL_EXT_shader_8bit_storage : require");
      line("#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require");
    }
    line("// kernel " + k_.name, k_.origins());
    line("layout(local_size_x = " + std::to_string(o_.workgroup_size) + ") in;");
    for (size_t i = 0; i < k_.buffers.size(); ++i) {
      const BufferSlot& b = k_.buffers[i];
      std::string n = std::to_string(i);
      bool i32 = b.dtype == DType::I32;
      if (vec4_ && texel_input(i)) {
        line("layout(binding = " + n + (i32 ? ", rgba32i) uniform readonly iimageBuffer" : ", rgba32f) uniform readonly imageBuffer") +
             " b" + n + ";");
        continue;
      }
      if (texel_input(i)) {
        line("layout(binding = " + n + ") uniform " + (i32 ? "isamplerBuffer" : "samplerBuffer") + " b" + n + ";");
        continue;
      }
      if (vec4_ && b.output) {
        line("layout(std430, binding = " + n + ") writeonly buffer B" + n + " { " + vec4_type(b.dtype) + " b" + n + "[]; };");
        continue;
      }
      line("layout(std430, binding = " + n + ") " + (b.output ? "writeonly" : "readonly") +
           " buffer B" + n + " { " + storage_type(b.dtype, d_) + " b" + n + "[]; };");
    }
    if (k_.num_params > 0)
      line("layout(push_constant) uniform Params { int p[" + std::to_string(k_.num_params) + "]; } pc;");
    if (coop_) line("shared float kiln_partial[" + std::to_string(o_.workgroup_size) + "];", k_.origins());
    add_lines(prelude_macros(Dialect::Glsl));
    preludes();
    line("void main() {");
  }

  void cuda_header() {
    line("// kernel " + k_.name, k_.origins());
    if (o_.standalone) {
      if (uses(DType::F16)) line("#include <cuda_fp16.h>");
      add_lines(prelude_cuda_compat());
      add_lines(prelude_macros(Dialect::Cuda));
      preludes();
    }
    std::string params = "KilnParams" + std::to_string(k_.num_params);
    if (k_.num_params > 0) {  // guarded: kernels batched into one translation unit share it
      line("#ifndef KILN_" + params);
      line("#define KILN_" + params);
      line("struct " + params + " { int p[" + std::to_string(k_.num_params) + "]; };");
      line("#endif");
    }
    std::string args;
    for (size_t i = 0; i < k_.buffers.size(); ++i) {
      const BufferSlot& b = k_.buffers[i];
      if (i) args += ", ";
      args += std::string(b.output ? "" : "const ") + storage_type(b.dtype, d_) + "* __restrict__ b" +
              std::to_string(i);
    }
    if (k_.num_params > 0) args += std::string(args.empty() ? "" : ", ") + params + " pc";
    line("extern \"C\" __global__ void __launch_bounds__(" + std::to_string(o_.workgroup_size) +
         ") " + entry() + "(" + args + ") {");
  }

  // C++: the backend's trampoline (backends/cpu) calls this with the kernel's buffers, its params and
  // a range [begin, end) of the iteration space, one range per thread. Kernels of one program share
  // a translation unit, each in a namespace of its own, so the prelude is static inline.
  void cpp_header() {
    line("// kernel " + k_.name, k_.origins());
    if (o_.standalone) {
      line("#include <cmath>");
      line("#include <cstdint>");
      line("#include <cstring>");
      add_lines(prelude_cpp_compat());
      add_lines(prelude_macros(Dialect::Cpp));
      preludes();
      if (!vector_block_.empty()) add_lines(prelude_cpp_vector());
    }
    line("void " + entry() + "(void* const* buffers, const int* params, long begin, long end) {", k_.origins());
    for (size_t i = 0; i < k_.buffers.size(); ++i) {
      const BufferSlot& b = k_.buffers[i];
      std::string type = std::string(b.output ? "" : "const ") + storage_type(b.dtype, d_);
      line("  " + type + "* __restrict b" + std::to_string(i) + " = static_cast<" + type + "*>(buffers[" +
           std::to_string(i) + "]);");
    }
    line("  struct { const int* p; } pc = {params};");
    line("  (void)pc;");
  }

  // C++ walks its range row by row: the coordinates of the range's first element are divided out
  // once, then a row is a plain counted loop (loads at gid or at c<last> are unit stride, so the
  // compiler vectorizes it) and the outer coordinates carry at the end of each row. A row spans
  // the innermost dims no expression reads as coordinates: a batch norm's [N, C, 7, 7] scale reads
  // c1, so its rows are 49 long, not 7; an optimizer's update of a [O, I, 3, 3] weight reads none,
  // so its range is one loop.
  void cpp_loop_begin() {
    const std::vector<int> all = k_.origins();
    auto tag = [&](const std::string& text) { line(text, all); };
    tag("  const long total = " + (k_.rank == 0 ? std::string("1") : "long(" + total_elements() + ")") + ";");
    tag("  if (end > total) end = total;");
    if (!walks_rows()) {
      tag("  for (int gid = int(begin); gid < int(end); ++gid) {");
      return;
    }
    const int from = row_dims_from();
    std::string row_size = param(from);
    for (int d = from + 1; d < k_.rank; ++d) row_size += " * " + param(d);
    const std::string along = from == k_.rank - 1 ? "c" + std::to_string(from) : "in_row";
    tag("  const int row_size = " + row_size + ";");
    tag("  int next = int(begin), rest = next;");
    tag("  int first = rest % row_size;");
    tag("  rest = rest / row_size;");
    for (int d = from - 1; d >= 0; --d) {
      std::string ds = std::to_string(d);
      if (d == 0) {
        tag("  int c0 = rest;");
      } else {
        tag("  int c" + ds + " = rest % " + param(d) + ";");
        tag("  rest = rest / " + param(d) + ";");
      }
    }
    tag("  while (next < int(end)) {");
    tag("  const int row = next - first, stop = int(end) - row < row_size ? int(end) - row : row_size;");
    tag("  for (int " + along + " = first; " + along + " < stop; ++" + along + ") {");
    tag("  const int gid = row + " + along + ";");
  }

  bool walks_rows() const { return k_.rank > 0 && innermost_coordinate_ >= 0; }
  // The first dim of a row: the innermost one, unless no expression reads it (nor the ones after it).
  int row_dims_from() const { return std::min(innermost_coordinate_ + 1, k_.rank - 1); }

  void cpp_loop_end() {
    line("  }");  // the row (or the whole range)
    if (!walks_rows()) return;
    const std::vector<int> all = k_.origins();
    auto tag = [&](const std::string& text) { line(text, all); };
    tag("  next = row + row_size;");
    tag("  first = 0;");
    const int from = row_dims_from();
    for (int d = from - 1; d >= 0; --d) {  // ++c(d) wrapping into c(d-1), innermost outer dim first
      std::string ds = std::to_string(d);
      tag("  " + std::string(size_t(from - 1 - d), ' ') + "if (++c" + ds + " == " + param(d) + ") {" +
          (d == 0 ? "" : " c" + ds + " = 0;"));
    }
    for (int d = 0; d <= from - 1; ++d) tag("  " + std::string(size_t(from - 1 - d), ' ') + "}");
    line("  }");  // while
  }

  // Index set-up serves every node of the kernel: tagged with all of them.
  void index_prologue() {
    const std::vector<int> all = k_.origins();
    auto tag = [&](const std::string& text) { line(text, all); };
    if (cpp(d_)) {
      cpp_loop_begin();
      return;
    }
    std::string x = glsl(d_) ? "gl_GlobalInvocationID.x" : "(blockIdx.x * blockDim.x + threadIdx.x)";
    std::string y = glsl(d_) ? "gl_GlobalInvocationID.y" : "blockIdx.y";
    const std::string& in = indent_;
    if (coop_) {  // the workgroup's number is the output element's
      const std::string group = glsl(d_) ? "int(gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x)"
                                         : "int(blockIdx.x + blockIdx.y * gridDim.x)";
      if (!glsl(d_)) tag("  __shared__ float kiln_partial[" + std::to_string(o_.workgroup_size) + "];");
      tag(std::string("  const int lid = int(") + (glsl(d_) ? "gl_LocalInvocationID.x" : "threadIdx.x") + ");");
      if (k_.rank == 0) {
        tag("  if (" + group + " != 0) return;");
        return;
      }
      tag("  int gid = " + group + ";");
      tag("  if (gid >= " + total_elements() + ") return;");
    } else if (k_.rank == 0) {
      tag("  if (" + x + " != 0u || " + y + " != 0u) return;");
      return;
    } else if (vec4_) {
      tag(in + "int gid = gv * 4 + lane;");
      tag(in + "if (gid >= total) continue;");  // a constant trip count keeps the loop unrollable
    } else {
      tag("  int gid = " + invocation_index() + ";");
      tag("  if (gid >= " + total_elements() + ") return;");
    }
    tag(in + "int rest = gid;");
    for (int d = k_.rank - 1; d >= 0; --d) {
      std::string ds = std::to_string(d);
      if (d == 0) {
        tag(in + "int c0 = rest;");
      } else {
        tag(in + "int c" + ds + " = rest % " + param(d) + ";");
        tag(in + "rest = rest / " + param(d) + ";");
      }
    }
  }

  void reduce_loop() {
    DType at = k_.accumulator_type;
    std::string ct = compute_type(at, d_);
    bool arg = k_.combiner == OpKind::ArgMax || k_.combiner == OpKind::ArgMin;
    DType vt = arg ? k_.body->type : at;
    std::string vct = compute_type(vt, d_);
    std::string init;
    switch (k_.combiner) {
      case OpKind::Sum: init = literal(0, at, d_); break;
      case OpKind::Prod: init = literal(1, at, d_); break;
      default: init = "";  // max/min/arg: start from the first element
    }
    const std::vector<int> body_origins = collect_origins(k_.body);
    context_ = body_origins;
    std::string extent = value(k_.extent);
    if (cpp(d_) && k_.combiner == OpKind::Sum) {
      cpp_sum_in_lanes(ct, init, extent, body_origins);
      return;
    }
    if (arg) {
      line("  " + vct + " best = " + vct + "(0);", body_origins);
      line("  " + ct + " acc = " + ct + "(0);", body_origins);
    } else {
      line("  " + ct + " acc = " + (init.empty() ? ct + "(0)" : init) + ";", body_origins);
    }
    if (coop_)
      line("  for (int r = lid; r < " + extent + "; r += " + std::to_string(o_.workgroup_size) + ") {", body_origins);
    else
      line("  for (int r = 0; r < " + extent + "; ++r) {", body_origins);
    indent_ = "    ";
    std::string v = value(k_.body);
    auto step = [&](const std::string& text) { line(text, body_origins); };

    switch (k_.combiner) {
      case OpKind::Sum: step("    acc += " + ct + "(" + v + ");"); break;
      case OpKind::Prod: step("    acc *= " + ct + "(" + v + ");"); break;
      case OpKind::ReduceMax:
        step("    acc = r == 0 ? " + ct + "(" + v + ") : kiln_max(acc, " + ct + "(" + v + "));");
        break;
      case OpKind::ReduceMin:
        step("    acc = r == 0 ? " + ct + "(" + v + ") : kiln_min(acc, " + ct + "(" + v + "));");
        break;
      case OpKind::ArgMax: case OpKind::ArgMin: {
        std::string cmp = k_.combiner == OpKind::ArgMax ? ">" : "<";
        bool fl = is_floating(vt);
        // NaN wins and stays (first NaN), as the reference does.
        std::string better = "(" + v + " " + cmp + " best" + (fl ? " || (isnan(" + v + ") && !isnan(best))" : "") + ")";
        if (fl) better = "(!isnan(best) && " + better + ")";
        step("    if (r == 0 || " + better + ") { best = " + v + "; acc = " + ct + "(r); }");
        break;
      }
      default:
        throw Error("emit: unsupported reduction combiner " + std::string(op_name(k_.combiner)));
    }
    indent_ = "  ";
    forget_loop_temporaries();
    line("  }");
  }

  // Temporaries made inside a loop are not visible after it.
  void forget_loop_temporaries() {
    for (auto it = names_.begin(); it != names_.end();)
      it = loop_scoped_.count(it->first) ? names_.erase(it) : std::next(it);
  }

  // C++ sums: one loop adds into a dependent chain, each add waiting on the last (about 2 GB/s on
  // a batch norm's statistics). Instead kLanes partial sums take every kLanes-th element, in an
  // inner loop of constant trip count that the compiler vectorizes without reassociating anything
  // (no -ffast-math); the partial sums are then added pairwise, and the last extent % kLanes
  // elements one by one. The order is fixed, so results do not depend on the machine.
  void cpp_sum_in_lanes(const std::string& ct, const std::string& init, const std::string& extent,
                        const std::vector<int>& origins) {
    auto tag = [&](const std::string& text) { line(text, origins); };
    const std::string lanes = std::to_string(kLanes);
    tag("  " + ct + " part[" + lanes + "];");
    tag("  for (int lane = 0; lane < " + lanes + "; ++lane) part[lane] = " + init + ";");
    tag("  int r0 = 0;");
    tag("  for (; r0 + " + lanes + " <= " + extent + "; r0 += " + lanes + ") {");
    tag("    for (int lane = 0; lane < " + lanes + "; ++lane) {");
    tag("      const int r = r0 + lane;");
    indent_ = "      ";
    tag("      part[lane] += " + ct + "(" + value(k_.body) + ");");
    forget_loop_temporaries();
    tag("    }");
    tag("  }");
    for (int width = kLanes / 2; width > 0; width /= 2)
      tag("  for (int lane = 0; lane < " + std::to_string(width) + "; ++lane) part[lane] += part[lane + " +
          std::to_string(width) + "];");
    tag("  " + ct + " acc = part[0];");
    tag("  for (int r = r0; r < " + extent + "; ++r) {");
    indent_ = "    ";
    tag("    acc += " + ct + "(" + value(k_.body) + ");");
    indent_ = "  ";
    forget_loop_temporaries();
    tag("  }");
  }
  static constexpr int kLanes = 16;

  // Returns an expression string for e, emitting temporaries for Op and Load nodes.
  // Lines computing a node without origins of its own (loads, index math) are tagged with the
  // origins of the expression that needed them, so every computing line leads back to the graph.
  std::string value(const ExprRef& e) {
    auto it = names_.find(e.get());
    if (it != names_.end()) return it->second;
    std::vector<int> origins = e->origins.empty() ? context_ : e->origins;
    std::vector<int> saved = context_;
    context_ = origins;
    std::string text;
    switch (e->kind) {
      case ExprKind::Const: context_ = saved; return literal(e->value, e->type, d_);
      case ExprKind::Param: context_ = saved; return param(e->index);
      case ExprKind::Coord: context_ = saved; return e->index < 0 ? "gid" : "c" + std::to_string(e->index);
      case ExprKind::ReductionIndex: context_ = saved; return "r";
      case ExprKind::Accumulator: context_ = saved; return compute_type(e->type, d_) + "(acc)";
      case ExprKind::Load: {
        std::string off = value(e->args[0]);
        std::string b = "b" + std::to_string(e->index);
        if (prefetched_.count(e->index) && is_linear_index(e->args[0]))
          text = "q" + b + "[lane]";
        else if (vec4_ && texel_input(size_t(e->index)))
          text = "imageLoad(" + b + ", " + off + " >> 2)[" + off + " & 3]";
        else
          text = texel_input(size_t(e->index)) ? "texelFetch(" + b + ", " + off + ").x"
                                               : load_text(e->type, b + "[" + off + "]", d_);
        break;
      }
      case ExprKind::Op: text = op_text(*e); break;
    }
    std::string name = "v" + std::to_string(next_++);
    line(indent_ + compute_type(e->type, d_) + " " + name + " = " + text + ";", origins);
    context_ = saved;
    names_[e.get()] = name;
    if (indent_.size() > 2) loop_scoped_.insert(e.get());
    return name;
  }

  std::string op_text(const Expr& e) {
    std::vector<std::string> a;
    std::vector<DType> types;
    for (const ExprRef& x : e.args) {
      a.push_back(value(x));
      types.push_back(x->type);
    }
    const bool index_math = e.op == OpKind::Mod && !e.args.empty() && e.args[0]->kind != ExprKind::Load;
    return op_expression(e.op, e.attrs, e.type, types, a, d_, index_math);
  }

  const Kernel& k_;
  const EmitOptions& o_;
  Dialect d_;
  std::ostringstream src_;
  std::vector<std::vector<int>> origins_;
  std::map<const Expr*, std::string> names_;
  std::set<const Expr*> scanned_, loop_scoped_;
  int innermost_coordinate_ = -1;  // the last of c0, c1, ... an expression reads (scan); -1: none
  std::set<DType> used_types_;
  std::string indent_ = "  ";
  int next_ = 0;
  bool vec4_ = false;
  bool coop_ = false;  // cooperative()
  std::vector<CppVectorLine> vector_block_;  // C++: the elements run 128 at a time, or empty
  std::set<int> prefetched_;  // vec4 kernels: input slots read as one texel per invocation
  std::vector<int> context_;  // origins inherited by nodes that have none
  bool relocated_ = false;    // a #line put the next line at a user's file:line
  SourceLine presumed_;       // where the compiler places the next line while relocated_
};

}  // namespace

EmittedKernel emit(const Kernel& kernel, const EmitOptions& options) {
  EmittedKernel out = Printer(kernel, options).run();
  if (options.dialect != Dialect::Glsl) out.entry = options.entry.empty() ? cuda_entry_name() : options.entry;
  return out;
}

std::string emit_prelude_for(Dialect dialect) {
  std::string text;
  if (dialect == Dialect::Cpp) {
    text += "#include <cmath>\n#include <cstdint>\n#include <cstring>\n";
    text += prelude_cpp_compat();
    text += prelude_cpp_vector();
  } else if (dialect == Dialect::Cuda) {
    text += "#include <cuda_fp16.h>\n";
    text += prelude_cuda_compat();
  }
  text += prelude_macros(dialect);
  for (const char* part : {prelude_common(), prelude_f64(), prelude_bf16(), prelude_i64(), prelude_u64()})
    text += part;
  return text;
}

std::array<uint32_t, 3> launch_groups(int64_t elements, int workgroup_size, int per, int invocations) {
  return launch_groups((elements + per - 1) / per * invocations, workgroup_size);
}

std::array<uint32_t, 3> launch_groups(const EmittedKernel& kernel, int64_t elements) {
  return launch_groups(elements, kernel.workgroup_size, kernel.elements_per_invocation, kernel.invocations_per_element);
}

std::array<uint32_t, 3> launch_groups(int64_t elements, int workgroup_size) {
  int64_t groups = (std::max<int64_t>(elements, 1) + workgroup_size - 1) / workgroup_size;
  if (groups <= 65535) return {uint32_t(groups), 1, 1};
  int64_t y = (groups + 65534) / 65535;
  int64_t x = (groups + y - 1) / y;
  return {uint32_t(x), uint32_t(y), 1};
}

EmitOptions emit_options_for(const CodegenTarget& target) {
  EmitOptions options;
  options.dialect = target.dialect;
  options.texel_reads = target.texel_reads;
  options.vec4_pointwise = target.vec4_pointwise;
  while (options.workgroup_size > std::max(1, target.max_workgroup_size)) options.workgroup_size /= 2;
  return options;
}

}  // namespace kiln::kernel
