// NVIDIA GPUs' health as a node check reads it without CUDA (issue #60): the driver's Xid errors in the
// kernel log, nvidia-smi's error counters and NVLink links, DCGM's level-1 diagnostics. Each reader is a pure
// function of what a tool prints, in NVIDIA's documented formats, so fixtures test it; node_check.cpp runs
// the tools and turns these into checks.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pcdino/doctor/doctor.hpp"

namespace pcdino::doctor {

/// What NVIDIA's Xid catalogue asks for after an Xid, from least to most severe.
enum class XidAction {
  kApplication,  ///< the application's error (RESTART_APP): the GPU is healthy
  kMonitor,      ///< informational (IGNORE, CONTACT_SUPPORT, unknown codes): logged, no job stopped
  kResetGpu,     ///< the GPU must be reset before it runs jobs again (RESET_GPU, WORKFLOW_XID_48, ...)
  kReboot,       ///< the node must be restarted (RESTART_BM, RESTART_VM)
  kIsolate,      ///< a hardware fault: the node must be replaced (CHECK_MECHANICALS)
};

/// One row of the Xid table.
struct XidRule {
  int xid;
  const char* name;  ///< NVIDIA's mnemonic (GPU_HAS_FALLEN_OFF_THE_BUS)
  XidAction action;
};

/// Where xid_rules() comes from: NVIDIA's Xid catalogue and the tiers of a GPU cluster health check.
extern const char* const kXidSource;

/// The Xids the node check acts on, in increasing number (an Xid not listed is kMonitor).
const std::vector<XidRule>& xid_rules();

/// The row of `xid`; {xid, "unknown", kMonitor} when the table has none.
XidRule xid_rule(int xid);

/// "application error", "monitor", "reset the GPU", "reboot the node", "replace the node".
const char* action_name(XidAction action);

/// What a node check does about `action`: kDrain from kResetGpu up, kWarn below.
Severity xid_severity(XidAction action);

/// One Xid the driver logged.
struct XidEvent {
  std::string gpu;      ///< the PCI address as the driver printed it ("0000:3b:00"; "" when it gave none)
  int xid = 0;          ///< the Xid code
  std::string message;  ///< the driver's text after the code, pid and name ("GPU has fallen off the bus.")
};

/// The Xid errors in `log`, in order: /dev/kmsg records ("4,1234,5678,-;NVRM: Xid (PCI:0000:3b:00): 79,
/// ..."), their "\x0a" escapes decoded, or dmesg lines ("[ 12.3] NVRM: Xid ...", or the message alone). Every
/// driver's form: with or without pid and name (drivers before 570 print pid='<unknown>'), MIG's "GPU-I:NN"
/// and the PCI domain (kernel_rc.c's krcReportXid in NVIDIA/open-gpu-kernel-modules). The driver's "has
/// fallen off the bus" lines outside an Xid (osapi.c, osinit.c, older drivers' "GPU at ...") count as Xid 79
/// of their GPU. A line counts only where the driver writes it: its text at the message's start (after the
/// record's header or dmesg's timestamp), never mid-line (a program's file name in the kernel's segfault
/// line); and a kmsg record only from the kernel's facility (PRIO < 8: what user space writes to /dev/kmsg
/// carries another, Documentation/ABI/testing/dev-kmsg) and not a '+' fragment. dmesg's lines carry no
/// facility: read /dev/kmsg (read_kernel_log) to tell the driver's lines from a user's.
std::vector<XidEvent> parse_xids(const std::string& log);

/// The kernel's log since boot (as far as its ring buffer holds it) from `path`, /dev/kmsg by default: the
/// records from the first on, read without blocking (a regular file is read whole). Throws
/// Error(kUnavailable) naming `path` when it cannot be opened (not root, or a container without it).
std::string read_kernel_log(const std::string& path = "/dev/kmsg");

/// The Xid check: ok without Xids; otherwise each (GPU, Xid) once with its count, the driver's message (the
/// catalogue's name when it has none) and the action, the most severe first ("gpu 0000:3b:00 Xid 79 GPU has
/// fallen off the bus (reboot the node)"); kDrain when one's action is kResetGpu or worse, else kWarn.
Check judge_xids(const std::vector<XidEvent>& events);

/// The fields the check asks nvidia-smi for (`--query-gpu=`, nvidia-smi --help-query-gpu, driver 590), in
/// the order parse_gpu_query() reads them.
extern const char* const kGpuQueryFields;
/// The same without the remapped_rows fields, which drivers before R510 do not know ("is not a valid field").
extern const char* const kGpuQueryFieldsNoRemap;

/// One GPU's error state from nvidia-smi; nullopt where it prints "[N/A]" or "[Not Supported]" (no ECC, an
/// architecture without page retirement or row remapping, MIG on).
struct GpuErrors {
  std::string index;
  std::string bus_id;  ///< "00000000:3B:00.0"
  std::string uuid;
  std::optional<long> uncorrected_ecc;  ///< ecc.errors.uncorrected.volatile.total, since the driver loaded
  std::optional<bool> retired_pending;  ///< retired_pages.pending: pages retire at the next reboot
  std::optional<bool> remap_pending;    ///< remapped_rows.pending: rows remap at the next GPU reset
  std::optional<bool> remap_failure;    ///< remapped_rows.failure: a remapping failed (the GPU is done)
};

/// The rows of `nvidia-smi --query-gpu=<kGpuQueryFields or kGpuQueryFieldsNoRemap>
/// --format=csv,noheader,nounits` (", "-separated). Throws DataError naming the line when a row has fewer
/// fields than asked for or a value that is neither a number, Yes/No nor a bracketed "[...]".
std::vector<GpuErrors> parse_gpu_query(const std::string& csv, bool remapped_rows = true);

/// The GPUs nvidia-smi says it cannot reach, from its stderr ("Unable to determine the device handle for
/// GPU 0000:3B:00.0: GPU is lost.  Reboot the system to recover this GPU", or "...: Unknown Error"): their
/// PCI addresses with the reason ("0000:3B:00.0: GPU is lost").
std::vector<std::string> unreachable_gpus(const std::string& err);

/// What nvidia-smi's exit status means (its manual's RETURN VALUE: 15 "the GPU has fallen off the bus", 9
/// "the NVIDIA driver is not loaded", ...; 18 a driver/library version mismatch), "exit N" for others.
std::string nvidia_smi_status(int exit_code);

/// The GPU error check from nvidia-smi's query (`gpus`), the GPUs it could not reach and its exit status,
/// against the GPUs the node should have (`expected`: Slurm's gres or the instance type; 0 = not known):
/// kDrain for a GPU missing or unreachable, uncorrectable ECC errors, pages pending retirement, rows pending
/// remapping or a remapping failure.
Check judge_gpus(const std::vector<GpuErrors>& gpus, const std::vector<std::string>& unreachable,
                 int exit_code, int expected);

/// One GPU's NVLink links as `nvidia-smi nvlink --status` prints them.
struct NvlinkLinks {
  std::string gpu;            ///< "GPU 0: NVIDIA H100 80GB HBM3 (UUID: ...)" up to the colon: "GPU 0"
  int links = 0;              ///< "Link N:" lines
  std::vector<int> inactive;  ///< links printed "<inactive>"
};

/// The GPUs of `nvidia-smi nvlink --status` and their links (a GPU without NVLink has no link lines).
std::vector<NvlinkLinks> parse_nvlink_status(const std::string& out);

/// The NVLink check: kDrain when a GPU that has links has one inactive (its collectives fall back to PCIe or
/// fail), or when NVML says every link is inactive; ok (not judged) where no GPU has NVLink.
Check judge_nvlink(const std::vector<NvlinkLinks>& gpus, const std::string& err);

/// The DCGM check from `dcgmi diag -r 1`'s exit status and output: ok on 0; kDrain with the output's "Fail"
/// rows (or its first line) when a test failed (dcgmi exits 226, or 205 for a failure that asks to isolate
/// the GPU: DCGM's dcgmi/Diag.cpp); kWarn for any other exit (no host engine, a bad argument: nothing said of
/// the GPUs).
Check judge_dcgm(int exit_code, const std::string& out);

}  // namespace pcdino::doctor
