// Measured memory of LibTorch on the CPU: a counting allocator in front of c10's CPU allocator.
// Every tensor storage ATen allocates on the CPU goes through c10::GetCPUAllocator(); once this
// allocator is installed there, it counts the bytes of each allocation until it is freed, so
// that the live bytes and their peak are telemetry, not an estimate.
#pragma once

#include <cstdint>

namespace neuralcost::libtorch {

/// The live and peak bytes of the CPU storages allocated since install_counting_allocator().
struct AllocatorCount {
  std::uint64_t current_bytes = 0;
  std::uint64_t peak_bytes = 0;
  std::uint64_t allocations = 0;  ///< allocations since the last reset
};

/// Puts the counting allocator in front of c10's CPU allocator (once per process; later calls do
/// nothing). Storages allocated before it are not counted, nor are their frees.
void install_counting_allocator();
/// Whether the counting allocator is c10's CPU allocator now.
bool counting_allocator_installed();
/// The counts so far.
AllocatorCount allocator_count();
/// Sets the peak to the current live bytes and the allocation count to 0 (before a step).
void reset_allocator_peak();
/// Called after each counted allocation (bytes > 0) and free (bytes < 0) with the block's
/// pointer, outside the allocator's lock; nullptr (the default) calls nothing. For diagnostics:
/// tests/libtorch/alloc_trace.cpp lists the blocks of a step by op.
using AllocationHook = void (*)(const void* ptr, std::int64_t bytes);
void set_allocation_hook(AllocationHook hook);

}  // namespace neuralcost::libtorch
