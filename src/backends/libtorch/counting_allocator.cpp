// The counting CPU allocator (see counting_allocator.hpp). It wraps the allocator c10 had (the
// default CPU allocator, which frees by pointer through its raw deleter) and records each
// block's size by its pointer, so that the raw allocate/deallocate interface keeps working.
#include "backends/libtorch/counting_allocator.hpp"

#include <c10/core/CPUAllocator.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <unordered_map>

#include "neuralcost/core/error.hpp"

namespace neuralcost::libtorch {
namespace {

struct Counts {
  std::mutex mutex;
  std::unordered_map<void*, std::size_t> sizes;  ///< live blocks allocated through us
  AllocatorCount count;
  c10::DeleterFnPtr inner_delete = nullptr;
  std::atomic<AllocationHook> hook{nullptr};
};

Counts& counts() {
  static Counts* c = new Counts;  // never destroyed: storages may be freed during exit
  return *c;
}

void counting_delete(void* ptr) {
  Counts& c = counts();
  std::size_t freed = 0;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    const auto it = c.sizes.find(ptr);
    if (it != c.sizes.end()) {
      freed = it->second;
      c.count.current_bytes -= it->second;
      c.sizes.erase(it);
    }
  }
  if (const AllocationHook hook = c.hook.load(); hook != nullptr && freed > 0) {
    hook(ptr, -static_cast<std::int64_t>(freed));
  }
  c.inner_delete(ptr);
}

class CountingAllocator final : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* inner) : inner_(inner) {}

  c10::DataPtr allocate(std::size_t n) const override {
    c10::DataPtr block = inner_->allocate(n);
    void* ptr = block.get();
    if (ptr == nullptr) return block;  // zero bytes
    // the default CPU allocator's block is its own context: free it by pointer later
    block.release_context();
    Counts& c = counts();
    {
      std::lock_guard<std::mutex> lock(c.mutex);
      c.sizes[ptr] = n;
      c.count.current_bytes += n;
      c.count.peak_bytes = std::max(c.count.peak_bytes, c.count.current_bytes);
      ++c.count.allocations;
    }
    if (const AllocationHook hook = c.hook.load(); hook != nullptr) hook(ptr, static_cast<std::int64_t>(n));
    return {ptr, ptr, &counting_delete, block.device()};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &counting_delete; }

 private:
  c10::Allocator* inner_;
};

CountingAllocator* installed = nullptr;

}  // namespace

void install_counting_allocator() {
  static std::once_flag once;
  std::call_once(once, [] {
    c10::Allocator* inner = c10::GetCPUAllocator();
    if (inner->raw_deleter() == nullptr) {
      throw Error(ErrorCode::kUnimplemented,
                  "libtorch: the CPU allocator frees blocks through contexts, not pointers: the counting allocator "
                  "cannot wrap it, so no memory telemetry");
    }
    counts().inner_delete = inner->raw_deleter();
    installed = new CountingAllocator(inner);  // lives as long as the process: storages point to it
    // the highest priority: nothing registered later replaces it
    c10::SetCPUAllocator(installed, std::numeric_limits<std::uint8_t>::max());
  });
}

bool counting_allocator_installed() { return installed != nullptr && c10::GetCPUAllocator() == installed; }

AllocatorCount allocator_count() {
  Counts& c = counts();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.count;
}

void reset_allocator_peak() {
  Counts& c = counts();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.count.peak_bytes = c.count.current_bytes;
  c.count.allocations = 0;
}

void set_allocation_hook(AllocationHook hook) { counts().hook.store(hook); }

}  // namespace neuralcost::libtorch
