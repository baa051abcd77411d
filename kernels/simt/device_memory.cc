#include "kernels/simt/device_memory.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "kernels/simt/thread_context.h"

namespace tessera::simt {
namespace {

struct Allocation {
  char* mapping;
  size_t mapping_bytes;  // leading guard + data pages + one guard page
  size_t bytes;          // as asked
};

// The inaccessible bytes before each buffer's first data page: a negative index up to this far
// (e.g. block id -1 of a paged KV pool with blocks up to 64 KiB) faults.
constexpr size_t kLeadingGuardBytes = size_t{64} << 10;

struct Registry {
  std::mutex mutex;
  std::map<uintptr_t, Allocation> by_start;  // key: the pointer handed out
  size_t bytes_in_use = 0;
};

Registry& TheRegistry() {
  static Registry* registry = new Registry;
  return *registry;
}

size_t PageSize() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

struct sigaction previous_segv_action;

// Names the buffer an emulated kernel overran, then lets the default action kill the process.
// Runs in a signal handler while the process is doomed: it reads the registry without locking.
void ReportFault(int signal_number, siginfo_t* info, void* context) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(info->si_addr);
  char message[512];
  int length = std::snprintf(message, sizeof message,
                             "simt: invalid memory access at %p", info->si_addr);
  for (const auto& [start, allocation] : TheRegistry().by_start) {
    const uintptr_t end = start + allocation.bytes;
    const uintptr_t mapping_end =
        reinterpret_cast<uintptr_t>(allocation.mapping) + allocation.mapping_bytes;
    if (address >= end && address < mapping_end) {
      length += std::snprintf(message + length, sizeof message - length,
                              ": %zu bytes past the end of a %zu-byte device buffer at %p",
                              static_cast<size_t>(address - end), allocation.bytes,
                              reinterpret_cast<void*>(start));
      break;
    }
    if (address < start && address >= reinterpret_cast<uintptr_t>(allocation.mapping)) {
      length += std::snprintf(message + length, sizeof message - length,
                              ": %zu bytes before the start of a %zu-byte device buffer at %p",
                              static_cast<size_t>(start - address), allocation.bytes,
                              reinterpret_cast<void*>(start));
      break;
    }
  }
  const ThreadCoordinates& c = current_coordinates;
  length += std::snprintf(message + length, sizeof message - length,
                          " (last emulated thread (%u,%u,%u) of block (%u,%u,%u))\n",
                          c.thread_idx.x, c.thread_idx.y, c.thread_idx.z, c.block_idx.x,
                          c.block_idx.y, c.block_idx.z);
  [[maybe_unused]] ssize_t written = write(STDERR_FILENO, message, static_cast<size_t>(length));
  sigaction(SIGSEGV, &previous_segv_action, nullptr);
  raise(signal_number);
}

void InstallFaultReporter() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_sigaction = &ReportFault;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &previous_segv_action);
  });
  // The handler must not run on a fiber's small stack: give this OS thread an alternate one.
  thread_local bool alternate_stack_set = false;
  if (!alternate_stack_set) {
    stack_t stack{};
    stack.ss_size = 64 * 1024;
    stack.ss_sp = std::malloc(stack.ss_size);
    sigaltstack(&stack, nullptr);
    alternate_stack_set = true;
  }
}

}  // namespace

absl::StatusOr<void*> AllocateDevice(size_t bytes) {
  InstallFaultReporter();
  const size_t page = PageSize();
  const size_t padded = (std::max<size_t>(bytes, 1) + 15) / 16 * 16;
  const size_t data_pages = (padded + page - 1) / page * page;
  const size_t lead = (kLeadingGuardBytes + page - 1) / page * page;
  const size_t mapping_bytes = lead + data_pages + page;
  void* mapping = mmap(nullptr, mapping_bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapping == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("emulated device: cannot allocate ", bytes, " bytes"));
  }
  char* base = static_cast<char*>(mapping);
  mprotect(base, lead, PROT_NONE);
  mprotect(base + lead + data_pages, page, PROT_NONE);
  char* start = base + lead + data_pages - padded;
  // Poisoned (0xFF: NaN in every float type) around the data, where no guard page can sit.
  std::memset(base + lead, 0xFF, static_cast<size_t>(start - (base + lead)));
  std::memset(start + bytes, 0xFF, padded - bytes);
  Registry& registry = TheRegistry();
  std::lock_guard lock(registry.mutex);
  registry.by_start[reinterpret_cast<uintptr_t>(start)] = {base, mapping_bytes, bytes};
  registry.bytes_in_use += bytes;
  return start;
}

void FreeDevice(void* pointer) {
  if (pointer == nullptr) return;
  Registry& registry = TheRegistry();
  std::lock_guard lock(registry.mutex);
  auto it = registry.by_start.find(reinterpret_cast<uintptr_t>(pointer));
  if (it == registry.by_start.end()) {
    std::fprintf(stderr, "simt: FreeDevice(%p): not an emulated device allocation\n", pointer);
    std::abort();
  }
  munmap(it->second.mapping, it->second.mapping_bytes);
  registry.bytes_in_use -= it->second.bytes;
  registry.by_start.erase(it);
}

size_t DeviceBytesInUse() {
  Registry& registry = TheRegistry();
  std::lock_guard lock(registry.mutex);
  return registry.bytes_in_use;
}

}  // namespace tessera::simt
