// Device memory of the emulated device: host memory whose end touches an inaccessible guard page,
// so a kernel that reads or writes past the end of a buffer faults at once instead of reading a
// neighbour. The fault is reported on stderr (which buffer, how far past its end, which emulated
// thread) before the process aborts. Sizes are rounded up to 16 bytes (vector-load alignment):
// an overrun inside that padding is not caught, but the padding is poisoned (0xFF).
// Thread-safe.
#pragma once

#include <cstddef>

#include "absl/status/statusor.h"

namespace tessera::simt {

absl::StatusOr<void*> AllocateDevice(size_t bytes);
// `pointer` must come from AllocateDevice (checked: anything else aborts).
void FreeDevice(void* pointer);
// Bytes handed out and not yet freed.
size_t DeviceBytesInUse();

}  // namespace tessera::simt
