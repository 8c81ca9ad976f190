// Linked into test programs that run on Vulkan: turns the Khronos validation layer on before any
// device opens and fails the run when the layer reported anything.
#include <gtest/gtest.h>

#include <cstdlib>

#ifdef KILN_HAVE_VULKAN
#include "backends/vulkan/vulkan_backend.h"
#endif

namespace {

const int kValidationOn = setenv("KILN_VULKAN_VALIDATION", "1", 0);

class ValidationMessagesFail : public ::testing::Environment {
 public:
  void TearDown() override {
#ifdef KILN_HAVE_VULKAN
    auto messages = kiln::vulkan::validation_messages();
    for (const std::string& m : messages) ADD_FAILURE() << "Vulkan validation: " << m;
#endif
  }
};

::testing::Environment* const kEnvironment =
    ::testing::AddGlobalTestEnvironment(new ValidationMessagesFail);

}  // namespace
