#include "pcdino/sbatch/scripts.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <sstream>

#include "pcdino/core/error.hpp"
#include "pcdino/core/process.hpp"
#include "pcdino/core/run_files.hpp"
#include "pcdino/core/text_template.hpp"

namespace pcdino::sbatch {

namespace fs = std::filesystem;

namespace {

std::uint64_t fnv1a(const std::string& text) {
  std::uint64_t h = 14695981039346656037ULL;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

// Version of the hashed text below (v1: a dump of the stage's sections, up to 1c02a51).
constexpr const char* kStageHashFormat = "pcdino stage hash v2";

// The keys that decide a stage's outputs, one "path=value" line each, in the schema's order.
std::string stage_inputs(const PipelineConfig& config, const StageSpec& stage) {
  std::string text;
  for (const auto& key : config_schema()) {
    if (stage_reads_key(stage, key.path)) text += key.path + "=" + config_value(config, key.path) + "\n";
  }
  return text;
}

// The #SBATCH lines: the job's name, its output files, its resources and whether Slurm may requeue it.
void write_directives(std::ostream& o, const PipelineConfig& config, const Stage& stage,
                      const StageSpec& spec, const RunLayout& files, bool requeue, bool expedite) {
  const SlurmConfig& s = config.slurm;
  const auto sbatch = [&o](const std::string& option) { o << "#SBATCH " << option << "\n"; };
  sbatch("--job-name=" + config.meta.name_of_run + "-" + stage);
  sbatch("--output=" + files.stage_output(stage, "%j", false));
  sbatch("--error=" + files.stage_output(stage, "%j", true));
  sbatch("--open-mode=append");
  sbatch("--chdir=" + config.run_dir());
  const StageResources r = spec.resources(config);
  if (r.nodes > 0) sbatch("--nodes=" + std::to_string(r.nodes));
  if (r.tasks_per_node > 0) sbatch("--ntasks-per-node=" + std::to_string(r.tasks_per_node));
  if (r.tasks > 0) sbatch("--ntasks=" + std::to_string(r.tasks));
  if (s.gpus && r.gpus_per_node > 0) sbatch("--gpus-per-node=" + std::to_string(r.gpus_per_node));
  if (s.cpus_per_task > 0) sbatch("--cpus-per-task=" + std::to_string(s.cpus_per_task));
  if (!s.mem.empty()) sbatch("--mem=" + s.mem);
  if (const auto t = s.time_limit.find(stage); t != s.time_limit.end()) sbatch("--time=" + t->second);
  if (!s.partition.empty()) sbatch("--partition=" + s.partition);
  if (!s.account.empty()) sbatch("--account=" + s.account);
  if (!s.qos.empty()) sbatch("--qos=" + s.qos);
  if (!s.constraint.empty()) sbatch("--constraint=" + s.constraint);
  if (spec.accelerated && s.exclusive) sbatch("--exclusive");
  if (requeue) {
    sbatch(expedite ? "--requeue=expedite" : "--requeue");
    if (s.signal_seconds > 0) sbatch("--signal=USR1@" + std::to_string(s.signal_seconds));
  } else {
    sbatch("--no-requeue");
  }
}

// The restart budget: the job ends (exit 79, ExitCode::kRestartsSpent) once it has started again after more
// faults than slurm.max_restarts. Faults are the starts before this one that ran this script (each writes its
// start line to the job's stderr file) less the requeues after an agreed checkpoint (write_requeue records
// them): a requeue Slurm made itself after a node of the job failed counts, one after a prolog found a sick
// node (nothing of the job ran) does not. Where the stderr file cannot be read, every restart counts.
const char* const kRestartBudget = R"SH(restarts=@RESTARTS@  # why this script requeued its job
err_file=@ERR@
err_file=${err_file//%j/$SLURM_JOB_ID}
restart=${SLURM_RESTART_COUNT:-0}
agreed=$(grep -F "\"job_id\": \"${SLURM_JOB_ID}\"," "$restarts" 2>/dev/null | grep -c '"fault": false')
ran=$(grep -c "^pcdino: stage @STAGE@, job ${SLURM_JOB_ID} (start " "$err_file" 2>/dev/null)
if [ "${ran:-0}" -gt 0 ]; then faults=$((ran - 1 - agreed)); else faults=$((restart - agreed)); fi
if [ "$faults" -gt @MAX@ ]; then
  echo "error: pcdino: stage @STAGE@ failed for good: started again after $faults fault(s), more than slurm.max_restarts (@MAX@); \`pcdino status\` lists each restart and why" >&2
@FOR_GOOD@  exit @SPENT@
fi
)SH";

// Before an exit that ends an expedited requeue job for good: Slurm 25.11 would requeue and hold a job whose
// script ends non-zero (job_mgr.c: "holding expedited requeue ... as no epilogs failed"); with Requeue=0 it
// fails, and the stages behind it are cancelled as on any other release.
const char* const kForGood =
    R"SH(  scontrol update JobId="${SLURM_JOB_ID}" Requeue=0 || echo "pcdino: could not turn job ${SLURM_JOB_ID}'s requeue off: Slurm may hold it (scancel it)" >&2
)SH";

void write_restart_budget(std::ostream& o, const Stage& stage, const RunLayout& files, const SlurmConfig& s,
                          bool expedite) {
  o << fill_template(kRestartBudget, {{"RESTARTS", shell_quote(files.stage_restarts(stage))},
                                      {"ERR", shell_quote(files.stage_output(stage, "%j", true))},
                                      {"STAGE", stage},
                                      {"MAX", std::to_string(s.max_restarts)},
                                      {"SPENT", std::to_string(to_int(ExitCode::kRestartsSpent))},
                                      {"FOR_GOOD", expedite ? kForGood : ""}});
}

// slurm.environment's exports, unless spank_pcdino.so sets them in every task.
void write_environment(std::ostream& o, const SlurmConfig& s) {
  o << "\n# The accelerator environment: spank_pcdino.so sets it in every task when the cluster loads it;\n"
       "# otherwise these exports, which srun hands on to the tasks.\n";
  o << "plugstack=$(scontrol show config 2>/dev/null | sed -n 's/^PlugStackConfig *= *//p')\n";
  o << "if grep -qs spank_pcdino \"${plugstack:-/etc/slurm/plugstack.conf}\" "
       "\"${plugstack:-/etc/slurm/plugstack.conf}.d\"/*; then\n";
  o << "  echo \"pcdino: accelerator environment from spank_pcdino.so\" >&2\nelse\n";
  for (const auto& [name, value] : s.environment)
    o << "  export " << name << "=" << shell_quote(value) << "\n";
  o << "fi\n";
}

}  // namespace

std::vector<std::string> container_options(const PipelineConfig& config) {
  const SlurmConfig& s = config.slurm;
  if (s.container_image.empty()) return {};
  std::vector<std::string> options{"--container-image=" + s.container_image};
  std::string mounts;
  for (const auto& m : s.container_mounts) mounts += (mounts.empty() ? "" : ",") + m;
  if (!mounts.empty()) options.push_back("--container-mounts=" + mounts);
  options.push_back("--container-workdir=" + config.run_dir());
  return options;
}

namespace {

// The line that runs the stage: pcdino under srun or mpirun unless the stage launches its own tasks.
std::string launch_command(const PipelineConfig& config, const Stage& stage, const StageSpec& spec,
                           const RunLayout& files, const ScriptOptions& options) {
  const SlurmConfig& s = config.slurm;
  std::string launch;
  if (s.launcher == "mpirun") {
    launch = "mpirun --bind-to none";
  } else {
    launch = "srun " + shell_quote("--mpi=" + s.mpi) + " --kill-on-bad-exit=1";
  }
  // In a container (Pyxis) the step runs the image's pcdino; the doctor, which starts its own steps, stays
  // on the host.
  const bool contained = !spec.launches_itself && !s.container_image.empty();
  if (contained) {
    for (const auto& option : container_options(config)) launch += " " + shell_quote(option);
    // Pyxis keeps an image's value of a variable over the one the step hands it, unless --container-env
    // names it: slurm.environment's (or spank_pcdino's) accelerator settings win over the image's ENV.
    if (spec.accelerated && !s.environment.empty()) {
      std::string names;
      for (const auto& entry : s.environment) names += (names.empty() ? "" : ",") + entry.first;
      launch += " " + shell_quote("--container-env=" + names);
    }
    // A PMIx client in the container cannot attach the server's shared-memory data store (every rank
    // printed "PMIX ERROR: ... gds_ds12_lock_pthread.c at line 169" in 4 of 4 runs, then fell back); the hash
    // store asks the server instead, as awsome-distributed-ai's container recipes set it (0 of 4 with it).
    launch = "PMIX_MCA_gds=hash " + launch;
  }
  const std::string pcdino = contained ? kContainerPcdino : options.pcdino;
  std::string command = (spec.launches_itself ? "" : launch + " ") + shell_quote(pcdino) + " " + stage +
                        " --config " + shell_quote(files.submitted_config);
  if (spec.threaded && s.cpus_per_task > 0) command += " --threads " + std::to_string(s.cpus_per_task);
  return command;
}

// After a fault: the node whose task failed first for a reason of its own, from this start's lines of the
// job's stderr file ("srun: error: node2: task 1: Killed", "node2: tasks 0-7: Killed"; mpirun's "... on node
// node2 exited on signal 9"). A first failure of 74 (the watchdog: a peer went silent), 14 or 17 (Open MPI 5
// or 4: a peer was lost) blames the silent peer, which the line does not name: no node then. The script keeps
// that node out of its next start (the job's ExcNodeList, which Slurm lets the job's owner set only while it
// is pending: requeuehold, update, release, within KillWait of the requeue's SIGTERM), unless the partition's
// nodes in service would then be too few; the node check (prolog and health check) drains the node when one
// of its probes names the fault.
const char* const kExclusion =
    R"SH(# The node whose task failed first, unless it only lost a peer (74, 14, 17): kept out of the next start. Only
# the lines before the step was cancelled count: once it is, every task left is killed, and a node lost whole
# (its slurmd gone) has no line of its own, so the first "Killed" names a healthy node.
bad=""
if [ "$fault" = true ]; then
  bad=$(awk -v start="(start $((restart + 1)))" 'index($0, start) { n = NR } { line[NR] = $0 }
    END { for (i = n + 1; i <= NR && line[i] !~ /\*\*\* STEP .* CANCELLED/; i++) print line[i] }' "$err_file" 2>/dev/null |
    sed -n -e 's/^srun: error: \([^: ]*\): tasks\{0,1\} [0-9,-]*: \(.*\)$/\1 \2/p' \
      -e 's/.*process rank [0-9]* with PID [0-9]* on node \([^ ]*\) \(exited.*\)$/\1 \2/p' |
    head -n 1 | grep -v -e 'exit code 74$' -e 'exit code 14$' -e 'exit code 17$' -e 'exit status 74' \
      -e 'exit status 14' -e 'exit status 17' |
    cut -d ' ' -f 1)
  if [ -n "$bad" ]; then
    excluded=$(scontrol show job -o "$SLURM_JOB_ID" | sed -n 's/.* ExcNodeList=\([^ ]*\).*/\1/p')
    [ "$excluded" != "(null)" ] || excluded=""
    # The partition's nodes in service (not drained, down, failing or not responding: sinfo's %t ends in *)
    # that the next start may have.
    usable=$(comm -23 <(sinfo -h -N -p "${SLURM_JOB_PARTITION:-}" -t idle,mixed,allocated,completing -o '%N %t' 2>/dev/null |
      awk '$2 !~ /\*$/ { print $1 }' | sort -u) \
      <(scontrol show hostnames "${excluded:+$excluded,}$bad" 2>/dev/null | sort -u) | wc -l)
    if [ "$usable" -lt "${SLURM_JOB_NUM_NODES:-1}" ]; then
      echo "pcdino: $bad failed this start, but without it the partition has $usable node(s) in service for ${SLURM_JOB_NUM_NODES:-1}: not left out" >&2
      bad=""
    fi
  fi
fi
)SH";

void write_exclusion(std::ostream& o) {
  o << kExclusion;
}

// Requeues the job after a checkpoint (restart_exits()' agreed exits) or a fault within the budget, and
// records why in the restarts file.
void write_requeue(std::ostream& o, const SlurmConfig& s, bool expedite) {
  o << "# The trainer checkpointed on SIGUSR1 (time limit) or SIGTERM (preemption): back into the queue. "
       "A\n"
       "# fault (a rank lost or silent) within the budget: back too. Either start resumes from "
       "checkpoint.pth.\n"
       "why=\"\" fault=false\n"
       "case \"$rc\" in\n";
  for (const auto& f : restart_exits())
    o << "  " << f.pattern << ") why=" << shell_quote(f.why) << " fault=" << (f.fault ? "true" : "false")
      << " ;;\n";
  o << "esac\n";
  write_exclusion(o);
  o << "if [ -n \"$why\" ] && { [ \"$fault\" = false ] || [ \"$faults\" -lt " << s.max_restarts
    << " ]; }; then\n"
       "  printf '{\"job_id\": \"%s\", \"start\": %d, \"time\": \"%s\", \"nodes\": \"%s\", "
       "\"exit_code\": %d, \"fault\": %s, \"excluded\": \"%s\", \"why\": \"%s\"}\\n' \\\n"
       "    \"${SLURM_JOB_ID}\" \"$((restart + 1))\" \"$(date -Is)\" \"${SLURM_JOB_NODELIST}\" \"$rc\" "
       "\"$fault\" \"$bad\" "
       "\"$why\" "
       ">>\"$restarts\"\n"
       "  if [ -n \"$bad\" ]; then\n"
       "    echo \"pcdino: exit $rc ($why); requeueing job ${SLURM_JOB_ID} without $bad, where it failed\" "
       ">&2\n"
       "    # The requeue's SIGTERM would end this script: KillWait (slurm.conf) is its time to finish.\n"
       "    trap '' TERM\n"
       "    if scontrol requeuehold \"${SLURM_JOB_ID}\"; then\n"
       "      scontrol update JobId=\"${SLURM_JOB_ID}\" ExcNodeList=\"${excluded:+$excluded,}$bad\" ||\n"
       "        echo \"pcdino: could not keep $bad out of the next start\" >&2\n"
       "      for _ in 1 2 3 4 5; do scontrol release \"${SLURM_JOB_ID}\" && break; sleep 1; done\n"
       "    else\n"
       "      scontrol requeue \"${SLURM_JOB_ID}\"\n"
       "    fi\n"
       "  else\n"
       "    echo \"pcdino: exit $rc ($why); requeueing job ${SLURM_JOB_ID}\" >&2\n"
       "    scontrol requeue \"${SLURM_JOB_ID}\"\n"
       "  fi\n"
       "  exit \"$rc\"\n"
       "fi\n"
       "if [ -n \"$why\" ]; then\n"
       "  echo \"error: pcdino: exit $rc ($why); not requeued: the job already started again after $faults "
       "fault(s), "
       "slurm.max_restarts is "
    << s.max_restarts
    << "\" >&2\n"
       "  # The restarts this script asked for, and why (a requeue Slurm made itself has no line).\n"
       "  sed -n \"s/^{\\\"job_id\\\": \\\"${SLURM_JOB_ID}\\\", \\\"start\\\": "
       "\\([0-9]*\\),.*\\\"exit_code\\\": "
       "\\([0-9]*\\),.*\\\"why\\\": \\\"\\(.*\\)\\\"}$/pcdino:   after start \\1: exit \\2, \\3/p\" "
       "\"$restarts\" >&2\n"
       "fi\n";
  if (expedite) o << "if [ \"$rc\" -ne 0 ]; then\n" << kForGood << "fi\n";
}

// Fails the job with the stage's exit code, else writes the completion marker `pcdino resume` trusts.
void write_completion(std::ostream& o, const Stage& stage, const std::string& marker,
                      const std::string& config_hash) {
  o << "if [ \"$rc\" -ne 0 ]; then\n"
       "  echo \"pcdino: stage "
    << stage
    << " failed with exit code $rc\" >&2\n"
       "  exit \"$rc\"\n"
       "fi\n";
  o << "printf '{\"stage\": \"" << stage << "\", \"config_hash\": \"" << config_hash
    << "\", \"job_id\": \"%s\", \"finished\": \"%s\", \"seconds\": %d}\\n' \\\n"
       "  \"${SLURM_JOB_ID}\" \"$(date -Is)\" \"$(($(date +%s) - started))\" >"
    << marker << ".tmp && mv -f " << marker << ".tmp " << marker << "\n";
}

}  // namespace

const std::vector<RestartExit>& restart_exits() {
  static const std::vector<RestartExit> exits = {
      {"75", "checkpointed on SIGUSR1 or SIGTERM (time limit, preemption or scontrol requeue)", false},
      {"74", "a rank heard nothing from its peers for --comm-timeout (a node hung or lost)", true},
      // Open MPI 5 ends a rank itself when the runtime reports a peer process or connection lost: its PMIx
      // event handler calls the fatal error handler on no communicator, which a program cannot replace
      // (ompi/errhandler/errhandler.c, ompi_errhandler_callback, v5.0.x); the rank exits 14, MPI_ERR_UNKNOWN
      // (Debian 13's Open MPI 5.0.7 in train.node_failure; Open MPI 4 leaves the rank to srun's kill).
      {"14",
       "Open MPI ended a rank when the runtime reported a peer lost (a node lost or its process killed)",
       true},
      // Open MPI 4 ends a rank whose TCP peer was lost mid-collective through MPI_ERRORS_ARE_FATAL, the exit
      // code the error class: 17, MPI_ERR_INTERN ("An error occurred in MPI_Allreduce ... MPI_ERR_INTERN";
      // Debian 12's Open MPI 4.1.4 in pcdino's container image, train.node_failure_container, 2 of 3 runs,
      // the others ended by srun's kill first). ParallelCluster's EFA installer ships Open MPI 4.1.8.
      {"17", "Open MPI 4 ended a rank that lost the connection to a peer (a node lost or its process killed)",
       true},
      {"129|1[3-9][0-9]|2[0-5][0-9]", "a task ended by a signal (its node lost, the OOM killer or a kill)",
       true},
  };
  return exits;
}

std::vector<Stage> all_stages() {
  std::vector<Stage> names;
  for (const auto& s : pipeline_stages()) names.emplace_back(s.name);
  return names;
}

std::vector<Stage> stage_dependencies(const Stage& stage) {
  const auto& after = stage_spec(stage).after;
  return {after.begin(), after.end()};
}

bool waits_for(const Stage& stage, const Stage& other) {
  const auto& after = stage_spec(stage).after;
  return std::any_of(after.begin(), after.end(), [&](const char* dep) { return other == dep; });
}

std::vector<Stage> parse_stages(const std::string& list, const std::string& origin) {
  if (list == "all") return all_stages();
  std::set<Stage> wanted;
  std::stringstream in(list);
  std::string name;
  while (std::getline(in, name, ',')) {
    if (find_stage(name) == nullptr) {
      throw ConfigError(origin + " " + list + ": '" + name + "' is not a stage (" + stage_names() +
                        " or all)");
    }
    wanted.insert(name);
  }
  if (wanted.empty()) throw ConfigError(origin + ": expected a comma-separated list of stages");
  std::vector<Stage> ordered;
  for (const auto& s : all_stages()) {
    if (wanted.count(s) != 0) ordered.push_back(s);
  }
  return ordered;
}

std::map<Stage, std::string> stage_config_hashes(const PipelineConfig& config) {
  std::map<Stage, std::string> hashes;
  for (const auto& stage : all_stages()) {  // submission order: dependencies first
    // The format's version first: a change in how the text is made reruns every stage once, on purpose.
    std::string text =
        std::string(kStageHashFormat) + "\n" + stage + "\n" + stage_inputs(config, stage_spec(stage));
    for (const auto& dep : stage_dependencies(stage)) {
      if (!stage_spec(dep).check) text += dep + "=" + hashes.at(dep) + "\n";  // a check's outputs feed none
    }
    hashes[stage] = fmt::format("{:016x}", fnv1a(text));
  }
  return hashes;
}

std::string render_script(const PipelineConfig& config, const Stage& stage, const ScriptOptions& options,
                          const std::string& config_hash) {
  const SlurmConfig& s = config.slurm;
  const RunLayout files(config);
  const StageSpec& spec = stage_spec(stage);
  const bool requeue = spec.requeues && s.requeue;
  std::ostringstream o;
  o << "#!/bin/bash\n";
  o << "# pcdino pipeline '" << config.meta.name_of_run << "', stage " << stage << ": " << spec.summary
    << ".\n";
  o << "# Written by `pcdino submit` (rewritten by `pcdino resume`); configuration hash " << config_hash
    << ".\n";
  const bool expedite = requeue && options.expedited_requeue;
  write_directives(o, config, stage, spec, files, requeue, expedite);

  o << "\nset -uo pipefail\n";
  const std::string marker = shell_quote(files.stage_marker(stage));
  o << "rm -f " << marker << "  # this stage is complete again only when this job succeeds\n";
  o << "started=$(date +%s)\n";
  o << "echo \"pcdino: stage " << stage << ", job ${SLURM_JOB_ID} (start $((${SLURM_RESTART_COUNT:-0} + 1)))"
    << " on ${SLURM_JOB_NODELIST} at $(date -Is)\" >&2\n";
  if (requeue) write_restart_budget(o, stage, files, s, expedite);
  if (spec.accelerated && !s.environment.empty()) write_environment(o, s);

  o << "\n" << launch_command(config, stage, spec, files, options) << "\n";
  o << "rc=$?\n";
  if (requeue) write_requeue(o, s, expedite);
  write_completion(o, stage, marker, config_hash);
  return o.str();
}

std::vector<Stage> enabled_stages(const PipelineConfig& config) {
  std::vector<Stage> names;
  for (const auto& s : pipeline_stages()) {
    if (stage_enabled(s, config)) names.emplace_back(s.name);
  }
  return names;
}

std::vector<PlannedJob> plan_jobs(const std::vector<Stage>& selected, const std::set<Stage>& complete) {
  const std::vector<Stage> stages = selected.empty() ? all_stages() : selected;
  const auto wanted = [&](const Stage& s) {
    return std::find(stages.begin(), stages.end(), s) != stages.end();
  };
  // The producers first: a complete one is skipped unless a producer it reads is resubmitted.
  std::set<Stage> submitted;
  for (const auto& stage : all_stages()) {
    if (!wanted(stage) || stage_spec(stage).check) continue;
    const auto deps = stage_dependencies(stage);
    const bool reads_new =
        std::any_of(deps.begin(), deps.end(), [&](const Stage& d) { return submitted.count(d); });
    if (complete.count(stage) == 0 || reads_new) submitted.insert(stage);
  }
  // A check runs when a stage that waits for it does, or when it is all that was asked for.
  for (const auto& stage : all_stages()) {
    if (!wanted(stage) || !stage_spec(stage).check) continue;
    bool waited_for = false, guards_submitted = false;
    for (const auto& other : stages) {
      if (!waits_for(other, stage)) continue;
      waited_for = true;
      guards_submitted = guards_submitted || submitted.count(other) != 0;
    }
    if (guards_submitted || !waited_for) submitted.insert(stage);
  }
  std::vector<PlannedJob> jobs;
  for (const auto& stage : all_stages()) {
    if (submitted.count(stage) == 0) continue;
    PlannedJob job{stage, {}};
    for (const auto& dep : stage_dependencies(stage)) {
      if (submitted.count(dep) != 0) job.after.push_back(dep);
    }
    jobs.push_back(job);
  }
  return jobs;
}

std::vector<std::string> sbatch_arguments(const PlannedJob& job,
                                          const std::map<Stage, std::string>& job_ids) {
  std::vector<std::string> args = {"sbatch", "--parsable"};
  if (!job.after.empty()) {
    std::string dependency = "--dependency=afterok";
    for (const auto& dep : job.after) dependency += ":" + job_ids.at(dep);
    args.push_back(dependency);
    args.push_back("--kill-on-invalid-dep=yes");  // a failed stage cancels its dependents
  }
  return args;
}

}  // namespace pcdino::sbatch
