#include "pcdino/doctor/doctor.hpp"

#include <fmt/format.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "pcdino/core/config.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/fs.hpp"
#include "pcdino/core/mpi_world.hpp"
#include "pcdino/core/process.hpp"
#include "pcdino/doctor/accelerators.hpp"
#include "pcdino/doctor/node_check.hpp"
#include "pcdino/doctor/probes.hpp"
#include "vendor_tools.hpp"

namespace pcdino::doctor {

namespace {

using json = nlohmann::json;

constexpr int kReportTag = 2101, kDecisionTag = 2102;

std::string timed_out(double seconds) {
  return fmt::format("did not finish within {:g} s", seconds);
}

// On a node with NVIDIA devices: the CUDA runtime and NCCL load and the runtime shows the task its GPUs.
void check_gpu_stack(const DoctorOptions& o, NodeReport& r) {
  const auto stack = within<GpuStack>(o.probe_seconds, [] { return probe_gpu_stack(); });
  if (!stack) {
    r.checks.push_back({"gpu_stack", false, "the CUDA runtime " + timed_out(o.probe_seconds)});
    return;
  }
  const auto job_has_gpus = slurm_job_has_gpus([](const char* n) { return std::getenv(n); });
  r.cuda_gpus = job_has_gpus == false ? 0 : stack->gpus;  // NCCL's sweep uses only the job's GPUs
  r.checks.push_back(judge_gpu_stack(*stack, job_has_gpus));
}

void check_variables(const DoctorOptions& o, NodeReport& r) {
  const auto missing = missing_variables(o.expect_variables, [](const char* n) { return std::getenv(n); });
  r.checks.push_back({"environment", missing.empty(),
                      missing.empty() ? join(o.expect_variables) : "missing " + join(missing)});
}

// The other vendors' accelerators (vendor_probes()): kNotPresent on a node without them; judged against the
// instance type Slurm's features name (check_slurm_view) and the image manifest. Where the collectives are
// checked (o.nccl), a kind's own test in place of NCCL's on a node where its check found healthy devices.
void check_vendor_accelerators(const DoctorOptions& o, NodeReport& r) {
  for (const auto& vendor : vendor_probes()) {
    const VendorNode node = vendor.probe(o.probe_seconds);
    const Check check = vendor.judge(node, r.instance_type, o.manifest);
    r.checks.push_back(check);
    if (!o.nccl || vendor.collectives == nullptr || !check.ok || check.detail == kNotPresent) continue;
    if (auto test = vendor.collectives(node, o.probe_seconds)) r.checks.push_back(*test);
  }
}

json to_json(const NodeReport& r) {
  json checks = json::array();
  for (const auto& c : r.checks)
    checks.push_back(
        {{"name", c.name}, {"ok", c.ok}, {"severity", severity_name(c.severity)}, {"detail", c.detail}});
  return {{"node", r.node},
          {"rank", r.rank},
          {"answered", r.answered},
          {"healthy", r.healthy()},
          {"memory_gb_s", r.memory_gb_s},
          {"instance_type", r.instance_type},
          {"cuda_gpus", r.cuda_gpus},
          {"checks", checks}};
}

NodeReport from_json(const json& j) {
  NodeReport r;
  r.node = j.at("node").get<std::string>();
  r.rank = j.at("rank").get<int>();
  r.answered = true;
  r.memory_gb_s = j.at("memory_gb_s").get<double>();
  r.instance_type = j.at("instance_type").get<std::string>();
  r.cuda_gpus = j.at("cuda_gpus").get<int>();
  for (const auto& c : j.at("checks"))
    r.checks.push_back({c.at("name").get<std::string>(), c.at("ok").get<bool>(),
                        c.at("detail").get<std::string>(),
                        c.value("severity", "drain") == "warn" ? Severity::kWarn : Severity::kDrain});
  return r;
}

// Rank 0: every other rank's report, each waited for until the common deadline.
void collect_reports(const DoctorOptions& o, int ranks, std::vector<NodeReport>& nodes) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(o.answer_seconds);
  int pending = ranks - 1;
  while (pending > 0 && std::chrono::steady_clock::now() < deadline) {
    int flag = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kReportTag, MPI_COMM_WORLD, &flag, &status);
    if (!flag) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    int bytes = 0;
    MPI_Get_count(&status, MPI_CHAR, &bytes);
    std::string payload(static_cast<std::size_t>(bytes), '\0');
    MPI_Recv(payload.data(), bytes, MPI_CHAR, status.MPI_SOURCE, kReportTag, MPI_COMM_WORLD,
             MPI_STATUS_IGNORE);
    nodes[static_cast<std::size_t>(status.MPI_SOURCE)] = from_json(json::parse(payload));
    --pending;
  }
  // A rank that did not answer is named from the step's node list: one task per node, in rank order.
  std::vector<std::string> step_nodes;
  if (const char* list = std::getenv("SLURM_STEP_NODELIST")) {
    const auto shown = within<ProcessResult>(o.probe_seconds, [list = std::string(list)] {
      return run_process({"scontrol", "show", "hostnames", list}, "Slurm's client commands");
    });
    if (shown && shown->exit_code == 0) {
      std::istringstream names(shown->out);
      for (std::string name; names >> name;) step_nodes.push_back(name);
    }
  }
  for (std::size_t r = 1; r < nodes.size(); ++r) {
    if (nodes[r].answered) continue;
    nodes[r].rank = static_cast<int>(r);
    nodes[r].node = step_nodes.size() == nodes.size() ? step_nodes[r] : fmt::format("rank {}", r);
  }
}

// A node whose memory bandwidth is below slow_fraction of the upper median of the nodes' (the faster of the
// two middle ones: with two nodes, the faster node) is slow: its cores are taken, or its memory is.
void judge_speed(const DoctorOptions& o, std::vector<NodeReport>& nodes) {
  std::vector<double> rates;
  for (const auto& n : nodes)
    if (n.answered) rates.push_back(n.memory_gb_s);
  if (rates.size() < 2) return;
  std::sort(rates.begin(), rates.end());
  const double median = rates[rates.size() / 2];
  for (auto& n : nodes) {
    if (!n.answered) continue;
    const bool ok = n.memory_gb_s >= o.slow_fraction * median;
    n.checks.push_back(
        {"speed", ok,
         fmt::format(
             "memory {:.1f} GB/s{}", n.memory_gb_s,
             ok ? "" : fmt::format(" (< {:g} x the nodes' median {:.1f})", o.slow_fraction, median))});
  }
}

}  // namespace

Check judge_spank_plugin(const std::string& path, const spank::SlurmVersion& plugin,
                         const spank::SlurmVersion& slurm) {
  if (plugin.loads_in(slurm)) {
    return {"spank_plugin", true,
            path + " built for Slurm " + plugin.str() + ", the node runs " + slurm.str()};
  }
  return {
      "spank_plugin", false,
      path + " is built for Slurm " + plugin.str() + " but the node runs Slurm " + slurm.str() +
          "; Slurm loads only a plugin of its own " + slurm.major_minor() +
          ": rebuild pcdino against this Slurm's headers (the image's scripts/85-pcdino.sh builds it against "
          "/opt/slurm/include)"};
}

spank::SlurmVersion running_slurm_version() {
  const ProcessResult scontrol = run_process({"scontrol", "--version"}, "Slurm's scontrol");
  try {
    return spank::parse_slurm_version_line(scontrol.out);
  } catch (const std::invalid_argument&) {
    const std::string err = scontrol.err.substr(0, scontrol.err.find('\n'));
    throw Error(ExitCode::kUnavailable, "`scontrol --version` printed no version (exit " +
                                            std::to_string(scontrol.exit_code) +
                                            (err.empty() ? "" : ": " + err) + ")");
  }
}

std::vector<std::string> default_plugstack_files() {
  std::vector<std::string> files;
  if (const char* conf = std::getenv("SLURM_CONF"); conf != nullptr && *conf != '\0')
    files.push_back((std::filesystem::path(conf).parent_path() / "plugstack.conf").string());
  files.push_back("/opt/slurm/etc/plugstack.conf");
  files.push_back("/etc/slurm/plugstack.conf");
  return files;
}

Check check_spank_plugin(const std::vector<std::string>& plugstack) {
  std::error_code error;
  std::string conf;
  for (const auto& f : plugstack) {
    if (std::filesystem::exists(f, error)) {
      conf = f;
      break;
    }
  }
  // plugstack.conf(5): "required|optional PATH [ARGS]" lines and "include GLOB" lines.
  std::vector<std::string> files{conf};
  std::string plugin, listed_as;
  for (std::size_t i = 0; i < files.size() && plugin.empty() && !conf.empty(); ++i) {
    std::ifstream in(files[i]);
    for (std::string line; std::getline(in, line) && plugin.empty();) {
      std::istringstream words(line);
      std::string kind, path;
      words >> kind >> path;
      if ((kind == "required" || kind == "optional") && path.find("spank_pcdino.so") != std::string::npos) {
        plugin = path;
        listed_as = kind;
      } else if (kind == "include") {
        const std::filesystem::path pattern(path);
        for (const auto& entry : std::filesystem::directory_iterator(pattern.parent_path(), error)) {
          if (entry.is_regular_file(error)) files.push_back(entry.path().string());
        }
      }
    }
  }
  if (plugin.empty()) {
    return {"spank_plugin", true,
            conf.empty() ? "no plugstack.conf: spank_pcdino.so not checked" : "not listed in " + conf};
  }
  // Slurm fails every job launch on a required plugin it cannot load, and skips an optional one.
  const Severity severity = listed_as == "required" ? Severity::kDrain : Severity::kWarn;
  try {
    const spank::SlurmVersion built = spank::plugin_slurm_version(plugin);
    Check check = judge_spank_plugin(plugin, built, running_slurm_version());
    check.severity = severity;
    return check;
  } catch (const std::exception& e) {
    return {"spank_plugin", false, e.what(), severity};
  }
}

Check judge_trainer(const BuildFacts& facts, int gpus) {
  if (gpus <= 0 || facts.libtorch_cuda) {
    return {"trainer", true,
            fmt::format("LibTorch {} ({}), CUDA {}, NCCL {}", *facts.libtorch ? facts.libtorch : "none",
                        facts.libtorch_cuda ? "CUDA" : "CPU only", facts.cuda, facts.nccl)};
  }
  return {
      "trainer", false,
      fmt::format("this pcdino was built with LibTorch {} without CUDA on a node with {} GPU(s): it would "
                  "train on the CPU; rebuild it against a CUDA LibTorch (the image spec's versions.libtorch)",
                  *facts.libtorch ? facts.libtorch : "(none)", gpus)};
}

Check judge_gpu_stack(const GpuStack& stack, std::optional<bool> job_has_gpus) {
  if (job_has_gpus == false && (stack.no_device || (stack.error.empty() && stack.gpus > 0))) {
    return {"gpu_stack", true,
            "CUDA runtime and NCCL loaded; GPUs not used: the job has none of this node's (ask with "
            "--gpus-per-node)"};
  }
  if (stack.error.empty() && stack.gpus > 0)
    return {"gpu_stack", true, fmt::format("{} GPUs, CUDA runtime and NCCL loaded", stack.gpus)};
  return {"gpu_stack", false, stack.error.empty() ? "the CUDA runtime shows no GPU" : stack.error};
}

const char* severity_name(Severity severity) {
  return severity == Severity::kWarn ? "warn" : "drain";
}

bool NodeReport::healthy() const {
  return answered && std::all_of(checks.begin(), checks.end(),
                                 [](const Check& c) { return c.ok || c.severity == Severity::kWarn; });
}

std::string NodeReport::reason() const {
  if (!answered) return "did not answer (stopped, hung or dead)";
  std::vector<std::string> failed;
  for (const auto& c : checks)
    if (!c.ok && c.severity == Severity::kDrain) failed.push_back(c.name + ": " + c.detail);
  return join(failed, "; ");
}

std::string summary(const DoctorReport& report) {
  std::vector<std::string> problems;
  for (const auto& n : report.nodes) {
    if (!n.healthy()) problems.push_back(n.node + " (" + n.reason() + ")");
  }
  if (!report.allreduce_ok) problems.push_back("allreduce: " + report.allreduce_note);
  if (!report.nccl_ok) problems.push_back("nccl allreduce: " + report.nccl_note);
  return problems.empty() ? "healthy" : "unhealthy: " + join(problems, "; ");
}

bool DoctorReport::healthy() const {
  return allreduce_ok && nccl_ok &&
         std::all_of(nodes.begin(), nodes.end(), [](const NodeReport& n) { return n.healthy(); });
}

NodeReport probe_this_node(const DoctorOptions& options, const std::string& node) {
  NodeReport r;
  r.node = node;
  r.answered = true;
  const double limit = options.probe_seconds;
  if (!options.shared_dir.empty()) {
    std::pair<double, double> rates{0, 0};
    r.checks.push_back(check_shared_dir(options.shared_dir, options.probe_bytes, options.min_write_mb_s,
                                        options.min_read_mb_s, limit, &rates));
    r.fs_write_mb_s = rates.first, r.fs_read_mb_s = rates.second;
  }
  if (!options.scratch_dir.empty())
    r.checks.push_back(check_scratch(options.scratch_dir, options.min_scratch_gib));
  if (options.check_slurm_view) {
    SlurmNodeView view;
    r.checks.push_back(check_slurm_view(r.node, limit, &view));
    r.instance_type = instance_type_feature(view.features);
  }
  // The node check's GPU health (Xid errors, ECC, remapping, NVLink) where the node has NVIDIA GPUs; DCGM's
  // diagnostic is the node check's alone (NCCL's sweep stands for it here). Slurm's view is left out: where
  // Slurm confines a job to its GPUs, nvidia-smi in the step shows only those, not the gres's count.
  NodeCheckSite gpu_site;
  gpu_site.probe_seconds = static_cast<int>(std::max(1.0, limit));
  gpu_site.dcgm = false;
  for (auto& c : nvidia_health_checks(gpu_site, node_facts(r.node, std::nullopt)))
    r.checks.push_back(std::move(c));
  if (!options.expect_variables.empty()) check_variables(options, r);
  r.checks.push_back(check_providers(options.expect_providers, limit));
  check_vendor_accelerators(options, r);
  if (options.nccl && host_resources().gpus > 0) check_gpu_stack(options, r);
  if (host_resources().gpus > 0) r.checks.push_back(judge_trainer(build_facts(), host_resources().gpus));
  if (!options.manifest.empty()) {
    r.checks.push_back(check_spank_plugin(default_plugstack_files()));
    r.checks.push_back(check_image(options.manifest, limit));
  }
  const auto rate =
      within<double>(options.probe_seconds, [] { return memory_bandwidth_gb_s(128u << 20, 4); });
  r.memory_gb_s = rate.value_or(0);
  if (!rate) r.checks.push_back({"speed", false, "memory probe " + timed_out(options.probe_seconds)});
  return r;
}

namespace {

// The node of rank `r` in rank 0's report.
const std::string& node_of(const DoctorReport& report, int r) {
  return report.nodes[static_cast<std::size_t>(r)].node;
}

// Below the floor, the pairs of neighbours name the node on the slow links, when one node explains them.
void blame_pairs(const DoctorOptions& options, DoctorReport& report) {
  const auto& pairs = report.pairs_busbw_gb_s;
  const int n = static_cast<int>(pairs.size());
  const auto slow = slow_ranks(pairs, options.min_busbw_gb_s);
  for (const int r : slow) {
    const int before = (r + n - 1) % n, after = (r + 1) % n;
    report.nodes[static_cast<std::size_t>(r)].checks.push_back(
        {"network", false,
         fmt::format("allreduce with {} {:.2f} GB/s and with {} {:.2f} GB/s, below the floor {:g} GB/s that "
                     "other pairs reach",
                     node_of(report, before), pairs[static_cast<std::size_t>(before)], node_of(report, after),
                     pairs[static_cast<std::size_t>(r)], options.min_busbw_gb_s)});
  }
  std::vector<std::string> names;
  for (const int r : slow) names.push_back(node_of(report, r));
  report.allreduce_note +=
      !slow.empty() ? "; pairs of neighbours blame " + join(names)
      : std::all_of(pairs.begin(), pairs.end(), [&](double b) { return b < options.min_busbw_gb_s; })
          ? "; every pair of neighbours is below it too: the network, not one node"
          : "; the pairs of neighbours blame no single node";
}

// Runs `sweep` on every rank; if it has not returned after `seconds`, rank 0 hands `on_timeout` the report as
// it stood when the sweep began, with `fail` applied, and every rank ends the process with exit code 1: a
// rank lost inside a collective would hang every other one.
void under_watchdog(double seconds, bool report_it, const DoctorReport& before,
                    const std::function<void(DoctorReport&)>& fail,
                    const std::function<void(const DoctorReport&)>& on_timeout,
                    const std::function<void()>& sweep) {
  std::atomic<bool> done{false};
  // The watchdog reports from a copy taken now: the caller writes its report when the sweep returns.
  std::thread watchdog([&, late = before]() mutable {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (!done.load() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (done.load()) return;
    if (report_it) {
      fail(late);
      on_timeout(late);
    }
    std::_Exit(1);
  });
  sweep();
  done.store(true);
  watchdog.join();
}

// The MPI allreduce sweep between the nodes, and below the floor on 3 nodes or more the pairs of neighbours.
void measure_mpi(const DoctorOptions& options, const MpiWorld& world, DoctorReport& report,
                 const std::function<void(const DoctorReport&)>& on_timeout) {
  const auto fail = [&](DoctorReport& late) {
    late.allreduce_ok = false;
    late.allreduce_note = "allreduce " + timed_out(options.allreduce_seconds) + ": a node stopped answering";
  };
  under_watchdog(options.allreduce_seconds, world.rank() == 0, report, fail, on_timeout, [&] {
    report.allreduce = allreduce_sweep(MPI_COMM_WORLD, options.sizes, options.reps);
    const double busbw = report.allreduce.empty() ? 0 : report.allreduce.back().busbw_gb_s;
    report.allreduce_ok = busbw >= options.min_busbw_gb_s;
    // Every rank holds the same result (the slowest rank's time), so all take part in the pairs or none.
    if (!report.allreduce_ok && world.size() >= 3)
      report.pairs_busbw_gb_s = pairwise_busbw(MPI_COMM_WORLD, options.sizes.back(), options.reps);
  });
  const double busbw = report.allreduce.back().busbw_gb_s;
  report.allreduce_note =
      options.min_busbw_gb_s > 0
          ? fmt::format("busbw {:.2f} GB/s at {} bytes {} the floor {:g} GB/s", busbw,
                        report.allreduce.back().bytes, report.allreduce_ok ? ">=" : "<",
                        options.min_busbw_gb_s)
          : fmt::format("busbw {:.2f} GB/s at {} bytes (no floor set)", busbw, report.allreduce.back().bytes);
  if (world.rank() == 0 && !report.pairs_busbw_gb_s.empty()) blame_pairs(options, report);
}

// NCCL's allreduce across every GPU of every node, judged against the site's floor or the instance type's.
void measure_nccl(const DoctorOptions& options, const MpiWorld& world, const NodeReport& mine,
                  DoctorReport& report, const std::function<void(const DoctorReport&)>& on_timeout) {
  const bool root = world.rank() == 0;
  int run = 0;
  if (root) {
    report.nccl_note = nccl_blocker(report.nodes);
    run = report.nccl_note.empty() ? 1 : 0;
  }
  MPI_Bcast(&run, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!run) return;
  std::string error;
  const auto fail = [&](DoctorReport& late) {
    late.nccl_ok = false;
    late.nccl_note =
        "NCCL allreduce " + timed_out(options.allreduce_seconds) + ": a node stopped answering or NCCL hung";
  };
  under_watchdog(options.allreduce_seconds, root, report, fail, on_timeout, [&] {
    try {
      report.nccl = nccl_allreduce_sweep(world, mine.cuda_gpus, options.nccl_sizes, options.reps);
    } catch (const NcclSetupError& e) {  // on every rank: each node that could not set up gets the blame
      error = e.what();
      if (root) {
        for (const auto& [r, why] : e.failed)
          report.nodes[static_cast<std::size_t>(r)].checks.push_back({"nccl", false, why});
      }
    } catch (const std::exception& e) {  // this rank alone: said here, since the others may be stuck in NCCL
      error = e.what();
      std::cerr << "error: pcdino doctor: NCCL allreduce on " << mine.node << ": " << error << std::endl;
    }
  });
  if (!error.empty()) {
    report.nccl_ok = false;
    report.nccl_note = error;
    return;
  }
  if (!root) return;
  std::vector<std::string> types;
  std::vector<int> gpus;
  for (const auto& n : report.nodes) {
    types.push_back(n.instance_type);
    gpus.push_back(n.cuda_gpus);
    report.nccl_gpus += n.cuda_gpus;
  }
  if (report.nccl_gpus < 2) {
    // NCCL's allreduce over one rank returns without moving data: its times say nothing of the machine
    // (an H200 "sent" 1 GiB in 0.3 us), so no row is kept.
    report.nccl.clear();
    report.nccl_note =
        "one GPU: an allreduce over one rank moves no data, so nothing was measured (not judged)";
    return;
  }
  const AllreducePoint& largest = report.nccl.back();
  std::string source;
  const double floor = nccl_floor(options.min_nccl_busbw_gb_s, types, gpus, &source);
  report.min_nccl_busbw_gb_s = floor;
  report.nccl_ok = floor <= 0 || largest.busbw_gb_s >= floor;
  const std::string measured = fmt::format("busbw {:.2f} GB/s at {} bytes over {} GPUs", largest.busbw_gb_s,
                                           largest.bytes, report.nccl_gpus);
  report.nccl_note = floor > 0
                         ? fmt::format("{} {} the floor {:g} GB/s ({})", measured,
                                       report.nccl_ok ? ">=" : "<", floor, source)
                         : measured + " (no floor: doctor.min_nccl_busbw_gbps is 0, and " + source + ")";
}

}  // namespace

DoctorReport run_doctor(const DoctorOptions& options, const MpiWorld& world,
                        const std::function<void(const DoctorReport&)>& on_timeout) {
  const char* slurm_name = std::getenv("SLURMD_NODENAME");
  NodeReport mine = probe_this_node(options, slurm_name && *slurm_name ? slurm_name : world.host());
  mine.rank = world.rank();
  DoctorReport report;
  report.min_busbw_gb_s = options.min_busbw_gb_s;
  int go = 0;
  if (world.rank() == 0) {
    report.nodes.resize(static_cast<std::size_t>(world.size()));
    report.nodes[0] = mine;
    collect_reports(options, world.size(), report.nodes);
    judge_speed(options, report.nodes);
    go =
        std::all_of(report.nodes.begin(), report.nodes.end(), [](const NodeReport& n) { return n.answered; });
    for (const auto& n : report.nodes) {
      if (n.rank != 0 && n.answered) MPI_Send(&go, 1, MPI_INT, n.rank, kDecisionTag, MPI_COMM_WORLD);
    }
    if (!go) {
      report.allreduce_ok = false;
      report.allreduce_note =
          fmt::format("not measured: a node did not answer within {:g} s", options.answer_seconds);
      return report;
    }
  } else {
    const std::string payload = to_json(mine).dump();
    MPI_Send(payload.data(), static_cast<int>(payload.size()), MPI_CHAR, 0, kReportTag, MPI_COMM_WORLD);
    MPI_Recv(&go, 1, MPI_INT, 0, kDecisionTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    report.nodes.push_back(mine);
    if (!go) return report;
  }
  if (world.size() >= 2) {
    measure_mpi(options, world, report, on_timeout);
  } else {
    report.allreduce_note = "not measured: one node";
  }
  if (options.nccl) measure_nccl(options, world, mine, report, on_timeout);
  return report;
}

std::string format_table(const DoctorReport& report) {
  std::vector<std::string> columns;
  for (const auto& n : report.nodes)
    for (const auto& c : n.checks)
      if (std::find(columns.begin(), columns.end(), c.name) == columns.end()) columns.push_back(c.name);
  std::string out = fmt::format("{:<12} {:<9}", "NODE", "VERDICT");
  for (const auto& c : columns) out += fmt::format(" {:<11}", c);
  out += "\n";
  for (const auto& n : report.nodes) {
    out += fmt::format("{:<12} {:<9}", n.node, !n.answered ? "NO ANSWER" : n.healthy() ? "ok" : "FAIL");
    for (const auto& col : columns) {
      const auto c =
          std::find_if(n.checks.begin(), n.checks.end(), [&](const Check& k) { return k.name == col; });
      out += fmt::format(" {:<11}", c == n.checks.end()              ? "-"
                                    : c->ok                          ? "ok"
                                    : c->severity == Severity::kWarn ? "WARN"
                                                                     : "FAIL");
    }
    out += "\n";
    for (const auto& c : n.checks) out += fmt::format("  {:<11} {}\n", c.name, c.detail);
  }
  if (!report.allreduce.empty()) {
    out += fmt::format("\nMPI allreduce over {} nodes (float32 sum; busbw = algbw x 2(n-1)/n)\n",
                       report.nodes.size());
    out += fmt::format("{:>12} {:>12} {:>12} {:>12}\n", "bytes", "time (us)", "algbw GB/s", "busbw GB/s");
    for (const auto& p : report.allreduce)
      out += fmt::format("{:>12} {:>12.1f} {:>12.3f} {:>12.3f}\n", p.bytes, p.seconds * 1e6, p.algbw_gb_s,
                         p.busbw_gb_s);
  }
  const std::size_t n = report.pairs_busbw_gb_s.size();
  if (n > 0) out += "\npairs of neighbours at the largest size (busbw GB/s)\n";
  for (std::size_t k = 0; k < n && n == report.nodes.size(); ++k) {
    out += fmt::format("  {:<12} {:<12} {:>10.3f}\n", report.nodes[k].node, report.nodes[(k + 1) % n].node,
                       report.pairs_busbw_gb_s[k]);
  }
  out += fmt::format("allreduce: {}{}\n", report.allreduce_ok ? "" : "FAIL: ", report.allreduce_note);
  if (!report.nccl.empty()) {
    out += fmt::format("\nNCCL allreduce over {} GPUs (float32 sum, in place; busbw = algbw x 2(n-1)/n)\n",
                       report.nccl_gpus);
    out += fmt::format("{:>12} {:>12} {:>12} {:>12}\n", "bytes", "time (us)", "algbw GB/s", "busbw GB/s");
    for (const auto& p : report.nccl)
      out += fmt::format("{:>12} {:>12.1f} {:>12.3f} {:>12.3f}\n", p.bytes, p.seconds * 1e6, p.algbw_gb_s,
                         p.busbw_gb_s);
  }
  if (!report.nccl_note.empty())
    out += fmt::format("nccl allreduce: {}{}\n", report.nccl_ok ? "" : "FAIL: ", report.nccl_note);
  out += report.healthy() ? "healthy\n" : "UNHEALTHY\n";
  return out;
}

std::string format_json(const DoctorReport& report) {
  json nodes = json::array();
  const auto drains = drain_commands(report);
  for (const auto& n : report.nodes) {
    json j = to_json(n);
    j["drain"] = nullptr;
    for (const auto& d : drains)
      if (d[2] == "NodeName=" + n.node) j["drain"] = join(std::vector<std::string>(d.begin(), d.end()), " ");
    nodes.push_back(j);
  }
  const auto points = [](const std::vector<AllreducePoint>& sweep) {
    json out = json::array();
    for (const auto& p : sweep)
      out.push_back({{"bytes", p.bytes},
                     {"seconds", p.seconds},
                     {"algbw_gb_s", p.algbw_gb_s},
                     {"busbw_gb_s", p.busbw_gb_s}});
    return out;
  };
  return json{{"healthy", report.healthy()},
              {"nodes", nodes},
              {"allreduce",
               {{"ok", report.allreduce_ok},
                {"note", report.allreduce_note},
                {"min_busbw_gb_s", report.min_busbw_gb_s},
                {"points", points(report.allreduce)},
                {"pairs_busbw_gb_s", report.pairs_busbw_gb_s}}},
              {"nccl",
               {{"ok", report.nccl_ok},
                {"note", report.nccl_note},
                {"gpus", report.nccl_gpus},
                {"min_busbw_gb_s", report.min_nccl_busbw_gb_s},
                {"points", points(report.nccl)}}}}
             .dump(2) +
         "\n";
}

std::vector<std::vector<std::string>> drain_commands(const DoctorReport& report) {
  std::vector<std::vector<std::string>> out;
  for (const auto& n : report.nodes) {
    if (n.healthy() || (!n.answered && n.node.rfind("rank ", 0) == 0)) continue;  // no name to drain
    std::string reason = "pcdino doctor: " + n.reason();
    if (reason.size() > 200) reason = reason.substr(0, 197) + "...";
    out.push_back({"scontrol", "update", "NodeName=" + n.node, "State=DRAIN", "Reason=" + reason});
  }
  return out;
}

std::string nccl_blocker(const std::vector<NodeReport>& nodes) {
  // NCCL is NVIDIA's: the other vendors' collectives have their own tests.
  std::vector<std::string> vendor;
  for (const auto& n : nodes) {
    for (const auto& c : n.checks) {
      for (const auto& kind : vendor_probes()) {
        if (c.name == kind.check && c.detail != kNotPresent)
          vendor.push_back(n.node + " " + kind.instead_of_nccl);
      }
    }
  }
  if (!vendor.empty()) return "not measured: NCCL runs on NVIDIA GPUs; " + join(vendor, "; ");
  std::vector<std::string> without;
  for (const auto& n : nodes)
    if (n.cuda_gpus == 0) without.push_back(n.node);
  if (without.size() == nodes.size()) return "not measured: no node has a GPU the CUDA runtime shows";
  return without.empty() ? "" : "not measured: the CUDA runtime shows no GPU on " + join(without);
}

}  // namespace pcdino::doctor
