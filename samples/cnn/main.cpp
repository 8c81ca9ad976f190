// kiln-sample-cnn: the demo's SmallCnn (conv, batch norm, pools, linear, softmax);
// eager vs compiled on one device: times, kernels, memory; exit 1 on disagreement.
#include "samples/common/sample_models.h"

int main(int argc, char** argv) {
  return kiln::samples::sample_main("kiln-sample-cnn", "cnn", argc, argv);
}
