// Device memory of the emulated device: host memory whose end touches an inaccessible guard page
// and whose first page follows 64 KiB of inaccessible pages, so a kernel that reads or writes
// past the end of a buffer faults at once, and one that indexes up to 64 KiB before its start
// (a -1 block id) faults too, instead of reading a neighbour. The fault is reported on stderr
// (which buffer, how far past its end or before its start, which emulated thread) before the
// process aborts. Sizes are rounded up to 16 bytes (vector-load alignment), and the data ends at
// the guard page: an overrun inside that padding, or an underrun inside the rest of the first
// page, is not caught, but both are poisoned (0xFF, a NaN in every float type).
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
