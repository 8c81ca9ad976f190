// The 8x8 digits as samples/train/export_digits.py writes them, the CNN it trains with PyTorch,
// and the eager training loop (SGD over its batch order, cosine-annealed per epoch) and held-out
// accuracy that tests/train and kiln-sample-train share.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <kiln/kiln.h>

namespace kiln::samples {

// One export: the tensors (cpu) and settings of DIR/manifest.txt, by name.
struct DigitsExport {
  std::string dir;
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> settings;

  const Tensor& tensor(const std::string& name) const {
    auto it = tensors.find(name);
    if (it == tensors.end()) throw Error(dir + "/manifest.txt has no tensor '" + name + "'");
    return it->second;
  }
  double setting(const std::string& name) const {
    auto it = settings.find(name);
    if (it == settings.end()) throw Error(dir + "/manifest.txt has no setting '" + name + "'");
    return std::stod(it->second);
  }
  // The "cnn.*" tensors with the prefix removed: a state_dict for DigitsCnn.
  std::map<std::string, Tensor> initial_state() const {
    std::map<std::string, Tensor> out;
    for (const auto& [name, t] : tensors)
      if (name.rfind("cnn.", 0) == 0) out.emplace(name.substr(4), t);
    return out;
  }
};

// Reads DIR/manifest.txt and its tensors; nullopt when there is no manifest (not exported).
inline std::optional<DigitsExport> load_digits(const std::string& dir) {
  std::ifstream manifest(dir + "/manifest.txt");
  if (!manifest) return std::nullopt;
  DigitsExport out{dir, {}, {}};
  std::string line;
  while (std::getline(manifest, line)) {
    std::istringstream fields(line);
    std::string name, dtype, dims, file;
    if (!(fields >> name >> dtype >> dims)) continue;
    if (name == "setting") {
      out.settings[dtype] = dims;
      continue;
    }
    if (!(fields >> file) || (dtype != "f32" && dtype != "i64"))
      throw Error(dir + "/manifest.txt: cannot read the line '" + line + "'");
    std::vector<int64_t> shape;
    if (dims != "-") {
      std::istringstream parts(dims);
      for (std::string d; std::getline(parts, d, 'x');) shape.push_back(std::stoll(d));
    }
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    const DType type = dtype == "f32" ? DType::F32 : DType::I64;
    std::vector<char> bytes(size_t(count) * 4 * (type == DType::I64 ? 2 : 1));
    std::ifstream data(dir + "/" + file, std::ios::binary);
    if (!data.read(bytes.data(), std::streamsize(bytes.size())))
      throw Error(dir + "/" + file + ": expected " + std::to_string(bytes.size()) + " bytes for " +
                  name + " (" + dtype + " " + dims + ")");
    out.tensors[name] = from_bytes(bytes.data(), type, shape);
  }
  return out;
}

// The model export_digits.py trains: conv 1->8 3x3 pad 1, batch norm, relu, max pool 2,
// conv 8->16 3x3, relu, flatten, linear 64->10; the parameter names of its DigitsCnn.
class DigitsCnn : public nn::UnaryModule {
 public:
  explicit DigitsCnn(Device dev)
      : conv1(1, 8, 3, 1, /*padding=*/1, 1, 1, true, dev), bn1(8, 1e-5, 0.1, dev),
        conv2(8, 16, 3, 1, 0, 1, 1, true, dev), fc(16 * 2 * 2, 10, true, dev) {
    register_module("conv1", conv1);
    register_module("bn1", bn1);
    register_module("conv2", conv2);
    register_module("fc", fc);
  }
  std::string type_name() const override { return "DigitsCnn"; }
  Tensor forward(const Tensor& x, Loc loc = Loc::current()) override {
    ScopeGuard guard = scope();
    Tensor y = max_pool2d(relu(bn1(conv1(x, loc), loc), loc), 2, std::nullopt, 0, 1, false, loc);
    y = relu(conv2(y, loc), loc);
    return fc(flatten(y, 1, -1, loc), loc);
  }

  nn::Conv2d conv1;
  nn::BatchNorm2d bn1;
  nn::Conv2d conv2;
  nn::Linear fc;
};

// The given rows of a row-major [N, ...] host array, as a [rows, shape...] tensor on dev.
template <class T>
Tensor gather_rows(const std::vector<T>& data, int64_t row_size, const std::vector<int64_t>& rows,
                   std::vector<int64_t> shape, Device dev) {
  std::vector<T> out;
  out.reserve(rows.size() * size_t(row_size));
  for (int64_t r : rows) out.insert(out.end(), data.begin() + r * row_size, data.begin() + (r + 1) * row_size);
  shape.insert(shape.begin(), int64_t(rows.size()));
  return from_vector(out, shape, dev);
}

// Held-out accuracy in percent, in eval mode (batch norm's running statistics), without autograd.
inline double digits_accuracy(nn::UnaryModule& model, const DigitsExport& data, Device dev) {
  NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  Tensor images = data.tensor("images_test").to(dev);
  std::vector<int64_t> predicted = argmax(model(images), 1).to_vector<int64_t>();
  std::vector<int64_t> labels = data.tensor("labels_test").to_vector<int64_t>();
  model.train(was_training);
  int64_t right = 0;
  for (size_t i = 0; i < labels.size(); ++i) right += predicted[i] == labels[i];
  return 100.0 * double(right) / double(labels.size());
}

struct DigitsEpoch {
  int64_t epoch;  // from 1
  double mean_loss, test_accuracy, seconds;
  double samples_per_second;
};

// Trains `model` on `dev` with the export's settings, as export_digits.py trains PyTorch's: SGD
// with momentum over each epoch's batch order, the learning rate cosine-annealed per epoch.
// `on_epoch` sees each epoch's mean training loss and held-out accuracy. `compiled`: each step
// (zero_grad, forward, loss, backward, update) runs as one program under kiln::compile
// (fullgraph, reduce-overhead); the last, smaller batch of an epoch recompiles it once.
inline DigitsEpoch train_digits(nn::UnaryModule& model, const DigitsExport& data, Device dev,
                                const std::function<void(const DigitsEpoch&)>& on_epoch = {},
                                bool compiled = false) {
  const int64_t epochs = int64_t(data.setting("epochs"));
  const int64_t batch_size = int64_t(data.setting("batch_size"));
  std::vector<float> images = data.tensor("images_train").to_vector<float>();
  std::vector<int64_t> labels = data.tensor("labels_train").to_vector<int64_t>();
  std::vector<int64_t> order = data.tensor("order").to_vector<int64_t>();
  const int64_t n = int64_t(labels.size());
  model.train();
  optim::SGD sgd(model.parameters(), {.lr = data.setting("lr"), .momentum = data.setting("momentum")});
  optim::CosineAnnealingLR schedule(sgd, epochs);
  auto train_step = [&sgd, &model](const Tensor& x, const Tensor& y) {
    sgd.zero_grad();
    Tensor loss = cross_entropy(model(x), y);
    loss.backward();
    sgd.step();
    return loss;
  };
  auto compiled_step = compile(train_step, {.mode = Mode::ReduceOverhead, .fullgraph = true, .name = "digits step"});
  DigitsEpoch last{};
  for (int64_t epoch = 0; epoch < epochs; ++epoch) {
    const auto start = std::chrono::steady_clock::now();
    double loss_sum = 0;
    int64_t batches = 0;
    for (int64_t first = 0; first < n; first += batch_size) {
      std::vector<int64_t> rows(order.begin() + epoch * n + first,
                                order.begin() + epoch * n + std::min(n, first + batch_size));
      Tensor x = gather_rows(images, 64, rows, {1, 8, 8}, dev);
      Tensor y = gather_rows(labels, 1, rows, {}, dev);
      Tensor loss = compiled ? compiled_step(x, y) : train_step(x, y);
      loss_sum += loss.item<double>();
      ++batches;
    }
    schedule.step();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    last = {epoch + 1, loss_sum / double(batches), digits_accuracy(model, data, dev), seconds, double(n) / seconds};
    if (on_epoch) on_epoch(last);
  }
  return last;
}

}  // namespace kiln::samples
