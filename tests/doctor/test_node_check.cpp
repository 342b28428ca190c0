// The node check (issue #60): NVIDIA's tools read from captures of their documented output
// (tests/doctor/fixtures/nvidia, SOURCES.md), the site file, the mount check against /proc/self/mountinfo's
// format, the report's Slurm reason and what it asks Slurm to do; the check on this machine's own
// filesystems. The local cluster runs it as Prolog and HealthCheckProgram (tests/train/test_sick_node.sh).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../lib/temp_dir.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/fs.hpp"
#include "pcdino/core/node_check_site.hpp"
#include "pcdino/core/process.hpp"
#include "pcdino/doctor/gpu_health.hpp"
#include "pcdino/doctor/node_check.hpp"

namespace pcdino::doctor {
namespace {

std::string fixture(const std::string& name) {
  return read_file(std::string(PCDINO_SOURCE_DIR) + "/tests/doctor/fixtures/nvidia/" + name, "fixture");
}

// Found by scripts/fuzz probes (doctor/fuzz/corpus/probes/crash-xid-beyond-int): an Xid number longer than an
// int threw std::out_of_range out of the node check, which runs as root in every prolog.
TEST(GpuXid, ANumberNoDriverPrintsIsNoXidAndNoCrash) {
  const std::string log =
      "3,1181,3801140022,-;NVRM: Xid (PCI:0000:3b:00): 99999999999999999999, pid=1, x\n"
      "3,1182,3801140023,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n";
  std::vector<XidEvent> events;
  ASSERT_NO_THROW(events = parse_xids(log));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].xid, 79);
  EXPECT_NO_THROW(parse_nvlink_status("GPU 0: H100\n\tLink 99999999999999: <inactive>\n"));
}

TEST(GpuXid, AFallenGpuInTheKernelLogDrainsForAReboot) {
  // /dev/kmsg records of driver 560: the UUID line, the Xid and osinit.c's own line of the same fault.
  const auto events = parse_xids(fixture("kmsg-xid79.txt"));
  ASSERT_EQ(events.size(), 1u) << "the Xid 79 line and the driver's 'fallen off the bus' line are one fault";
  EXPECT_EQ(events[0].gpu, "0000:3b:00");
  EXPECT_EQ(events[0].xid, 79);
  EXPECT_EQ(events[0].message, "GPU has fallen off the bus.");
  const Check c = judge_xids(events);
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.severity, Severity::kDrain);
  EXPECT_EQ(c.detail, "gpu 0000:3b:00 Xid 79 GPU has fallen off the bus (reboot the node)");
  // The same file read the way /dev/kmsg is read.
  EXPECT_EQ(parse_xids(read_kernel_log(std::string(PCDINO_SOURCE_DIR) +
                                       "/tests/doctor/fixtures/nvidia/kmsg-xid79.txt"))
                .size(),
            1u);
  EXPECT_THROW(read_kernel_log("/nonexistent/kmsg"), Error);
}

TEST(GpuXid, ApplicationErrorsWarnAndAreCounted) {
  // Driver 570's form (no pid or name when unknown, MIG's GPU-I): application errors leave the GPU in
  // service.
  const auto events = parse_xids(fixture("kmsg-xids-570.txt"));
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[3].gpu, "0000:2a:00");
  EXPECT_EQ(events[3].xid, 94);
  const Check c = judge_xids(events);
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.severity, Severity::kWarn);
  EXPECT_NE(c.detail.find("gpu 0000:18:00 Xid 13 x2 Graphics SM Warp Exception"), std::string::npos)
      << c.detail;
  EXPECT_NE(c.detail.find("(application error)"), std::string::npos) << c.detail;
  EXPECT_TRUE(judge_xids({}).ok);
}

TEST(GpuXid, ResetAndTheDriversOwnVerdictDrainTheMostSevereFirst) {
  // dmesg lines: an ECC double-bit error (48) and NVLink (74) need a reset; Xid 154 says the driver's
  // verdict.
  const auto events = parse_xids(fixture("dmesg-xid48-74.txt"));
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[1].gpu, "0003:00:00") << "the PCI domain is not always 0000";
  const Check c = judge_xids(events);
  EXPECT_EQ(c.severity, Severity::kDrain);
  EXPECT_EQ(c.detail.rfind("gpu 0019:01:00 Xid 154", 0), 0u) << "the reboot first: " << c.detail;
  EXPECT_NE(c.detail.find("Xid 48 An uncorrectable double bit error"), std::string::npos) << c.detail;
  EXPECT_NE(c.detail.find("(reset the GPU)"), std::string::npos) << c.detail;
  // osapi.c's three-line message, one kmsg record with its newlines escaped, is the GPU's Xid 79.
  const auto fallen = parse_xids(fixture("kmsg-fallen-off-no-xid.txt"));
  ASSERT_EQ(fallen.size(), 1u);
  EXPECT_EQ(fallen[0].xid, 79);
  EXPECT_EQ(fallen[0].gpu, "0000:b3:00.0");
  // The table's actions: application errors and monitor-only codes warn, the rest drain.
  EXPECT_EQ(xid_severity(xid_rule(13).action), Severity::kWarn);
  EXPECT_EQ(xid_severity(xid_rule(63).action), Severity::kWarn);
  EXPECT_EQ(xid_severity(xid_rule(9999).action), Severity::kWarn) << "an unknown code is monitored";
  for (int xid : {46, 48, 54, 62, 64, 74, 79, 95, 109, 110, 119, 120, 136, 140, 143, 151})
    EXPECT_EQ(xid_severity(xid_rule(xid).action), Severity::kDrain) << xid;
}

// The lines of `log` that parse_xids() finds an Xid in when it reads each alone, counted from 1.
std::vector<int> lines_with_xids(const std::string& log) {
  std::vector<int> found;
  std::istringstream in(log);
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (!parse_xids(line).empty()) found.push_back(n);
  }
  return found;
}

TEST(GpuXid, AProgramNamedLikeTheDriverInTheKernelsOwnLinesIsNoXid) {
  // Issue #70: the kernel's records (facility 0) that carry a user's text: segfault lines whose program file
  // or name is the driver's text, and a fragment that continues a line. Only the driver's Xid 48 counts.
  const std::string log = fixture("kmsg-user-text.txt");
  EXPECT_EQ(lines_with_xids(log), std::vector<int>{7});
  const auto events = parse_xids(log);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].gpu, "0000:5d:00");
  EXPECT_EQ(events[0].xid, 48);
}

TEST(GpuXid, WhatUserSpaceWritesToKmsgIsNoXid) {
  // Issue #70: a user's writes to /dev/kmsg in the driver's words: no level (LOG_USER: PRIO 12), "<3>" and
  // "<0>" (still LOG_USER: PRIO 11, 8), local7 ("<187>"); then the driver's own records.
  const std::string log = fixture("kmsg-user-writes.txt");
  EXPECT_EQ(lines_with_xids(log), (std::vector<int>{6, 7, 8}));
  const auto events = parse_xids(log);
  ASSERT_EQ(events.size(), 2u) << "the Xid 79 and osinit.c's line of 0000:5d:00, osapi.c's of 0000:b3:00.0";
  EXPECT_EQ(events[0].gpu, "0000:5d:00");
  EXPECT_EQ(events[0].xid, 79);
  EXPECT_EQ(events[1].gpu, "0000:b3:00.0");
  EXPECT_EQ(events[1].xid, 79);
}

TEST(GpuXid, TheDriversTextMidLineIsNoXid) {
  // Issue #70: dmesg's lines: the driver's Xid 79 and an older driver's "GPU at ... has fallen off the bus"
  // count; the driver's text after a segfault or general protection line's "in " does not.
  const std::string log = fixture("dmesg-user-text.txt");
  EXPECT_EQ(lines_with_xids(log), (std::vector<int>{2, 3}));
  const auto events = parse_xids(log);
  ASSERT_EQ(events.size(), 1u) << "one fault of 0000:06:00";
  EXPECT_EQ(events[0].gpu, "0000:06:00");
  EXPECT_EQ(events[0].xid, 79);
}

// A real page fault at start-up where PCDINO_TEST_FAULT_AT_START is set: the test below runs a copy of this
// program that way, as another user, so that the kernel logs a segfault in a file of its name.
const bool kFaultAtStart = [] {
  if (std::getenv("PCDINO_TEST_FAULT_AT_START") == nullptr) return false;
  std::signal(SIGSEGV, SIG_DFL);
  volatile int* volatile address = nullptr;  // a fault, not a trap the compiler puts in its place
  *address = 1;
  return true;
}();

// Issue #70, on this machine's own kernel: an unprivileged user's program named in the driver's words
// crashes, and the kernel writes its segfault record (facility 0, the program's name first: "NVRM: Xid
// (PCI:[PID]: segfault at 0 ... in ..."). Read from /dev/kmsg as the node check reads it, that record is
// there and is no Xid. Skipped where the test cannot read /dev/kmsg, switch users, or the kernel logs no
// segfaults.
TEST(GpuXid, ARealUsersSegfaultRecordInTheKernelLogIsNoXid) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (/dev/kmsg, another user)";
  std::ifstream trace("/proc/sys/debug/exception-trace");
  int traced = 0;
  if (!(trace >> traced) || traced == 0) GTEST_SKIP() << "the kernel logs no segfaults here";
  // A copy of this program under a name in the driver's words: the kernel's record starts with its first 15
  // bytes (the comm) and names the file it faulted in ("in NVRM: Xid (PCI:...): 79, ...[...]").
  test::TempDir d;
  ::chmod(d.path().c_str(), 0755);
  const std::string name = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus";
  const std::string program = d / name;
  std::filesystem::copy_file("/proc/self/exe", program);
  ::chmod(program.c_str(), 0755);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // nobody runs it, and it faults before main (kFaultAtStart)
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(3);
    ::setenv("PCDINO_TEST_FAULT_AT_START", "1", 1);
    ::execl(program.c_str(), name.c_str(), static_cast<char*>(nullptr));
    ::_exit(4);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGSEGV)
    GTEST_SKIP() << "the copy did not fault as nobody here (wait status " << status << ")";
  std::string log;
  try {
    log = read_kernel_log();
  } catch (const Error& e) {
    GTEST_SKIP() << e.what();
  }
  EXPECT_NE(log.find(name.substr(0, 15) + "["), std::string::npos) << "the kernel did not record the fault";
  EXPECT_NE(log.find("in " + name + "["), std::string::npos) << "nor the file it faulted in";
  for (const auto& e : parse_xids(log))
    EXPECT_EQ(e.message.find("segfault"), std::string::npos) << "a user's record counted as Xid " << e.xid;
  EXPECT_TRUE(parse_xids(log).empty()) << "this machine has no NVIDIA driver: no Xid at all";
}

TEST(GpuQuery, HealthyH100sPass) {
  const auto gpus = parse_gpu_query(fixture("query-h100-healthy.csv"));
  ASSERT_EQ(gpus.size(), 8u);
  EXPECT_EQ(gpus[2].bus_id, "00000000:3A:00.0");
  EXPECT_EQ(gpus[0].uncorrected_ecc, 0);
  EXPECT_FALSE(gpus[0].retired_pending.has_value()) << "[N/A]: Hopper retires no pages";
  EXPECT_EQ(gpus[0].remap_pending, false);
  const Check c = judge_gpus(gpus, {}, 0, 8);
  EXPECT_TRUE(c.ok) << c.detail;
  const Check missing = judge_gpus({gpus.begin(), gpus.begin() + 7}, {}, 0, 8);
  EXPECT_FALSE(missing.ok);
  EXPECT_EQ(missing.detail, "nvidia-smi shows 7 of the 8 GPUs the node should have");
}

TEST(GpuQuery, EccRemappingAndALostGpuDrain) {
  const auto gpus = parse_gpu_query(fixture("query-a100-remap.csv"));
  ASSERT_EQ(gpus.size(), 4u);
  EXPECT_FALSE(gpus[3].uncorrected_ecc.has_value()) << "[N/A] with MIG on";
  const Check c = judge_gpus(gpus, {}, 0, 4);
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.severity, Severity::kDrain);
  EXPECT_NE(c.detail.find("gpu 0 (00000000:07:00.0): 2 uncorrectable ECC errors"), std::string::npos)
      << c.detail;
  EXPECT_NE(c.detail.find("gpu 0 (00000000:07:00.0): rows pending remapping: reset the GPU"),
            std::string::npos);
  EXPECT_NE(c.detail.find("gpu 1 (00000000:0F:00.0): a row remapping failed"), std::string::npos);
  EXPECT_EQ(c.detail.find("gpu 3"), std::string::npos) << c.detail;
  // The GPU nvidia-smi cannot reach is named, with its exit status's meaning.
  const auto lost = unreachable_gpus(fixture("query-lost.err"));
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0], "0000:3B:00.0: GPU is lost");
  EXPECT_EQ(unreachable_gpus("Unable to determine the device handle for GPU0: 0000:01:00.0: Unknown Error\n"),
            std::vector<std::string>{"0000:01:00.0: Unknown Error"});
  const Check gone = judge_gpus(parse_gpu_query(fixture("query-lost.csv")), lost, 15, 0);
  EXPECT_EQ(gone.detail, "gpu 0000:3B:00.0: GPU is lost");
  EXPECT_EQ(judge_gpus({}, {}, 9, 0).detail, "nvidia-smi: exit 9: the NVIDIA driver is not loaded");
  EXPECT_EQ(nvidia_smi_status(15), "exit 15: a GPU has fallen off the bus or become inaccessible");
  EXPECT_THROW(parse_gpu_query("0, 00000000:07:00.0, GPU-x, 2\n"), DataError);
  EXPECT_THROW(parse_gpu_query("0, 00000000:07:00.0, GPU-x, two, No, No, No\n"), DataError);
  // Drivers before R510 know no remapped_rows fields.
  EXPECT_EQ(parse_gpu_query("0, 00000000:07:00.0, GPU-x, 0, Yes\n", false)[0].retired_pending, true);
}

TEST(GpuNvlink, AnInactiveLinkDrains) {
  const auto v100 = parse_nvlink_status(fixture("nvlink-v100-inactive.txt"));
  ASSERT_EQ(v100.size(), 2u);
  EXPECT_EQ(v100[1].gpu, "GPU 3");
  EXPECT_EQ(v100[1].inactive, (std::vector<int>{3, 5}));
  const Check down = judge_nvlink(v100, "");
  EXPECT_FALSE(down.ok);
  EXPECT_EQ(down.detail, "GPU 3 link 3,5 inactive");
  const Check h100 = judge_nvlink(parse_nvlink_status(fixture("nvlink-h100.txt")), "");
  EXPECT_TRUE(h100.ok);
  EXPECT_EQ(h100.detail, "18 links active on 1 GPU(s)");
  EXPECT_TRUE(judge_nvlink({}, "").ok) << "no NVLink (a g5): not judged";
  EXPECT_FALSE(judge_nvlink({}, "NVML: Unable to retrieve Nvlink information as all links are inActive").ok);
}

TEST(GpuDcgm, AFailedLevelOneTestIsNamed) {
  const Check c = judge_dcgm(226, fixture("dcgmi-diag-r1-fail.txt"));
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.detail, "dcgmi diag -r 1 exit 226: failed Persistence Mode");
  EXPECT_NE(judge_dcgm(205, "x\n").detail.find("(isolate the GPU)"), std::string::npos);
  const Check no_engine = judge_dcgm(250, "Error: unable to establish a connection to the specified host\n");
  EXPECT_FALSE(no_engine.ok);
  EXPECT_EQ(no_engine.severity, Severity::kWarn) << "no host engine says nothing of the GPUs";
  EXPECT_TRUE(judge_dcgm(0, "").ok);
}

TEST(NodeCheckMount, TheSharedFilesystemMustBeMountedAsItsType) {
  test::TempDir dir;
  const std::string info = dir / "mountinfo";
  test::write_text(info,
                   "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
                   "40 22 0:50 / /fsx rw,relatime shared:20 - lustre 172.31.0.5@tcp:/fsx rw,flock\n"
                   "41 22 0:51 / /home/my\\040data rw,relatime shared:21 - nfs4 fs-1.efs:/ rw\n");
  EXPECT_TRUE(check_mount({"/fsx", "FsxLustre"}, info).ok);
  EXPECT_TRUE(check_mount({"/fsx", ""}, info).ok) << "no StorageType: any filesystem";
  EXPECT_TRUE(check_mount({"/home/my data", "Efs"}, info).ok) << "mountinfo's octal escapes";
  const Check wrong = check_mount({"/fsx", "Efs"}, info);
  EXPECT_FALSE(wrong.ok);
  EXPECT_EQ(wrong.detail, "/fsx: mounted as lustre, not as Efs (nfs4 or nfs)");
  const Check bare = check_mount({"/shared", "Ebs"}, info);
  EXPECT_FALSE(bare.ok);
  EXPECT_EQ(bare.detail,
            "/shared: not mounted (a directory of the ext4 filesystem at /: jobs would write to the node's "
            "own disk)");
  // A later mount of the same point is the one on top.
  test::write_text(info, "40 22 0:50 / /fsx rw - lustre x rw\n90 40 0:99 / /fsx rw - fuse.sshfs y rw\n");
  EXPECT_FALSE(check_mount({"/fsx", "FsxLustre"}, info).ok);
  EXPECT_FALSE(check_mount({"/fsx", ""}, dir / "missing").ok);
}

TEST(NodeCheckSiteFile, ReadsBackWhatItWritesAndNamesBadKeys) {
  NodeCheckSite site;
  site.shared_storage = {{"/fsx", "FsxLustre"}, {"/apps", "Ebs"}, {"/data", ""}};
  site.local_scratch = {"/scratch"};
  site.min_scratch_gib = 50;
  site.probe_seconds = 7;
  site.dcgm = false;
  const NodeCheckSite back = parse_node_check_site(write_node_check_site(site, "a test"), "s.yaml");
  ASSERT_EQ(back.shared_storage.size(), 3u);
  EXPECT_EQ(back.shared_storage[0].storage_type, "FsxLustre");
  EXPECT_EQ(back.shared_storage[2].storage_type, "");
  EXPECT_EQ(back.local_scratch, site.local_scratch);
  EXPECT_EQ(back.min_scratch_gib, 50);
  EXPECT_EQ(back.probe_seconds, 7);
  EXPECT_FALSE(back.dcgm);
  EXPECT_EQ(back.manifest, "/opt/pcdino/manifest.json");
  const auto error = [](const std::string& yaml) {
    try {
      parse_node_check_site(yaml, "s.yaml");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_NE(error("SharedStorage:\n  - MountDir: /fsx\n    StorageType: Lustre\n")
                .find("s.yaml:3:18: SharedStorage[0].StorageType: expected one of FsxLustre|"),
            std::string::npos)
      << error("SharedStorage:\n  - MountDir: /fsx\n    StorageType: Lustre\n");
  EXPECT_NE(
      error("SharedStorage: [{MountDir: fsx}]\n").find("SharedStorage[0].MountDir: expected an absolute"),
      std::string::npos);
  EXPECT_NE(error("ProbeSecond: 3\n").find("ProbeSecond"), std::string::npos);
  EXPECT_NE(error("ProbeSeconds: 0\n").find("ProbeSeconds"), std::string::npos);
  EXPECT_EQ(parse_node_check_site("", "s.yaml").probe_seconds, 10) << "an empty file: the defaults";
}

TEST(NodeCheckWrapper, SetsWhatSlurmdLeavesOut) {
  NodeCheckPaths paths;
  paths.json = "/var/log/pcdino/node-check-%n.json";
  const std::string w = node_check_wrapper(paths);
  EXPECT_EQ(w.rfind("#!/bin/sh\n", 0), 0u);
  EXPECT_NE(w.find("\nPATH=/opt/slurm/bin:/usr/sbin:/usr/bin:/sbin:/bin\nexport PATH\n"), std::string::npos)
      << w;
  EXPECT_NE(w.find("\nSLURM_CONF=${SLURM_CONF:-/opt/slurm/etc/slurm.conf}\n"), std::string::npos) << w;
  EXPECT_NE(
      w.find("\nexec /opt/pcdino/bin/pcdino node-check --slurm --site /opt/slurm/etc/pcdino/node-check.yaml "
             "--json /var/log/pcdino/node-check-%n.json\n"),
      std::string::npos)
      << w;
  // It is a script sh runs: it execs what it names.
  test::TempDir dir;
  paths.pcdino = "/bin/echo";
  paths.json = "";
  write_file_atomic(dir / "w", node_check_wrapper(paths));
  const ProcessResult r = run_process({"sh", dir / "w"});
  EXPECT_EQ(r.out, "node-check --slurm --site /opt/slurm/etc/pcdino/node-check.yaml\n");
}

NodeCheckReport report_of(std::vector<Check> checks) {
  NodeCheckReport r;
  r.node = "node2";
  for (auto& c : checks) r.checks.push_back({c, c.name, 0.1});
  return r;
}

TEST(NodeCheckReportTest, ReasonVerdictAndWhatSlurmIsAskedToDo) {
  const NodeCheckReport sick =
      report_of({{"slurm_view", true, "2 CPUs"},
                 {"gpu_xid", false, "gpu 0000:3b:00 Xid 79 GPU has fallen off the bus"},
                 {"dcgm", false, "dcgmi slow", Severity::kWarn}});
  EXPECT_EQ(sick.verdict(), "drain");
  EXPECT_EQ(sick.reason(), "pcdino: gpu_xid: gpu 0000:3b:00 Xid 79 GPU has fallen off the bus")
      << "warnings stay out of the reason";
  const NodeCheckReport warned = report_of({{"dcgm", false, "dcgmi slow", Severity::kWarn}});
  EXPECT_EQ(warned.verdict(), "warn");
  EXPECT_EQ(warned.reason(), "");
  EXPECT_FALSE(warned.drain());
  EXPECT_EQ(report_of({{"x", false, std::string(400, 'a')}}).reason().size(), 250u);

  SlurmNodeView idle;
  idle.state = "IDLE";
  const auto drain = slurm_actions(sick, &idle, SlurmContext::kProlog);
  ASSERT_EQ(drain.size(), 1u);
  EXPECT_EQ(drain[0], (std::vector<std::string>{"scontrol", "update", "NodeName=node2", "State=DRAIN",
                                                "Reason=" + sick.reason()}));
  SlurmNodeView ours = idle;
  ours.state = "IDLE+DRAIN";
  ours.reason = sick.reason();
  EXPECT_TRUE(slurm_actions(sick, &ours, SlurmContext::kHealthCheck).empty()) << "drained for this already";
  SlurmNodeView admin = ours;
  admin.reason = "maintenance: new cables";
  EXPECT_TRUE(slurm_actions(sick, &admin, SlurmContext::kProlog).empty()) << "an admin's reason is kept";
  const NodeCheckReport healthy = report_of({{"shared_fs", true, "/fsx: mounted"}});
  EXPECT_EQ(slurm_actions(healthy, &ours, SlurmContext::kHealthCheck),
            (std::vector<std::vector<std::string>>{{"scontrol", "update", "NodeName=node2", "State=RESUME"}}))
      << "what pcdino drained returns once healthy";
  EXPECT_TRUE(slurm_actions(healthy, &ours, SlurmContext::kProlog).empty())
      << "only the health check resumes";
  EXPECT_TRUE(slurm_actions(healthy, &admin, SlurmContext::kHealthCheck).empty()) << "never an admin's drain";
  SlurmNodeView doctor = ours;
  doctor.reason = "pcdino doctor: nccl allreduce: busbw 3 GB/s < the floor 26 GB/s";
  EXPECT_TRUE(slurm_actions(healthy, &doctor, SlurmContext::kHealthCheck).empty())
      << "nor the doctor's, which judged what the node check does not probe";
  EXPECT_TRUE(drained(parse_scontrol_node("NodeName=n CPUTot=2 State=MIXED+DRAIN Reason=x [root@t]")));
  EXPECT_EQ(
      parse_scontrol_node("NodeName=n CPUTot=2 State=IDLE+DRAIN ExtSensorsTemp=n/s Reason=pcdino: a b; c "
                          "[root@2026-11-28T03:36:19]")
          .reason,
      "pcdino: a b; c");
}

// What a node should have, from Slurm's view as ParallelCluster configures it: its gres, else its instance
// type where its features say gpu; EFA devices where they say efa.
TEST(NodeCheckExpected, GpusAndEfaFromSlursView) {
  SlurmNodeView v;
  v.features = {"static", "p4d.24xlarge", "cr1", "efa", "gpu"};
  EXPECT_EQ(expected_gpus(v), 8) << "the catalogue's p4d.24xlarge";
  v.gpus = 4;
  EXPECT_EQ(expected_gpus(v), 4) << "Slurm's gres first";
  v.gpus = 0;
  v.features = {"static", "p4d.24xlarge", "cr1"};
  EXPECT_EQ(expected_gpus(v), 0) << "no gpu feature: not judged";
  v.features = {"static", "trn1.32xlarge", "gpu"};
  EXPECT_EQ(expected_gpus(v), 0) << "Trainium is not an NVIDIA GPU";
  EXPECT_EQ(expected_efa_devices("p4d.24xlarge", {"static", "p4d.24xlarge", "efa"}), 4);
  EXPECT_EQ(expected_efa_devices("p5.48xlarge", {"p5.48xlarge", "efa"}), 32);
  EXPECT_EQ(expected_efa_devices("p5.48xlarge", {"p5.48xlarge"}), 0) << "EFA off for the compute resource";
  const Check none = check_efa(4, 5);
  EXPECT_FALSE(none.ok) << "no EFA device on this machine: " << none.detail;
  EXPECT_TRUE(check_efa(0, 5).ok);
}

// On this machine: a directory of the root filesystem declared shared is not a mount, and drains; the check
// ends within its time limit and says which probes ran.
TEST(NodeCheckRun, ADirectoryThatIsNoMountDrains) {
  test::TempDir dir;
  NodeCheckSite site;
  site.shared_storage = {{dir.path().string(), ""}};
  site.local_scratch = {dir.path().string(), "/nonexistent/scratch"};
  site.min_scratch_gib = 0;
  site.manifest = "";
  site.probe_seconds = 3;
  const auto start = std::chrono::steady_clock::now();
  const NodeCheckReport r = run_node_check(site, "no-such-node");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 3 * 2 + 2.0);
  EXPECT_TRUE(r.drain());
  EXPECT_NE(r.reason().find("shared_fs: " + dir.path().string() + ": not mounted"), std::string::npos)
      << r.reason();
  int scratch = 0;
  for (const auto& c : r.checks) {
    if (c.check.name == "slurm_view") {
      EXPECT_EQ(c.check.severity, Severity::kWarn) << "no controller: warn";
    }
    if (c.check.name == "scratch") ++scratch;
  }
  EXPECT_EQ(scratch, 1) << "a scratch directory the node has not is not judged";
  const std::string json = node_check_json(r);
  EXPECT_NE(json.find("\"verdict\": \"drain\""), std::string::npos) << json;
  EXPECT_NE(format_node_check(r).find("no-such-node: drain in "), std::string::npos);
}

// The limit the health check runs within (issue #74): HealthCheckTimeout where the Slurm that scontrol names
// has it (26.05 on), Slurm's fixed 60 s before, and every probe within half of it. The show-config lines are
// as src/api/config_info.c prints them ("%u sec"; scontrol pads each key to 23 columns).
TEST(NodeCheckLimit, TheHealthCheckRunsWithinSlurmsLimitAndSaysWhose) {
  const auto config = [](const std::string& version, const std::string& timeout) {
    std::string text = "Configuration data as of 2026-12-02T10:00:00\nHealthCheckInterval     = 300 sec\n";
    if (!timeout.empty()) text += "HealthCheckTimeout      = " + timeout + "\n";
    return text + "SLURM_VERSION           = " + version + "\n";
  };
  EXPECT_EQ(health_check_limit("").seconds, 60) << "scontrol did not answer";
  EXPECT_EQ(health_check_limit("").source, CheckLimit{}.source);
  const CheckLimit newest = health_check_limit(config("26.05.3", "20 sec"));
  EXPECT_EQ(newest.seconds, 20);
  EXPECT_EQ(newest.source, "HealthCheckTimeout of Slurm 26.05.3");
  // 25.11's slurmd kills the program at 60 s whatever the line says: a key its release lacks is not read.
  const CheckLimit older = health_check_limit(config("25.11.7", "20 sec"));
  EXPECT_EQ(older.seconds, 60);
  EXPECT_EQ(older.source, "Slurm 25.11.7's fixed limit for a HealthCheckProgram");
  EXPECT_EQ(health_check_limit(config("26.05.3", "")).seconds, 60);
  EXPECT_EQ(health_check_limit(config("26.05.3", "0 sec")).source,
            "Slurm 26.05.3's default HealthCheckTimeout");

  const auto limit_of = [](const NodeCheckSite& site, const std::string& name) {
    for (const auto& p : node_probes())
      if (name == p.name) return probe_limit(site, p);
    ADD_FAILURE() << "no probe " << name;
    return 0.0;
  };
  NodeCheckSite site;  // ProbeSeconds 10 under Slurm's 60 s: as before HealthCheckTimeout
  EXPECT_EQ(limit_of(site, "shared_fs"), 10);
  EXPECT_EQ(limit_of(site, "dcgm"), 30);
  site.limit = newest;
  EXPECT_EQ(limit_of(site, "shared_fs"), 10);
  EXPECT_EQ(limit_of(site, "dcgm"), 10);
  site.limit.seconds = 120, site.probe_seconds = 20;
  EXPECT_EQ(limit_of(site, "shared_fs"), 20);
  EXPECT_EQ(limit_of(site, "dcgm"), 60);
  site.limit.seconds = 1;
  EXPECT_EQ(limit_of(site, "gpus"), 1) << "at least a second";

  test::TempDir dir;
  NodeCheckSite small;
  small.shared_storage = {{dir.path().string(), ""}};
  small.manifest = "";
  small.limit = {6, "a test's limit"};
  const NodeCheckReport r = run_node_check(small, "no-such-node");
  const std::string text = format_node_check(r);
  EXPECT_EQ(text.substr(0, text.find('\n')),
            "pcdino node-check on no-such-node, within 6 s (a test's limit)");
  EXPECT_NE(node_check_json(r).find("\"limit_seconds\": 6.0"), std::string::npos) << node_check_json(r);
}

}  // namespace
}  // namespace pcdino::doctor
