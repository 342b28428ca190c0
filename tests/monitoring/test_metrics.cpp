// The metrics files of issue #40: what a process writes into the node exporter's textfile directory, when
// it goes away, the names it accepts, and that the alert rules and the dashboard use only those names.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

#include "pcdino/core/exporters.hpp"
#include "pcdino/monitoring/metrics.hpp"

namespace fs = std::filesystem;
using namespace pcdino::monitoring;

namespace {

std::string slurp(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A fresh folder per test, removed at the end.
struct Folder {
  fs::path path;
  explicit Folder(const std::string& name) : path(fs::temp_directory_path() / ("pcdino-metrics-" + name)) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~Folder() { fs::remove_all(path); }
  std::vector<std::string> files() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(path)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
};

JobLabels job(const std::string& stage, int rank, const std::string& node = "node1") {
  JobLabels l;
  l.slurm_job_id = "42";
  l.rank = rank;
  l.node = node;
  l.stage = stage;
  return l;
}

// The value of the series whose line starts with `prefix` (name and labels), or -1.
double value_of(const std::string& text, const std::string& prefix) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(prefix, 0) == 0) return std::stod(line.substr(line.rfind(' ') + 1));
  }
  return -1;
}

}  // namespace

TEST(Metrics, TrainingFileHasTheJobsLabelsAndSaysWhenItEnded) {
  if (!PCDINO_HAVE_PROMETHEUS_CPP) GTEST_SKIP() << "built without prometheus-cpp: no files";
  Folder dir("train");
  const fs::path file = dir.path / "pcdino_42_1.prom";
  {
    MetricsFile m({dir.path.string(), 60}, job("train", 1));
    ASSERT_TRUE(m.enabled());
    EXPECT_EQ(m.path(), file.string());
    for (int step = 0; step < 3; ++step) {
      m.add("pcdino_train_steps_total", 1);
      m.add("pcdino_train_samples_total", 8);
      m.observe("pcdino_train_step_duration_seconds", 0.3);
    }
    m.add("pcdino_train_phase_seconds_total", 0.25, "forward");
    m.set("pcdino_train_loss", 6.5);
    m.write_now();
    EXPECT_EQ(dir.files(), std::vector<std::string>{"pcdino_42_1.prom"});  // no temporary left behind
    const std::string text = slurp(file);
    const std::string labels = "node=\"node1\",rank=\"1\",slurm_job_id=\"42\",stage=\"train\"";
    EXPECT_EQ(value_of(text, "pcdino_train_steps_total{" + labels + "}"), 3) << text;
    EXPECT_EQ(value_of(text, "pcdino_train_samples_total{" + labels + "}"), 24) << text;
    EXPECT_EQ(value_of(text, "pcdino_train_step_duration_seconds_count{" + labels + "}"), 3) << text;
    EXPECT_NEAR(value_of(text, "pcdino_train_step_duration_seconds_sum{" + labels + "}"), 0.9, 1e-9);
    EXPECT_EQ(value_of(text, "pcdino_train_step_duration_seconds_bucket{" + labels + ",le=\"0.32\"}"), 3);
    EXPECT_EQ(value_of(text, "pcdino_train_step_duration_seconds_bucket{" + labels + ",le=\"0.16\"}"), 0);
    EXPECT_EQ(value_of(text, "pcdino_train_phase_seconds_total{" + labels + ",phase=\"forward\"}"), 0.25);
    EXPECT_NE(text.find("pcdino_build_info{"), std::string::npos);
    EXPECT_GT(value_of(text, "pcdino_heartbeat_timestamp_seconds{" + labels + "}"), 1.7e9);
    EXPECT_NE(text.find("# TYPE pcdino_train_steps_total counter"), std::string::npos);
    EXPECT_NE(text.find("# HELP pcdino_train_loss "), std::string::npos);
  }
  // The final values stay, marked ended, until the node's next training process replaces the file.
  ASSERT_EQ(dir.files(), std::vector<std::string>{"pcdino_42_1.prom"});
  EXPECT_GT(value_of(slurp(file), "pcdino_job_end_timestamp_seconds{"), 1.7e9);
  EXPECT_EQ(value_of(slurp(file), "pcdino_train_steps_total{"), 3);
  {
    JobLabels next = job("train", 0);
    next.slurm_job_id = "43";
    MetricsFile m({dir.path.string(), 60}, next);
    EXPECT_EQ(dir.files(), std::vector<std::string>{"pcdino_43_0.prom"});
  }
}

TEST(Metrics, AFileOfAProcessThatMayStillRunStays) {
  if (!PCDINO_HAVE_PROMETHEUS_CPP) GTEST_SKIP() << "built without prometheus-cpp: no files";
  Folder dir("running");
  MetricsFile first({dir.path.string(), 60}, job("train", 0));
  JobLabels second_job = job("train", 0);
  second_job.slurm_job_id = "43";
  MetricsFile second({dir.path.string(), 60}, second_job);  // another job's rank on the same node
  EXPECT_EQ(dir.files(), (std::vector<std::string>{"pcdino_42_0.prom", "pcdino_43_0.prom"}));
}

TEST(Metrics, TheWriterRewritesTheHeartbeat) {
  if (!PCDINO_HAVE_PROMETHEUS_CPP) GTEST_SKIP() << "built without prometheus-cpp: no files";
  Folder dir("heartbeat");
  MetricsFile m({dir.path.string(), 0.05}, job("extract", 0));
  const fs::path file = dir.path / "pcdino_42_0.prom";
  const std::string prefix =
      "pcdino_heartbeat_timestamp_seconds{node=\"node1\",rank=\"0\",slurm_job_id=\"42\",stage=\"extract\"}";
  const double first = value_of(slurp(file), prefix);
  m.add("pcdino_extract_images_total", 5);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  const std::string text = slurp(file);
  EXPECT_GT(value_of(text, prefix), first);
  EXPECT_EQ(value_of(text, "pcdino_extract_images_total{"), 5) << "written without write_now()";
}

TEST(Metrics, TheDoctorsVerdictStaysAndReplacesTheNodesEarlierOne) {
  if (!PCDINO_HAVE_PROMETHEUS_CPP) GTEST_SKIP() << "built without prometheus-cpp: no files";
  Folder dir("doctor");
  {
    MetricsFile m({dir.path.string(), 60, true}, job("doctor", 0, "node1"));
    m.set("pcdino_doctor_check_ok", 0, "shared_fs");
  }
  {
    JobLabels other = job("doctor", 1, "node2");
    other.slurm_job_id = "41";
    MetricsFile m({dir.path.string(), 60, true}, other);
  }
  EXPECT_EQ(dir.files(), (std::vector<std::string>{"pcdino_41_1.prom", "pcdino_42_0.prom"}));
  EXPECT_GT(value_of(slurp(dir.path / "pcdino_42_0.prom"), "pcdino_job_end_timestamp_seconds{"), 1.7e9);
  {
    JobLabels later = job("doctor", 0, "node1");
    later.slurm_job_id = "50";
    MetricsFile m({dir.path.string(), 60, true}, later);
  }
  // node1's verdict of job 42 replaced by job 50's; node2's stays.
  EXPECT_EQ(dir.files(), (std::vector<std::string>{"pcdino_41_1.prom", "pcdino_50_0.prom"}));
}

// The node check's verdict (issue #60) is the doctor's, in a file named for its node: written from a job's
// prolog, it does not take the name of that job's own rank-0 file, and it replaces the node's earlier
// verdict.
TEST(Metrics, TheNodeChecksVerdictHasItsNodesFile) {
  if (!PCDINO_HAVE_PROMETHEUS_CPP) GTEST_SKIP() << "built without prometheus-cpp: no files";
  Folder dir("node-check");
  {
    MetricsFile m({dir.path.string(), 60, true}, job("doctor", 0, "node1"));
    m.set("pcdino_doctor_node_healthy", 1);
  }
  {
    MetricsFile m({dir.path.string(), 60, true, "pcdino_node_check_node1.prom"}, job("doctor", 0, "node1"));
    m.set("pcdino_doctor_check_ok", 0, "gpu_xid");
    m.set("pcdino_doctor_node_healthy", 0);
  }
  EXPECT_EQ(dir.files(), (std::vector<std::string>{"pcdino_node_check_node1.prom"}));
  EXPECT_EQ(value_of(slurp(dir.path / "pcdino_node_check_node1.prom"), "pcdino_doctor_node_healthy{"), 0);
}

// The textfile folder is every user's (1777): a FIFO, a link and a huge sparse file that a user put there
// under the names a stage reads at its start (issue #70) neither block it nor drown it, and are left alone.
TEST(Metrics, AFifoALinkAndAHugeFileInTheFolderLeaveAStageUnharmed) {
  if (!PCDINO_HAVE_PROMETHEUS_CPP) GTEST_SKIP() << "built without prometheus-cpp: no files";
  Folder dir("hostile");
  const fs::path fifo = dir.path / "pcdino_1_0.prom";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0666), 0);
  fs::create_symlink("/dev/zero", dir.path / "pcdino_2_0.prom");
  std::ofstream(dir.path / "pcdino_3_0.prom") << "pcdino_build_info{";
  fs::resize_file(dir.path / "pcdino_3_0.prom", std::uintmax_t{64} << 30);
  // Were the stage to block on the FIFO, a writer opens it after 5 s to let it go, and says so.
  std::mutex mutex;
  std::condition_variable done;
  bool constructed = false, released = false;
  std::thread watchdog([&] {
    std::unique_lock<std::mutex> lock(mutex);
    if (done.wait_for(lock, std::chrono::seconds(5), [&] { return constructed; })) return;
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) released = true, ::close(fd);
  });
  {
    MetricsFile m({dir.path.string(), 60, true}, job("doctor", 0, "node1"));
    {
      std::lock_guard<std::mutex> lock(mutex);
      constructed = true;
    }
    done.notify_all();
    EXPECT_TRUE(m.enabled());
  }
  watchdog.join();
  EXPECT_FALSE(released) << "the stage blocked on a FIFO in the textfile folder";
  EXPECT_TRUE(fs::is_fifo(fs::symlink_status(fifo)));
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(dir.path / "pcdino_2_0.prom")));
  EXPECT_TRUE(fs::exists(dir.path / "pcdino_42_0.prom"));
}

// Its file is written through a new temporary each time, never through a link planted at a name known in
// advance (the old ".NAME.PID").
TEST(Metrics, AFileIsNeverWrittenThroughAPlantedLink) {
  if (!PCDINO_HAVE_PROMETHEUS_CPP) GTEST_SKIP() << "built without prometheus-cpp: no files";
  Folder dir("planted");
  const fs::path victim = dir.path / "victim";
  std::ofstream(victim) << "root's";
  fs::create_symlink(victim, dir.path / (".pcdino_42_0.prom." + std::to_string(::getpid())));
  {
    MetricsFile m({dir.path.string(), 60}, job("train", 0));
    m.add("pcdino_train_steps_total", 1);
    m.write_now();
  }
  EXPECT_EQ(slurp(victim), "root's");
  EXPECT_GT(value_of(slurp(dir.path / "pcdino_42_0.prom"), "pcdino_train_steps_total{"), 0);
  EXPECT_EQ(fs::status(dir.path / "pcdino_42_0.prom").permissions() & fs::perms::others_read,
            fs::perms::others_read)
      << "the node exporter reads it as another user";
}

TEST(Metrics, NoFolderNoMetricsNoError) {
  MetricsFile absent({"/nonexistent/pcdino-textfile", 60}, job("train", 0));
  EXPECT_FALSE(absent.enabled());
  absent.add("pcdino_train_steps_total", 1);
  absent.write_now();
  MetricsFile off({"", 60}, job("meanstd", 0));
  EXPECT_FALSE(off.enabled());
}

TEST(Metrics, NamesOutsideTheTableAreRefused) {
  MetricsFile m({"", 60}, job("train", 0));
  EXPECT_THROW(m.add("pcdino_train_step_total", 1), std::invalid_argument);           // a typo
  EXPECT_THROW(m.set("pcdino_train_steps_total", 1), std::invalid_argument);          // a counter as gauge
  EXPECT_THROW(m.add("pcdino_extract_images_total", 1), std::invalid_argument);       // another stage's
  EXPECT_THROW(m.add("pcdino_train_phase_seconds_total", 1), std::invalid_argument);  // its label missing
  EXPECT_THROW(m.set("pcdino_train_loss", 1, "forward"), std::invalid_argument);      // a label too many
  EXPECT_THROW(MetricsFile({"", 60}, job("plots", 0)), std::invalid_argument);        // no such stage
}

TEST(Metrics, TableFollowsPrometheusNaming) {
  std::set<std::string> seen;
  for (const auto& s : metric_table()) {
    const std::string name = s.name;
    EXPECT_TRUE(seen.insert(name).second) << name << " twice";
    EXPECT_TRUE(std::regex_match(name, std::regex("pcdino_[a-z0-9_]+"))) << name;
    const bool total = name.size() > 6 && name.compare(name.size() - 6, 6, "_total") == 0;
    EXPECT_EQ(total, s.type == MetricType::kCounter) << name << ": _total on counters, and only there";
    EXPECT_NE(std::string(s.help), "") << name;
  }
}

// Every pcdino_ metric an alert rule or a dashboard query names is one the code exports (histograms with
// their _bucket, _sum and _count series); recording rules (level:metric:operations) are not metrics.
TEST(Metrics, RulesAndDashboardUseExportedNames) {
  std::set<std::string> exported;
  for (const auto& s : metric_table()) {
    exported.insert(s.name);
    if (s.type == MetricType::kHistogram) {
      for (const char* suffix : {"_bucket", "_sum", "_count"}) exported.insert(std::string(s.name) + suffix);
    }
  }
  const std::regex metric("(^|[^:A-Za-z0-9_])(pcdino_[a-z0-9_]+)(?![:A-Za-z0-9_])");
  std::size_t used = 0;
  for (const char* file : {"monitoring/rules/pcdino-alerts.yml", "monitoring/rules/pcdino-thresholds.yml",
                           "monitoring/grafana/pcdino-job.json"}) {
    const std::string text = slurp(fs::path(PCDINO_SOURCE_DIR) / file);
    ASSERT_FALSE(text.empty()) << file;
    for (std::sregex_iterator it(text.begin(), text.end(), metric), end; it != end; ++it) {
      const std::string name = (*it)[2];
      EXPECT_TRUE(exported.count(name)) << file << " uses " << name << ", which pcdino does not export";
      ++used;
    }
  }
  EXPECT_GT(used, 20u);
}

// Every DCGM field the dashboard and the alerts read is one dcgm-exporter exports by default, as its
// counters file at the pinned tag says (monitoring/upstream/dcgm-exporter-counters.yaml), and the image
// checks exactly the fields they read (pcdino/core/exporters.hpp).
TEST(Metrics, GpuPanelsAndAlertUseDcgmExportersDefaultCounters) {
  const YAML::Node counters = YAML::LoadFile(
      (fs::path(PCDINO_SOURCE_DIR) / "monitoring/upstream/dcgm-exporter-counters.yaml").string());
  ASSERT_EQ(counters["release"].Scalar(), pcdino::exporters::kDcgmExporterRelease);
  ASSERT_EQ(counters["port"].as<int>(), pcdino::exporters::kDcgmExporterPort);
  std::set<std::string> enabled;
  for (const auto& kv : counters["enabled"]) enabled.insert(kv.first.Scalar());
  ASSERT_GT(enabled.size(), 20u);
  const std::regex field("DCGM_[A-Z0-9_]+");
  std::set<std::string> used;
  for (const char* file : {"monitoring/rules/pcdino-alerts.yml", "monitoring/grafana/pcdino-job.json"}) {
    const std::string text = slurp(fs::path(PCDINO_SOURCE_DIR) / file);
    for (std::sregex_iterator it(text.begin(), text.end(), field), end; it != end; ++it) {
      EXPECT_TRUE(enabled.count(it->str()))
          << file << " reads " << it->str() << ", which dcgm-exporter does not export by default";
      used.insert(it->str());
    }
  }
  const std::set<std::string> checked(pcdino::exporters::dcgm_fields_used().begin(),
                                      pcdino::exporters::dcgm_fields_used().end());
  EXPECT_EQ(used, checked) << "the image checks the fields the dashboard and the alerts read";
  // The four GPU panels: utilisation, memory, power, XID.
  const std::string dashboard = slurp(fs::path(PCDINO_SOURCE_DIR) / "monitoring/grafana/pcdino-job.json");
  for (const char* title : {"GPU utilisation", "GPU memory used", "GPU power", "XID errors"})
    EXPECT_NE(dashboard.find(std::string("\"title\": \"") + title + "\""), std::string::npos) << title;
}

// Every Slurm series the dashboard reads is one slurmctld 25.11.7 serves (a real GET /metrics/nodes,
// tests/monitoring/fixtures/slurm-25.11.7), and the job's nodes are joined to Slurm's by the node label that
// both carry: pcdino's (SLURMD_NODENAME) and Slurm's own.
TEST(Metrics, SlurmPanelsUseWhatSlurmctldServes) {
  const std::string scrape =
      slurp(fs::path(PCDINO_SOURCE_DIR) / "tests/monitoring/fixtures/slurm-25.11.7/metrics-nodes.txt");
  std::set<std::string> served;
  const std::regex type("# TYPE (slurm_[a-z0-9_]+) gauge");
  for (std::sregex_iterator it(scrape.begin(), scrape.end(), type), end; it != end; ++it)
    served.insert((*it)[1]);
  ASSERT_GT(served.size(), 30u);
  EXPECT_NE(scrape.find("slurm_node_cpus_alloc{node=\"node1\"} 1\n"), std::string::npos);
  const std::string dashboard = slurp(fs::path(PCDINO_SOURCE_DIR) / "monitoring/grafana/pcdino-job.json");
  const std::regex metric("(^|[^:A-Za-z0-9_])(slurm_[a-z0-9_]+)(?![:A-Za-z0-9_])");
  std::set<std::string> used;
  for (std::sregex_iterator it(dashboard.begin(), dashboard.end(), metric), end; it != end; ++it)
    if ((*it)[2] != "slurm_job_id") used.insert((*it)[2]);
  for (const auto& name : used) EXPECT_TRUE(served.count(name)) << "the dashboard reads " << name;
  EXPECT_TRUE(used.count("slurm_node_cpus_alloc") && used.count("slurm_node_cpus_effective"));
  EXPECT_NE(dashboard.find("\"title\": \"Slurm state of the job's nodes\""), std::string::npos);
  EXPECT_NE(dashboard.find("on (node) group_left () group by (node) (pcdino_build_info"), std::string::npos);
}
