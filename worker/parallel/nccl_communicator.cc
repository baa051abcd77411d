#include "worker/parallel/nccl_communicator.h"

#include <dlfcn.h>
#include <nccl.h>

#include <string>

#include "absl/strings/str_cat.h"

namespace tessera::worker {
namespace {

// The few NCCL entry points the communicator calls, resolved from the opened library.
struct NcclLibrary {
  void* handle = nullptr;
  decltype(&ncclGetVersion) get_version = nullptr;
  decltype(&ncclCommInitAll) init_all = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclCommAbort) abort = nullptr;
  decltype(&ncclCommDestroy) destroy = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
  int version = 0;

  ~NcclLibrary() {
    if (handle != nullptr) dlclose(handle);
  }

  std::string Error(ncclResult_t result) const {
    return error_string != nullptr ? error_string(result) : absl::StrCat("code ", result);
  }
};

template <typename Function>
bool Resolve(void* handle, const char* name, Function* out) {
  *out = reinterpret_cast<Function>(dlsym(handle, name));
  return *out != nullptr;
}

// The loader's search (LD_LIBRARY_PATH, the system's paths) finds libnccl.so.2.
absl::StatusOr<std::shared_ptr<NcclLibrary>> OpenNccl() {
  const std::string path = "libnccl.so.2";
  auto library = std::make_shared<NcclLibrary>();
  library->handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library->handle == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "tensor parallelism on cuda needs NCCL: cannot open ", path, " (", dlerror(),
        "); install libnccl2 or put its directory on LD_LIBRARY_PATH"));
  }
  void* h = library->handle;
  if (!Resolve(h, "ncclGetVersion", &library->get_version) ||
      !Resolve(h, "ncclCommInitAll", &library->init_all) ||
      !Resolve(h, "ncclAllReduce", &library->all_reduce) ||
      !Resolve(h, "ncclCommAbort", &library->abort) ||
      !Resolve(h, "ncclCommDestroy", &library->destroy) ||
      !Resolve(h, "ncclGetErrorString", &library->error_string)) {
    return absl::UnavailableError(absl::StrCat(path, " lacks an NCCL 2 entry point"));
  }
  library->get_version(&library->version);
  return library;
}

absl::StatusOr<ncclDataType_t> NcclType(device::DataType type) {
  switch (type) {
    case device::DataType::kF32: return ncclFloat32;
    case device::DataType::kBf16: return ncclBfloat16;
    case device::DataType::kF16: return ncclFloat16;
  }
  return absl::InvalidArgumentError("tensor parallel: no NCCL type");
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(std::shared_ptr<NcclLibrary> nccl, ncclComm_t comm, int rank, int size,
                   device::CudaDeviceRuntime& runtime)
      : nccl_(std::move(nccl)), comm_(comm), rank_(rank), size_(size), runtime_(runtime) {}
  ~NcclCommunicator() override {
    if (comm_ != nullptr) nccl_->destroy(comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  absl::Status AllReduceSum(void* data, int64_t count, device::DataType type) override {
    if (count == 0) return absl::OkStatus();
    absl::StatusOr<ncclDataType_t> nccl_type = NcclType(type);
    if (!nccl_type.ok()) return nccl_type.status();
    const ncclResult_t result = nccl_->all_reduce(data, data, static_cast<size_t>(count),
                                                  *nccl_type, ncclSum, comm_, runtime_.stream());
    if (result == ncclSuccess) return absl::OkStatus();
    return absl::InternalError(absl::StrCat("ncclAllReduce on rank ", rank_, ": ",
                                            nccl_->Error(result)));
  }
  void Abort() override {
    if (comm_ != nullptr) nccl_->abort(comm_);
    comm_ = nullptr;
  }
  std::string Describe() const override {
    return absl::StrCat("nccl ", nccl_->version / 10000, ".", nccl_->version / 100 % 100, ".",
                        nccl_->version % 100);
  }

 private:
  std::shared_ptr<NcclLibrary> nccl_;
  ncclComm_t comm_;
  int rank_, size_;
  device::CudaDeviceRuntime& runtime_;
};

}  // namespace

absl::StatusOr<std::vector<std::unique_ptr<Communicator>>> MakeNcclCommunicators(
    const std::vector<device::CudaDeviceRuntime*>& runtimes) {
  absl::StatusOr<std::shared_ptr<NcclLibrary>> nccl = OpenNccl();
  if (!nccl.ok()) return nccl.status();
  const int size = static_cast<int>(runtimes.size());
  std::vector<int> devices;
  for (const device::CudaDeviceRuntime* runtime : runtimes) {
    devices.push_back(runtime->device_index());
  }
  std::vector<ncclComm_t> comms(runtimes.size(), nullptr);
  if (ncclResult_t result = (*nccl)->init_all(comms.data(), size, devices.data());
      result != ncclSuccess) {
    return absl::InternalError(absl::StrCat("ncclCommInitAll over ", size,
                                            " GPUs: ", (*nccl)->Error(result)));
  }
  std::vector<std::unique_ptr<Communicator>> communicators;
  for (int r = 0; r < size; ++r) {
    communicators.push_back(
        std::make_unique<NcclCommunicator>(*nccl, comms[r], r, size, *runtimes[r]));
  }
  return communicators;
}

}  // namespace tessera::worker
