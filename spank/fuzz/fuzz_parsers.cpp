// libFuzzer target for every parser that handles text from outside the plugin: the profile file, the
// plugstack.conf arguments, the users' option values, version conditions and Slurm host lists. Each may
// reject its input only with std::invalid_argument; anything else (another exception, a crash, a
// sanitizer report) is a bug. Built and run for a bounded time by tests/spank/test_fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "pcdino/spank/args.hpp"
#include "pcdino/spank/environment.hpp"
#include "pcdino/spank/profiles.hpp"

using namespace pcdino::spank;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const ProfileConfig config = parse_profiles(text, "fuzz.yaml");
    const std::map<std::string, Version> versions = {{"kernel", Version::parse("5.15")},
                                                     {"aws-ofi-nccl", Version::parse("1.7.4")}};
    TaskInfo task;
    task.local_rank = 3;
    task.visible_devices = "0,1,,2";
    task.step_nodelist = "n[1-2]";
    for (const auto& [name, profile] : config.profiles) task_environment(task, &profile, versions, true, {});
  } catch (const std::invalid_argument&) {
  }
  std::vector<std::string> args;
  std::istringstream words(text);
  for (std::string w; words >> w;) args.push_back(w);
  try {
    parse_plugin_args(args);
  } catch (const std::invalid_argument&) {
  }
  const std::string cstr = text.substr(0, text.find('\0'));
  try {
    parse_profile_option(cstr.c_str());
  } catch (const std::invalid_argument&) {
  }
  try {
    parse_bind_option(cstr.c_str());
  } catch (const std::invalid_argument&) {
  }
  try {
    Condition::parse(text).holds({{"x", Version::parse("1")}});
  } catch (const std::invalid_argument&) {
  }
  try {
    first_host(text);
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
