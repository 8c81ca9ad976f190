// The C interface between the CUDA host emulator's scheduler and the kernels it compiles: each
// emulated GPU thread sees one KilnEmuThread, and calls back through its hooks to synchronize.
#pragma once

extern "C" {

struct KilnEmuDim {
  unsigned x, y, z;
};

struct KilnEmuThread;

struct KilnEmuHooks {
  // __syncthreads: returns once every thread of the block that has not exited arrived.
  void (*syncthreads)(KilnEmuThread* self);
  // Deposits `value` as this lane's slot and returns once every live lane of `mask` did the same;
  // the result is the warp's 32 slots. Shuffles, votes and __syncwarp are built on it.
  const unsigned long long* (*warp_exchange)(KilnEmuThread* self, unsigned mask, unsigned long long value);
};

struct KilnEmuThread {
  KilnEmuDim thread_idx, block_idx, block_dim, grid_dim;
  unsigned lane;  // linear thread index % 32
  unsigned linear;  // linear thread index in the block
  const KilnEmuHooks* hooks;
  void* scheduler;  // the host's state for this block
};

// Exported by every compiled kernel library: the calling OS thread's slot for the current thread.
typedef KilnEmuThread** (*KilnEmuSelfSlotFn)();
// One per kernel entry: calls it with cuLaunchKernel-style arguments (pointers to each value).
typedef void (*KilnEmuEntryFn)(void** args);

}  // extern "C"
