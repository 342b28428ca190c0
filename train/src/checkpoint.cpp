#include "pcdino/train/checkpoint.hpp"

#include <caffe2/serialize/in_memory_adapter.h>
#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <torch/csrc/jit/serialization/pickler.h>
#include <torch/csrc/jit/serialization/unpickler.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <sstream>
#include <tuple>

#include "pcdino/core/error.hpp"
#include "pcdino/core/fs.hpp"
#include "pcdino/train/pickle_bounds.hpp"

namespace pcdino::train {

c10::Dict<std::string, torch::Tensor> state_dict(const torch::nn::Module& module, const std::string& prefix) {
  c10::Dict<std::string, torch::Tensor> dict;
  // Host tensors: a checkpoint written on a GPU loads on a CPU (and in Python without map_location). A
  // tensor already on the host is written as it is (no copy: the write is synchronous).
  const auto host = [](const torch::Tensor& t) { return t.detach().to(torch::kCPU); };
  for (const auto& p : module.named_parameters()) dict.insert(prefix + p.key(), host(p.value()));
  for (const auto& b : module.named_buffers()) dict.insert(prefix + b.key(), host(b.value()));
  return dict;
}

namespace {

torch::Device device_of(torch::nn::Module& module) {
  const auto params = module.parameters();
  return params.empty() ? torch::Device(torch::kCPU) : params.front().device();
}

void copy_into(torch::nn::Module& module, const c10::Dict<std::string, torch::Tensor>& dict,
               const std::string& prefix, const std::string& path) {
  torch::NoGradGuard no_grad;
  for (auto& p : module.named_parameters()) {
    const std::string key = prefix + p.key();
    if (!dict.contains(key)) throw DataError(path + ": no parameter '" + key + "' (another architecture?)");
    const torch::Tensor value = dict.at(key);
    if (value.sizes() != p.value().sizes()) {
      std::ostringstream msg;
      msg << path << ": parameter '" << key << "' has shape " << value.sizes() << ", the model expects "
          << p.value().sizes();
      throw DataError(msg.str());
    }
    p.value().copy_(value);
  }
}

// A checkpoint file mapped copy-on-write (MAP_PRIVATE): its tensors are views of the file, as
// torch.load(mmap=True) gives them, so that reading a checkpoint's epoch and args touches none of its
// hundreds of MB and a full load copies each byte once, into the model. The mapping lives as long as the
// last tensor that views it. Checkpoints are replaced by rename, never truncated in place, so a mapped file
// keeps its size.
class MappedFile final : public caffe2::serialize::ReadAdapterInterface {
 public:
  explicit MappedFile(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw NoInputError("cannot read checkpoint '" + path + "': " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      throw NoInputError("cannot read checkpoint '" + path + "': not a regular file");
    }
    size_ = static_cast<std::size_t>(st.st_size);
    if (size_ > 0) {
      void* data = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
      if (data == MAP_FAILED) {
        const std::string why = std::strerror(errno);
        ::close(fd);
        throw NoInputError("cannot read checkpoint '" + path + "': " + why);
      }
      data_ = static_cast<char*>(data);
    }
    ::close(fd);
  }
  ~MappedFile() override {
    if (data_ != nullptr) ::munmap(data_, size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  std::size_t size() const override { return size_; }
  std::size_t read(uint64_t pos, void* buf, std::size_t n, const char* /*what*/) const override {
    if (pos >= size_) return 0;
    n = std::min<std::size_t>(n, size_ - static_cast<std::size_t>(pos));
    std::memcpy(buf, data_ + pos, n);
    return n;
  }
  char* data() const { return data_; }

 private:
  char* data_ = nullptr;
  std::size_t size_ = 0;
};

// Whether `tensor`'s view lies inside its storage: no negative size, stride or offset, and the last element
// it reaches within the storage's bytes. LibTorch's unpickler takes a tensor's offset, sizes and strides from
// the pickle as they are (a damaged stride made a copy of the tensor read outside the file).
bool view_inside_storage(const torch::Tensor& tensor) {
  if (tensor.storage_offset() < 0) return false;
  std::uint64_t last = static_cast<std::uint64_t>(tensor.storage_offset());  // the last element's index
  for (int64_t d = 0; d < tensor.dim(); ++d) {
    const int64_t size = tensor.size(d), stride = tensor.stride(d);
    if (size < 0 || stride < 0) return false;
    if (size == 0) return true;  // no element
    const auto reach = static_cast<std::uint64_t>(size - 1), step = static_cast<std::uint64_t>(stride);
    if (step != 0 && reach > (UINT64_MAX - last) / step) return false;
    last += reach * step;
  }
  const auto bytes = static_cast<std::uint64_t>(tensor.element_size());
  return last < UINT64_MAX / bytes && (last + 1) * bytes <= tensor.storage().nbytes();
}

// Every tensor in `value` (nested dicts and lists): a storage that views the mapped file must lie inside it
// (a corrupt pickle can claim more elements than its record holds), and the tensor inside its storage.
void check_storages(const c10::IValue& value, const MappedFile& file, const std::string& path) {
  if (value.isTensor()) {
    if (!view_inside_storage(value.toTensor()))
      throw DataError(path + ": a tensor's sizes, strides or offset reach outside its storage");
    const c10::Storage& storage = value.toTensor().storage();
    const char* begin = static_cast<const char*>(storage.data());
    if (begin >= file.data() && begin < file.data() + file.size() &&
        storage.nbytes() > static_cast<std::size_t>(file.data() + file.size() - begin)) {
      throw DataError(path + ": a tensor claims " + std::to_string(storage.nbytes()) +
                      " bytes, more than the file holds after its record");
    }
  } else if (value.isGenericDict()) {
    for (const auto& entry : value.toGenericDict()) check_storages(entry.value(), file, path);
  } else if (value.isList()) {
    for (const c10::IValue& item : value.toListRef()) check_storages(item, file, path);
  }
}

// zlib's CRC-32 of `size` bytes.
std::uint32_t crc32_of(const void* data, std::size_t size) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const auto* p = static_cast<const Bytef*>(data);
  for (std::size_t done = 0; done < size;) {
    const auto n = static_cast<uInt>(std::min<std::size_t>(size - done, 1u << 30));
    crc = crc32(crc, p + done, n);
    done += n;
  }
  return static_cast<std::uint32_t>(crc);
}

// The optimizer's archive (LibTorch's own: a TorchScript zip in a uint8 tensor) is loaded by LibTorch's
// TorchScript importer, whose parser a damaged archive crashes (its code records are source text): its bytes
// must have the CRC-32 the checkpoint's "optimizer_crc32" records (a checkpoint written before that key has
// none and is loaded unchecked), and each of its pickles is walked as the checkpoint's is.
// Throws DataError or c10::Error.
void check_optimizer_archive(const c10::Dict<c10::IValue, c10::IValue>& top, const torch::Tensor& archive,
                             const std::string& path) {
  if (top.contains("optimizer_crc32")) {
    const c10::IValue& recorded = top.at("optimizer_crc32");
    const std::uint32_t crc = crc32_of(archive.data_ptr(), static_cast<std::size_t>(archive.numel()));
    if (!recorded.isInt() || recorded.toInt() != static_cast<int64_t>(crc))
      throw DataError(path + ": the optimizer's archive is damaged (its CRC-32 is not the one recorded)");
  }
  caffe2::serialize::PyTorchStreamReader reader(std::make_shared<caffe2::serialize::MemoryReadAdapter>(
      archive.data_ptr(), static_cast<off_t>(archive.numel())));
  for (const std::string& name : reader.getAllRecords()) {
    if (name.size() < 4 || name.compare(name.size() - 4, 4, ".pkl") != 0) continue;
    const auto [bytes, size] = reader.getRecord(name);
    check_pickle_bounds(static_cast<const char*>(bytes.get()), size, path, "the optimizer's " + name);
  }
}

// The checkpoint's top-level dict (torch.save's zip archive: data.pkl and one data/N record per storage),
// its tensors viewing the mapped file.
c10::Dict<c10::IValue, c10::IValue> read_top(const std::string& path) {
  const auto file = std::make_shared<MappedFile>(path);
  try {
    caffe2::serialize::PyTorchStreamReader reader(file);
    at::DataPtr pickle;
    std::size_t pickle_size = 0;
    std::tie(pickle, pickle_size) = reader.getRecord("data.pkl");
    check_pickle_bounds(static_cast<const char*>(pickle.get()), pickle_size, path);
    std::size_t at = 0;
    const auto read = [&](char* buf, std::size_t n) {
      n = std::min(n, pickle_size - at);
      std::memcpy(buf, static_cast<const char*>(pickle.get()) + at, n);
      at += n;
      return n;
    };
    const auto view = [&](const std::string& key) {
      const std::size_t offset = reader.getRecordOffset("data/" + key);
      if (offset > file->size())
        throw DataError(path + ": record data/" + key + " lies past the end of the file");
      return c10::DataPtr(
          file->data() + offset, new std::shared_ptr<MappedFile>(file),
          [](void* keep) { delete static_cast<std::shared_ptr<MappedFile>*>(keep); }, c10::Device(c10::kCPU));
    };
    torch::jit::Unpickler unpickler(read, nullptr, nullptr, view, c10::nullopt);
    unpickler.set_version(reader.version());
    const c10::IValue top = unpickler.parse_ivalue();
    if (!top.isGenericDict()) throw DataError(path + ": not a checkpoint (expected a dict)");
    check_storages(top, *file, path);
    return top.toGenericDict();
  } catch (const Error&) {
    throw;
  } catch (const c10::Error& e) {
    throw DataError(path + ": cannot unpickle checkpoint: " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    // LibTorch's unpickler indexes its memo and stack with .at(): a damaged pickle can end in
    // std::out_of_range (found by Checkpoint.DamagedCheckpointsAreEachReadOrRefusedNamingTheFile).
    throw DataError(path + ": cannot unpickle checkpoint: " + e.what());
  }
}

// torch.save's zip archive of `value` (data.pkl, one data/N record per storage) written into `file`,
// pickled with plain Python dicts and lists. torch::pickle_save wraps every container in
// torch.jit._pickle.restore_type_tag (and tensor lists in build_tensorlist), globals that torch.load refuses
// under weights_only=True, its default since PyTorch 2.6; without the tags only what weights_only accepts
// remains: dicts, lists, strings, integers and tensors (torch._utils._rebuild_tensor_v2, torch.*Storage,
// collections.OrderedDict). The storages go from the tensors to the file, never copied in memory.
void write_archive(const c10::IValue& value, AtomicFile& file) {
  std::vector<char> pickle;
  torch::jit::Pickler pickler(
      [&](const char* data, size_t size) { pickle.insert(pickle.end(), data, data + size); },
      /*tensor_table=*/nullptr, /*type_renamer=*/nullptr, /*memoized_class_types=*/nullptr,
      /*get_tensor_id=*/nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(value);
  pickler.stop();
  // The writer function never throws and never writes short: an exception through miniz's C code, or a
  // failed write that PyTorchStreamWriter's destructor then meets, ends the process (seen: a full
  // filesystem aborted the training). The first failure is kept and thrown once the archive is closed.
  std::exception_ptr failed;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t size) {
    if (!failed) {
      try {
        file.write(data, size);
      } catch (...) {
        failed = std::current_exception();
      }
    }
    return size;
  });
  const auto& storages = pickler.tensorData();  // in the order of the pickle's storage keys "0", "1", ...
  for (std::size_t i = 0; i < storages.size() && !failed; ++i) {
    const auto bytes = torch::jit::getWriteableTensorData(storages[i]);
    writer.writeRecord("data/" + std::to_string(i), bytes.data(), bytes.sizeInBytes());
  }
  writer.writeRecord("data.pkl", pickle.data(), pickle.size());
  writer.writeEndOfFile();
  if (failed) std::rethrow_exception(failed);
}

c10::Dict<std::string, torch::Tensor> tensor_dict(const c10::Dict<c10::IValue, c10::IValue>& top,
                                                  const std::string& key, const std::string& path) {
  if (!top.contains(key)) throw DataError(path + ": checkpoint has no '" + key + "'");
  const c10::IValue& value = top.at(key);
  if (!value.isGenericDict()) throw DataError(path + ": '" + key + "' is not a dict of tensors");
  c10::Dict<std::string, torch::Tensor> out;
  for (const auto& entry : value.toGenericDict()) {
    if (!entry.key().isString() || !entry.value().isTensor()) {
      throw DataError(
          path + ": '" + key + "' holds " +
          (entry.key().isString() ? "'" + entry.key().toStringRef() + "'" : std::string("a key")) +
          ", which is not a named tensor");
    }
    out.insert(entry.key().toStringRef(), entry.value().toTensor());
  }
  return out;
}

}  // namespace

void save_checkpoint(const std::string& path, MultiCropWrapper& student, MultiCropWrapper& teacher,
                     torch::optim::Optimizer& optimizer, const DinoLoss& loss, const CheckpointState& state) {
  c10::impl::GenericDict top(c10::StringType::get(), c10::AnyType::get());
  top.insert("student", state_dict(*student, "module."));
  top.insert("teacher", state_dict(*teacher));
  torch::serialize::OutputArchive archive;
  optimizer.save(archive);
  auto bytes = std::make_shared<std::vector<char>>();
  // AdamW's two moments per parameter and the archive's own records: reserved once, not grown by doubling.
  std::size_t parameter_bytes = 0;
  for (const auto& p : student->parameters()) parameter_bytes += p.nbytes();
  bytes->reserve(2 * parameter_bytes + (1 << 20));
  archive.save_to([&](const void* data, size_t size) {
    bytes->insert(bytes->end(), static_cast<const char*>(data), static_cast<const char*>(data) + size);
    return size;
  });
  // A uint8 tensor over the bytes (no copy), which it keeps alive.
  top.insert("optimizer", torch::from_blob(
                              bytes->data(), {static_cast<int64_t>(bytes->size())}, [bytes](void*) {},
                              torch::TensorOptions().dtype(torch::kUInt8)));
  top.insert("optimizer_crc32", static_cast<int64_t>(crc32_of(bytes->data(), bytes->size())));
  top.insert("epoch", static_cast<int64_t>(state.epoch));
  top.insert("iteration", static_cast<int64_t>(state.iteration));
  c10::Dict<std::string, torch::Tensor> dino_loss;
  dino_loss.insert("center", loss.center.detach().to(torch::kCPU, false, /*copy=*/true));
  top.insert("dino_loss", dino_loss);
  top.insert("rng_state", at::detail::getDefaultCPUGenerator().get_state());
  const torch::Device device = device_of(*student);
  if (device.is_cuda()) {  // drop path draws on the GPU's generator
    top.insert("cuda_rng_state", at::globalContext().defaultGenerator(device).get_state());
  }
  for (const auto& [key, states] : {std::pair{"rank_rng_states", &state.rank_rng_states},
                                    std::pair{"rank_cuda_rng_states", &state.rank_cuda_rng_states}}) {
    if (states->empty()) continue;
    c10::impl::GenericList list(
        c10::AnyType::get());  // a plain list: a tensor list pickles as build_tensorlist
    for (const auto& t : *states) list.push_back(t);
    top.insert(key, list);
  }
  c10::Dict<std::string, std::string> args;
  for (const auto& [k, v] : state.args) args.insert(k, v);
  top.insert("args", args);
  AtomicFile file(path);
  write_archive(top, file);
  file.commit();
}

CheckpointState load_checkpoint(const std::string& path, MultiCropWrapper& student, MultiCropWrapper& teacher,
                                torch::optim::Optimizer& optimizer, DinoLoss& loss, int rank,
                                int world_size) {
  const auto top = read_top(path);
  copy_into(*student, tensor_dict(top, "student", path), "module.", path);
  copy_into(*teacher, tensor_dict(top, "teacher", path), "", path);
  try {
    const torch::Tensor opt = top.at("optimizer").toTensor().contiguous();
    if (opt.scalar_type() != torch::kUInt8) throw DataError(path + ": its optimizer is not a byte tensor");
    const torch::Device device = device_of(*student);
    check_optimizer_archive(top, opt, path);
    torch::serialize::InputArchive archive;
    archive.load_from(static_cast<const char*>(opt.data_ptr()), static_cast<std::size_t>(opt.numel()),
                      device);  // the AdamW moments where the parameters are
    optimizer.load(archive);
    loss.center = top.at("dino_loss").toGenericDict().at("center").toTensor().to(device, false, true);
    // This rank's state from the per-rank list when it was written by a world of this size.
    const auto state_of = [&](const char* per_rank, const char* single) -> std::optional<torch::Tensor> {
      if (world_size > 1 && top.contains(per_rank)) {
        const auto list = top.at(per_rank).toList();  // a plain list, or a tensor list (earlier pcdino)
        if (static_cast<int>(list.size()) == world_size)
          return list.get(static_cast<std::size_t>(rank)).toTensor();
      }
      if (top.contains(single)) return top.at(single).toTensor();
      return std::nullopt;
    };
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    if (const auto cpu = state_of("rank_rng_states", "rng_state")) generator.set_state(*cpu);
    if (device.is_cuda()) {
      if (const auto gpu = state_of("rank_cuda_rng_states", "cuda_rng_state")) {
        at::Generator cuda_generator = at::globalContext().defaultGenerator(device);
        cuda_generator.set_state(*gpu);
      }
    }
    CheckpointState state;
    state.epoch = static_cast<int>(top.at("epoch").toInt());
    state.iteration = top.contains("iteration") ? static_cast<int>(top.at("iteration").toInt()) : 0;
    for (const auto& entry : top.at("args").toGenericDict()) {
      state.args[entry.key().toStringRef()] = entry.value().toStringRef();
    }
    return state;
  } catch (const Error&) {
    throw;
  } catch (const c10::Error& e) {
    throw DataError(path + ": incomplete checkpoint: " + e.what_without_backtrace());
  } catch (const std::exception& e) {  // e.g. std::out_of_range from LibTorch's archive reader
    throw DataError(path + ": incomplete checkpoint: " + e.what());
  }
}

CheckpointState read_checkpoint_state(const std::string& path) {
  const auto top = read_top(path);
  CheckpointState state;
  state.epoch = -1;
  try {
    if (top.contains("epoch")) state.epoch = static_cast<int>(top.at("epoch").toInt());
    if (top.contains("iteration")) state.iteration = static_cast<int>(top.at("iteration").toInt());
    if (top.contains("args") && top.at("args").isGenericDict()) {
      for (const auto& entry : top.at("args").toGenericDict()) {
        if (entry.key().isString() && entry.value().isString()) {
          state.args[entry.key().toStringRef()] = entry.value().toStringRef();
        }
      }
    }
  } catch (const c10::Error& e) {
    throw DataError(path + ": unreadable epoch or args: " + e.what_without_backtrace());
  }
  return state;
}

std::map<std::string, torch::Tensor> read_state_dict(const std::string& path, const std::string& key) {
  const auto dict = tensor_dict(read_top(path), key, path);
  std::map<std::string, torch::Tensor> out;
  for (const auto& entry : dict) {
    std::string name = entry.key();
    for (const char* prefix : {"module.", "backbone."}) {
      if (name.rfind(prefix, 0) == 0) name = name.substr(std::string(prefix).size());
    }
    out[name] = entry.value();
  }
  return out;
}

namespace {

// The heads of a ViT of width `width`: its preset's (args.arch), else the DINO preset of that width.
int heads_for_width(int64_t width, const std::string& arch) {
  if (!arch.empty()) return VitOptions::preset(arch, 16, 1, 224).num_heads;
  for (const char* preset : {"vit_tiny", "vit_small", "vit_base"}) {
    const auto o = VitOptions::preset(preset, 16, 1, 224);
    if (o.embed_dim == width) return o.num_heads;
  }
  return 0;
}

}  // namespace

PretrainedVit load_pretrained_vit(const std::string& path, const std::string& key) {
  const auto weights = read_state_dict(path, key);
  const auto state = read_checkpoint_state(path);
  const auto need = [&](const std::string& name) -> const torch::Tensor& {
    const auto it = weights.find(name);
    if (it == weights.end()) {
      throw DataError(path + ": the '" + key + "' state dict has no '" + name +
                      "': not a ViT checkpoint (checkpoint_key teacher or student)");
    }
    return it->second;
  };
  const auto& proj = need("patch_embed.proj.weight");  // [D, C, p, p]
  const auto& pos = need("pos_embed");                 // [1, grid^2 + 1, D]
  if (proj.dim() != 4 || proj.size(2) != proj.size(3) || pos.dim() != 3) {
    throw DataError(path + ": patch_embed.proj.weight " + c10::str(proj.sizes()) + " / pos_embed " +
                    c10::str(pos.sizes()) + " do not describe a ViT");
  }
  int depth = 0;
  while (weights.count("blocks." + std::to_string(depth) + ".attn.qkv.weight") > 0) ++depth;
  const auto args = state.args.find("arch");
  PretrainedVit m;
  m.arch = args != state.args.end() ? args->second : "";
  m.epoch = state.epoch;
  VitOptions o;
  o.embed_dim = static_cast<int>(proj.size(0));
  o.in_channels = static_cast<int>(proj.size(1));
  o.patch_size = static_cast<int>(proj.size(2));
  const auto grid = static_cast<int>(std::llround(std::sqrt(static_cast<double>(pos.size(1) - 1))));
  o.image_size = grid * o.patch_size;
  o.depth = depth;
  try {
    o.num_heads = heads_for_width(o.embed_dim, m.arch);
  } catch (const std::invalid_argument& e) {
    throw DataError(path + ": args.arch: " + e.what());
  }
  if (o.num_heads == 0 || depth == 0) {
    throw DataError(path + ": cannot tell the number of heads of a ViT of width " +
                    std::to_string(o.embed_dim) + " with " + std::to_string(depth) +
                    " blocks (no args.arch in the checkpoint)");
  }
  m.vit = VisionTransformer(o);
  torch::NoGradGuard no_grad;
  for (auto& p : m.vit->named_parameters()) {
    const auto& w = need(p.key());
    if (w.sizes() != p.value().sizes()) {
      throw DataError(path + ": '" + p.key() + "' is " + c10::str(w.sizes()) + " in the checkpoint but " +
                      c10::str(p.value().sizes()) + " in a " + (m.arch.empty() ? "ViT" : m.arch) +
                      " built from its shapes");
    }
    p.value().copy_(w);
  }
  return m;
}

}  // namespace pcdino::train
