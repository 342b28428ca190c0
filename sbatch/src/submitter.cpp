#include "pcdino/sbatch/submitter.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <regex>
#include <sstream>

#include "pcdino/core/error.hpp"
#include "pcdino/core/fs.hpp"
#include "pcdino/core/process.hpp"
#include "pcdino/core/run_files.hpp"
#include "pcdino/core/slurm_features.hpp"

namespace pcdino::sbatch {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

const char* const kSlurmHint =
    "the pipeline commands need Slurm's client commands on PATH (Debian: slurm-client)";

std::string now_iso() {
  const std::time_t t = std::time(nullptr);
  std::tm local{};
  localtime_r(&t, &local);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S%z", &local);
  return text;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

json read_state(const RunLayout& files) {
  if (!fs::exists(files.job_state)) {
    throw NoInputError("no submission recorded for this run (" + files.job_state +
                       " does not exist): submit it with `pcdino submit`");
  }
  try {
    return json::parse(read_file(files.job_state, "pipeline state"));
  } catch (const json::exception& e) {
    throw DataError(files.job_state + ": not a pipeline state file (" + e.what() + ")");
  }
}

// The stages whose completion marker records the configuration they ran with now.
std::set<Stage> complete_stages(const RunLayout& files, const std::map<Stage, std::string>& hashes) {
  std::set<Stage> complete;
  for (const auto& [stage, hash] : hashes) {
    std::ifstream in(files.stage_marker(stage));
    if (!in) continue;
    try {
      const json marker = json::parse(in);
      if (marker.value("config_hash", "") == hash) complete.insert(stage);
    } catch (const json::exception&) {
      // A torn or foreign marker means "not complete".
    }
  }
  return complete;
}

// The run time a completion marker records, as Slurm writes it (HH:MM:SS), or "".
std::string marker_elapsed(const std::string& path) {
  std::ifstream in(path);
  try {
    const json marker = json::parse(in);
    if (!marker.contains("seconds")) return "";
    const long s = marker["seconds"].get<long>();
    return fmt::format("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
  } catch (const json::exception&) {
    return "";
  }
}

// "Key=Value Key=Value ..." of `scontrol show job -o`; values hold no spaces except the last keys'.
std::map<std::string, std::string> parse_scontrol(const std::string& line) {
  std::map<std::string, std::string> fields;
  std::istringstream in(line);
  std::string word;
  while (in >> word) {
    const auto eq = word.find('=');
    if (eq != std::string::npos) fields[word.substr(0, eq)] = word.substr(eq + 1);
  }
  return fields;
}

bool is_active(const std::string& state) {
  static const std::set<std::string> active = {"PENDING",   "RUNNING",      "CONFIGURING", "COMPLETING",
                                               "REQUEUED",  "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING",
                                               "SUSPENDED", "STAGE_OUT",    "SIGNALING"};
  return active.count(state) != 0;
}

bool is_failure(const std::string& state) {
  return state != "COMPLETED" && state != "COMPLETE" && state != "NOT_SUBMITTED" && !is_active(state) &&
         state != "UNKNOWN";
}

// The line of a stderr file that says why a stage failed: pcdino's last "error: ..." / "[error] ..." line;
// else the last other line that mentions an error, before srun's own "srun: error: ... Exited with exit
// code" lines (MPI_Abort's banner and slurmstepd's "CANCELLED" come after pcdino's line); else the last line.
std::string last_error_line(const std::string& path) {
  std::ifstream in(path);
  std::string line, pcdino, other, launcher, last;
  while (std::getline(in, line)) {
    line = trim(line);
    if (line.empty()) continue;
    last = line;
    if (line.rfind("error: ", 0) == 0 || line.find("] [error] ") != std::string::npos) {
      pcdino = line;
      continue;
    }
    std::string lower = line;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    if (lower.find("error") == std::string::npos) continue;
    (lower.rfind("srun:", 0) == 0 ? launcher : other) = line;
  }
  return !pcdino.empty() ? pcdino : !other.empty() ? other : !launcher.empty() ? launcher : last;
}

// The starts of `job_id` after its first: the batch script's start lines and the trainer's resume lines in
// its stderr file, with the reason the script recorded for the start before each.
std::vector<StageRestart> restart_log(const RunLayout& files, const Stage& stage, const std::string& job_id) {
  static const std::regex start_line(R"(^pcdino: stage \S+, job (\S+) \(start ([0-9]+)\) on (\S+) at (\S+))");
  static const std::regex resume_line(R"(resuming from .* at epoch ([0-9]+) iteration ([0-9]+))");
  std::map<int, std::string> why;  // by the start that ended (1 for the first)
  std::ifstream records(files.stage_restarts(stage));
  for (std::string line; std::getline(records, line);) {
    const json r = json::parse(line, nullptr, false);
    if (!r.is_object() || r.value("job_id", "") != job_id) continue;
    const std::string excluded = r.value("excluded", "");
    why[r.value("start", 0)] = fmt::format(
        "exit {} on {}: {}{}", r.value("exit_code", 0), r.value("nodes", "?"), r.value("why", "?"),
        excluded.empty() ? "" : "; kept off " + excluded + ", where it failed");
  }
  std::vector<StageRestart> log;
  std::ifstream err(files.stage_output(stage, job_id, true));
  bool in_restart = false;
  std::smatch m;
  for (std::string line; std::getline(err, line);) {
    if (std::regex_search(line, m, start_line) && m[1] == job_id) {
      const int start = std::stoi(m[2]);
      in_restart = start > 1;
      if (!in_restart) continue;
      const auto recorded = why.find(start - 1);
      log.push_back({start, m[4], m[3],
                     recorded != why.end()
                         ? recorded->second
                         : "requeued by Slurm (a node of the job failed, or scontrol requeue)",
                     ""});
    } else if (in_restart && log.back().resumed.empty() && std::regex_search(line, m, resume_line)) {
      const std::string iterations = m[2].str() == "0" ? "" : " and " + m[2].str() + " iterations";
      log.back().resumed = m[1].str() + " epochs" + iterations;
    }
  }
  return log;
}

StageStatus query_job(const RunLayout& files, const Stage& stage, const std::string& job_id,
                      const std::set<Stage>& complete) {
  StageStatus st{stage, job_id, "", "", "", "", "", 0, "", {}};
  const ProcessResult r = run_process({"scontrol", "show", "job", "-o", job_id}, kSlurmHint);
  if (r.exit_code == 0 && !r.out.empty()) {
    auto f = parse_scontrol(r.out);
    st.state = f["JobState"];
    st.elapsed = f["RunTime"];
    st.exit_code = f["ExitCode"];
    st.reason = f["Reason"] == "None" ? "" : f["Reason"];
    st.restarts =
        f.count("Restarts") != 0 ? static_cast<int>(std::strtol(f["Restarts"].c_str(), nullptr, 10)) : 0;
  } else {
    // Slurm forgot the job (MinJobAge): accounting, when the cluster keeps it.
    try {
      const ProcessResult a =
          run_process({"sacct", "-n", "-X", "-P", "-j", job_id, "-o", "State,Elapsed,ExitCode,Reason"});
      std::istringstream rows(a.out);
      std::string row;
      if (a.exit_code == 0 && std::getline(rows, row) && !trim(row).empty()) {
        std::vector<std::string> cols;
        std::stringstream cells(trim(row));
        std::string cell;
        while (std::getline(cells, cell, '|')) cols.push_back(cell);
        cols.resize(4);
        st.state = cols[0].substr(0, cols[0].find(' '));  // "CANCELLED by 0"
        st.elapsed = cols[1];
        st.exit_code = cols[2];
        st.reason = cols[3] == "None" ? "" : cols[3];
      }
    } catch (const Error&) {
      // No sacct on this machine.
    }
    if (st.state.empty() && complete.count(stage) != 0) {
      st.state = "COMPLETE";
      st.elapsed = marker_elapsed(files.stage_marker(stage));
    }
    if (st.state.empty()) st.state = "UNKNOWN";
  }
  if (is_failure(st.state)) st.error = last_error_line(files.stage_output(stage, job_id, true));
  if (stage_spec(stage).requeues) st.restart_log = restart_log(files, stage, job_id);
  return st;
}

std::string shell_join(const std::vector<std::string>& args) {
  std::string line;
  for (const auto& a : args)
    line += (line.empty() ? "" : " ") + (a.find('$') != std::string::npos ? a : shell_quote(a));
  return line;
}

}  // namespace

PipelineConfig with_absolute_paths(PipelineConfig config, const std::string& base) {
  const auto absolute = [&](std::string& path) {
    if (!path.empty() && fs::path(path).is_relative())
      path = (fs::path(base) / path).lexically_normal().string();
  };
  absolute(config.meta.dataset_dir);
  absolute(config.meta.output_dir);
  if (config.meta.output_dir.empty()) config.meta.output_dir = base;
  const std::string run = config.run_dir();
  if (const std::string problem = sbatch_path_problem(run); !problem.empty()) {
    throw ConfigError("meta.output_dir/meta.name_of_run: the run folder '" + run + "' " + problem);
  }
  return config;
}

void check_container_settings(const PipelineConfig& config, const std::string& srun_help) {
  const SlurmConfig& s = config.slurm;
  if (s.container_image.empty()) return;
  if (s.launcher != "srun") {
    throw ConfigError("slurm.container_image: Pyxis runs the steps srun starts, and slurm.launcher is " +
                      s.launcher + " (use srun)");
  }
  if (s.container_image.front() == '/' && !fs::is_regular_file(s.container_image)) {
    throw ConfigError("slurm.container_image: no image file '" + s.container_image +
                      "' here (make one with scripts/container-image and put it on the shared filesystem)");
  }
  // Each mount: its source, and where it appears inside (Pyxis: DST defaults to SRC).
  std::vector<std::pair<fs::path, fs::path>> mounts;
  for (std::size_t i = 0; i < s.container_mounts.size(); ++i) {
    const std::string& m = s.container_mounts[i];
    const auto colon = m.find(':');
    const std::string src = m.substr(0, colon);
    std::string dst = colon == std::string::npos ? src : m.substr(colon + 1);
    dst = dst.substr(0, dst.find(':'));
    if (!fs::exists(src)) {
      throw ConfigError("slurm.container_mounts[" + std::to_string(i) + "]: '" + src +
                        "' does not exist here: a mount's source must be on the shared filesystem that "
                        "every node has");
    }
    mounts.emplace_back(fs::path(src).lexically_normal(), fs::path(dst).lexically_normal());
  }
  const auto inside_at_own_path = [&](const fs::path& p) {
    return std::any_of(mounts.begin(), mounts.end(), [&](const auto& m) {
      if (m.first != m.second) return false;
      const auto rel = p.lexically_normal().lexically_relative(m.first);
      return !rel.empty() && *rel.begin() != "..";
    });
  };
  for (const auto& [key, path] :
       {std::pair<std::string, std::string>{"meta.dataset_dir", config.meta.dataset_dir},
        {"meta.output_dir (the run folder)", config.run_dir()}}) {
    if (!path.empty() && !inside_at_own_path(path)) {
      throw ConfigError("slurm.container_mounts: " + key + " '" + path +
                        "' is not inside the container at its own path; add a mount of it or of a folder "
                        "above it (SRC, or SRC:SRC)");
    }
  }
  if (!srun_help.empty() && srun_help.find("--container-image") == std::string::npos) {
    throw ConfigError(
        "slurm.container_image: this cluster's srun has no --container-image: Pyxis is not "
        "loaded (`pcdino cluster generate` with containers: on, or ParallelCluster's "
        "examples/pyxis)");
  }
}

bool expedites_requeues(const std::string& config) {
  auto keys = slurm::parse_show_config(config);  // SlurmctldParameters: a comma list, "(null)" when unset
  if (!slurm::has(keys["SLURM_VERSION"], "expedited_requeue")) return false;
  const auto asked = slurm::features_of_setting("SlurmctldParameters", keys["SlurmctldParameters"]);
  return std::any_of(asked.begin(), asked.end(),
                     [](const slurm::Feature* f) { return std::string(f->name) == "expedited_requeue"; });
}

bool cluster_expedites_requeues() {
  try {
    const ProcessResult r = run_process({"scontrol", "show", "config"}, kSlurmHint, 30);
    return r.exit_code == 0 && expedites_requeues(r.out);
  } catch (const Error&) {
    return false;
  }
}

SubmitReport submit_pipeline(const PipelineConfig& config, const SubmitOptions& options, std::ostream& out) {
  const RunLayout files(config);
  const auto hashes = stage_config_hashes(config);
  SubmitReport report;
  if (!config.slurm.container_image.empty()) {
    std::string help;
    if (!options.dry_run) {
      try {
        help = run_process({"srun", "--help"}, kSlurmHint, 30).out;
      } catch (const Error&) {
        help.clear();  // no srun here: sbatch fails below with its own message
      }
    }
    check_container_settings(config, help);
  }

  json state = json::object();
  if (!options.dry_run && fs::exists(files.job_state)) {
    state = read_state(files);
    std::vector<std::string> busy;
    for (const auto& st : pipeline_status(config)) {
      if (is_active(st.state)) busy.push_back(st.stage + " (job " + st.job_id + ", " + st.state + ")");
    }
    if (!busy.empty()) {
      std::string list;
      for (const auto& b : busy) list += (list.empty() ? "" : ", ") + b;
      throw Error(ExitCode::kTempFail, "run '" + config.meta.name_of_run +
                                           "' still has jobs queued or running: " + list +
                                           "; wait for them or `pcdino cancel` first");
    }
  }
  const std::vector<Stage> enabled = enabled_stages(config);
  for (const auto& stage : options.stages) {
    if (std::find(enabled.begin(), enabled.end(), stage) == enabled.end()) {
      const char* key = stage_spec(stage).switch_key;
      throw ConfigError("--stages: stage " + stage + " is off in this configuration (" + key +
                        " is false; --set " + key + "=true turns it on)");
    }
  }
  std::vector<Stage> selected = options.stages.empty() ? enabled : options.stages;
  // A check on is part of every submission of a stage that waits for it (--stages train runs the doctor).
  for (const auto& stage : enabled) {
    if (!stage_spec(stage).check || std::find(selected.begin(), selected.end(), stage) != selected.end())
      continue;
    const bool guards =
        std::any_of(selected.begin(), selected.end(), [&](const Stage& s) { return waits_for(s, stage); });
    if (guards) selected.insert(selected.begin(), stage);
  }
  const std::set<Stage> complete = options.resume ? complete_stages(files, hashes) : std::set<Stage>{};
  const auto plan = plan_jobs(selected, complete);
  for (const auto& stage : selected) {
    if (complete.count(stage) != 0 && !stage_spec(stage).check &&
        std::none_of(plan.begin(), plan.end(), [&](const PlannedJob& j) { return j.stage == stage; })) {
      report.complete.push_back(stage);
    }
  }

  const ScriptOptions script_options{options.pcdino, cluster_expedites_requeues()};
  if (options.dry_run) {
    out << "# pcdino submit --dry-run: run '" << config.meta.name_of_run << "' in " << config.run_dir()
        << "\n";
    for (const auto& stage : report.complete) out << "# " << stage << ": complete, not resubmitted\n";
    std::map<Stage, std::string> ids;
    for (const auto& job : plan) {
      out << "\n# ---- " << files.stage_script(job.stage) << " ----\n"
          << render_script(config, job.stage, script_options, hashes.at(job.stage));
    }
    out << "\n# ---- sbatch commands ----\n";
    for (const auto& job : plan) {
      auto args = sbatch_arguments(job, ids);
      args.push_back(files.stage_script(job.stage));
      out << job.stage << "=$(" << shell_join(args) << ")\n";
      ids[job.stage] = "$" + job.stage;
      report.jobs.push_back({job.stage, ids[job.stage], job.after});
    }
    return report;
  }

  make_directories(files.logs_dir);
  write_file_atomic(files.submitted_config, dump_config(config));
  for (const auto& job : plan) {
    write_file_atomic(files.stage_script(job.stage),
                      render_script(config, job.stage, script_options, hashes.at(job.stage)));
    fs::permissions(files.stage_script(job.stage), fs::perms::owner_exec | fs::perms::group_exec,
                    fs::perm_options::add);
  }

  std::map<Stage, std::string> ids;
  if (!state.contains("jobs")) state["jobs"] = json::object();
  for (const auto& job : plan) {
    auto args = sbatch_arguments(job, ids);
    args.push_back(files.stage_script(job.stage));
    const ProcessResult r = run_process(args, kSlurmHint);
    // --parsable prints "id" or "id;cluster".
    std::string id = trim(r.out);
    if (const auto semicolon = id.find(';'); semicolon != std::string::npos) id.resize(semicolon);
    if (r.exit_code != 0 || id.empty() || id.find_first_not_of("0123456789") != std::string::npos) {
      for (const auto& [stage, submitted] : ids) run_process({"scancel", submitted});
      throw Error(ExitCode::kSoftware,
                  "sbatch refused stage " + job.stage + " (exit code " + std::to_string(r.exit_code) +
                      "): " + trim(r.err + r.out) +
                      (ids.empty() ? "" : "; the stages submitted before it were cancelled"));
    }
    ids[job.stage] = id;
    report.jobs.push_back({job.stage, id, job.after});
    state["jobs"][job.stage] = {{"job_id", id},
                                {"config_hash", hashes.at(job.stage)},
                                {"submitted", now_iso()},
                                {"after", job.after}};
  }
  state["name_of_run"] = config.meta.name_of_run;
  state["run_dir"] = config.run_dir();
  state["config"] = config.source;
  write_file_atomic(files.job_state, state.dump(2) + "\n");

  for (const auto& stage : report.complete)
    out << fmt::format("{:<8} complete (configuration unchanged)\n", stage);
  for (const auto& job : report.jobs) {
    std::string after;
    for (const auto& dep : job.after) after += (after.empty() ? " after " : ", ") + dep + " " + ids.at(dep);
    out << fmt::format("{:<8} job {}{}\n", job.stage, job.job_id, after);
  }
  return report;
}

std::vector<StageStatus> pipeline_status(const PipelineConfig& config) {
  const RunLayout files(config);
  const json state = read_state(files);
  const auto complete = complete_stages(files, stage_config_hashes(config));
  std::vector<StageStatus> result;
  std::map<Stage, std::vector<Stage>> waited_for;  // what each job waited for when it was submitted
  const json jobs = state.value("jobs", json::object());
  for (const auto& stage : all_stages()) {
    const bool enabled = stage_enabled(stage_spec(stage), config);
    if (!jobs.contains(stage)) {
      if (!enabled) continue;  // not in this pipeline
      result.push_back(
          {stage, "", complete.count(stage) != 0 ? "COMPLETE" : "NOT_SUBMITTED", "", "", "", "", 0, "", {}});
      continue;
    }
    // State files before the `after` record: the stage's dependencies as the table has them.
    waited_for[stage] = jobs[stage].contains("after") ? jobs[stage]["after"].get<std::vector<Stage>>()
                                                      : stage_dependencies(stage);
    StageStatus st = query_job(files, stage, jobs[stage].value("job_id", ""), complete);
    // A stage switched off since: shown only while its job is still queued or running (cancel finds it).
    if (enabled || is_active(st.state)) result.push_back(st);
  }
  // A stage Slurm cancelled because a stage it waits for failed never ran: say which one, and why that one
  // failed (the first failure up the chain, so that every stage after a failed check names the check).
  std::map<Stage, const StageStatus*> by_stage;
  for (auto& st : result) {
    if (is_failure(st.state) && st.reason.find("Dependency") != std::string::npos) {
      for (const auto& dep : waited_for[st.stage]) {
        const auto d = by_stage.find(dep);
        if (d == by_stage.end() || !is_failure(d->second->state)) continue;
        st.blocked_by = d->second->blocked_by.empty() ? dep : d->second->blocked_by;
        const StageStatus& root = *by_stage.at(st.blocked_by);
        st.error = "not started: stage " + root.stage + " " + root.state + (root.error.empty() ? "" : ": ") +
                   root.error;
        break;
      }
    }
    by_stage[st.stage] = &st;
  }
  return result;
}

bool print_status(const PipelineConfig& config, std::ostream& out) {
  const auto stages = pipeline_status(config);
  out << "run '" << config.meta.name_of_run << "' in " << config.run_dir() << "\n";
  out << fmt::format("{:<8} {:>8} {:<14} {:>11} {:>5} {}\n", "STAGE", "JOBID", "STATE", "ELAPSED", "EXIT",
                     "REASON");
  bool ok = true;
  for (const auto& s : stages) {
    std::string reason = s.reason;
    if (s.restarts > 0) reason += (reason.empty() ? "" : ", ") + fmt::format("requeued {}x", s.restarts);
    out << fmt::format("{:<8} {:>8} {:<14} {:>11} {:>5} {}\n", s.stage, s.job_id.empty() ? "-" : s.job_id,
                       s.state, s.elapsed.empty() ? "-" : s.elapsed, s.exit_code.empty() ? "-" : s.exit_code,
                       reason);
    if (!s.error.empty()) out << "         " << s.error << "\n";
    if (is_failure(s.state)) ok = false;
  }
  for (const auto& s : stages) {
    for (const auto& r : s.restart_log) {
      out << fmt::format("{}: start {} at {} on {}, {}; after {}\n", s.stage, r.start, r.time, r.nodes,
                         r.resumed.empty() ? "not resumed (yet)" : "resumed after " + r.resumed, r.after);
    }
  }
  for (const auto& s : stages) {
    if (is_failure(s.state) && !s.error.empty() && s.blocked_by.empty()) {
      out << "stage " << s.stage << " ended " << s.state << ": see `pcdino logs " << config.source << " "
          << s.stage << "`; `pcdino resume` then runs the stages that are not complete\n";
      break;
    }
  }
  return ok;
}

std::vector<std::string> cancel_pipeline(const PipelineConfig& config) {
  std::vector<std::string> ids, cancelled;
  for (const auto& s : pipeline_status(config)) {
    if (is_active(s.state)) {
      ids.push_back(s.job_id);
      cancelled.push_back(s.stage + " " + s.job_id);
    }
  }
  if (ids.empty()) return cancelled;
  std::vector<std::string> args = {"scancel"};
  args.insert(args.end(), ids.begin(), ids.end());
  const ProcessResult r = run_process(args, kSlurmHint);
  if (r.exit_code != 0) throw Error(ExitCode::kSoftware, "scancel failed: " + trim(r.err));
  return cancelled;
}

void print_logs(const PipelineConfig& config, const Stage& stage, int lines, const std::string& stream,
                std::ostream& out) {
  parse_stages(stage, "pcdino logs");
  const RunLayout files(config);
  const json state = read_state(files);
  const json jobs = state.value("jobs", json::object());
  if (!jobs.contains(stage)) {
    throw NoInputError("stage " + stage + " of run '" + config.meta.name_of_run + "' was never submitted");
  }
  const std::string job = jobs[stage].value("job_id", "");
  std::vector<bool> which;
  if (stream != "err") which.push_back(false);
  if (stream != "out") which.push_back(true);
  bool any = false;
  for (const bool error : which) {
    const std::string path = files.stage_output(stage, job, error);
    std::ifstream in(path);
    if (!in) continue;
    any = true;
    std::deque<std::string> tail;
    std::string line;
    while (std::getline(in, line)) {
      tail.push_back(line);
      if (static_cast<int>(tail.size()) > lines) tail.pop_front();
    }
    out << "==> " << path << " <==\n";
    for (const auto& l : tail) out << l << "\n";
  }
  if (!any) {
    throw NoInputError("no output of stage " + stage + " (job " + job +
                       ") yet: " + files.stage_output(stage, job, false) +
                       " does not exist (the job may still be pending)");
  }
}

}  // namespace pcdino::sbatch
