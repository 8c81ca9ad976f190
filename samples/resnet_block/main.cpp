// kiln-sample-resnet_block: a ResNet basic block (conv-bn-relu-conv-bn, identity residual, relu);
// eager vs compiled on one device: times, kernels, memory; exit 1 on disagreement.
#include "samples/common/sample_models.h"

int main(int argc, char** argv) {
  return kiln::samples::sample_main("kiln-sample-resnet_block", "resnet", argc, argv);
}
