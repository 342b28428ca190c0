#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "../lib/temp_dir.hpp"
#include "pcdino/spank/profiles.hpp"
#include "pcdino/spank/versions.hpp"

namespace pcdino::spank {
namespace {

std::string error_of(const std::string& yaml) {
  try {
    parse_profiles(yaml, "accel.yaml");
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Version, ComparesNumerically) {
  EXPECT_GT(Version::parse("1.18").compare(Version::parse("1.7")), 0);
  EXPECT_EQ(Version::parse("1.7").compare(Version::parse("1.7.0")), 0);
  EXPECT_LT(Version::parse("5.10.0-1051-aws").compare(Version::parse("5.15")), 0);
  EXPECT_EQ(Version::parse("5.15.0-1051-aws").str(), "5.15.0");
  EXPECT_THROW(Version::parse("v1.2"), std::invalid_argument);
  EXPECT_THROW(Version::parse("99999999999"), std::invalid_argument);
}

TEST(Condition, ParsesAndEvaluates) {
  const std::map<std::string, Version> v = {{"libfabric", Version::parse("1.18.1")},
                                            {"aws-ofi-nccl", Version::parse("1.5.0")}};
  EXPECT_TRUE(Condition::parse("libfabric >= 1.18").holds(v));
  EXPECT_FALSE(Condition::parse("libfabric<1.18").holds(v));
  EXPECT_TRUE(Condition::parse("aws-ofi-nccl <= 1.5").holds(v));
  EXPECT_TRUE(Condition::parse("aws-ofi-nccl == 1.5").holds(v));
  EXPECT_FALSE(Condition::parse("aws-ofi-nccl != 1.5.0").holds(v));
  EXPECT_FALSE(Condition::parse("nccl >= 2.0").holds(v)) << "unknown component: condition does not hold";
  EXPECT_THROW(Condition::parse("libfabric 1.18"), std::invalid_argument);
  EXPECT_THROW(Condition::parse(">= 1.18"), std::invalid_argument);
  EXPECT_THROW(Condition::parse("lib$(reboot) >= 1"), std::invalid_argument);
}

// What the node reports wins over the image manifest (pcdino ami writes libfabric from its table); the
// manifest adds what the node cannot report; an entry with no version is skipped, not the whole file.
TEST(Versions, TheNodeWinsAndTheManifestAddsTheRest) {
  test::TempDir d;
  test::write_text(d / "manifest.json", R"({"components": {"aws-ofi-nccl": "1.7.4", "libfabric": "0.1",
      "openmpi": "from efa_installer 1.36.0"}})");
  std::vector<std::string> notes;
  const auto v = detect_versions(d / "manifest.json", {{"nccl", Version::parse("2.99")}}, &notes);
  EXPECT_TRUE(notes.empty()) << notes.front();
  EXPECT_EQ(v.at("aws-ofi-nccl").str(), "1.7.4");
  ASSERT_EQ(v.count("libfabric"), 1U);
  EXPECT_EQ(v.at("libfabric").str(), node_versions().at("libfabric").str())
      << "fi_version(), not the manifest";
  EXPECT_EQ(v.count("openmpi"), 0U);
  EXPECT_EQ(v.at("nccl").str(), "2.99") << "pinned versions win";
}

TEST(Profiles, ExampleFileParsesWithEveryVariableSourced) {
  std::ifstream in(std::string(PCDINO_SOURCE_DIR) + "/spank/examples/accel-profiles.yaml");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  const ProfileConfig c = parse_profiles(text, "accel-profiles.yaml");
  for (const char* name : {"nvidia-efa", "nvidia-efa-fork", "nvidia", "habana", "neuron", "cpu"}) {
    ASSERT_EQ(c.profiles.count(name), 1u) << name;
    for (const auto& e : c.profiles.at(name).env) EXPECT_FALSE(e.source.empty()) << name << " " << e.name;
  }
  EXPECT_EQ(c.profiles.at("habana").devices, pcdino::accelerator_kind("habana"));
  EXPECT_EQ(c.profiles.at("neuron").devices, pcdino::accelerator_kind("neuron"));
  // The fuzzer's seed is this file.
  std::ifstream seed(std::string(PCDINO_SOURCE_DIR) + "/spank/fuzz/corpus/profiles-example.yaml");
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(seed)), {}), text);
  // The rank-0 addresses of HCCL and the Neuron runtime are the plugin's, never a profile's.
  for (const char* managed : {"HCCL_COMM_ID", "NEURON_RT_ROOT_COMM_ID", "NEURON_RT_VISIBLE_CORES"})
    EXPECT_NE(forbidden_variable(managed), "") << managed;
  // EFA guidance by version: old stack gets FI_PROVIDER and NCCL_PROTO, a new one does not.
  const Profile& efa = c.profiles.at("nvidia-efa");
  auto applied = [&](const std::map<std::string, Version>& v) {
    std::set<std::string> names;
    for (const auto& e : efa.env) {
      if (e.applies(v)) names.insert(e.name);
    }
    return names;
  };
  const auto old_stack = applied({{"aws-ofi-nccl", Version::parse("1.5.0")},
                                  {"libfabric", Version::parse("1.16")},
                                  {"kernel", Version::parse("5.10.0")}});
  EXPECT_EQ(old_stack, (std::set<std::string>{"FI_PROVIDER", "NCCL_PROTO", "FI_EFA_USE_DEVICE_RDMA",
                                              "FI_EFA_FORK_SAFE", "NCCL_SOCKET_IFNAME"}));
  const auto new_stack = applied({{"aws-ofi-nccl", Version::parse("1.7.4")},
                                  {"libfabric", Version::parse("1.19")},
                                  {"kernel", Version::parse("6.1.0")}});
  EXPECT_EQ(new_stack, (std::set<std::string>{"NCCL_SOCKET_IFNAME"}));
}

TEST(Profiles, RefusesWhatAProfileMustNotSet) {
  const auto with_var = [](const std::string& name) {
    return "profiles:\n  p:\n    env:\n      - name: " + name + "\n        value: x\n";
  };
  EXPECT_NE(error_of(with_var("LD_PRELOAD")).find("accel.yaml:4:15: variable 'LD_PRELOAD'"),
            std::string::npos)
      << error_of(with_var("LD_PRELOAD"));
  EXPECT_NE(error_of(with_var("LD_LIBRARY_PATH")).find("loaded"), std::string::npos);
  EXPECT_NE(error_of(with_var("RDMAV_FORK_SAFE")).find("never to set RDMAV_"), std::string::npos);
  EXPECT_NE(error_of(with_var("1ABC")).find("not a variable name"), std::string::npos);
  EXPECT_NE(error_of(with_var("\"A-B\"")).find("not a variable name"), std::string::npos);
  EXPECT_NE(error_of(with_var("\"A=B\"")).find("not a variable name"), std::string::npos);
  EXPECT_EQ(error_of(with_var("OMPI_MCA_btl")), "(no error)");
  EXPECT_NE(error_of(with_var("SLURM_JOB_ID")).find("Slurm"), std::string::npos);
  EXPECT_NE(error_of(with_var(std::string(200, 'A'))).find("longer than"), std::string::npos);
  EXPECT_EQ(error_of(with_var("NCCL_DEBUG")), "(no error)");
  for (const char* managed : {"RANK", "MASTER_PORT", "OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES"}) {
    EXPECT_NE(error_of(with_var(managed)).find("set by the plugin itself"), std::string::npos) << managed;
  }
}

TEST(Profiles, RefusesMalformedFilesNamingLineAndColumn) {
  EXPECT_NE(error_of("profiles:\n  p:\n    devices: tpu\n").find("accel.yaml:3:14: profiles.p.devices"),
            std::string::npos);
  EXPECT_NE(error_of("profiles:\n  p:\n    colour: red\n").find("unknown key 'colour'"), std::string::npos);
  EXPECT_NE(error_of("profiles:\n  Bad Name: {}\n").find("profile name 'Bad Name'"), std::string::npos);
  EXPECT_NE(error_of("profiles:\n  none: {}\n").find("not 'none'"), std::string::npos);
  EXPECT_NE(
      error_of("profiles:\n  p:\n    env:\n      - name: A\n        value: b\n        when: [\"x ~ 1\"]\n")
          .find("no operator"),
      std::string::npos);
  EXPECT_NE(error_of("profiles: [").find("YAML syntax error"), std::string::npos);
  EXPECT_NE(error_of("other: 1\n").find("unknown key 'other'"), std::string::npos);
  EXPECT_NE(error_of("versions: {nccl: abc}\nprofiles: {p: {}}\n").find("versions.nccl"), std::string::npos);
  std::string many = "profiles:\n";
  for (int i = 0; i < 65; ++i) many += "  p" + std::to_string(i) + ": {}\n";
  EXPECT_NE(error_of(many).find("more than 64 profiles"), std::string::npos);
}

TEST(Profiles, LoadRefusesFilesOthersCanWrite) {
  test::TempDir d;
  const std::string path = d / "accel.yaml";
  test::write_text(path, "profiles:\n  p: {}\n");
  chmod(path.c_str(), 0644);
  const bool root = geteuid() == 0;
  EXPECT_EQ(load_profiles(path, root).profiles.count("p"), 1u);
  chmod(path.c_str(), 0666);
  try {
    load_profiles(path, root);
    FAIL() << "world-writable file accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("writable by group or others (mode 666)"), std::string::npos)
        << e.what();
  }
  chmod(path.c_str(), 0620);
  EXPECT_THROW(load_profiles(path, root), std::runtime_error);
  EXPECT_THROW(load_profiles(d / "missing.yaml", root), std::runtime_error);
  EXPECT_THROW(load_profiles(d.path().string(), root), std::runtime_error);  // a directory
  const std::string fifo = d / "fifo.yaml";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  EXPECT_THROW(load_profiles(fifo, root), std::runtime_error) << "a FIFO is refused without blocking";
}

}  // namespace
}  // namespace pcdino::spank
