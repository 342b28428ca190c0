// Checkpoints: written by C++, read back bit-exactly, and readable by Python's torch.load with the
// reference's keys and names.
#include <caffe2/serialize/inline_container.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/serialization/pickler.h>
#include <torch/torch.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <random>
#include <typeinfo>
#include <vector>

#include "../lib/peak_memory.hpp"
#include "../lib/temp_dir.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/train/checkpoint.hpp"
#include "pcdino/train/pickle_bounds.hpp"

namespace pcdino::train {
namespace {

MultiCropWrapper tiny_model(int channels = 1) {
  VitOptions o = VitOptions::preset("vit_tiny", 4, channels, 12);
  o.depth = 2;
  return MultiCropWrapper(VisionTransformer(o), DinoHead(192, 16, true, 32, 8));
}

// What a checkpoint holds, made after torch::manual_seed(seed): student, teacher, the student's AdamW, the
// loss.
struct Dino {
  explicit Dino(std::uint64_t seed)
      : student((torch::manual_seed(seed), tiny_model())),
        teacher(tiny_model()),
        opt(student->parameters(), torch::optim::AdamWOptions(1e-3)) {}
  MultiCropWrapper student, teacher;
  torch::optim::AdamW opt;
  DinoLoss loss{16, 4, 0.04, 0.04, 0, 2};
};

// Runs `script` with the Python that has PyTorch (tests/lib/python.sh: PCDINO_PYTHON, else python3 on PATH,
// else /usr/bin/python3), standard error included; the finder's own message when there is none.
std::string run_python(const std::filesystem::path& script) {
  const std::string cmd =
      "{ py=$(bash '" PCDINO_SOURCE_DIR "/tests/lib/python.sh') && \"$py\" '" + script.string() + "'; } 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  std::string out;
  std::array<char, 4096> buf{};
  while (pipe && fgets(buf.data(), buf.size(), pipe.get()) != nullptr) out += buf.data();
  return out;
}

std::string file_bytes(const std::string& path) {
  return test::read_text(path);
}

// The pickle (data.pkl) of a checkpoint's zip archive, as bytes: its global names are plain text in it.
std::string pickle_of(const std::string& path) {
  caffe2::serialize::PyTorchStreamReader reader(path);
  const auto [data, size] = reader.getRecord("data.pkl");
  return {static_cast<const char*>(data.get()), size};
}

TEST(Checkpoint, RoundTripIsBitExactAndPythonReadsIt) {
  test::TempDir d;
  torch::manual_seed(1);
  auto student = tiny_model(), teacher = tiny_model();
  torch::optim::AdamW opt(student->parameters(), torch::optim::AdamWOptions(1e-3));
  DinoLoss loss(16, 4, 0.04, 0.04, 0, 2);
  // One real step so that the optimizer has state and the centre moved.
  std::vector<torch::Tensor> crops = {torch::randn({2, 1, 12, 12}), torch::randn({2, 1, 12, 12}),
                                      torch::randn({2, 1, 8, 8}), torch::randn({2, 1, 8, 8})};
  const auto t_out = teacher->forward(std::vector<torch::Tensor>(crops.begin(), crops.begin() + 2));
  loss(student->forward(crops), t_out, 0).backward();
  opt.step();
  const std::string path = d / "checkpoint.pth";
  save_checkpoint(path, student, teacher, opt, loss,
                  {3, 0, {{"arch", "vit_tiny"}, {"patch_size", "4"}}, {}, {}});
  const auto rng_after_save = torch::rand({3});

  torch::manual_seed(999);  // a different generator state and fresh weights
  auto student2 = tiny_model(), teacher2 = tiny_model();
  torch::optim::AdamW opt2(student2->parameters(), torch::optim::AdamWOptions(1e-3));
  DinoLoss loss2(16, 4, 0.04, 0.04, 0, 2);
  const CheckpointState state = load_checkpoint(path, student2, teacher2, opt2, loss2);
  EXPECT_EQ(state.epoch, 3);
  EXPECT_EQ(state.args.at("arch"), "vit_tiny");
  EXPECT_TRUE(torch::equal(torch::rand({3}), rng_after_save)) << "generator state restored";
  const auto a = student->named_parameters(), b = student2->named_parameters();
  for (const auto& p : a) EXPECT_TRUE(torch::equal(p.value(), b[p.key()])) << p.key();
  for (const auto& p : teacher->named_parameters()) {
    EXPECT_TRUE(torch::equal(p.value(), teacher2->named_parameters()[p.key()])) << p.key();
  }
  EXPECT_TRUE(torch::equal(loss.center, loss2.center));
  // The same next step from both: the optimizer state came back too.
  for (auto* o :
       {static_cast<torch::optim::Optimizer*>(&opt), static_cast<torch::optim::Optimizer*>(&opt2)}) {
    for (auto& p : o == &opt ? student->parameters() : student2->parameters())
      p.mutable_grad() = torch::ones_like(p);
    o->step();
  }
  EXPECT_TRUE(torch::equal(student->backbone->cls_token, student2->backbone->cls_token));

  // Python reads it with a plain torch.load (weights_only=True by default from PyTorch 2.6 on) and with
  // weights_only=True asked for (1.13 has the option, not the default): only dicts, lists, strings, numbers
  // and tensors, with the reference's keys and pcdino's values bit for bit.
  std::ofstream(d / "read.py")
      << "import sys, torch\n"
         "c = torch.load('"
      << path
      << "')\n"
         "w = torch.load('"
      << path
      << "', weights_only=True)\n"
         "print(torch.__version__.split('+')[0], sorted(c.keys()) == sorted(w.keys()))\n"
         "print(sorted(c.keys())); print(c['epoch'], c['args']['arch'])\n"
         "print(tuple(c['teacher']['backbone.patch_embed.proj.weight'].shape))\n"
         "print('module.head.last_layer.weight_g' in c['student'], "
         "tuple(c['dino_loss']['center'].shape))\n"
         "print('cls', ' '.join('%.9g' % float(v) for v in "
         "w['teacher']['backbone.cls_token'].flatten()[:4]))\n";
  const std::string py = run_python(d / "read.py");
  EXPECT_NE(py.find(" True\n"), std::string::npos)
      << py << "(a plain torch.load and weights_only=True agree)";
  EXPECT_NE(py.find("['args', 'dino_loss', 'epoch', 'iteration', 'optimizer', 'optimizer_crc32', "
                    "'rng_state', 'student', "
                    "'teacher']"),
            std::string::npos)
      << py;
  EXPECT_NE(py.find("3 vit_tiny"), std::string::npos) << py;
  EXPECT_NE(py.find("(192, 1, 4, 4)"), std::string::npos) << py;
  EXPECT_NE(py.find("True (1, 16)"), std::string::npos) << py;
  std::string cls = "cls";
  const auto first = teacher->backbone->cls_token.flatten().slice(0, 0, 4);
  for (int i = 0; i < 4; ++i) {
    char digits[64];  // 9 significant digits: a float32 exactly, rounded alike by C and Python
    std::snprintf(digits, sizeof digits, " %.9g", static_cast<double>(first[i].item<float>()));
    cls += digits;
  }
  EXPECT_NE(py.find(cls + "\n"), std::string::npos) << py << "(expected " << cls << ")";
  // No torch.jit._pickle global (restore_type_tag, build_tensorlist) that weights_only refuses in the pickle.
  EXPECT_EQ(pickle_of(path).find("torch.jit"), std::string::npos);

  const auto weights = read_state_dict(path, "teacher");
  EXPECT_EQ(weights.count("cls_token"), 1u) << "backbone. prefix stripped";
  EXPECT_EQ(weights.count("head.mlp.0.weight"), 1u);
}

// Earlier pcdino wrote torch::pickle_save's typed containers (Dict[str, Tensor], the per-rank generator
// states as a Tensor list): `to` gets `from`'s content in that form.
void write_as_earlier_releases(const std::string& from, const std::string& to) {
  const std::string bytes = file_bytes(from);
  const auto top = torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end())).toGenericDict();
  c10::impl::GenericDict legacy(c10::StringType::get(), c10::AnyType::get());
  for (const auto& entry : top) {
    const std::string key = entry.key().toStringRef();
    const c10::IValue& value = entry.value();
    if (value.isList()) {
      c10::List<torch::Tensor> list;
      for (std::size_t i = 0; i < value.toList().size(); ++i)
        list.push_back(value.toList().get(i).toTensor());
      legacy.insert(key, list);
    } else if (value.isGenericDict() && key == "args") {
      c10::Dict<std::string, std::string> args;
      for (const auto& a : value.toGenericDict()) args.insert(a.key().toStringRef(), a.value().toStringRef());
      legacy.insert(key, args);
    } else if (value.isGenericDict()) {
      c10::Dict<std::string, torch::Tensor> tensors;
      for (const auto& t : value.toGenericDict()) tensors.insert(t.key().toStringRef(), t.value().toTensor());
      legacy.insert(key, tensors);
    } else {
      legacy.insert(key, value);
    }
  }
  const auto data = torch::pickle_save(legacy);
  std::ofstream(to, std::ios::binary).write(data.data(), static_cast<std::streamsize>(data.size()));
}

TEST(Checkpoint, EarlierReleasesCheckpointsStillResume) {
  test::TempDir d;
  Dino saved(2);
  // Two ranks' generator states; rank 1's draws are what a resumed rank 1 must draw next.
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  const torch::Tensor rank0 = generator.get_state();
  torch::rand({7});
  const torch::Tensor rank1 = generator.get_state();
  const auto rank1_draws = torch::rand({3});
  save_checkpoint(d / "new.pth", saved.student, saved.teacher, saved.opt, saved.loss,
                  {5, 2, {{"arch", "vit_tiny"}}, {rank0, rank1}, {}});
  write_as_earlier_releases(d / "new.pth", d / "old.pth");
  ASSERT_NE(pickle_of(d / "old.pth").find("restore_type_tag"), std::string::npos) << "the old format's tags";
  ASSERT_NE(pickle_of(d / "old.pth").find("build_tensorlist"), std::string::npos) << "and its tensor list";
  EXPECT_EQ(pickle_of(d / "new.pth").find("torch.jit"), std::string::npos) << "and none in this release's";

  for (const char* name : {"old.pth", "new.pth"}) {
    Dino loaded(999);
    const CheckpointState state =
        load_checkpoint(d / name, loaded.student, loaded.teacher, loaded.opt, loaded.loss, 1, 2);
    EXPECT_EQ(state.epoch, 5) << name;
    EXPECT_EQ(state.iteration, 2) << name;
    EXPECT_EQ(state.args.at("arch"), "vit_tiny") << name;
    EXPECT_TRUE(torch::equal(torch::rand({3}), rank1_draws)) << name << ": rank 1's generator state";
    for (const auto& p : saved.teacher->named_parameters()) {
      EXPECT_TRUE(torch::equal(p.value(), loaded.teacher->named_parameters()[p.key()]))
          << name << " " << p.key();
    }
    EXPECT_TRUE(torch::equal(saved.loss.center, loaded.loss.center)) << name;
    EXPECT_EQ(read_checkpoint_state(d / name).epoch, 5) << name;
    EXPECT_EQ(read_state_dict(d / name, "teacher").count("cls_token"), 1u) << name;
  }
}

TEST(Checkpoint, AnotherArchitectureIsRefusedNamingTheParameter) {
  test::TempDir d;
  auto student = tiny_model(1), teacher = tiny_model(1);
  torch::optim::AdamW opt(student->parameters(), torch::optim::AdamWOptions(1e-3));
  DinoLoss loss(16, 4, 0.04, 0.04, 0, 2);
  save_checkpoint(d / "c.pth", student, teacher, opt, loss, {});
  auto other = tiny_model(5), other_teacher = tiny_model(5);
  torch::optim::AdamW opt5(other->parameters(), torch::optim::AdamWOptions(1e-3));
  try {
    load_checkpoint(d / "c.pth", other, other_teacher, opt5, loss);
    FAIL() << "5-channel model loaded a 1-channel checkpoint";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("module.backbone.patch_embed.proj.weight' has shape [192, 1, 4, 4]"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(load_checkpoint(d / "missing.pth", other, other_teacher, opt5, loss), NoInputError);
}

// Checkpoints are read as views of the mapped file (read_top): a file cut short and a pickle whose tensor
// claims more bytes than the file holds are refused naming the file, before any tensor's bytes are read.
TEST(Checkpoint, ACutOrLyingCheckpointIsRefusedNamingTheFile) {
  test::TempDir d;
  Dino saved(7);
  save_checkpoint(d / "whole.pth", saved.student, saved.teacher, saved.opt, saved.loss, {});
  const std::string whole = file_bytes(d / "whole.pth");
  {
    std::ofstream cut(d / "cut.pth", std::ios::binary);
    cut << whole.substr(0, whole.size() / 2);
  }
  // A zip archive whose pickle holds a tensor of 1,000,000 floats and whose record for it holds 16 bytes.
  {
    std::vector<char> pickle;
    torch::jit::Pickler pickler(
        [&](const char* data, size_t size) { pickle.insert(pickle.end(), data, data + size); }, nullptr,
        nullptr, nullptr, nullptr, false);
    c10::impl::GenericDict top(c10::StringType::get(), c10::AnyType::get());
    top.insert("epoch", static_cast<int64_t>(3));
    top.insert("teacher", torch::zeros({1000000}));
    pickler.protocol();
    pickler.pushIValue(top);
    pickler.stop();
    caffe2::serialize::PyTorchStreamWriter writer(d / "lying.pth");
    const std::array<char, 16> few{};
    writer.writeRecord("data/0", few.data(), few.size());
    writer.writeRecord("data.pkl", pickle.data(), pickle.size());
    writer.writeEndOfFile();
  }
  for (const char* name : {"cut.pth", "lying.pth"}) {
    const std::string path = d / name;
    try {
      read_checkpoint_state(path);
      FAIL() << name << " was read";
    } catch (const DataError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(path + ": ", 0), 0u) << e.what();
    }
  }
  try {
    read_checkpoint_state(d / "lying.pth");
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("claims 4000000 bytes"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read_checkpoint_state(d / "whole.pth").epoch, 0);
}

// check_pickle_bounds against CPython's own pickler (its table restates Lib/pickletools.py): a value with
// every kind of argument (integers of each width, a long, floats, short and long strings and bytes, a
// bytearray, containers, globals, memo entries past 255) pickled at protocols 0-5, and torch.save's
// data.pkl, each passes whole; every cut of the protocol pickles is refused naming the file.
TEST(PickleBounds, PythonsPicklesOfEveryProtocolPassAndEveryCutOfOneIsRefused) {
  test::TempDir d;
  test::write_text(d / "write.py",
                   "import collections, os, pickle, sys, zipfile\n"
                   "import torch\n"
                   "here = os.path.dirname(os.path.abspath(sys.argv[0]))\n"
                   "shared = ['shared']\n"
                   "value = {'ints': [0, 255, 65535, -1, 2**31 - 1, 2**70, -2**70],\n"
                   "         'floats': [0.5, -1e300], 'text': ['x', 'ü' * 300],\n"
                   "         'bytes': [b'y', b'z' * 300], 'array': bytearray(b'w' * 10),\n"
                   "         'more': (None, True, False, (1,), (1, 2), (1, 2, 3), {1, 2},\n"
                   "                  frozenset([3]), collections.OrderedDict(a=1)),\n"
                   "         'memo': [str(i) for i in range(300)], 'again': [shared, shared]}\n"
                   "for protocol in range(6):\n"
                   "    open(here + f'/p{protocol}.pkl', 'wb').write(pickle.dumps(value, "
                   "protocol=protocol))\n"
                   "torch.save({'teacher': {f'w{i}': torch.ones(i + 1) for i in range(300)}, "
                   "'epoch': 3}, here + '/t.pth')\n"
                   "z = zipfile.ZipFile(here + '/t.pth')\n"
                   "name = [n for n in z.namelist() if n.endswith('/data.pkl')][0]\n"
                   "open(here + '/torch.pkl', 'wb').write(z.read(name))\n"
                   "print('written')\n");
  const std::string py = run_python(d / "write.py");
  ASSERT_NE(py.find("written"), std::string::npos) << py;
  for (const char* name : {"p0.pkl", "p1.pkl", "p2.pkl", "p3.pkl", "p4.pkl", "p5.pkl", "torch.pkl"}) {
    const std::string bytes = file_bytes(d / name);
    ASSERT_GT(bytes.size(), 1000u) << name;
    EXPECT_NO_THROW(check_pickle_bounds(bytes.data(), bytes.size(), name)) << name;
    if (std::string(name) == "torch.pkl") continue;
    for (std::size_t cut = 0; cut < bytes.size(); ++cut) {
      try {
        check_pickle_bounds(bytes.data(), cut, name);
        ADD_FAILURE() << name << " cut to " << cut << " bytes passed";
        break;
      } catch (const DataError& e) {
        ASSERT_EQ(std::string(e.what()).rfind(std::string(name) + ": data.pkl", 0), 0u) << e.what();
      }
    }
  }
}

// A pickle whose opcodes claim what it does not hold (issue #73): LibTorch's unpickler allocates a
// string of the length a BINUNICODE claims, zeroed, before it reads it (4 GB for a damaged 100 KB
// checkpoint), and memo entries up to a LONG_BINPUT's index. Each is refused naming the file, the opcode and
// its byte, and nothing of the claim is allocated.
TEST(Checkpoint, APickleClaimingMoreThanItHoldsIsRefusedBeforeItIsAllocated) {
  test::TempDir d;
  const struct {
    const char* name;
    std::string pickle, says;
  } cases[] = {
      {"string.pth",
       std::string("\x80\x02}X\xf0\xff\xff\xff"
                   "epochK\x03s.",
                   16),
       "data.pkl, byte 3: BINUNICODE claims 4294967280 bytes, 8 remain"},
      {"memo.pth", std::string("\x80\x02}r\xff\xff\xff\x7f.", 9),
       "data.pkl, byte 3: LONG_BINPUT names memo entry 2147483647 in a pickle of 9 bytes"},
      {"unended.pth",
       std::string("\x80\x02}X\x05\x00\x00\x00"
                   "epochK\x03s",
                   15),
       "data.pkl ends after 15 bytes without its STOP opcode"},
  };
  for (const auto& c : cases) {
    const std::string path = d / c.name;
    {
      caffe2::serialize::PyTorchStreamWriter writer(path);
      writer.writeRecord("data.pkl", c.pickle.data(), c.pickle.size());
      writer.writeEndOfFile();
    }
    const test::PeakMemory peak;
    try {
      read_checkpoint_state(path);
      FAIL() << c.name << " was read";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(path + ": " + c.says), std::string::npos) << e.what();
    }
    EXPECT_LT(peak.grown_kib(), 16 * 1024) << c.name << ": the claim was allocated";
  }
}

// What a checkpoint of a ViT of width 24 and one block holds, its AdamW `steps` steps in: the structure of
// a real one whole (every key; after a step, the optimizer's moments in its archive) in about 100 KB, so
// that each damaged copy costs milliseconds, not the tiny model's 20 MB. Its weights are seeded: every save
// writes the same bytes.
struct SmallDino {
  static VitOptions vit() {
    VitOptions o = VitOptions::preset("vit_tiny", 4, 1, 12);
    o.depth = 1, o.embed_dim = 24, o.num_heads = 2;
    return o;
  }
  explicit SmallDino(int steps)
      : student((torch::manual_seed(73), VisionTransformer(vit())), DinoHead(24, 16, true, 32, 8)),
        teacher(VisionTransformer(vit()), DinoHead(24, 16, true, 32, 8)),
        opt(student->parameters(), torch::optim::AdamWOptions(1e-3)) {
    for (auto& p : student->parameters()) p.mutable_grad() = torch::ones_like(p);
    for (int i = 0; i < steps; ++i) opt.step();
  }
  void save(const std::string& path) { save_checkpoint(path, student, teacher, opt, loss, {}); }
  MultiCropWrapper student, teacher;
  torch::optim::AdamW opt;
  DinoLoss loss{16, 4, 0.04, 0.04, 0, 2};
};

// A damaged copy that crashed LibTorch 1.13's unpickler (SIGSEGV, copy 74,806 of a 200,000-copy run of the
// test below): one persistent id's dtype, a BINGET of torch.FloatStorage, became BININT1 164, which the
// unpickler casts to a ScalarType unchecked. Its pickle is kept in the pickle fuzzer's seeds and refused by
// the walk; the same damage to a fresh checkpoint's last persistent id is refused when the file is read.
TEST(Checkpoint, AStorageOfNoDtypeIsRefusedNotCastToOne) {
  const std::string kept =
      file_bytes(PCDINO_SOURCE_DIR "/train/fuzz/corpus/pickle/crash-persistent-id-of-no-storage-type.pkl");
  try {
    check_pickle_bounds(kept.data(), kept.size(), "kept.pth");
    FAIL() << "the kept pickle passed";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("kept.pth: data.pkl, byte 4530: BINPERSID has no ('storage', "),
              std::string::npos)
        << e.what();
  }
  test::TempDir d;
  SmallDino(0).save(d / "whole.pth");
  std::string bytes = file_bytes(d / "whole.pth");
  // MARK, BINGET of 'storage', BINGET of torch.FloatStorage, BINUNICODE the key: the last persistent id
  const std::string id("(h\x03h\x04X", 6);
  const std::size_t at = bytes.rfind(id);
  ASSERT_NE(at, std::string::npos) << "no persistent id of the expected form";
  bytes.replace(at + 3, 2, "K\xa4");
  test::write_text(d / "damaged.pth", bytes);
  try {
    read_checkpoint_state(d / "damaged.pth");
    FAIL() << "read";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(d / "damaged.pth" + ": data.pkl, byte "), std::string::npos)
        << e.what();
    EXPECT_NE(
        std::string(e.what()).find("BINPERSID has no ('storage', torch.<Type>Storage, key, location, size)"),
        std::string::npos)
        << e.what();
  }
}

// A checkpoint damaged in many ways (issue #73; the fuzzing tree has no LibTorch, so this is a seeded
// mutation test under the ordinary build; it found LibTorch's unpickler ending in std::out_of_range, a
// string where a tensor belongs ending in c10::Error, a 4 GB allocation and a crash, bench/RESULTS.md):
// bytes of its pickle overwritten, set to opcodes' edge values, inserted or deleted, bytes of the zip
// directory after it or of the optimizer's archive overwritten, the file cut short. Every damaged file is
// read as a resume and an extraction read it (read_checkpoint_state, read_state_dict, load_checkpoint):
// each either reads or is refused with pcdino's Error naming the file; no other exception, no crash, and
// the reader's peak memory bounded.
TEST(Checkpoint, DamagedCheckpointsAreEachReadOrRefusedNamingTheFile) {
  test::TempDir d;
  SmallDino m(1);
  m.save(d / "whole.pth");
  const std::string whole = file_bytes(d / "whole.pth"), pickle = pickle_of(d / "whole.pth");
  const std::size_t at = whole.find(pickle);
  ASSERT_NE(at, std::string::npos);
  // The optimizer's archive: the record that is itself a zip
  std::size_t archive_at = 0, archive_size = 0;
  {
    caffe2::serialize::PyTorchStreamReader reader(d / "whole.pth");
    for (const std::string& name : reader.getAllRecords()) {
      const auto [data, size] = reader.getRecord(name);
      if (size > 4 && std::memcmp(data.get(), "PK\x03\x04", 4) == 0)
        archive_at = reader.getRecordOffset(name), archive_size = size;
    }
  }
  ASSERT_GT(archive_size, 0u) << "no optimizer archive found";
  std::cout << "a checkpoint of " << whole.size() << " bytes, its pickle " << pickle.size()
            << ", its optimizer's archive " << archive_size << "\n";
  std::mt19937_64 rng(73);
  const auto below = [&](std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng); };
  const std::string path = d / "damaged.pth";
  std::size_t refused = 0, read = 0;
  const test::PeakMemory peak;
  // 2000 by default (~2 ms a copy here); longer runs: PCDINO_CHECKPOINT_MUTATIONS=N.
  const char* mutations = std::getenv("PCDINO_CHECKPOINT_MUTATIONS");
  const int kFiles = mutations != nullptr ? std::atoi(mutations) : 2000;
  for (int k = 0; k < kFiles; ++k) {
    std::string bytes = whole;
    const std::size_t kind = below(11);
    if (kind < 4) {  // 1-4 pickle bytes overwritten
      for (std::size_t n = 1 + below(4); n > 0; --n)
        bytes[at + below(pickle.size())] = static_cast<char>(below(256));
    } else if (kind < 6) {  // a pickle byte set to an edge value
      static constexpr char kEdges[] = {0, 1, '\x7f', '\x80', '\xff', 'q', 'X', 'K'};
      bytes[at + below(pickle.size())] = kEdges[below(sizeof kEdges)];
    } else if (kind < 7) {  // a pickle byte inserted or deleted: every offset after it moves
      const std::size_t i = at + below(pickle.size());
      if (below(2) == 0)
        bytes.insert(i, 1, static_cast<char>(below(256)));
      else
        bytes.erase(i, 1);
    } else if (kind < 8) {  // the zip directory after the pickle
      for (std::size_t n = 1 + below(4); n > 0; --n) {
        const std::size_t tail = bytes.size() - (at + pickle.size());
        bytes[at + pickle.size() + below(tail)] = static_cast<char>(below(256));
      }
    } else if (kind < 9) {  // 1-4 bytes of the optimizer's archive (a TorchScript zip of its own)
      for (std::size_t n = 1 + below(4); n > 0; --n)
        bytes[archive_at + below(archive_size)] = static_cast<char>(below(256));
    } else {  // cut short
      bytes.resize(below(bytes.size()));
    }
    {
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out << bytes;
    }
    try {
      read_checkpoint_state(path);
      read_state_dict(path, "teacher");
      load_checkpoint(path, m.student, m.teacher, m.opt, m.loss);
      ++read;
    } catch (const Error& e) {
      ++refused;
      ASSERT_NE(std::string(e.what()).find(path), std::string::npos)
          << "file " << k << " (kind " << kind << "): " << e.what();
    } catch (const std::exception& e) {
      FAIL() << "file " << k << " (kind " << kind << "): " << typeid(e).name() << ": " << e.what();
    }
  }
  std::cout << kFiles << " damaged copies: " << refused << " refused, " << read << " read\n";
  EXPECT_EQ(refused + read, static_cast<std::size_t>(kFiles));
  EXPECT_GT(refused, static_cast<std::size_t>(kFiles / 2)) << "the damage reached the reader";
  // A checkpoint of 107 KB: nothing it claims is allocated before it is known to hold it (a damaged
  // BINUNICODE length had the unpickler zero 4 GB)
  EXPECT_LT(peak.grown_kib(), 64 * 1024) << "peak RSS in KiB above the start's";
}

}  // namespace
}  // namespace pcdino::train
