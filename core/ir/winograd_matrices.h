// The matrices of Winograd's minimal filtering algorithm F(2x2, 3x3) (Lavin and Gray, "Fast
// Algorithms for Convolutional Neural Networks", 2015), shared by the reference kernels and the
// kernel-IR lowerings of winograd_weights, winograd_input and winograd_output (their shape rules:
// core/ir/ops/winograd.cpp). For a 4x4 input tile d and a 3x3 filter g, the 2x2 outputs of the
// stride-1 correlation are Y = A^T [(G g G^T) (.) (B^T d B)] A.
#pragma once

namespace kiln::winograd {

inline constexpr int kTile = 4;     // input tile and transformed tile: 4x4
inline constexpr int kOutTile = 2;  // outputs per tile: 2x2
inline constexpr int kTaps = 3;     // filter: 3x3

inline constexpr double kG[kTile][kTaps] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
inline constexpr double kBt[kTile][kTile] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
inline constexpr double kAt[kOutTile][kTile] = {{1, 1, 1, 0}, {0, 1, -1, -1}};

// Each row of B^T has two nonzeros and each row of A^T three, at these columns (the lowerings read
// only those).
inline constexpr int kBtNonzeros = 2;
inline constexpr int kBtColumns[kTile][kBtNonzeros] = {{0, 2}, {1, 2}, {1, 2}, {1, 3}};
inline constexpr int kAtNonzeros = 3;
inline constexpr int kAtColumns[kOutTile][kAtNonzeros] = {{0, 1, 2}, {1, 2, 3}};

}  // namespace kiln::winograd
