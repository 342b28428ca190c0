// The pipeline configuration: one YAML file whose keys follow the workshop's scDINO_full_pipeline.yaml
// (sections `meta`, `train_scDINO`, `downstream_analyses`), read by every stage.
//
// Every key has a default (DINO's main_dino.py / scDINO's pipeline file where they define one). A key the
// schema does not know, a value of the wrong type or out of range is a ConfigError whose message names the
// file, line and column, and the key path, e.g.
//   pipeline.yaml:14:5: train_scDINO.hyperparameters.lr: expected a number > 0, got 'fast'
// Values given on the command line (`--set meta.seed=3`) are named by the flag instead of a line.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace pcdino {

/// `meta:` the dataset and the run, shared by all stages.
struct MetaConfig {
  std::string name_of_run = "pcdino_run";
  std::string output_dir = "output";
  std::string dataset_dir;          ///< class-folder layout or a packed dataset (pack.json)
  int folder_depth_for_labels = 0;  ///< 0: the file's parent folder names its label, 1: the one above
  double train_datasetsplit_fraction = 0.8;  ///< in (0, 1]; the rest is held out for evaluation
  std::uint32_t seed = 40;                   ///< numpy-compatible seed of the split permutation
  bool images_are_RGB = false;               ///< NOLINT(readability-identifier-naming): the workshop's key
  std::map<int, std::string> channel_dict;   ///< channel index -> name (no '_' or '/')
  /// Channel combinations, one model per combination in scDINO; stages use one (see selected_channels()).
  std::vector<std::vector<int>> selected_channel_combination_per_run;
  int center_crop = 0;  ///< side of the centre crop in pixels; 0 = none
  /// Mean/std and training go on past an unreadable image, naming it (mean/std leaves it out; training
  /// takes another training image in its place) instead of stopping.
  bool skip_corrupt = false;
};

/// `train_scDINO.hyperparameters:` DINO's options with main_dino.py's names and defaults.
struct DinoHyperparameters {
  std::string arch = "vit_small";
  int patch_size = 16;
  int out_dim = 65536;
  bool norm_last_layer = true;
  double momentum_teacher = 0.996;
  bool use_bn_in_head = false;
  double warmup_teacher_temp = 0.04;
  double teacher_temp = 0.04;
  int warmup_teacher_temp_epochs = 0;
  bool use_fp16 = true;
  double weight_decay = 0.04;
  double weight_decay_end = 0.4;
  double clip_grad = 3.0;
  int freeze_last_layer = 1;
  double lr = 0.0005;
  int warmup_epochs = 10;
  double min_lr = 1e-6;
  std::string optimizer = "adamw";
  double drop_path_rate = 0.1;
  std::array<double, 2> global_crops_scale = {0.4, 1.0};
  int local_crops_number = 8;
  std::array<double, 2> local_crops_scale = {0.05, 0.4};
  int global_crops_size = 224;  ///< pixels; small images train far faster at small crop sizes
  int local_crops_size = 96;    ///< pixels

  // pcdino's own keys (not in main_dino.py), each defaulting to the reference's behaviour.

  /// Scale every augmentation parameter given in pixels (the Gaussian blur's sigma and kernel) by
  /// crop size / the reference's crop size (224 px global, 96 px local), so that a 28-px crop is blurred
  /// as much relative to its size as DINO blurs a 224-px one. Crops of 224/96 px are unchanged; false keeps
  /// the reference's pixel values at every crop size.
  bool scale_augmentation_to_crop = true;
  /// Vertical flip with p 0.5; unset = the pipeline's reference (scDINO's channel-wise pipeline flips,
  /// DINO's RGB pipeline does not). Written `vflip: true|false|null`.
  std::optional<bool> vflip;
  /// Transformer blocks of the ViT; 0 = the arch's (12). Fewer blocks train faster on CPUs.
  int depth = 0;
  /// Every this many epochs (and after the last), a kNN top-1 of the teacher's CLS features on a fixed
  /// subset of the held-out split, logged as `online_knn_top1`; 0 = never.
  int online_knn_every = 0;
  int online_knn_images = 2000;  ///< held-out images of the online kNN (bank 80%, queries 20%)
};

/// `train_scDINO:` the mean/std and pretraining stages.
struct TrainConfig {
  std::string dino_vit_name = "dino_vit";
  double fraction_for_mean_std_calc = 0.2;  ///< in (0, 1]: share of the dataset sampled for mean/std
  int epochs = 100;
  /// pcdino: > 0 cuts `epochs` (never raises it) to what fits this many minutes of training, from the
  /// time of the first epoch; 0 trains every epoch.
  double time_budget_minutes = 0;
  int saveckp_freq = 20;
  int nnodes = 1;
  int num_gpus = 1;  ///< per node
  int batch_size_per_gpu = 64;
  int num_workers = 10;
  std::string dist_url = "env://";
  /// pcdino: local folder each node stages the packed dataset in (core/staging.hpp); "" = read in place.
  std::string stage_dataset;
  bool keep_staged_dataset = false;  ///< keep the copy after a stage that succeeded
  DinoHyperparameters hyperparameters;
};

/// `downstream_analyses:` CLS features, kNN, UMAP and attention maps.
struct DownstreamConfig {
  struct ComputeClsFeatures {
    bool normalize = true;
    int num_gpus = 1;
    int batch_size_per_gpu = 24;
    int num_workers = 8;
    std::string checkpoint_key = "teacher";
    bool resize = true;
    int resize_length = 224;
    bool use_weighted_sampler = false;
  } compute_cls_features;
  struct AttentionVisualisation {
    int num_images_per_class = 1;
    bool resize_attention_image = true;
    int image_size = 480;
  } attention_visualisation;
  struct Knn {
    std::vector<int> n_neighbors = {5, 10, 50, 100, 200, 500};
    double temperature = 0.1;
  } knn;  ///< `kNN.global`
  struct Umap {
    int n_neighbors = 30;
    double min_dist = 0.4;
    int n_components = 2;
    std::string metric = "euclidean";
    double spread = 1.1;
    int epochs = 100;
    bool topometry_plots = false;
    int random_state = 42;
  } umap_eval;
};

/// `slurm:` the resources `pcdino submit` asks Slurm for (a pcdino section: the workshop wrote them into its
/// .slurm files). Task counts come from train_scDINO.nnodes and num_gpus (training) and
/// compute_cls_features.num_gpus (CLS features); no key here changes what a stage computes.
struct SlurmConfig {
  std::string partition;   ///< --partition ("" = the cluster's default)
  std::string account;     ///< --account
  std::string qos;         ///< --qos
  std::string constraint;  ///< --constraint, e.g. an instance type's node feature
  /// Ask for num_gpus GPUs per node (--gpus-per-node) for training and CLS features. false on CPU-only
  /// clusters, where num_gpus is the number of tasks (ranks) per node.
  bool gpus = true;
  bool exclusive = true;  ///< --exclusive for training and CLS features, as the workshop's scripts
  /// The device training and CLS features run on: auto (CUDA where a GPU is visible, else the CPU), nvidia
  /// (--device cuda) or cpu (--device cpu). The accelerator kinds pcdino has no LibTorch backend for are
  /// refused (core/accelerator.hpp).
  std::string accelerator = "auto";
  int cpus_per_task = 0;          ///< --cpus-per-task, also each rank's --threads; 0 = Slurm's default
  std::string mem;                ///< --mem per node ("" = Slurm's default, "0" = all of the node's memory)
  int cpu_tasks = 1;              ///< MPI ranks of the mean/std stage
  std::string launcher = "srun";  ///< srun (with --mpi=`mpi`) or mpirun (Open MPI inside the allocation)
  std::string mpi = "pmix";       ///< srun's --mpi plugin
  /// The container image every stage's step runs in through Pyxis (srun --container-image): an enroot
  /// image file (`.sqsh`, scripts/container-image) on the shared filesystem, or an image reference Pyxis
  /// imports ([USER@][REGISTRY#]IMAGE[:TAG]); "" = the programs installed on the nodes. The doctor stays
  /// on the host.
  std::string container_image;
  /// Pyxis's --container-mounts, one "SRC[:DST[:FLAGS]]" each (DST defaults to SRC): the data, the run
  /// folder and the configuration must appear inside at their own paths.
  std::vector<std::string> container_mounts;
  bool requeue = true;       ///< the training job requeues itself on preemption or time limit
  int signal_seconds = 120;  ///< SIGUSR1 this many seconds before the time limit: checkpoint, requeue
  /// Restart budget of a requeueing stage: how often its job may start again after a fault (a node lost or
  /// hung, the watchdog's exit 74, a rank killed by a signal) before it fails for good. Requeues after an
  /// agreed checkpoint (time limit, preemption) do not count. 0: a fault ends the job.
  int max_restarts = 3;
  std::map<std::string, std::string> time_limit;   ///< stage name -> --time ("2-00:00:00", "30:00")
  std::map<std::string, std::string> environment;  ///< exported by the scripts when spank_pcdino.so is not
                                                   ///< loaded (NCCL, libfabric, EFA variables)
};

/// `doctor:` the health check `pcdino submit` puts in front of training (a pcdino section; `pcdino doctor
/// --config` reads it too). Off by default: the check costs an allocation of the training's nodes.
struct DoctorConfig {
  bool enabled = false;       ///< the doctor stage runs first; training waits for it (afterok)
  std::string shared_dir;     ///< probed on every node; "" = the run folder (where checkpoints go)
  double probe_mb = 64;       ///< MB each node writes to and reads from it
  double min_write_mb_s = 0;  ///< floors of its throughput (MB/s); 0 = not judged
  double min_read_mb_s = 0;
  std::string scratch = "/tmp";               ///< local scratch ("" = not checked)
  double min_scratch_gib = 1;                 ///< free space it needs (GiB)
  std::vector<std::string> expect_env;        ///< variables every task must have, beside slurm.environment's
  std::vector<std::string> expect_providers;  ///< libfabric providers fi_getinfo must report ("efa")
  double min_busbw_gbps = 0;                  ///< floor of the MPI allreduce bus bandwidth (GB/s); 0 = none
  bool nccl = true;  ///< on GPU nodes: the CUDA runtime and NCCL, and NCCL's allreduce over all GPUs
  double min_nccl_busbw_gbps = 0;  ///< its floor at 1 GiB (GB/s); 0 = the instance type's published one
  std::string manifest = "/opt/pcdino/manifest.json";  ///< image manifest the versions are checked against
  bool drain = false;                                  ///< run the scontrol drain line of each unhealthy node
};

/// `monitoring:` Prometheus metrics of every stage (a pcdino section, issue #40), as node-exporter
/// textfile-collector files: one per process, `{textfile_dir}/pcdino_{SLURM_JOB_ID}_{rank}.prom`.
struct MonitoringConfig {
  /// The node exporter's --collector.textfile.directory (Debian's and Ubuntu's default); "" = no metrics.
  /// A directory that does not exist on a node means no metrics there (logged), not an error.
  std::string textfile_dir = "/var/lib/prometheus/node-exporter";
  double interval_seconds = 5;  ///< how often each process rewrites its file (its heartbeat)
};

/// The whole pipeline file.
struct PipelineConfig {
  MetaConfig meta;
  TrainConfig train;  ///< `train_scDINO`
  DownstreamConfig downstream;
  SlurmConfig slurm;
  DoctorConfig doctor;
  MonitoringConfig monitoring;
  std::string source;  ///< the file it was read from ("" for defaults only)

  /// `{output_dir}/{name_of_run}`: where every stage of this run writes.
  std::string run_dir() const;

  /// The channel combination at `index` of `selected_channel_combination_per_run` (default: the first).
  /// An empty result means "all channels of the images". Throws ConfigError if `index` is out of range.
  const std::vector<int>& selected_channels(std::size_t index = 0) const;

  /// The combination's name as scDINO writes it ("01234").
  std::string channel_combination_name(std::size_t index = 0) const;
};

/// Whether `path` stands in a batch script's #SBATCH lines (--output, --error, --chdir) as it is: "" if so,
/// else its first character that sbatch or Slurm's filename patterns read otherwise, and how ("holds '#',
/// which begins a comment in an #SBATCH line ..."). For the run folder ({output_dir}/{name_of_run}), known
/// only once output_dir is absolute. The characters and their sources (Slurm's files) are a table in
/// core/src/config.cpp.
std::string sbatch_path_problem(const std::string& path);

/// A command-line override: `path` is a dotted key path ("meta.seed"), `value` is parsed as YAML.
struct ConfigOverride {
  std::string path;
  std::string value;
  std::string origin;    ///< how the user wrote it, for messages ("--seed 3", "--set meta.seed=3")
  bool literal = false;  ///< take `value` as a plain string instead of parsing it as YAML (paths, names)
};

/// Parses "a.b.c=value" (the argument of --set). Throws ConfigError if there is no '=' or the path is empty.
ConfigOverride parse_override(const std::string& assignment);

/// Reads and validates `path`, then applies `overrides` in order. Throws NoInputError if the file cannot
/// be read, ConfigError for YAML syntax errors (with line and column), unknown keys, wrong types and
/// out-of-range values.
PipelineConfig load_config(const std::string& path, const std::vector<ConfigOverride>& overrides = {});

/// Same as load_config() for YAML text (`name` is used in messages).
PipelineConfig parse_config(const std::string& yaml_text, const std::string& name,
                            const std::vector<ConfigOverride>& overrides = {});

/// The complete effective configuration (every key of the schema, defaults included) as YAML that
/// load_config() reads back to an equal configuration; written beside each run's outputs as
/// run_config_dump.yaml.
std::string dump_config(const PipelineConfig& config);

/// One key of the configuration schema. The schema (core/src/config.cpp) names each key once; reading,
/// checking, the dump, overrides, the stages' resume hashes and `pcdino config --schema` all follow it.
struct ConfigKey {
  std::string path;           ///< dotted key path, e.g. "train_scDINO.hyperparameters.lr"
  std::string type;           ///< "integer", "number", "bool", "string", "[low, high]", ...
  std::string allowed;        ///< the values it accepts beyond its type ("> 0", "one of srun, mpirun",
                              ///< "only adamw (...)" for a key pcdino does not implement); "" = any
  std::string default_value;  ///< as dump_config() writes it
  std::string doc;            ///< what it does, one sentence or two
  bool locates = false;       ///< names where the run's files go (output_dir, name_of_run, the staged
                              ///< dataset), not what a stage computes: no stage's resume hash covers it
};

/// Every key, in the order of the file (sections as in the workshop's scDINO_full_pipeline.yaml).
const std::vector<ConfigKey>& config_schema();

/// The schema's entry for `path`. Throws ConfigError for a path the schema does not know.
const ConfigKey& config_key(const std::string& path);

/// The value of key `path` in `config` as dump_config() writes it (YAML, flow style), e.g. "0.0005",
/// "[0.4, 1]", "\"teacher\"". Throws ConfigError for a path the schema does not know.
std::string config_value(const PipelineConfig& config, const std::string& path);

/// The schema as a Markdown table (key, type, default, accepted values, what it does): the
/// "Configuration keys" section of docs/configuration.md, printed by `pcdino config --schema`.
std::string config_schema_markdown();

}  // namespace pcdino
