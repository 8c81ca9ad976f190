// kiln-sample-transformer_block: pre-norm LayerNorm + MultiheadAttention + GELU MLP, residuals;
// eager vs compiled on one device: times, kernels, memory; exit 1 on disagreement.
#include "samples/common/sample_models.h"

int main(int argc, char** argv) {
  return kiln::samples::sample_main("kiln-sample-transformer_block", "transformer", argc, argv);
}
