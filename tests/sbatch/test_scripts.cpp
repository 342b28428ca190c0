// The batch scripts and submission plans of `pcdino submit` (issue #7), checked without a cluster: the
// dependency graph, what a configuration change re-runs, the #SBATCH lines, and that bash parses every
// script rendered.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "../lib/config_values.hpp"
#include "pcdino/core/config.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/process.hpp"
#include "pcdino/sbatch/scripts.hpp"
#include "pcdino/sbatch/submitter.hpp"

namespace pcdino::sbatch {
namespace {

PipelineConfig example(const std::string& extra = "") {
  return parse_config(
      "meta:\n  name_of_run: run1\n  output_dir: /fsx/out\n  dataset_dir: /fsx/data\n" + extra, "test.yaml");
}

bool has_line(const std::string& text, const std::string& line) {
  return ("\n" + text + "\n").find("\n" + line + "\n") != std::string::npos;
}

std::vector<Stage> stages_of(const std::vector<PlannedJob>& jobs) {
  std::vector<Stage> s;
  for (const auto& j : jobs) s.push_back(j.stage);
  return s;
}

TEST(Stages, ParsedInSubmissionOrder) {
  EXPECT_EQ(parse_stages("plots,meanstd", "--stages"), (std::vector<Stage>{"meanstd", "plots"}));
  EXPECT_EQ(parse_stages("all", "--stages").size(), 7u);
  try {
    parse_stages("train,knnn", "--stages");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--stages train,knnn: 'knnn' is not a stage"), std::string::npos)
        << e.what();
  }
}

TEST(Stages, HashesChangeForTheStagesAKeyAffects) {
  const auto base = stage_config_hashes(example());
  EXPECT_EQ(base.size(), 7u);
  EXPECT_EQ(stage_config_hashes(example()), base) << "deterministic";

  const auto changed = [&](const std::string& extra) {
    const auto h = stage_config_hashes(example(extra));
    std::vector<Stage> differ;
    for (const auto& stage : all_stages()) {
      if (h.at(stage) != base.at(stage)) differ.push_back(stage);
    }
    return differ;
  };
  EXPECT_EQ(changed("downstream_analyses:\n  kNN:\n    global:\n      n_neighbors: [3]\n"),
            (std::vector<Stage>{"knn", "plots"}));
  EXPECT_EQ(changed("train_scDINO:\n  hyperparameters:\n    lr: 0.001\n"),
            (std::vector<Stage>{"train", "extract", "knn", "plots"}));
  EXPECT_EQ(changed("train_scDINO:\n  fraction_for_mean_std_calc: 0.5\n"),
            (std::vector<Stage>{"meanstd", "train", "extract", "knn", "plots"}));
  EXPECT_EQ(changed("downstream_analyses:\n  umap_eval:\n    min_dist: 0.1\n"),
            (std::vector<Stage>{"plots"}));
  EXPECT_EQ(changed("  seed: 7\n").size(), 6u) << "the split changes every stage but the node check";
  EXPECT_EQ(changed("doctor:\n  min_busbw_gbps: 5\n"), std::vector<Stage>{"doctor"})
      << "a check's settings do not retrain";
  EXPECT_TRUE(changed("slurm:\n  partition: gpu\n  cpus_per_task: 4\n").empty());
  // Where the run lives does not change what it computes.
  EXPECT_EQ(
      stage_config_hashes(parse_config(
          "meta:\n  name_of_run: other\n  output_dir: /elsewhere\n  dataset_dir: /fsx/data\n", "t.yaml")),
      base);
}

// Table-driven: each key of the schema, set to another value, changes the hash of exactly the stages that
// read it, and of the stages after those (they read its outputs), no others. The readers and the chain are
// written out here by hand, from what each stage's code reads, so that a wrong row in the stage table
// (core/src/stages.cpp) fails this test instead of defining its expectation.
TEST(Stages, EveryKeyChangesExactlyTheStagesThatReadIt) {
  const std::vector<std::pair<std::string, std::set<Stage>>> readers = {
      // first matching prefix wins
      {"meta.output_dir", {}},
      {"meta.name_of_run", {}},  // where the run is, not what it computes
      {"meta.", {"meanstd", "train", "extract", "labels", "knn", "plots"}},
      {"train_scDINO.fraction_for_mean_std_calc", {"meanstd", "train"}},
      {"train_scDINO.stage_dataset", {}},  // where the dataset is read from, not what it holds
      {"train_scDINO.keep_staged_dataset", {}},
      {"train_scDINO.", {"train"}},
      {"downstream_analyses.compute_cls_features.", {"extract"}},
      {"downstream_analyses.kNN.", {"knn"}},
      {"downstream_analyses.umap_eval.", {"plots"}},
      {"slurm.", {}},
      {"doctor.", {"doctor"}},
      {"monitoring.", {}},  // where metrics go, not what a stage computes
  };
  // The stages whose outputs each stage reads (the doctor check before training is waited for, not read).
  const std::map<Stage, std::vector<Stage>> after = {{"doctor", {}},         {"meanstd", {}},
                                                     {"train", {"meanstd"}}, {"extract", {"train"}},
                                                     {"labels", {}},         {"knn", {"extract", "labels"}},
                                                     {"plots", {"knn"}}};
  const std::vector<Stage> order = {"doctor", "meanstd", "train", "extract", "labels", "knn", "plots"};
  EXPECT_EQ(all_stages(), order);
  const auto base = stage_config_hashes(PipelineConfig{});
  std::size_t keys_read_by_some_stage = 0;
  for (const auto& key : config_schema()) {
    const auto assignment = test::non_default_assignment(key);
    if (!assignment) continue;  // a key pcdino refuses: no other value to set
    const auto reader = std::find_if(readers.begin(), readers.end(),
                                     [&](const auto& r) { return key.path.rfind(r.first, 0) == 0; });
    ASSERT_NE(reader, readers.end()) << key.path << ": which stages read it?";
    std::set<Stage> expected;
    for (const auto& stage : order) {  // submission order: dependencies first
      bool affected = reader->second.count(stage) != 0;
      for (const auto& dep : after.at(stage)) affected = affected || expected.count(dep) != 0;
      if (affected) expected.insert(stage);
    }
    keys_read_by_some_stage += expected.empty() ? 0 : 1;
    const auto hashes = stage_config_hashes(parse_config("", "p.yaml", {parse_override(*assignment)}));
    std::set<Stage> changed;
    for (const auto& [stage, hash] : hashes) {
      if (hash != base.at(stage)) changed.insert(stage);
    }
    EXPECT_EQ(changed, expected) << *assignment;
  }
  EXPECT_GT(keys_read_by_some_stage, 50u);
}

TEST(Plan, FullChainWaitsOnWhatEachStageReads) {
  const auto jobs = plan_jobs({}, {});
  ASSERT_EQ(stages_of(jobs), all_stages());
  std::map<Stage, std::vector<Stage>> after;
  for (const auto& j : jobs) after[j.stage] = j.after;
  EXPECT_TRUE(after["meanstd"].empty());
  EXPECT_TRUE(after["doctor"].empty()) << "the node check runs beside mean/std";
  EXPECT_EQ(after["train"], (std::vector<Stage>{"doctor", "meanstd"}));
  EXPECT_EQ(after["extract"], std::vector<Stage>{"train"});
  EXPECT_TRUE(after["labels"].empty()) << "labels run beside the model stages";
  EXPECT_EQ(after["knn"], (std::vector<Stage>{"extract", "labels"}));
  EXPECT_EQ(after["plots"], std::vector<Stage>{"knn"});
}

TEST(Plan, ResumeSkipsCompleteStagesButNotThoseAfterAResubmittedOne) {
  auto jobs = plan_jobs({}, {"meanstd", "train", "extract", "labels"});
  EXPECT_EQ(stages_of(jobs), (std::vector<Stage>{"knn", "plots"}));
  EXPECT_TRUE(jobs[0].after.empty()) << "complete stages are not waited for";
  EXPECT_EQ(jobs[1].after, std::vector<Stage>{"knn"});
  // train did not finish: extract, knn and plots would read outputs about to change.
  jobs = plan_jobs({}, {"meanstd", "extract", "labels", "knn", "plots"});
  EXPECT_EQ(stages_of(jobs), (std::vector<Stage>{"doctor", "train", "extract", "knn", "plots"}));
  EXPECT_EQ(jobs[1].after, std::vector<Stage>{"doctor"}) << "a resubmitted training waits for a new check";
  EXPECT_TRUE(plan_jobs({}, {"meanstd", "train", "extract", "labels", "knn", "plots"}).empty());
  EXPECT_EQ(stages_of(plan_jobs({"knn", "plots"}, {})), (std::vector<Stage>{"knn", "plots"}));
}

// The node check is a gate, not a producer: it runs again whenever training does (a complete check of
// yesterday's nodes says nothing about today's), never on its own account, and resubmits nothing after it.
TEST(Plan, TheDoctorCheckRunsWhenTrainingDoes) {
  const std::set<Stage> producers_done = {"meanstd", "train", "extract", "labels", "knn", "plots"};
  EXPECT_TRUE(plan_jobs({}, producers_done).empty()) << "training complete: no check";
  std::set<Stage> all_done = producers_done;
  all_done.insert("doctor");
  auto jobs = plan_jobs({}, {"doctor", "meanstd"});
  ASSERT_EQ(stages_of(jobs), (std::vector<Stage>{"doctor", "train", "extract", "labels", "knn", "plots"}))
      << "a complete check is run again before training";
  EXPECT_EQ(jobs[1].after, std::vector<Stage>{"doctor"});
  EXPECT_TRUE(plan_jobs({"doctor", "train"}, all_done).empty()) << "training complete: no check";
  EXPECT_EQ(stages_of(plan_jobs({"doctor"}, all_done)), std::vector<Stage>{"doctor"})
      << "asked for alone, it runs";
  jobs = plan_jobs({"meanstd", "train"}, {});
  EXPECT_EQ(jobs[1].after, std::vector<Stage>{"meanstd"}) << "not selected: not waited for";
}

TEST(Plan, TheDoctorStageIsOnlyInThePipelineWhenEnabled) {
  EXPECT_EQ(enabled_stages(example()),
            (std::vector<Stage>{"meanstd", "train", "extract", "labels", "knn", "plots"}));
  EXPECT_EQ(enabled_stages(example("doctor:\n  enabled: true\n")), all_stages());
}

TEST(Plan, SbatchArgumentsChainWithAfterok) {
  const PlannedJob knn{"knn", {"extract", "labels"}};
  EXPECT_EQ(sbatch_arguments(knn, {{"extract", "12"}, {"labels", "13"}}),
            (std::vector<std::string>{"sbatch", "--parsable", "--dependency=afterok:12:13",
                                      "--kill-on-invalid-dep=yes"}));
  EXPECT_EQ(sbatch_arguments({"meanstd", {}}, {}), (std::vector<std::string>{"sbatch", "--parsable"}));
}

TEST(Script, TrainingAsksForNodesGpusAndRequeue) {
  const auto c = example(
      "train_scDINO:\n  nnodes: 2\n  num_gpus: 8\nslurm:\n  partition: p5\n  cpus_per_task: 12\n  mem: '0'\n"
      "  time_limit: {train: '2-00:00:00'}\n");
  const std::string s = render_script(c, "train", {"/opt/pcdino/bin/pcdino"}, "0123456789abcdef");
  for (const char* line :
       {"#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=8", "#SBATCH --gpus-per-node=8",
        "#SBATCH --cpus-per-task=12", "#SBATCH --mem=0", "#SBATCH --time=2-00:00:00",
        "#SBATCH --partition=p5", "#SBATCH --exclusive", "#SBATCH --requeue", "#SBATCH --signal=USR1@120",
        "#SBATCH --open-mode=append", "#SBATCH --output=/fsx/out/run1/logs/train_out_%j.out",
        "#SBATCH --error=/fsx/out/run1/logs/train_err_%j.err",
        "srun --mpi=pmix --kill-on-bad-exit=1 /opt/pcdino/bin/pcdino train --config "
        "/fsx/out/run1/logs/submitted_pipeline.yaml --threads 12",
        "    scontrol requeue \"${SLURM_JOB_ID}\""}) {
    EXPECT_TRUE(has_line(s, line)) << "missing: " << line << "\n" << s;
  }
  EXPECT_NE(s.find("0123456789abcdef"), std::string::npos) << "the marker records the configuration hash";
}

// The restart budget (issue #39): the script requeues on the trainer's agreed checkpoint (75) and, within
// slurm.max_restarts, on a fault (74, Open MPI 5's 14, a task ended by a signal), recording why; a start over
// the budget fails with 79 (restarts-spent). tests/train/test_node_failure.sh runs it on a real cluster.
TEST(Script, TrainingRestartsWithinItsBudget) {
  const auto c = example("slurm:\n  max_restarts: 2\n");
  const std::string s = render_script(c, "train", {"/p/pcdino"}, "h");
  for (const char* line :
       {"restarts=/fsx/out/run1/logs/train_restarts.jsonl  # why this script requeued its job",
        "ran=$(grep -c \"^pcdino: stage train, job ${SLURM_JOB_ID} (start \" \"$err_file\" 2>/dev/null)",
        "if [ \"${ran:-0}\" -gt 0 ]; then faults=$((ran - 1 - agreed)); else faults=$((restart - agreed)); "
        "fi",
        "if [ \"$faults\" -gt 2 ]; then", "  exit 79",
        "  75) why='checkpointed on SIGUSR1 or SIGTERM (time limit, preemption or scontrol requeue)' "
        "fault=false ;;",
        "  74) why='a rank heard nothing from its peers for --comm-timeout (a node hung or lost)' fault=true "
        ";;",
        "if [ -n \"$why\" ] && { [ \"$fault\" = false ] || [ \"$faults\" -lt 2 ]; }; then",
        "    scontrol requeue \"${SLURM_JOB_ID}\"",
        // Issue #60: after a fault, the node that failed first is kept out of the next start.
        "err_file=/fsx/out/run1/logs/train_err_%j.err", "    trap '' TERM",
        "    if scontrol requeuehold \"${SLURM_JOB_ID}\"; then",
        "      scontrol update JobId=\"${SLURM_JOB_ID}\" ExcNodeList=\"${excluded:+$excluded,}$bad\" ||",
        "      for _ in 1 2 3 4 5; do scontrol release \"${SLURM_JOB_ID}\" && break; sleep 1; done"}) {
    EXPECT_TRUE(has_line(s, line)) << "missing: " << line << "\n" << s;
  }
  EXPECT_NE(s.find("129|1[3-9][0-9]|2[0-5][0-9]) why="), std::string::npos) << "a signal's exit codes";
  EXPECT_NE(s.find("  14) why='Open MPI ended a rank when the runtime reported a peer lost"),
            std::string::npos)
      << "Open MPI 5's own end of a rank whose peer was lost";
  EXPECT_NE(s.find("  17) why='Open MPI 4 ended a rank that lost the connection to a peer"),
            std::string::npos)
      << "Open MPI 4's end of a rank whose TCP peer was lost";
  const std::string none = render_script(example("slurm:\n  requeue: false\n"), "train", {"/p/pcdino"}, "h");
  EXPECT_EQ(none.find("scontrol requeue"), std::string::npos);
  EXPECT_EQ(none.find("restarts="), std::string::npos);
  EXPECT_EQ(render_script(c, "extract", {"/p/pcdino"}, "h").find("restarts="), std::string::npos)
      << "only the training stage requeues";
}

// Slurm 25.11's expedited requeue (issue #62), where the cluster turns it on: the training asks for it, and
// every exit that ends the job for good first sets Requeue=0, since 25.11 holds an expedited job whose script
// ends non-zero instead of failing it. Other stages and other clusters are as before.
TEST(Script, ExpeditedRequeueWhereTheClusterHasIt) {
  const auto c = example("slurm:\n  max_restarts: 2\n");
  const std::string off = render_script(c, "train", {"/p/pcdino"}, "h");
  const std::string on = render_script(c, "train", {"/p/pcdino", true}, "h");
  EXPECT_TRUE(has_line(off, "#SBATCH --requeue"));
  EXPECT_FALSE(has_line(on, "#SBATCH --requeue"));
  EXPECT_TRUE(has_line(on, "#SBATCH --requeue=expedite")) << on;
  EXPECT_EQ(off.find("Requeue=0"), std::string::npos);
  const std::string give_up = "  scontrol update JobId=\"${SLURM_JOB_ID}\" Requeue=0 || echo";
  EXPECT_NE(on.find(give_up + " \"pcdino: could not turn job"), std::string::npos) << on;
  EXPECT_NE(on.find("Requeue=0 || echo \"pcdino: could not turn job ${SLURM_JOB_ID}'s requeue off: Slurm may "
                    "hold it (scancel it)\" >&2\n  exit 79\n"),
            std::string::npos)
      << "before the budget's exit 79\n"
      << on;
  const auto last = on.rfind(give_up),
             final_exit = on.find("  echo \"pcdino: stage train failed with exit code");
  ASSERT_NE(last, std::string::npos);
  EXPECT_LT(last, final_exit) << "before the failed stage's exit";
  EXPECT_GT(last, on.find("not requeued: the job already started again")) << "after the requeues";
  // Run by bash from the requeue decision on, with scontrol recorded: Requeue=0 only where the job ends.
  const auto from = on.find("if [ -n \"$why\" ] && {");
  ASSERT_NE(from, std::string::npos);
  const auto calls = [&](int rc, const std::string& why, int faults) {
    const ProcessResult r = run_process(
        {"bash", "-c",
         "scontrol() { echo \"scontrol $*\"; }\nrc=" + std::to_string(rc) + " why='" + why +
             "' fault=true faults=" + std::to_string(faults) +
             " bad='' excluded='' restart=0 restarts=/dev/null SLURM_JOB_ID=7 SLURM_JOB_NODELIST=n\n" +
             on.substr(from, on.find("printf '{\"stage\"") - from)});
    std::string lines;
    std::istringstream out(r.out);
    for (std::string line; std::getline(out, line);)
      if (line.rfind("scontrol ", 0) == 0) lines += line + "\n";
    return lines;
  };
  EXPECT_EQ(calls(1, "", 0), "scontrol update JobId=7 Requeue=0\n") << "a failure that no restart answers";
  EXPECT_EQ(calls(137, "killed", 0), "scontrol requeue 7\n") << "a fault within the budget is requeued";
  EXPECT_EQ(calls(137, "killed", 2), "scontrol update JobId=7 Requeue=0\n") << "over the budget";
  EXPECT_EQ(calls(0, "", 0), "") << "success";
  EXPECT_EQ(render_script(c, "extract", {"/p/pcdino", true}, "h").find("expedite"), std::string::npos)
      << "only a requeueing stage";
  EXPECT_EQ(render_script(example("slurm:\n  requeue: false\n"), "train", {"/p/pcdino", true}, "h")
                .find("expedite"),
            std::string::npos);
}

// scontrol show config as Slurm 25.11.7 prints it (two of its lines): expedited only with the parameter on,
// and only from 25.11.
TEST(Script, ExpeditedRequeueNeedsTheReleaseAndTheParameter) {
  const auto config = [](const std::string& version, const std::string& parameters) {
    return "Configuration data as of 2026-11-28T07:00:41\nAccountingStorageBackupHost = (null)\n"
           "SLURM_VERSION           = " +
           version + "\nSlurmctldParameters     = " + parameters + "\nSlurmctldPort           = 27017\n";
  };
  EXPECT_TRUE(expedites_requeues(config("25.11.7", "enable_expedited_requeue")));
  EXPECT_TRUE(
      expedites_requeues(config("25.11.8", "idle_on_node_suspend,enable_expedited_requeue,cloud_dns")));
  EXPECT_FALSE(expedites_requeues(config("25.11.7", "(null)")));
  EXPECT_FALSE(expedites_requeues(config("25.11.7", "enable_expedited_requeue_x")));
  EXPECT_FALSE(expedites_requeues(config("24.11.5", "enable_expedited_requeue")));
  EXPECT_FALSE(expedites_requeues(""));
}

// The node the script keeps out of its restart (issue #60), run by bash on srun's own lines: the first task
// to fail for a reason of its own names it, in srun's singular and plural forms; a first failure of 74 (a
// rank that only lost its peer) names none, and so does a partition with no other node in service.
TEST(Script, TheRestartLeavesOutTheNodeThatFailedFirst) {
  const std::string script =
      render_script(example("slurm:\n  max_restarts: 2\n"), "train", {"/p/pcdino"}, "h");
  const auto from = script.find("# The node whose task failed first"), to = script.find("if [ -n \"$why\" ]");
  ASSERT_NE(from, std::string::npos);
  ASSERT_NE(to, std::string::npos);
  const std::string block = script.substr(from, to - from);
  const auto bad = [&](const std::string& lines, const std::string& in_service) {
    const std::string err = "/tmp/pcdino_exclusion_test_" + std::to_string(::getpid()) + ".err";
    std::FILE* f = std::fopen(err.c_str(), "w");
    std::fputs(("pcdino: stage train, job 7 (start 1) on node[1-2] at t\nsrun: error: node9: task 0: Killed\n"
                "pcdino: stage train, job 7 (start 2) on node[1-2] at t\n" +
                lines)
                   .c_str(),
               f);
    std::fclose(f);
    // Slurm's commands as the job sees them: its ExcNodeList empty, the partition's nodes in service.
    const std::string stubs =
        "scontrol() { case \"$1 $2\" in 'show job') echo 'JobId=7 ExcNodeList=(null) Nodes=2';; "
        "'show hostnames') echo \"$3\" | tr , '\\n';; esac; }\nsinfo() { printf '" +
        in_service + "'; }\n";
    const ProcessResult r =
        run_process({"bash", "-c",
                     stubs + "fault=true restart=1 SLURM_JOB_ID=7 SLURM_JOB_NUM_NODES=2 err_file=" + err +
                         "\n" + block + "echo \"bad=$bad\""});
    std::remove(err.c_str());
    return r.out + r.err;
  };
  const std::string three = "node1\\nnode2\\nnode3\\n";
  EXPECT_EQ(bad("srun: error: node2: task 1: Killed\nsrun: error: node1: task 0: Killed\n", three),
            "bad=node2\n");
  EXPECT_EQ(bad("srun: error: node2: tasks 8-15: Killed\n", three), "bad=node2\n") << "srun's plural";
  EXPECT_EQ(bad("srun: error: node1: task 0: Exited with exit code 74\nsrun: error: node2: task 1: Killed\n",
                three),
            "bad=\n")
      << "74 only lost a peer: the line does not name the silent node";
  EXPECT_EQ(bad("srun: error: node1: task 0: Exited with exit code 17\nsrun: error: node2: task 1: Killed\n",
                three),
            "bad=\n")
      << "Open MPI 4's 17: the rank lost its peer (train.node_failure_container)";
  EXPECT_NE(bad("srun: error: node2: task 1: Killed\n", "node1\\nnode2\\n").find("not left out"),
            std::string::npos)
      << "without node2 the partition has one node for two";
  EXPECT_EQ(bad("", three), "bad=\n");
  // node2 lost whole (its slurmd killed: no line of its own): srun cancels the step, node1's task is killed.
  EXPECT_EQ(bad("slurmstepd-node1: error: *** STEP 7.0 ON node1 CANCELLED AT 2026-11-28T08:12:31 ***\n"
                "srun: error: node1: task 0: Killed\n",
                three),
            "bad=\n")
      << "a task killed after the step was cancelled names no node (seen in CI, 2026-11-28)";
  EXPECT_NE(bad("srun: error: node2: task 1: Killed\n", "node1 idle\nnode2 alloc\nnode3 idle*\n")
                .find("not left out"),
            std::string::npos)
      << "a node not responding (sinfo's *) is not in service";
}

TEST(Script, CpuClusterAndCpuStages) {
  const auto c = example(
      "train_scDINO:\n  nnodes: 2\n  num_gpus: 1\nslurm:\n  gpus: false\n  exclusive: false\n"
      "  cpu_tasks: 3\n  requeue: false\n  launcher: mpirun\n");
  const std::string train = render_script(c, "train", {"/p/pcdino"}, "h");
  EXPECT_EQ(train.find("--gpus-per-node"), std::string::npos);
  EXPECT_EQ(train.find("--exclusive"), std::string::npos);
  EXPECT_TRUE(has_line(train, "#SBATCH --no-requeue"));
  EXPECT_TRUE(has_line(
      train, "mpirun --bind-to none /p/pcdino train --config /fsx/out/run1/logs/submitted_pipeline.yaml"));
  const std::string meanstd = render_script(c, "meanstd", {"/p/pcdino"}, "h");
  EXPECT_TRUE(has_line(meanstd, "#SBATCH --ntasks=3"));
  const std::string plots = render_script(example(), "plots", {"/p/pcdino"}, "h");
  EXPECT_TRUE(has_line(plots, "#SBATCH --ntasks=1"));
  EXPECT_EQ(plots.find("--exclusive"), std::string::npos) << "only the GPU stages take whole nodes";
  EXPECT_EQ(plots.find("--threads"), std::string::npos) << "cpus_per_task unset: the stage chooses";
}

TEST(Script, TheDoctorStageIsOneTaskOnEachTrainingNode) {
  const auto c = example(
      "train_scDINO:\n  nnodes: 4\n  num_gpus: 8\nslurm:\n  cpus_per_task: 12\n  environment: {FI_PROVIDER: "
      "efa}\n"
      "doctor:\n  enabled: true\n");
  const std::string s = render_script(c, "doctor", {"/p/pcdino"}, "h");
  for (const char* line : {"#SBATCH --nodes=4", "#SBATCH --ntasks-per-node=1", "#SBATCH --gpus-per-node=8",
                           "#SBATCH --exclusive", "#SBATCH --no-requeue", "  export FI_PROVIDER=efa",
                           "/p/pcdino doctor --config /fsx/out/run1/logs/submitted_pipeline.yaml"}) {
    EXPECT_TRUE(has_line(s, line)) << "missing: " << line << "\n" << s;
  }
}

TEST(Script, EnvironmentExportedOnlyWithoutTheSpankPlugin) {
  const auto c =
      example("slurm:\n  environment: {FI_PROVIDER: efa, NCCL_SOCKET_IFNAME: \"^docker,lo veth\"}\n");
  const std::string s = render_script(c, "train", {"/p/pcdino"}, "h");
  EXPECT_TRUE(has_line(s, "  export FI_PROVIDER=efa"));
  EXPECT_TRUE(has_line(s, "  export NCCL_SOCKET_IFNAME='^docker,lo veth'"));
  EXPECT_NE(s.find("grep -qs spank_pcdino"), std::string::npos);
  EXPECT_EQ(render_script(c, "labels", {"/p/pcdino"}, "h").find("export"), std::string::npos);
}

// Issue #63: with slurm.container_image every stage's step but the doctor's runs the image's pcdino through
// Pyxis's options; without it nothing changes.
TEST(Script, ContainedStagesRunTheImagesPcdinoThroughPyxis) {
  const auto c = example(
      "doctor:\n  enabled: true\nslurm:\n  container_image: /fsx/img/pcdino.sqsh\n  container_mounts: [/fsx, "
      "\"/scratch:/tmp:ro\"]\n");
  const std::string pyxis =
      "srun --mpi=pmix --kill-on-bad-exit=1 --container-image=/fsx/img/pcdino.sqsh "
      "--container-mounts=/fsx,/scratch:/tmp:ro --container-workdir=/fsx/out/run1 /opt/pcdino/bin/pcdino ";
  for (const auto& stage : all_stages()) {
    const std::string s = render_script(c, stage, {"/p/pcdino"}, "h");
    if (stage_spec(stage).launches_itself) {  // the doctor, on the host
      EXPECT_EQ(s.find("--container-image"), std::string::npos) << s;
      EXPECT_TRUE(has_line(s, "/p/pcdino doctor --config /fsx/out/run1/logs/submitted_pipeline.yaml")) << s;
    } else {
      EXPECT_NE(s.find(pyxis + stage + " --config "), std::string::npos) << s;
    }
  }
  EXPECT_EQ(render_script(example(), "train", {"/p/pcdino"}, "h").find("container"), std::string::npos);
  // slurm.environment's names win over the image's ENV in the accelerated stages (Pyxis's --container-env).
  const auto env = example(
      "slurm:\n  container_image: /fsx/img/pcdino.sqsh\n  environment: {NCCL_DEBUG: WARN, FI_PROVIDER: "
      "efa}\n");
  EXPECT_NE(render_script(env, "train", {"/p/pcdino"}, "h").find(" --container-env=FI_PROVIDER,NCCL_DEBUG "),
            std::string::npos)
      << render_script(env, "train", {"/p/pcdino"}, "h");
  EXPECT_EQ(render_script(env, "labels", {"/p/pcdino"}, "h").find("--container-env"), std::string::npos);
}

TEST(SlurmConfig, ContainerSettingsAreCheckedBeforeSubmission) {
  char tmpl[] = "/tmp/pcdino-container-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string image = dir + "/img.sqsh";
  ASSERT_EQ(mkdir((dir + "/data").c_str(), 0700), 0);
  std::FILE* f = std::fopen(image.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  const auto with = [&](const std::string& slurm) {
    return parse_config("meta:\n  name_of_run: r\n  output_dir: " + dir + "/out\n  dataset_dir: " + dir +
                            "/data\nslurm:\n  container_image: " + image + "\n" + slurm,
                        "test.yaml");
  };
  const auto error = [&](const PipelineConfig& c, const std::string& help = "") {
    try {
      check_container_settings(c, help);
      return std::string();
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
  };
  EXPECT_EQ(error(with("  container_mounts: [" + dir + "]\n")), "");
  EXPECT_EQ(error(with("  container_mounts: [\"" + dir + ":" + dir + ":ro\"]\n")), "");
  EXPECT_NE(error(with("  container_mounts: [" + dir + "]\n"), "Usage: srun [OPTIONS...]")
                .find("srun has no --container-image: Pyxis is not loaded"),
            std::string::npos);
  EXPECT_NE(error(with("  container_mounts: [\"" + dir + ":/elsewhere\"]\n")).find("meta.dataset_dir"),
            std::string::npos);
  EXPECT_NE(error(with("  container_mounts: [" + dir + "/data]\n")).find("meta.output_dir (the run folder)"),
            std::string::npos);
  EXPECT_NE(error(with("  container_mounts: [" + dir + "/none, " + dir + "]\n"))
                .find("slurm.container_mounts[0]: '" + dir + "/none' does not exist here"),
            std::string::npos);
  EXPECT_NE(
      error(with("  container_mounts: [" + dir + "]\n  launcher: mpirun\n")).find("slurm.launcher is mpirun"),
      std::string::npos);
  EXPECT_NE(error(parse_config("slurm:\n  container_image: " + dir + "/missing.sqsh\n", "t.yaml"))
                .find("no image file '" + dir + "/missing.sqsh'"),
            std::string::npos);
  EXPECT_EQ(error(example()), "");  // no image: nothing checked
  // The schema refuses what Pyxis could not take, naming the key.
  for (const char* bad : {"container_mounts: [relative/path]", "container_mounts: [\"/a,/b\"]",
                          "container_image: \"two words\"", "container_image: ./img.sqsh"}) {
    EXPECT_THROW(parse_config(std::string("slurm:\n  ") + bad + "\n", "t.yaml"), ConfigError) << bad;
  }
  std::remove(image.c_str());
  rmdir((dir + "/data").c_str());
  rmdir(dir.c_str());
}

// The run folder, {output_dir}/{name_of_run}, is known only once output_dir is absolute: there the folder is
// refused when #SBATCH --output or --chdir would not carry it as it is (issue #70).
TEST(SlurmConfig, ARunFolderThatSbatchWouldReadOtherwiseIsRefused) {
  const auto error = [](const std::string& output_dir) {
    PipelineConfig c = example();
    c.meta.output_dir = output_dir;  // any string: the schema cannot know the folder it is relative to
    try {
      with_absolute_paths(c, "/home/u");
      return std::string();
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
  };
  for (const auto& [dir, shown] : std::vector<std::pair<std::string, std::string>>{
           {"/fsx/out#1", "'#'"}, {"/fsx/%u", "'%'"}, {"/fsx/my out", "a space"}, {"/fsx/$USER", "'$'"}}) {
    EXPECT_NE(
        error(dir).find("meta.output_dir/meta.name_of_run: the run folder '" + dir + "/run1' holds " + shown),
        std::string::npos)
        << dir << ": " << error(dir);
  }
  EXPECT_NE(error("out#1").find("the run folder '/home/u/out#1/run1' holds '#'"), std::string::npos);
  EXPECT_EQ(error("/fsx/out-2.v1"), "");
  EXPECT_EQ(error("out"), "");
}

// The srun line quotes its --mpi word: the script does not rely on the schema alone for what reaches bash.
TEST(Script, TheSrunLineQuotesItsMpiPlugin) {
  PipelineConfig c = example();
  EXPECT_TRUE(has_line(render_script(c, "train", {"/p/pcdino"}, "h"),
                       "srun --mpi=pmix --kill-on-bad-exit=1 /p/pcdino train --config "
                       "/fsx/out/run1/logs/submitted_pipeline.yaml"));
  c.slurm.mpi = "pmix;date>/tmp/x";  // what the schema refuses, set past it
  EXPECT_NE(render_script(c, "train", {"/p/pcdino"}, "h")
                .find("srun '--mpi=pmix;date>/tmp/x' --kill-on-bad-exit=1"),
            std::string::npos);
}

// enroot's image reference, [USER@][REGISTRY#]IMAGE[:TAG], goes onto the srun line (quoted), never into an
// #SBATCH line: its registry's '#' is accepted (one of them).
TEST(SlurmConfig, AContainerImageMayNameItsRegistry) {
  const auto image = [](const std::string& reference) {
    return parse_config("slurm:\n  container_image: \"" + reference + "\"\n", "t.yaml").slurm.container_image;
  };
  EXPECT_EQ(image("nvcr.io#nvidia/pytorch:24.01-py3"), "nvcr.io#nvidia/pytorch:24.01-py3");
  EXPECT_EQ(image("user@nvcr.io#nvidia/pytorch"), "user@nvcr.io#nvidia/pytorch");
  EXPECT_THROW(image("a#b#c"), ConfigError);
  EXPECT_THROW(image("nvcr.io#two words"), ConfigError);
}

TEST(Script, EveryStageParsesAsBash) {
  const auto c = example("slurm:\n  environment: {A: \"it's $HOME\"}\n");
  for (const auto& stage : all_stages()) {
    const ProcessResult r =
        run_process({"bash", "-n", "-c", render_script(c, stage, {"/path with space/pcdino"}, "h")});
    EXPECT_EQ(r.exit_code, 0) << stage << ": " << r.err;
  }
}

TEST(Process, CapturesOutputErrorsAndExitCode) {
  const ProcessResult r = run_process({"sh", "-c", "echo out; echo err >&2; exit 3"});
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_EQ(r.exit_code, 3);
  try {
    run_process({"/nonexistent/sbatch"}, "install slurm-client");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUnavailable);
    EXPECT_NE(std::string(e.what()).find("install slurm-client"), std::string::npos);
  }
}

TEST(Process, ShellQuoteRoundTrips) {
  for (const std::string text : {"plain", "with space", "it's", "$HOME `x` \"q\"", "^docker,lo"}) {
    const ProcessResult r = run_process({"sh", "-c", "printf %s " + shell_quote(text)});
    EXPECT_EQ(r.out, text);
  }
}

TEST(SlurmConfig, BadValuesNameTheKey) {
  const auto error_of = [](const std::string& yaml) {
    try {
      parse_config(yaml, "p.yaml");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of("slurm:\n  time_limit: {trian: '1:00:00'}\n")
                .find("p.yaml:2:15: slurm.time_limit: 'trian' is not a stage"),
            std::string::npos);
  EXPECT_NE(error_of("slurm:\n  time_limit: {train: soon}\n").find("expected a Slurm time"),
            std::string::npos);
  EXPECT_NE(
      error_of("slurm:\n  partition: 'gpu; rm'\n").find("slurm.partition: holds a space, which ends a word"),
      std::string::npos);
  EXPECT_NE(error_of("slurm:\n  environment: {'1X': a}\n").find("'1X' is not an environment variable name"),
            std::string::npos);
  EXPECT_NE(error_of("slurm:\n  launcher: ssh\n").find("expected one of srun, mpirun"), std::string::npos);
  EXPECT_NE(error_of("slurm:\n  mem: lots\n").find("slurm.mem"), std::string::npos);
}

TEST(SlurmConfig, DumpReadsBack) {
  const auto c = example(
      "slurm:\n  partition: gpu\n  gpus: false\n  time_limit: {train: '10:00'}\n"
      "  environment: {FI_PROVIDER: efa}\n");
  const auto back = parse_config(dump_config(c), "dump.yaml");
  EXPECT_EQ(back.slurm.partition, "gpu");
  EXPECT_FALSE(back.slurm.gpus);
  EXPECT_EQ(back.slurm.time_limit, c.slurm.time_limit);
  EXPECT_EQ(back.slurm.environment, c.slurm.environment);
  EXPECT_EQ(dump_config(back), dump_config(c));
}

}  // namespace
}  // namespace pcdino::sbatch
