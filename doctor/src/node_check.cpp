#include "pcdino/doctor/node_check.hpp"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "pcdino/cluster/catalogue.hpp"
#include "pcdino/core/accelerator.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/fs.hpp"
#include "pcdino/core/process.hpp"
#include "pcdino/core/slurm_features.hpp"
#include "pcdino/doctor/gpu_health.hpp"
#include "vendor_tools.hpp"

namespace pcdino::doctor {

namespace {

std::string timed_out(double seconds) {
  return fmt::format("did not finish within {:g} s", seconds);
}

double since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// mountinfo escapes blanks and backslashes in paths as octal (\040): proc(5).
std::string unescape_mount_path(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1]))) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 3), nullptr, 8));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

// --- the probes
// ----------------------------------------------------------------------------------------------

Check shared_dir_failure(const std::string& error, int error_number) {
  if (!filesystem_wide_error(error_number)) return {"shared_fs", false, error};
  return {"shared_fs", false, error + " (the filesystem's state, the same on every node: not drained)",
          Severity::kWarn};
}

Check check_shared_dir(const std::string& dir, std::size_t bytes, double min_write_mb_s, double min_read_mb_s,
                       double seconds, std::pair<double, double>* rates) {
  const auto fs = within<FilesystemProbe>(seconds, [dir, bytes] { return probe_filesystem(dir, bytes); });
  if (!fs) return {"shared_fs", false, dir + ": " + timed_out(seconds)};
  if (!fs->writable) return shared_dir_failure(fs->error, fs->error_number);
  if (rates != nullptr) *rates = {fs->write_mb_s, fs->read_mb_s};
  const bool fast = fs->write_mb_s >= min_write_mb_s && fs->read_mb_s >= min_read_mb_s;
  return {"shared_fs", fast,
          fmt::format("{}: write {:.0f} MB/s, read {:.0f} MB/s{}", dir, fs->write_mb_s, fs->read_mb_s,
                      fast ? "" : fmt::format(" (floors {:g}/{:g} MB/s)", min_write_mb_s, min_read_mb_s))};
}

std::string filesystem_probe_json(const FilesystemProbe& probe) {
  return nlohmann::json{{"exists", probe.exists},         {"writable", probe.writable},
                        {"write_mb_s", probe.write_mb_s}, {"read_mb_s", probe.read_mb_s},
                        {"error", probe.error},           {"errno", probe.error_number}}
      .dump();
}

Check check_shared_dir_in_child(const std::string& dir, std::size_t bytes, double seconds,
                                const std::string& prober) {
  ProcessResult r;
  try {
    r = run_process({prober, "node-check", "--probe-filesystem", dir, "--probe-bytes", std::to_string(bytes)},
                    "", seconds);
  } catch (const std::exception& e) {
    return {"shared_fs", false, dir + ": " + e.what()};
  }
  if (r.timed_out) return {"shared_fs", false, dir + ": " + timed_out(seconds)};
  const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  if (r.exit_code != 0 || !j.is_object())
    return {"shared_fs", false, fmt::format("{}: the probe exited {}: {}", dir, r.exit_code, trim(r.err))};
  if (!j.value("writable", false))
    return shared_dir_failure(j.value("error", dir + ": not writable"), j.value("errno", 0));
  return {"shared_fs", true,
          fmt::format("{}: write {:.0f} MB/s, read {:.0f} MB/s", dir, j.value("write_mb_s", 0.0),
                      j.value("read_mb_s", 0.0))};
}

Check check_mount(const SharedStorage& storage, const std::string& mountinfo) {
  // "36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root rw,errors=continue": the mount point
  // is the fifth field, the filesystem type the first after " - " (proc(5)). The last mount of a point is
  // the one on top.
  std::ifstream in(mountinfo);
  if (!in) return {"shared_fs", false, "cannot read " + mountinfo};
  std::string type, containing_point, containing_type;
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    std::string id, parent, device, root, point;
    f >> id >> parent >> device >> root >> point;
    point = unescape_mount_path(point);
    const auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream after(line.substr(dash + 3));
    std::string fs_type;
    after >> fs_type;
    if (point == storage.mount_dir) type = fs_type;
    const bool contains = storage.mount_dir.rfind(point == "/" ? "/" : point + "/", 0) == 0;
    if (contains && point.size() >= containing_point.size())
      containing_point = point, containing_type = fs_type;
  }
  const std::string& dir = storage.mount_dir;
  if (type.empty()) {
    return {
        "shared_fs", false,
        fmt::format("{}: not mounted (a directory of the {} filesystem at {}: jobs would write to the node's "
                    "own disk)",
                    dir, containing_type.empty() ? "?" : containing_type,
                    containing_point.empty() ? "?" : containing_point)};
  }
  for (const auto& row : storage_filesystems()) {
    if (storage.storage_type != row.storage_type) continue;
    if (std::find(row.filesystems.begin(), row.filesystems.end(), type) == row.filesystems.end())
      return {"shared_fs", false,
              fmt::format("{}: mounted as {}, not as {} ({})", dir, type, storage.storage_type,
                          join(row.filesystems, " or "))};
  }
  return {"shared_fs", true, dir + ": mounted (" + type + ")"};
}

Check check_scratch(const std::string& dir, double min_gib) {
  const auto free = free_bytes(dir);
  if (!free) return {"scratch", false, dir + ": cannot be examined"};
  const double gib = static_cast<double>(*free) / (1024.0 * 1024.0 * 1024.0);
  return {"scratch", gib >= min_gib, fmt::format("{}: {:.1f} GiB free (needs {:g})", dir, gib, min_gib)};
}

Check check_slurm_view(const std::string& node, double seconds, SlurmNodeView* view) {
  const HostResources host = host_resources();
  const ProcessResult shown =
      run_process({"scontrol", "show", "node", "-o", node}, "Slurm's client commands", seconds);
  if (shown.timed_out || shown.exit_code != 0) {
    return {kSlurmViewProbe.name, false,
            "scontrol show node " + node + ": " +
                (shown.timed_out ? timed_out(seconds) : shown.err.substr(0, shown.err.find('\n')))};
  }
  const SlurmNodeView slurm = parse_scontrol_node(shown.out);
  if (view != nullptr) *view = slurm;
  const std::string type = instance_type_feature(slurm.features);
  std::vector<std::string> wrong;
  if (slurm.cpus > host.cpus)
    wrong.push_back(fmt::format("Slurm has {} CPUs, the node {}", slurm.cpus, host.cpus));
  if (slurm.real_memory_mib > host.memory_mib)
    wrong.push_back(fmt::format("Slurm has {} MiB, the node {}", slurm.real_memory_mib, host.memory_mib));
  if (slurm.gpus != host.gpus)
    wrong.push_back(fmt::format("Slurm's gres has {} GPUs, the node shows {}", slurm.gpus, host.gpus));
  if (!wrong.empty()) return {kSlurmViewProbe.name, false, join(wrong, "; ")};
  return {kSlurmViewProbe.name, true,
          fmt::format("{} CPUs, {} MiB, {} GPUs{}", host.cpus, host.memory_mib, host.gpus,
                      type.empty() ? "" : ", " + type)};
}

Check check_providers(const std::vector<std::string>& expected, double seconds) {
  const auto providers = within<std::vector<std::string>>(seconds, [] { return fabric_providers(); });
  if (!providers) return {"libfabric", false, "fi_getinfo " + timed_out(seconds)};
  std::vector<std::string> missing;
  for (const auto& p : expected)
    if (std::find(providers->begin(), providers->end(), p) == providers->end()) missing.push_back(p);
  return {"libfabric", missing.empty(),
          (missing.empty() ? "" : "no " + join(missing) + " among ") + join(*providers)};
}

Check check_efa(int expected, double seconds) {
  if (expected <= 0) return {"efa", true, "no EFA expected"};
  const auto devices = within<std::vector<std::string>>(seconds, [] { return efa_devices(); });
  if (!devices) return {"efa", false, "fi_getinfo " + timed_out(seconds)};
  if (!devices->empty() && devices->front().rfind("error: ", 0) == 0)
    return {"efa", false,
            fmt::format("no EFA device of the {} expected ({})", expected, devices->front().substr(7))};
  const int seen = static_cast<int>(devices->size());
  return {"efa", seen >= expected,
          fmt::format("{} of {} EFA devices{}", seen, expected, seen > 0 ? " (" + join(*devices) + ")" : "")};
}

Check check_image(const std::string& manifest, double seconds) {
  std::error_code error;
  if (!std::filesystem::exists(manifest, error))
    return {"image", true, "no " + manifest + ": versions not checked"};
  try {
    const auto compared = within<ManifestComparison>(seconds, [manifest] {
      // A node without NVIDIA devices is not judged on the GPU stack (Slurm's gres check finds missing GPUs).
      return compare_manifest(read_file(manifest, "image manifest"), manifest, image_versions(),
                              host_resources().gpus > 0);
    });
    if (!compared) return {"image", false, "reading the versions " + timed_out(seconds)};
    const std::string image = compared->image.empty() ? manifest : compared->image;
    if (!compared->mismatched.empty())
      return {"image", false, image + ": " + join(compared->mismatched, "; ")};
    return {"image", true, image + ": " + join(compared->matched)};
  } catch (const std::exception& e) {  // an unreadable or malformed manifest
    return {"image", false, e.what()};
  }
}

int expected_efa_devices(const std::string& instance_type, const std::vector<std::string>& features) {
  if (std::find(features.begin(), features.end(), "efa") == features.end()) return 0;
  const cluster::InstanceType* t = cluster::find_instance(instance_type);
  return t != nullptr && t->efa ? t->max_efa_interfaces : 0;
}

int expected_gpus(const SlurmNodeView& view) {
  if (view.gpus > 0) return view.gpus;
  // ParallelCluster tags a compute resource of GPU instances "gpu" (its slurm templates' feature_property).
  if (std::find(view.features.begin(), view.features.end(), "gpu") == view.features.end()) return 0;
  const cluster::InstanceType* t = cluster::find_instance(instance_type_feature(view.features));
  // The catalogue counts other vendors' accelerators too: only an NVIDIA model is a GPU here.
  return t != nullptr && t->gpus > 0 && accelerator_of_device(t->gpu_model) == nullptr ? t->gpus : 0;
}

// --- the node check's rows
// -----------------------------------------------------------------------------------

namespace {

// Level 1 takes seconds (DCGM's dcgmi diag reference): three times the others' limit, within half the
// check's (30 s of Slurm's 60 for a HealthCheckProgram). A slow host engine only warns.
double dcgm_limit(const NodeCheckSite& site) {
  return std::max(1.0, std::min(3.0 * site.probe_seconds, site.limit.seconds / 2));
}

bool has_nvidia(const NodeFacts& f) {
  return f.nvidia_device_files > 0 || f.nvidia_smi || (f.slurm && expected_gpus(*f.slurm) > 0);
}

// Each storage's mount first (no I/O on it), then their files written and read side by side, each within
// probe_seconds: a hung /fsx does not keep /apps from being checked.
std::vector<Check> run_shared_fs(const NodeCheckSite& site, const NodeFacts& f) {
  std::vector<Check> checks(site.shared_storage.size());
  std::vector<std::pair<std::size_t, std::future<Check>>> io;
  for (std::size_t i = 0; i < site.shared_storage.size(); ++i) {
    const SharedStorage& storage = site.shared_storage[i];
    checks[i] = check_mount(storage);
    if (!checks[i].ok) continue;
    auto promise = std::make_shared<std::promise<Check>>();
    io.emplace_back(i, promise->get_future());
    std::thread([promise, dir = storage.mount_dir, seconds = site.probe_seconds, prober = f.prober] {
      promise->set_value(prober.empty() ? check_shared_dir(dir, 1u << 20, 0, 0, seconds)
                                        : check_shared_dir_in_child(dir, 1u << 20, seconds, prober));
    }).detach();
  }
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(site.probe_seconds + 1.5);
  for (auto& [i, future] : io) {
    const std::string& dir = site.shared_storage[i].mount_dir;
    if (future.wait_until(deadline) != std::future_status::ready) {
      checks[i] = {"shared_fs", false, dir + ": " + timed_out(site.probe_seconds)};
      continue;
    }
    Check c = future.get();
    if (c.ok) c.detail = checks[i].detail + ", " + c.detail.substr(dir.size() + 2);
    checks[i] = c;
  }
  return checks;
}

std::vector<Check> run_scratch(const NodeCheckSite& site, const NodeFacts&) {
  std::vector<Check> checks;
  for (const auto& dir : site.local_scratch) {
    struct stat st {};
    if (::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
      checks.push_back(check_scratch(dir, site.min_scratch_gib));
  }
  return checks;
}

std::vector<Check> run_gpus(const NodeCheckSite& site, const NodeFacts& f) {
  if (!has_nvidia(f)) return {};
  const int expected = f.slurm ? expected_gpus(*f.slurm) : 0;
  if (!f.nvidia_smi) {
    return {{"gpus", false,
             fmt::format("nvidia-smi not found on a node with {} GPU(s) (the NVIDIA driver is missing)",
                         std::max(expected, f.nvidia_device_files))}};
  }
  const auto start = std::chrono::steady_clock::now();
  const auto query = [&](const char* fields) {  // the retry within what is left of the limit
    const double left = std::max(1.0, site.probe_seconds - since(start));
    return run_process({"nvidia-smi", std::string("--query-gpu=") + fields, "--format=csv,noheader,nounits"},
                       "", left);
  };
  ProcessResult r = query(kGpuQueryFields);
  bool remap = true;
  if (r.exit_code != 0 && r.err.find("is not a valid field") != std::string::npos)  // before R510
    r = query(kGpuQueryFieldsNoRemap), remap = false;
  if (r.timed_out) return {{"gpus", false, "nvidia-smi " + timed_out(site.probe_seconds)}};
  try {
    return {judge_gpus(parse_gpu_query(r.out, remap), unreachable_gpus(r.err), r.exit_code, expected)};
  } catch (const DataError& e) {
    return {{"gpus", false, e.what()}};
  }
}

std::vector<Check> run_xids(const NodeCheckSite&, const NodeFacts& f) {
  if (!has_nvidia(f)) return {};
  try {
    return {judge_xids(parse_xids(read_kernel_log()))};
  } catch (const Error& e) {
    return {{"gpu_xid", false, e.what(), Severity::kWarn}};
  }
}

std::vector<Check> run_nvlink(const NodeCheckSite& site, const NodeFacts& f) {
  if (!f.nvidia_smi) return {};
  const ProcessResult r = run_process({"nvidia-smi", "nvlink", "--status"}, "", site.probe_seconds);
  if (r.timed_out) return {{"nvlink", false, "nvidia-smi nvlink " + timed_out(site.probe_seconds)}};
  return {judge_nvlink(parse_nvlink_status(r.out), r.err)};
}

std::vector<Check> run_dcgm(const NodeCheckSite& site, const NodeFacts& f) {
  if (!site.dcgm || !f.dcgmi || !has_nvidia(f)) return {};
  const double limit = dcgm_limit(site);
  const ProcessResult r = run_process({"dcgmi", "diag", "-r", "1"}, "", limit);
  if (r.timed_out) return {{"dcgm", false, "dcgmi diag -r 1 " + timed_out(limit), Severity::kWarn}};
  return {judge_dcgm(r.exit_code, r.out)};
}

std::vector<Check> run_efa(const NodeCheckSite& site, const NodeFacts& f) {
  if (!f.slurm) return {};
  const int expected = expected_efa_devices(instance_type_feature(f.slurm->features), f.slurm->features);
  if (expected == 0) return {};
  return {check_efa(expected, site.probe_seconds)};
}

std::vector<Check> run_spank(const NodeCheckSite&, const NodeFacts&) {
  return {check_spank_plugin(default_plugstack_files())};
}

std::vector<Check> run_image(const NodeCheckSite& site, const NodeFacts&) {
  if (site.manifest.empty()) return {};
  return {check_image(site.manifest, site.probe_seconds)};
}

}  // namespace

std::vector<Check> nvidia_health_checks(const NodeCheckSite& site, const NodeFacts& facts) {
  std::vector<Check> checks;
  for (auto run : {run_xids, run_gpus, run_nvlink, run_dcgm})
    for (auto& c : run(site, facts)) checks.push_back(std::move(c));
  return checks;
}

NodeFacts node_facts(const std::string& node, const std::optional<SlurmNodeView>& slurm) {
  NodeFacts facts;
  facts.node = node;
  facts.slurm = slurm;
  facts.nvidia_device_files = host_resources().gpus;
  facts.nvidia_smi = executable("nvidia-smi");
  facts.dcgmi = executable("dcgmi");
  return facts;
}

const NodeProbe kSlurmViewProbe = {
    "slurm_view", "scontrol show node: CPUs, memory and gres GPUs against the node's (run first)", nullptr};

std::vector<const NodeProbe*> node_check_probes() {
  std::vector<const NodeProbe*> all = {&kSlurmViewProbe};
  for (const auto& p : node_probes()) all.push_back(&p);
  return all;
}

const std::vector<NodeProbe>& node_probes() {
  static const std::vector<NodeProbe> probes = {
      {"shared_fs", "each SharedStorage mounted as its StorageType, a file written, read back and removed",
       run_shared_fs},
      {"scratch", "free space of each LocalScratch directory the node has", run_scratch},
      {"gpu_xid", "the driver's Xid errors in the kernel log since boot (/dev/kmsg)", run_xids},
      {"gpus", "nvidia-smi: every GPU there, no uncorrectable ECC error, retirement or remapping pending",
       run_gpus},
      {"nvlink", "nvidia-smi nvlink --status: no link inactive", run_nvlink},
      {"dcgm", "dcgmi diag -r 1 where dcgmi exists", run_dcgm, dcgm_limit, Severity::kWarn},
      {"efa", "the EFA devices libfabric shows against the instance type's", run_efa},
      {"spank_plugin", "spank_pcdino.so in plugstack.conf built for the Slurm the node runs", run_spank},
      {"image", "the node's versions against the image manifest", run_image},
  };
  return probes;
}

bool NodeCheckReport::drain() const {
  return std::any_of(checks.begin(), checks.end(),
                     [](const TimedCheck& c) { return !c.check.ok && c.check.severity == Severity::kDrain; });
}

std::string NodeCheckReport::verdict() const {
  if (drain()) return "drain";
  const bool warn =
      std::any_of(checks.begin(), checks.end(), [](const TimedCheck& c) { return !c.check.ok; });
  return warn ? "warn" : "ok";
}

std::string NodeCheckReport::reason() const {
  std::vector<std::string> failed;
  for (const auto& c : checks)
    if (!c.check.ok && c.check.severity == Severity::kDrain)
      failed.push_back(c.check.name + ": " + c.check.detail);
  if (failed.empty()) return "";
  std::string reason = "pcdino: " + join(failed, "; ");
  // Slurm keeps any length, but sinfo -R and the logs show a line.
  if (reason.size() > 250) reason = reason.substr(0, 247) + "...";
  return reason;
}

double probe_limit(const NodeCheckSite& site, const NodeProbe& probe) {
  const double own = probe.limit != nullptr ? probe.limit(site) : site.probe_seconds;
  return std::max(1.0, std::min(own, site.limit.seconds / 2));
}

CheckLimit health_check_limit(const std::string& show_config) {
  auto keys = slurm::parse_show_config(show_config);
  const std::string version = keys["SLURM_VERSION"];
  CheckLimit limit;
  if (version.empty()) return limit;
  if (!slurm::has(version, "health_check_timeout")) {
    limit.source = "Slurm " + version + "'s fixed limit for a HealthCheckProgram";
    return limit;
  }
  // "60 sec"; slurmd resets 0 to its default (read_config.c), and the key holds at most 65535.
  const std::string& value = keys["HealthCheckTimeout"];
  char* end = nullptr;
  const long seconds = std::strtol(value.c_str(), &end, 10);
  if (end == value.c_str() || seconds <= 0 || seconds > 65535) {
    limit.source = "Slurm " + version + "'s default HealthCheckTimeout";
    return limit;
  }
  limit.seconds = static_cast<double>(seconds);
  limit.source = "HealthCheckTimeout of Slurm " + version;
  return limit;
}

NodeCheckReport run_node_check(const NodeCheckSite& given, const std::string& node,
                               const std::string& prober) {
  const auto start = std::chrono::steady_clock::now();
  NodeCheckReport report;
  report.node = node;
  report.limit = given.limit;
  // Every probe's own tools and calls within half the check's limit too, not only the wait for it below.
  NodeCheckSite site = given;
  site.probe_seconds = std::max(1, std::min(given.probe_seconds, static_cast<int>(given.limit.seconds / 2)));
  SlurmNodeView view;
  Check slurm = check_slurm_view(node, std::min(site.probe_seconds, 5), &view);
  NodeFacts facts = node_facts(node, view.name.empty() ? std::nullopt : std::optional<SlurmNodeView>(view));
  facts.prober = prober;
  // A controller that does not answer is not this node's fault: no job should fail for it.
  if (!facts.slurm) slurm.severity = Severity::kWarn;
  report.checks.push_back({slurm, kSlurmViewProbe.name, since(start)});

  // Each probe on a thread of its own; its result travels through a shared state that outlives this call,
  // so that a probe stuck on a hung filesystem writes, when it ever returns, into memory it still owns.
  struct Pending {
    const NodeProbe* probe;
    std::shared_ptr<std::promise<std::vector<Check>>> result;
    std::future<std::vector<Check>> future;
    std::shared_ptr<std::atomic<double>> seconds;
  };
  std::vector<Pending> pending;
  const auto begun = std::chrono::steady_clock::now();
  for (const auto& probe : node_probes()) {
    auto promise = std::make_shared<std::promise<std::vector<Check>>>();
    auto seconds = std::make_shared<std::atomic<double>>(0);
    pending.push_back({&probe, promise, promise->get_future(), seconds});
    std::thread([promise, seconds, &probe, site, facts, begun] {
      try {
        auto checks = probe.run(site, facts);
        seconds->store(since(begun));
        promise->set_value(std::move(checks));
      } catch (...) {
        seconds->store(since(begun));
        promise->set_exception(std::current_exception());
      }
    }).detach();
  }
  // Probes limit their own tools and filesystem calls; a probe stuck elsewhere fails at its limit here.
  for (auto& p : pending) {
    const double limit = probe_limit(site, *p.probe);
    const auto deadline = begun + std::chrono::duration<double>(limit + 2.0);
    if (p.future.wait_until(deadline) != std::future_status::ready) {
      report.checks.push_back(
          {{p.probe->name, false, timed_out(limit), p.probe->on_timeout}, p.probe->name, since(begun)});
      continue;
    }
    try {
      for (auto& c : p.future.get()) report.checks.push_back({c, p.probe->name, p.seconds->load()});
    } catch (const std::exception& e) {
      report.checks.push_back({{p.probe->name, false, e.what()}, p.probe->name, p.seconds->load()});
    }
  }
  report.seconds = since(start);
  return report;
}

std::string format_node_check(const NodeCheckReport& report) {
  std::string out = fmt::format("pcdino node-check on {}, within {:g} s ({})\n", report.node,
                                report.limit.seconds, report.limit.source);
  for (const auto& c : report.checks) {
    const char* verdict = c.check.ok ? "ok" : c.check.severity == Severity::kWarn ? "WARN" : "DRAIN";
    out += fmt::format("  {:<13} {:<5} {:>6.2f} s  {}\n", c.check.name, verdict, c.seconds, c.check.detail);
  }
  out += fmt::format("{}: {} in {:.2f} s{}\n", report.node, report.verdict(), report.seconds,
                     report.drain() ? " (" + report.reason() + ")" : "");
  return out;
}

std::string node_check_json(const NodeCheckReport& report) {
  nlohmann::json checks = nlohmann::json::array();
  for (const auto& c : report.checks) {
    checks.push_back({{"name", c.check.name},
                      {"probe", c.probe},
                      {"ok", c.check.ok},
                      {"severity", severity_name(c.check.severity)},
                      {"seconds", c.seconds},
                      {"detail", c.check.detail}});
  }
  return nlohmann::json{{"node", report.node},
                        {"verdict", report.verdict()},
                        {"reason", report.reason()},
                        {"seconds", report.seconds},
                        {"limit_seconds", report.limit.seconds},
                        {"limit", report.limit.source},
                        {"checks", checks}}
             .dump(2) +
         "\n";
}

std::vector<WithheldDrain> apply_drain_guard(NodeCheckReport& report, const std::vector<SlurmNodeView>& nodes,
                                             double share) {
  const auto self =
      std::find_if(nodes.begin(), nodes.end(), [&](const SlurmNodeView& n) { return n.name == report.node; });
  if (self == nodes.end() || self->partitions.empty()) return {};
  const auto shares_partition = [&](const SlurmNodeView& n) {
    return std::any_of(n.partitions.begin(), n.partitions.end(), [&](const std::string& p) {
      return std::find(self->partitions.begin(), self->partitions.end(), p) != self->partitions.end();
    });
  };
  // reason() writes "pcdino: CHECK: detail; CHECK: detail".
  const auto drained_for = [](const SlurmNodeView& n, const std::string& check) {
    const std::string& r = n.reason;
    return drained(n) && r.rfind("pcdino: ", 0) == 0 &&
           (r.compare(8, check.size() + 2, check + ": ") == 0 ||
            r.find("; " + check + ": ") != std::string::npos);
  };
  std::vector<WithheldDrain> withheld;
  for (auto& c : report.checks) {
    if (c.check.ok || c.check.severity != Severity::kDrain) continue;
    WithheldDrain w{c.check.name, 0, 0, join(self->partitions, ",")};
    for (const auto& n : nodes) {
      if (!shares_partition(n)) continue;
      ++w.nodes;
      if (n.name != report.node && drained_for(n, c.check.name)) ++w.drained;
    }
    if (w.drained == 0 || w.drained < share * w.nodes) continue;
    c.check.severity = Severity::kWarn;
    c.check.detail +=
        fmt::format(" (not drained: {} of the {} nodes of {} already are for {}; DrainGuardShare {:g})",
                    w.drained, w.nodes, w.partitions, w.check, share);
    withheld.push_back(w);
  }
  return withheld;
}

std::vector<std::vector<std::string>> slurm_actions(const NodeCheckReport& report, const SlurmNodeView* view,
                                                    SlurmContext context) {
  const std::string node = "NodeName=" + report.node;
  const bool ours = view != nullptr && view->reason.rfind("pcdino: ", 0) == 0;
  const bool is_drained = view != nullptr && drained(*view);
  if (report.drain()) {
    const std::string reason = report.reason();
    // An admin's or Slurm's drain keeps its reason: they know why they drained it.
    if (is_drained && (!ours || view->reason == reason)) return {};
    return {{"scontrol", "update", node, "State=DRAIN", "Reason=" + reason}};
  }
  if (context == SlurmContext::kHealthCheck && is_drained && ours)
    return {{"scontrol", "update", node, "State=RESUME"}};
  return {};
}

}  // namespace pcdino::doctor
