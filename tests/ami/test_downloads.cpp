// Every download of every image recipe pinned (issue #70): by sha256, by commit, or by a signing key's
// fingerprint; a version without a pin refused.
#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <utility>

#include "examples.hpp"
#include "pcdino/ami/accelerators.hpp"
#include "pcdino/ami/compat.hpp"
#include "pcdino/ami/downloads.hpp"
#include "pcdino/ami/neuron.hpp"
#include "pcdino/ami/packer.hpp"
#include "pcdino/ami/source_build.hpp"
#include "pcdino/ami/spec.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/parallelcluster.hpp"

namespace pcdino::ami {
namespace {

using test::all_messages;
using test::example;

// Issue #70: every download of every script is pinned. unpinned_fetches() reads a provisioning script line by
// line, as a reviewer would: each line that names a URL must fetch something that a later line checks (a
// file's sha256, a git clone's commit, a signing key's fingerprint), or be a package repository trusted only
// through a key checked so. Comments are skipped. Returns one line per fetch that is not.
std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

bool later_line(const std::vector<std::string>& lines, std::size_t from, const std::regex& pattern) {
  for (std::size_t j = from + 1; j < lines.size(); ++j)
    if (std::regex_search(lines[j], pattern)) return true;
  return false;
}

std::string regex_escaped(const std::string& text) {
  static const std::regex special(R"([.^$|()\[\]{}*+?\\])");
  return std::regex_replace(text, special, R"(\$&)");
}

std::vector<std::string> unpinned_fetches(const std::string& script, std::size_t* fetches = nullptr) {
  const std::vector<std::string> lines = split_lines(script);
  static const std::regex url(R"((https?|git|ftp)://)");
  static const std::regex clone(R"(git clone .*\s(\S+)\s*$)");
  static const std::regex download(R"(\b(wget|curl)\b.*\s-[oO]\s*(\S+))");
  static const std::regex fingerprint_check(R"(\[ "\$fpr" = [0-9A-F]{40} \])");
  static const std::regex signed_by(R"(deb \[([^\]]*\s)?signed-by=([^\]\s]+)[^\]]*\] )");
  std::vector<std::string> unpinned;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    const auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#' || !std::regex_search(line, url)) continue;
    if (fetches != nullptr) ++*fetches;
    std::smatch m;
    bool pinned = false;
    if (std::regex_search(line, m, clone)) {
      // git clone ... DIR, then [ "$(git -C DIR rev-parse HEAD)" = <commit> ]
      pinned = later_line(
          lines, i,
          std::regex("git -C " + regex_escaped(m[1]) + R"re( rev-parse HEAD\)" = [0-9a-f]{40} \])re"));
    } else if (std::regex_search(line, m, download)) {
      // The file's name, as a shell word ("$key" and $key are one).
      std::string name = m[2].str();
      if (name.size() > 1 && name.front() == '"' && name.back() == '"')
        name = name.substr(1, name.size() - 2);
      const std::string file = "\"?" + regex_escaped(name) + "\"?";
      // The file's sha256, or a key file imported and its fingerprint checked.
      pinned =
          later_line(lines, i, std::regex("echo \"[0-9a-f]{64}  " + file + "\" \\| sha256sum -c")) ||
          (later_line(lines, i, std::regex("--import " + file)) && later_line(lines, i, fingerprint_check));
    } else if (std::regex_search(line, m, signed_by)) {
      // An apt source trusted through a keyring exported from a checked key.
      pinned = std::regex_search(script, fingerprint_check) &&
               std::regex_search(script, std::regex("--export [0-9A-F]{40} >" + regex_escaped(m[2].str())));
    } else if (line.rfind("baseurl=", first) == first) {
      // A yum repository: signed packages, the key file exported from a checked key.
      std::smatch key;
      pinned =
          script.find("\ngpgcheck=1\n") != std::string::npos &&
          std::regex_search(script, key, std::regex(R"(\ngpgkey=file://(\S+)\n)")) &&
          std::regex_search(script, fingerprint_check) &&
          std::regex_search(script, std::regex("--armor --export [0-9A-F]{40} >" + regex_escaped(key[1])));
    }
    if (!pinned) unpinned.push_back(std::to_string(i + 1) + ": " + line);
  }
  return unpinned;
}

// The scanner itself: what it must refuse, and what it must accept.
TEST(AmiDownloads, TheScanFindsEveryUnpinnedFetch) {
  const std::string sha(64, 'a'), commit(40, 'b'), fpr(40, 'C');
  EXPECT_EQ(unpinned_fetches("# a comment naming https://example.com/x.run\n").size(), 0u);
  EXPECT_EQ(unpinned_fetches("wget -q -O /tmp/x.run \"https://example.com/x.run\"\nsh /tmp/x.run\n").size(),
            1u);
  EXPECT_EQ(unpinned_fetches("wget -q -O /tmp/x.run \"https://example.com/x.run\"\necho \"" + sha +
                             "  /tmp/x.run\" | sha256sum -c --quiet - || fail x\n")
                .size(),
            0u);
  EXPECT_EQ(unpinned_fetches("wget -q -O /tmp/x.run \"https://example.com/x.run\"\necho \"" + sha +
                             "  /tmp/other\" | sha256sum -c --quiet -\n")
                .size(),
            1u)
      << "the check is of another file";
  EXPECT_EQ(unpinned_fetches("curl -fsSL -o x.tgz https://example.com/x.tgz\n").size(), 1u);
  EXPECT_EQ(unpinned_fetches("git clone -q --depth 1 --branch v1 https://github.com/a/b.git /tmp/b\n").size(),
            1u);
  EXPECT_EQ(
      unpinned_fetches("git clone -q --branch v1 https://github.com/a/b.git /tmp/b\n[ \"$(git -C /tmp/b "
                       "rev-parse HEAD)\" = " +
                       commit + " ] || fail moved\n")
          .size(),
      0u);
  EXPECT_EQ(unpinned_fetches("curl -fsSL https://example.com/key | gpg --dearmor -o /k.gpg\n").size(), 1u);
  EXPECT_EQ(unpinned_fetches("rpm --import https://example.com/KEY.PUB\n").size(), 1u);
  EXPECT_EQ(unpinned_fetches("yum install -y -q \"https://example.com/x.rpm\"\n").size(), 1u);
  EXPECT_EQ(
      unpinned_fetches("echo \"deb [signed-by=/k.gpg] https://example.com/apt main\" >/etc/apt/x.list\n")
          .size(),
      1u)
      << "a keyring nobody checked";
  const std::string key =
      "key=$(mktemp)\nwget -q -O \"$key\" \"https://example.com/k.pub\"\n"
      "gpg --homedir \"$g\" --batch --quiet --import \"$key\"\n[ \"$fpr\" = " +
      fpr + " ] || fail key\ngpg --homedir \"$g\" --batch --export " + fpr + " >/k.gpg\n";
  EXPECT_EQ(unpinned_fetches(key + "echo \"deb [signed-by=/k.gpg] https://example.com/apt main\" >/x.list\n")
                .size(),
            0u);
}

// Changes one version of `spec`, or erases it ("").
ImageSpec with_version(ImageSpec spec, const std::string& component, const std::string& version) {
  if (version.empty()) {
    spec.versions.erase(component);
  } else {
    spec.versions[component] = version;
  }
  return spec;
}

// Every example, on every OS pcdino builds on, built from source and from a package, and with each pinned
// version of each component it fetches: whatever check_compatibility() lets through is generated and every
// script scanned.
TEST(AmiDownloads, EveryDownloadOfEveryRecipeIsPinned) {
  std::vector<ImageSpec> specs;
  for (const char* name : {"workshop.yaml", "current.yaml", "p5-3.11.yaml", "trn1.yaml", "dl1.yaml"}) {
    for (const char* os : {"", "ubuntu2204", "alinux2", "alinux2023"}) {
      for (const bool package : {false, true}) {
        ImageSpec s = example(name);
        if (*os != '\0') s.os = os;
        if (package) {
          s.pcdino_from = "package";
          s.versions.erase("libtorch");
        }
        if (s.os != "ubuntu2204") s.versions.erase("node_exporter");
        specs.push_back(s);
        for (const auto& row : pinned_downloads())
          if (s.versions.count(row.component) != 0)
            specs.push_back(with_version(s, row.component, row.version));
        // Without the versions that are pinned only where wanted.
        specs.push_back(with_version(with_version(s, "fabric_manager", ""), "dcgm_exporter", ""));
      }
    }
  }
  std::size_t generated = 0, fetches = 0;
  std::set<std::string> components, digests;
  for (const ImageSpec& spec : specs) {
    std::vector<GeneratedFile> files;
    try {
      files = generate_image(spec);
    } catch (const ConfigError&) {
      continue;  // refused: nothing is generated
    }
    ++generated;
    for (const auto& f : files) {
      if (f.path.rfind("scripts/", 0) != 0) continue;
      for (const std::string& line : unpinned_fetches(f.content, &fetches))
        ADD_FAILURE() << spec.os << " " << f.path << " fetches without a pin, line " << line;
      for (const auto& row : pinned_downloads()) {
        if (f.content.find(row.digest) == std::string::npos) continue;
        components.insert(row.component);
        digests.insert(row.digest);
      }
    }
  }
  EXPECT_GE(generated, 100u);
  EXPECT_GE(fetches, 1000u);
  std::cout << generated << " images generated, " << fetches << " fetches checked, " << digests.size()
            << " of " << pinned_downloads().size() << " pinned rows used\n";
  // Each component's recipe was generated with a fetch, and most of the rows were used.
  for (const char* c : {"nvidia_driver", "cuda", "cudnn", "efa_installer", "nccl", "aws_ofi_nccl",
                        "nccl_tests", "pyxis", "enroot"})
    EXPECT_EQ(components.count(c), 1u) << c << " was never fetched in any generated script";
  EXPECT_GE(digests.size(), pinned_downloads().size() / 2) << "rows exercised";
}

// The table's rows are what their recipes need: a file's sha256 and its https URL, a tag's commit, a key's
// fingerprint, and each with its source.
TEST(AmiDownloads, EveryRowHasItsDigestAndSource) {
  const std::regex sha256("[0-9a-f]{64}"), commit("[0-9a-f]{40}"), fingerprint("[0-9A-F]{40}");
  std::set<std::string> seen;
  for (const auto& row : pinned_downloads()) {
    const std::string what = std::string(row.component) + " " + row.version + " " + row.variant;
    EXPECT_TRUE(seen.insert(what).second) << "twice: " << what;
    EXPECT_NE(std::string(row.source), "") << what;
    if (*row.tag == '\0') {
      EXPECT_TRUE(std::regex_match(row.digest, sha256)) << what;
      EXPECT_EQ(std::string(row.url).rfind("https://", 0), 0u) << what;
      EXPECT_NE(std::string(row.url).find(row.version), std::string::npos) << what;
    } else {
      EXPECT_TRUE(std::regex_match(row.digest, commit)) << what;
      EXPECT_EQ(std::string(row.url).rfind("https://github.com/", 0), 0u) << what;
    }
    // A CUDA runfile's name carries the driver compat.cpp's table gives it.
    if (std::string(row.component) == "cuda") {
      EXPECT_NE(std::string(row.url).find("cuda_" + std::string(row.version) + "_" +
                                          cuda_runfile_driver(row.version) + "_linux.run"),
                std::string::npos)
          << row.url;
    }
  }
  for (const auto& key : signing_keys())
    EXPECT_TRUE(*key.fingerprint == '\0' || std::regex_match(key.fingerprint, fingerprint)) << key.name;
}

// A version without a pin is refused before anything is generated, unless the base AMI ships it; a repository
// whose key has no recorded fingerprint is refused.
TEST(AmiDownloads, UnpinnedVersionsAreRefusedUnlessTheAmiShipsThem) {
  ImageSpec s = example("workshop.yaml");
  s.versions["efa_installer"] = "1.19.0";
  std::string m = all_messages(s);
  EXPECT_NE(m.find("versions.efa_installer 1.19.0 and its download do not work together: no pinned download "
                   "with a recorded sha256 or commit (known: 1.21.0, "),
            std::string::npos)
      << m;
  EXPECT_THROW(generate_image(s), ConfigError);
  s = example("current.yaml");
  s.versions["cuda"] = "13.2.1";
  EXPECT_NE(all_messages(s).find("versions.cuda 13.2.1 and its download"), std::string::npos)
      << all_messages(s);
  s = example("p5-3.11.yaml");
  s.versions["nccl_tests"] = "2.13.7";  // a tag the table does not hold
  EXPECT_NE(all_messages(s).find("versions.nccl_tests 2.13.7 and its download"), std::string::npos);
  // 3.11.1's AMI ships EFA installer 1.34.0 and Pyxis 0.20.0, 3.16.3's the driver 595.112.07 and EFA 1.51.0:
  // checked on the node, fetched from nowhere.
  s = example("p5-3.11.yaml");
  s.versions["efa_installer"] = "1.34.0";
  EXPECT_EQ(all_messages(s), "");
  s = example("current.yaml");
  ASSERT_EQ(pinned_download("efa_installer", s.versions.at("efa_installer")), nullptr);
  ASSERT_EQ(pinned_download("nvidia_driver", s.versions.at("nvidia_driver")), nullptr);
  EXPECT_EQ(all_messages(s), "");
  std::map<std::string, std::string> current;
  for (const auto& f : generate_image(s)) current[f.path] = f.content;
  EXPECT_NE(current.at("scripts/10-nvidia-driver.sh").find("AMI ships NVIDIA driver $VERSION"),
            std::string::npos);
  EXPECT_EQ(current.at("scripts/10-nvidia-driver.sh").find("wget"), std::string::npos);
  // On another base the same versions need a pin.
  s.base_ami = "ami-0123456789abcdef0";
  m = all_messages(s);
  EXPECT_NE(m.find("versions.nvidia_driver 595.112.07 and its download"), std::string::npos) << m;
  EXPECT_NE(m.find("versions.efa_installer 1.51.0 and its download"), std::string::npos) << m;
  // NVIDIA's rpm key and Intel's have no published fingerprint: Fabric Manager on Amazon Linux and Gaudi
  // images are refused, naming the key.
  s = example("p5-3.11.yaml");
  s.os = "alinux2023";
  m = all_messages(s);
  EXPECT_NE(m.find("versions.fabric_manager 550.127.05 and its package repository on alinux2023 do not work "
                   "together: no fingerprint of the nvidia-cuda-rpm signing key is recorded"),
            std::string::npos)
      << m;
  EXPECT_NE(all_messages(example("dl1.yaml"))
                .find("versions.gaudi_software 1.21.0-555 and its package "
                      "repository on ubuntu2204"),
            std::string::npos);
}

}  // namespace
}  // namespace pcdino::ami
