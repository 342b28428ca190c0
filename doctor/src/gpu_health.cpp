#include "pcdino/doctor/gpu_health.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <map>
#include <regex>
#include <sstream>

#include "pcdino/core/error.hpp"
#include "vendor_tools.hpp"

namespace pcdino::doctor {

const char* const kXidSource =
    "NVIDIA's Xid catalogue (docs.nvidia.com/deploy/xid-errors, analyzing-xid-catalog, as generated "
    "2025-10-29 in leptonai/gpud catalog_generated.go) and the tiers of awslabs/awsome-distributed-ai "
    "4.validation_and_observability/2.gpu-cluster-healthcheck checks/0-nvidia-smi-check.sh (2b0416e6), read "
    "2026-11-28";

const std::vector<XidRule>& xid_rules() {
  using A = XidAction;
  // NVIDIA's immediate action per Xid: RESTART_APP and IGNORE leave the GPU in service (NVIDIA's
  // k8s-device-plugin skips 13, 31, 43, 45, 68 too); RESET_GPU and the ECC/NVLink workflows need a reset;
  // RESTART_BM/VM a reboot; CHECK_MECHANICALS (54) a hardware fix. Xid 154 states the driver's own verdict
  // in its text: judge_xids() reads it.
  static const std::vector<XidRule> table = {
      {13, "GR_EXCEPTION", A::kApplication},
      {31, "FIFO_ERROR_MMU_ERR_FLT", A::kApplication},
      {43, "RESETCHANNEL_VERIF_ERROR", A::kApplication},
      {45, "PREEMPTIVE_REMOVAL", A::kApplication},
      {46, "GPU_TIMEOUT_ERROR", A::kResetGpu},
      {48, "GPU_ECC_DBE", A::kResetGpu},
      {54, "CHECK_MECHANICALS", A::kIsolate},
      {62, "PMU_HALT_ERROR", A::kResetGpu},
      {63, "DRAM_RETIREMENT_EVENT", A::kMonitor},
      {64, "DRAM_RETIREMENT_FAILURE", A::kResetGpu},
      {68, "NVDEC0_EXCEPTION", A::kApplication},
      {74, "NVLINK_ERROR", A::kResetGpu},
      {79, "GPU_HAS_FALLEN_OFF_THE_BUS", A::kReboot},
      {92, "EXCESSIVE_SBE_INTERRUPTS", A::kMonitor},
      {94, "CONTAINED_ERROR", A::kApplication},
      {95, "UNCONTAINED_ERROR", A::kResetGpu},
      {109, "CTXSW_TIMEOUT_ERROR", A::kResetGpu},
      {110, "SEC_FAULT_ERROR", A::kResetGpu},
      {119, "GSP_RPC_TIMEOUT", A::kResetGpu},
      {120, "GSP_ERROR", A::kResetGpu},
      {136, "ALI_TRAINING_FAIL", A::kResetGpu},
      {140, "UNRECOVERABLE_ECC_ERROR_ESCAPE", A::kResetGpu},
      {143, "GPU_INIT_ERROR", A::kResetGpu},
      {151, "KEY_ROTATION_ERROR", A::kReboot},
      {154, "GPU_RECOVERY_ACTION_CHANGED", A::kMonitor},
      {155, "NVLINK_SW_DEFINED_ERROR", A::kResetGpu},
      {156, "RESOURCE_RETIREMENT_EVENT", A::kResetGpu},
      {158, "GPU_FATAL_TIMEOUT", A::kResetGpu},
      {168, "BOOT_REATTEMPT", A::kReboot},
  };
  return table;
}

XidRule xid_rule(int xid) {
  for (const auto& r : xid_rules())
    if (r.xid == xid) return r;
  return {xid, "unknown", XidAction::kMonitor};
}

const char* action_name(XidAction action) {
  switch (action) {
    case XidAction::kApplication:
      return "application error";
    case XidAction::kMonitor:
      return "monitor";
    case XidAction::kResetGpu:
      return "reset the GPU";
    case XidAction::kReboot:
      return "reboot the node";
    case XidAction::kIsolate:
      return "replace the node";
  }
  return "monitor";
}

Severity xid_severity(XidAction action) {
  return action >= XidAction::kResetGpu ? Severity::kDrain : Severity::kWarn;
}

namespace {

// kmsg escapes every unprintable byte and '\' as \xNN (Documentation/ABI/testing/dev-kmsg).
std::string decode_kmsg(const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto hex = [&](std::size_t k) { return std::isxdigit(static_cast<unsigned char>(text[k])) != 0; };
    if (text[i] == '\\' && i + 3 < text.size() && text[i + 1] == 'x' && hex(i + 2) && hex(i + 3)) {
      out += static_cast<char>(std::stoi(text.substr(i + 2, 2), nullptr, 16));
      i += 3;
    } else {
      out += text[i];
    }
  }
  return out;
}

// The message of one kernel-log line, where the driver's text must start; nullopt for a record the kernel
// did not write. A /dev/kmsg record ("PRIO,SEQ,USEC,FLAGS[,...];MESSAGE") carries PRIO = facility * 8 +
// level, and user space cannot write facility 0 (LOG_KERN) to /dev/kmsg: LOG_USER when it names none, "to
// make sure that the origin of the messages can always be reliably determined" (the kernel's
// Documentation/ABI/testing/dev-kmsg; printk.c devkmsg_write). FLAGS '+' is a fragment that continues the
// record before it, mid-line (kernels 3.5 to 4.x, printk.c devkmsg_read). dmesg's lines lose the facility:
// their message follows an optional "[  123.456789] ".
// A count that a tool or the driver prints: its digits as an int, or nullopt when there are more than an int
// holds (no driver prints such a number: the line is not what it seems).
std::optional<int> small_count(const std::string& digits) {
  if (digits.empty() || digits.size() > 9) return std::nullopt;
  return std::stoi(digits);
}

std::optional<std::string> kernel_message(const std::string& line) {
  static const std::regex record(R"(^([0-9]{1,4}),[0-9]+,[0-9]+,([^;,]*)[^;]*;)");
  static const std::regex stamp(R"(^\[\s*[0-9]+\.[0-9]+\] ?)");
  std::smatch m;
  if (std::regex_search(line, m, record)) {
    if (std::stoi(m[1].str()) >= 8 || m[2].str() == "+") return std::nullopt;
    return decode_kmsg(m.suffix().str());
  }
  if (std::regex_search(line, m, stamp)) return m.suffix().str();
  return line;
}

}  // namespace

std::vector<XidEvent> parse_xids(const std::string& log) {
  // Each pattern matches at the message's start only: the kernel prints what users choose elsewhere in its
  // own lines (a crashing program's file name in its segfault line). A line that starts with a program's
  // name has at most 15 bytes of it (TASK_COMM_LEN) and then "[pid]", which none of these reaches.
  // "NVRM: Xid (PCI:0000:3b:00 GPU-I:05): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
  static const std::regex xid(
      R"(NVRM: Xid \((?:PCI:)?([0-9A-Fa-f:.]+)(?: GPU-I:[0-9]+)?(?: GPU-CI:[0-9]+)?\): ([0-9]+),(.*))");
  static const std::regex pid_name(R"(^\s*pid=('[^']*'|[^,]*),(\s*name=[^,]*,)?\s*)");
  // osinit.c's NV_DEV_PRINTF "NVRM: GPU 0000:2b:00.0: GPU has fallen off the bus." and older drivers'
  // "NVRM: GPU at 0000:06:00.0 has fallen off the bus.": the driver's words right after the address.
  static const std::string pci = R"([0-9A-Fa-f]{4,}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})";  // %04x:%02x:%02x
  static const std::regex off_bus("NVRM: GPU (?:at (?:PCI:)?)?(" + pci +
                                  R"((?:\.[0-9A-Fa-f])?):? (?:GPU )?has fallen off the bus)");
  // osapi.c's "NVRM: The NVIDIA GPU %04x:%02x:%02x.%x\nNVRM: (PCI ID: %04x:%04x) installed in this system
  // has\nNVRM: fallen off the bus and is not responding to commands.", one record.
  static const std::regex off_bus_osapi(
      "NVRM: The NVIDIA GPU (" + pci +
      R"(\.[0-9A-Fa-f])\nNVRM: (?:\(PCI ID: [0-9A-Fa-f]{4}:[0-9A-Fa-f]{4}\) )?)"
      R"(installed in this system has\nNVRM: fallen off the bus)");
  const auto at_start = std::regex_constants::match_continuous;
  std::vector<XidEvent> events;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.front() == ' ') continue;  // a kmsg record's dictionary (" SUBSYSTEM=pci")
    const auto text = kernel_message(line);
    if (!text) continue;
    std::smatch m;
    if (std::regex_search(*text, m, xid, at_start)) {
      std::string message = m[3].str();
      std::smatch p;
      if (std::regex_search(message, p, pid_name)) message = p.suffix().str();
      if (const auto number = small_count(m[2].str())) events.push_back({m[1].str(), *number, trim(message)});
    } else if (std::regex_search(*text, m, off_bus, at_start) ||
               std::regex_search(*text, m, off_bus_osapi, at_start)) {
      // The same fault as its Xid 79 line when the driver printed both: counted once per GPU.
      const std::string gpu = m[1].str();
      const bool seen = std::any_of(events.begin(), events.end(), [&](const XidEvent& e) {
        return e.xid == 79 && gpu.compare(0, e.gpu.size(), e.gpu) == 0;
      });
      if (!seen) events.push_back({gpu, 79, "GPU has fallen off the bus."});
    }
  }
  return events;
}

std::string read_kernel_log(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    throw Error(ExitCode::kUnavailable,
                "cannot read the kernel log " + path + ": " + std::strerror(errno) + " (needs root)");
  }
  // /dev/kmsg hands one record per read from the oldest it still holds, EAGAIN after the last, EPIPE when
  // the ring buffer overwrote the next one (reading goes on from the oldest left).
  std::string log;
  char buffer[8192];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n > 0) {
      log.append(buffer, static_cast<std::size_t>(n));
      if (log.back() != '\n') log += '\n';
    } else if (n < 0 && (errno == EPIPE || errno == EINTR)) {
      continue;
    } else {
      break;  // EAGAIN: the last record; 0: the end of a regular file
    }
  }
  ::close(fd);
  return log;
}

Check judge_xids(const std::vector<XidEvent>& events) {
  if (events.empty()) return {"gpu_xid", true, "no Xid in the kernel log"};
  struct Seen {
    int count = 0;
    XidAction action;
    std::string message;
  };
  std::map<std::pair<std::string, int>, Seen> seen;  // (gpu, xid): its count and last message
  for (const auto& e : events) {
    XidAction action = xid_rule(e.xid).action;
    // Xid 154 carries the driver's own verdict: "... changed from 0x0 (None) to 0x2 (Node Reboot Required)".
    if (e.xid == 154) {
      const auto to = e.message.rfind(" to ");
      const std::string verdict = to == std::string::npos ? "" : e.message.substr(to);
      if (verdict.find("Reboot") != std::string::npos) action = XidAction::kReboot;
      if (verdict.find("Reset") != std::string::npos || verdict.find("Drain") != std::string::npos)
        action = XidAction::kResetGpu;
    }
    auto& s = seen[{e.gpu, e.xid}];
    s.count++, s.action = std::max(s.count > 1 ? s.action : action, action), s.message = e.message;
  }
  std::vector<std::pair<XidAction, std::string>> found;
  for (const auto& [key, s] : seen) {
    std::string message = s.message;
    if (!message.empty() && message.back() == '.') message.pop_back();
    if (message.size() > 60) message = message.substr(0, 57) + "...";
    found.push_back({s.action, fmt::format("gpu {} Xid {}{} {} ({})", key.first.empty() ? "?" : key.first,
                                           key.second, s.count > 1 ? fmt::format(" x{}", s.count) : "",
                                           message.empty() ? xid_rule(key.second).name : message,
                                           action_name(s.action))});
  }
  std::stable_sort(found.begin(), found.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> details;
  for (const auto& f : found) details.push_back(f.second);
  const Severity severity = xid_severity(found.front().first);
  return {"gpu_xid", false, join(details, "; "), severity};
}

const char* const kGpuQueryFields =
    "index,pci.bus_id,uuid,ecc.errors.uncorrected.volatile.total,retired_pages.pending,remapped_rows.pending,"
    "remapped_rows.failure";
const char* const kGpuQueryFieldsNoRemap =
    "index,pci.bus_id,uuid,ecc.errors.uncorrected.volatile.total,retired_pages.pending";

namespace {

bool not_applicable(const std::string& v) {
  return v.size() >= 2 && v.front() == '[' && v.back() == ']';
}

std::optional<long> count_of(const std::string& v, const std::string& line) {
  if (not_applicable(v) || v == "N/A") return std::nullopt;
  try {
    std::size_t used = 0;
    const long n = std::stol(v, &used);
    if (used == v.size()) return n;
  } catch (const std::exception&) {
  }
  throw DataError("nvidia-smi: '" + v + "' is not a count in '" + line + "'");
}

std::optional<bool> flag_of(const std::string& v, const std::string& line) {
  if (not_applicable(v) || v == "N/A") return std::nullopt;
  if (v == "Yes") return true;
  if (v == "No") return false;
  throw DataError("nvidia-smi: '" + v + "' is not Yes or No in '" + line + "'");
}

}  // namespace

std::vector<GpuErrors> parse_gpu_query(const std::string& csv, bool remapped_rows) {
  const std::size_t fields = remapped_rows ? 7 : 5;
  std::vector<GpuErrors> gpus;
  std::istringstream in(csv);
  for (std::string line; std::getline(in, line);) {
    if (trim(line).empty()) continue;
    std::vector<std::string> v;
    std::istringstream cells(line);
    for (std::string cell; std::getline(cells, cell, ',');) v.push_back(trim(cell));
    if (v.size() < fields) {
      throw DataError(fmt::format("nvidia-smi --query-gpu: {} fields where {} were asked for in '{}'",
                                  v.size(), fields, line));
    }
    GpuErrors g{v[0], v[1], v[2], count_of(v[3], line), flag_of(v[4], line), std::nullopt, std::nullopt};
    if (remapped_rows) g.remap_pending = flag_of(v[5], line), g.remap_failure = flag_of(v[6], line);
    gpus.push_back(g);
  }
  return gpus;
}

std::vector<std::string> unreachable_gpus(const std::string& err) {
  // "Unable to determine the device handle for GPU 0000:05:00.0: GPU is lost.  Reboot ..." and the newer
  // "... for GPU0: 0000:01:00.0: Unknown Error".
  static const std::regex lost(
      R"(Unable to determine the device handle for GPU(?: ?[0-9]+:)? ?([0-9A-Fa-f]+:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]): ([^.\n]*))");
  std::vector<std::string> gpus;
  for (auto it = std::sregex_iterator(err.begin(), err.end(), lost); it != std::sregex_iterator(); ++it)
    gpus.push_back((*it)[1].str() + ": " + trim((*it)[2].str()));
  return gpus;
}

std::string nvidia_smi_status(int exit_code) {
  // nvidia-smi(1), RETURN VALUE (docs.nvidia.com/deploy/nvidia-smi); 18: anderskm/gputil#55.
  static const std::map<int, const char*> codes = {
      {2, "an invalid argument"},
      {3, "an operation not available on the device"},
      {4, "no permission"},
      {6, "a query found no such object"},
      {8, "external power cables not attached"},
      {9, "the NVIDIA driver is not loaded"},
      {10, "the kernel found an interrupt issue with a GPU"},
      {12, "NVML's library cannot be found or loaded"},
      {13, "this NVML does not implement the function"},
      {14, "the infoROM is corrupted"},
      {15, "a GPU has fallen off the bus or become inaccessible"},
      {18, "the driver and NVML versions differ"},
      {255, "an internal driver error"},
  };
  const auto c = codes.find(exit_code);
  return fmt::format("exit {}{}", exit_code, c == codes.end() ? "" : std::string(": ") + c->second);
}

Check judge_gpus(const std::vector<GpuErrors>& gpus, const std::vector<std::string>& unreachable,
                 int exit_code, int expected) {
  std::vector<std::string> faults;
  for (const auto& u : unreachable) faults.push_back("gpu " + u);  // "gpu 0000:3B:00.0: GPU is lost"
  const int seen = static_cast<int>(gpus.size());
  if (expected > 0 && seen + static_cast<int>(unreachable.size()) < expected)
    faults.push_back(fmt::format("nvidia-smi shows {} of the {} GPUs the node should have", seen, expected));
  for (const auto& g : gpus) {
    const std::string gpu = "gpu " + g.index + " (" + g.bus_id + ")";
    if (g.uncorrected_ecc.value_or(0) > 0)
      faults.push_back(fmt::format("{}: {} uncorrectable ECC errors since the driver loaded: reset the GPU",
                                   gpu, *g.uncorrected_ecc));
    if (g.retired_pending.value_or(false))
      faults.push_back(gpu + ": pages pending retirement: reboot the node");
    if (g.remap_pending.value_or(false)) faults.push_back(gpu + ": rows pending remapping: reset the GPU");
    if (g.remap_failure.value_or(false))
      faults.push_back(gpu + ": a row remapping failed: the GPU needs replacing");
  }
  if (exit_code != 0 && faults.empty()) faults.push_back("nvidia-smi: " + nvidia_smi_status(exit_code));
  if (!faults.empty()) return {"gpus", false, join(faults, "; ")};
  return {"gpus", true,
          fmt::format("{} GPU(s), no uncorrectable ECC error, retirement or remapping pending", seen)};
}

std::vector<NvlinkLinks> parse_nvlink_status(const std::string& out) {
  static const std::regex gpu(R"(^(GPU [0-9]+):)");
  static const std::regex link(R"(^\s*Link ([0-9]+): (.*)$)");
  std::vector<NvlinkLinks> gpus;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, gpu)) {
      gpus.push_back({m[1].str(), 0, {}});
    } else if (std::regex_search(line, m, link) && !gpus.empty()) {
      gpus.back().links++;
      const auto number = small_count(m[1].str());
      if (number && m[2].str().find("inactive") != std::string::npos) gpus.back().inactive.push_back(*number);
    }
  }
  return gpus;
}

Check judge_nvlink(const std::vector<NvlinkLinks>& gpus, const std::string& err) {
  // NVML: "Unable to retrieve Nvlink information as all links are inActive".
  if (err.find("all links are inActive") != std::string::npos)
    return {"nvlink", false, "every NVLink link is inactive (" + trim(err) + ")"};
  std::vector<std::string> down;
  int links = 0;
  for (const auto& g : gpus) {
    links += g.links;
    if (g.inactive.empty()) continue;
    std::vector<std::string> numbers;
    for (int l : g.inactive) numbers.push_back(std::to_string(l));
    down.push_back(fmt::format("{} link {} inactive", g.gpu, join(numbers, ",")));
  }
  if (!down.empty()) return {"nvlink", false, join(down, "; ")};
  if (links == 0) return {"nvlink", true, "no NVLink"};
  return {"nvlink", true, fmt::format("{} links active on {} GPU(s)", links, gpus.size())};
}

Check judge_dcgm(int exit_code, const std::string& out) {
  if (exit_code == 0) return {"dcgm", true, "dcgmi diag -r 1 passed"};
  // 226 a failed test, 205 one that asks to isolate the GPU; any other exit (no host engine, a bad
  // argument) says nothing of the GPUs.
  if (exit_code != 226 && exit_code != 205) {
    const std::string first = trim(out.substr(0, out.find('\n')));
    return {
        "dcgm", false,
        fmt::format("dcgmi diag -r 1 did not run: exit {}{}", exit_code, first.empty() ? "" : ": " + first),
        Severity::kWarn};
  }
  // The table's rows: "| Persistence Mode          | Fail   |".
  static const std::regex failed(R"(\|\s*([^|]*[^|\s])\s*\|\s*Fail\b)");
  std::vector<std::string> tests;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), failed); it != std::sregex_iterator(); ++it)
    tests.push_back((*it)[1].str());
  const std::string first = trim(out.substr(0, out.find('\n')));
  return {
      "dcgm", false,
      fmt::format("dcgmi diag -r 1 exit {}{}: {}", exit_code, exit_code == 205 ? " (isolate the GPU)" : "",
                  tests.empty() ? (first.empty() ? "no output" : first) : "failed " + join(tests))};
}

}  // namespace pcdino::doctor
