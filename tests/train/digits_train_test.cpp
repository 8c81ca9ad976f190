// Eager training learns: the digits CNN trained by kiln from PyTorch's initial weights, with
// PyTorch's batch order and SGD settings (samples/train/export_digits.py), reaches PyTorch's
// held-out accuracy on cpu and on Vulkan.
#include <gtest/gtest.h>

#include <cstdio>
#include <optional>
#include <string>

#include "samples/train/digits.h"

namespace kiln {
namespace {

constexpr double kMinAccuracy = 95.0;     // percent of the 359 held-out digits
constexpr double kMaxBehindTorch = 1.5;   // points

void expect_learns_like_torch(Device dev) {
  std::optional<samples::DigitsExport> data = samples::load_digits(KILN_DIGITS_DIR);
  if (!data)
    GTEST_SKIP() << "no digits export in " << KILN_DIGITS_DIR
                 << " (the train.digits.export test writes it with PyTorch and scikit-learn)";
  samples::DigitsCnn model(dev);
  model.load_state_dict(data->initial_state());
  const double torch_accuracy = data->setting("torch_test_accuracy");
  const double before = samples::digits_accuracy(model, *data, dev);
  samples::DigitsEpoch last = samples::train_digits(model, *data, dev, [&](const samples::DigitsEpoch& e) {
    std::printf("%s epoch %lld: loss %.4f, held-out accuracy %.2f%% (%.1f s)\n", dev.name().c_str(),
                static_cast<long long>(e.epoch), e.mean_loss, e.test_accuracy, e.seconds);
  });
  std::printf("%s: %.2f%% before training, %.2f%% after (PyTorch %.2f%%, final loss %.4f vs %.4f)\n",
              dev.name().c_str(), before, last.test_accuracy, torch_accuracy, last.mean_loss,
              data->setting("torch_final_loss"));
  EXPECT_LT(before, 30.0) << "the initial weights should not already classify";
  EXPECT_GE(last.test_accuracy, kMinAccuracy);
  EXPECT_GE(last.test_accuracy, torch_accuracy - kMaxBehindTorch);
  EXPECT_LE(last.test_accuracy, torch_accuracy + kMaxBehindTorch) << "far from PyTorch either way";
  const int64_t n = data->tensor("labels_train").numel(), batch = int64_t(data->setting("batch_size"));
  EXPECT_EQ(model.bn1.num_batches_tracked.item<int64_t>(),
            int64_t(data->setting("epochs")) * ((n + batch - 1) / batch))
      << "batch norm counted every training batch";
}

TEST(TrainDigits, CnnLearnsLikePyTorchOnCpu) { expect_learns_like_torch(Device::cpu()); }

TEST(TrainDigits, CnnLearnsLikePyTorchOnVulkan) {
  Device vulkan;
  try {
    vulkan = Device::parse("vulkan");
  } catch (const Error& e) {
    GTEST_SKIP() << "no Vulkan device: " << e.what();
  }
  expect_learns_like_torch(vulkan);
}

}  // namespace
}  // namespace kiln
