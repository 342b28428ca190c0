#include <gtest/gtest.h>

#include "../lib/config_values.hpp"
#include "../lib/temp_dir.hpp"
#include "pcdino/core/config.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/fs.hpp"

namespace pcdino {
namespace {

// The workshop's scDINO_full_pipeline.yaml, as published (values of its example run).
const char* kWorkshopYaml = R"(meta:
  name_of_run: "scDINO_run"
  output_dir: "/fsx/output"
  dataset_dir: "/fsx/DeepPhenotype_PBMC_ImageSet_YSeverin/Training"
  folder_depth_for_labels: 0 # 0 is the folder where the images are, 1 is the folder above, etc.
  train_datasetsplit_fraction: 0.8
  seed: 40
  images_are_RGB: False
  channel_dict: { 0: "aTub", 1: "BF", 2: "DAPI", 3: "Oct4", 4: "PE" }
  selected_channel_combination_per_run: ["01234", "0", "1"]
  center_crop: 0

train_scDINO:
  dino_vit_name: "dino_vit_name"
  fraction_for_mean_std_calc: 0.2
  epochs: 10
  saveckp_freq: 2
  num_gpus: 4
  batch_size_per_gpu: 32
  num_workers: 8
  dist_url: "env://"
  hyperparameters:
    arch: "vit_small"
    clip_grad: 3
    drop_path_rate: 0.1
    freeze_last_layer: 1
    global_crops_scale: !!python/tuple [0.14, 1.0]
    local_crops_number: 8
    local_crops_scale: !!python/tuple [0.05, 0.14]
    lr: 0.0005
    min_lr: 0.000001
    momentum_teacher: 0.996
    norm_last_layer: True
    optimizer: "adamw"
    patch_size: 16
    teacher_temp: 0.04
    use_bn_in_head: False
    use_fp16: True
    warmup_epochs: 5
    warmup_teacher_temp: 0.04
    warmup_teacher_temp_epochs: 0
    weight_decay: 0.04
    weight_decay_end: 0.4

downstream_analyses:
  compute_cls_features:
    normalize: True
    num_gpus: 4
    batch_size_per_gpu: 24
    num_workers: 8
    checkpoint_key: teacher
    resize: True
    resize_length: 224
    use_weighted_sampler: False
  attention_visualisation:
    num_images_per_class: 1
    resize_attention_image: True
    image_size: 480
  kNN:
    global:
      n_neighbors: [5, 10, 50, 100, 200, 500]
      temperature: 0.1
  umap_eval:
    n_neighbors: 30
    min_dist: 0.4
    n_components: 2
    metric: euclidean
    spread: 1.1
    epochs: 100
    topometry_plots: False
)";

std::string error_of(const std::string& yaml, const std::vector<ConfigOverride>& overrides = {}) {
  try {
    parse_config(yaml, "pipeline.yaml", overrides);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

// Found by scripts/fuzz yaml (core/fuzz/corpus/yaml/crash-alias-in-its-own-anchor): an alias inside its own
// anchor made yaml-cpp's tree a cycle and the duplicate-key walk recursed until the stack ran out.
TEST(Config, AnAliasInsideItsOwnAnchorIsRefusedNotFollowed) {
  try {
    parse_config("meta: &m\n  name_of_run: x\n  other: *m\n", "p.yaml");
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("an alias inside its own anchor"), std::string::npos) << e.what();
  }
  // The billion laughs: each level doubles the values an expanded walk meets.
  std::string laughs = "l0: &l0 [x, x]\n";
  for (int i = 1; i < 30; ++i)
    laughs += "l" + std::to_string(i) + ": &l" + std::to_string(i) + " [*l" + std::to_string(i - 1) + ", *l" +
              std::to_string(i - 1) + "]\n";
  EXPECT_THROW(parse_config(laughs, "p.yaml"), ConfigError);
}

// Found by scripts/fuzz yaml in CI (core/fuzz/corpus/yaml/crash-complex-key): a complex key ("? " and a
// mapping) reached the unknown-key walk, whose conversion to a string threw yaml-cpp's own exception.
TEST(Config, AComplexKeyIsRefusedNamingItsLine) {
  const std::string error = error_of("meta:\n  name_of_run: x\n  ? {a: 1}\n  : 2\n");
  EXPECT_NE(error.find("pipeline.yaml:3"), std::string::npos) << error;
  EXPECT_NE(error.find("a key must be a name, got '{a: 1}'"), std::string::npos) << error;
  EXPECT_NE(error_of("? [a, b]\n: 1\n").find("a key must be a name"), std::string::npos);
}

TEST(Config, ReadsTheWorkshopFile) {
  const PipelineConfig c = parse_config(kWorkshopYaml, "scDINO_full_pipeline.yaml");
  EXPECT_EQ(c.meta.dataset_dir, "/fsx/DeepPhenotype_PBMC_ImageSet_YSeverin/Training");
  EXPECT_EQ(c.meta.seed, 40u);
  EXPECT_FALSE(c.meta.images_are_RGB);
  EXPECT_EQ(c.meta.channel_dict.at(2), "DAPI");
  ASSERT_EQ(c.meta.selected_channel_combination_per_run.size(), 3u);
  EXPECT_EQ(c.selected_channels(0), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(c.selected_channels(2), (std::vector<int>{1}));
  EXPECT_EQ(c.channel_combination_name(0), "01234");
  EXPECT_DOUBLE_EQ(c.train.fraction_for_mean_std_calc, 0.2);
  EXPECT_EQ(c.train.num_gpus, 4);
  EXPECT_DOUBLE_EQ(c.train.hyperparameters.global_crops_scale[0], 0.14);
  EXPECT_DOUBLE_EQ(c.train.hyperparameters.min_lr, 1e-6);
  EXPECT_DOUBLE_EQ(c.train.hyperparameters.clip_grad, 3.0);
  EXPECT_EQ(c.downstream.knn.n_neighbors, (std::vector<int>{5, 10, 50, 100, 200, 500}));
  EXPECT_DOUBLE_EQ(c.downstream.umap_eval.spread, 1.1);
  EXPECT_EQ(c.run_dir(), "/fsx/output/scDINO_run");
}

TEST(Config, DefaultsFollowDino) {
  const PipelineConfig c = parse_config("meta:\n  dataset_dir: d\n", "p.yaml");
  EXPECT_EQ(c.train.hyperparameters.out_dim, 65536);
  EXPECT_DOUBLE_EQ(c.train.hyperparameters.momentum_teacher, 0.996);
  EXPECT_DOUBLE_EQ(c.train.hyperparameters.local_crops_scale[1], 0.4);
  EXPECT_DOUBLE_EQ(c.meta.train_datasetsplit_fraction, 0.8);
  EXPECT_TRUE(c.selected_channels().empty());  // all channels
}

TEST(Config, UnknownKeyNamesLineColumnAndSuggestion) {
  const std::string e = error_of("meta:\n  seed: 1\ntrain_scDINO:\n  epoch: 5\n");
  EXPECT_NE(e.find("pipeline.yaml:4:3: train_scDINO.epoch: unknown key"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean 'train_scDINO.epochs'"), std::string::npos) << e;
  EXPECT_NE(error_of("bogus_section: {}\n").find("pipeline.yaml:1:1: bogus_section: unknown key"),
            std::string::npos);
}

TEST(Config, WrongTypeAndRangeNameTheKey) {
  std::string e = error_of("train_scDINO:\n  hyperparameters:\n    lr: fast\n");
  EXPECT_NE(
      e.find("pipeline.yaml:3:9: train_scDINO.hyperparameters.lr: expected a finite number, got 'fast'"),
      std::string::npos)
      << e;
  e = error_of("meta:\n  train_datasetsplit_fraction: 1.5\n");
  EXPECT_NE(e.find("meta.train_datasetsplit_fraction: expected a number in (0, 1], got '1.5'"),
            std::string::npos)
      << e;
  e = error_of("train_scDINO:\n  hyperparameters:\n    arch: vit_huge\n");
  EXPECT_NE(e.find("expected one of vit_tiny, vit_small, vit_base"), std::string::npos) << e;
  e = error_of("meta:\n  selected_channel_combination_per_run: [\"0a\"]\n");
  EXPECT_NE(e.find("meta.selected_channel_combination_per_run[0]"), std::string::npos) << e;
  e = error_of("meta:\n  channel_dict: {0: \"a_b\"}\n");
  EXPECT_NE(e.find("meta.channel_dict.0"), std::string::npos) << e;
  e = error_of("meta: [1, 2]\n");
  EXPECT_NE(e.find("meta: expected a mapping"), std::string::npos) << e;
}

TEST(Config, SyntaxErrorHasLineAndColumn) {
  const std::string e = error_of("meta:\n  seed: [1, 2\n");
  EXPECT_NE(e.find("pipeline.yaml:"), std::string::npos);
  EXPECT_NE(e.find("YAML syntax error"), std::string::npos) << e;
}

// yaml-cpp would answer with the first of two equal keys and PyYAML with the last: refused, with both lines.
TEST(Config, AKeyWrittenTwiceIsRefused) {
  std::string e = error_of("meta:\n  seed: 1\n  name_of_run: a\n  seed: 2\n");
  EXPECT_NE(e.find("pipeline.yaml:4:3: key 'seed' appears twice in this mapping (first at line 2)"),
            std::string::npos)
      << e;
  e = error_of("meta:\n  seed: 1\nmeta:\n  seed: 2\n");
  EXPECT_NE(e.find("pipeline.yaml:3:1: key 'meta' appears twice"), std::string::npos) << e;
  EXPECT_EQ(
      error_of(
          "train_scDINO:\n  num_gpus: 1\ndownstream_analyses:\n  compute_cls_features:\n    num_gpus: 1\n"),
      "(no error)")
      << "equal keys in different mappings are fine";
}

TEST(Config, ChannelCombinationForms) {
  auto channels = [](const std::string& value) {
    return parse_config("meta:\n  selected_channel_combination_per_run: " + value + "\n", "p")
        .selected_channels();
  };
  EXPECT_EQ(channels("[\"024\"]"), (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(channels("\"0,1,12\""), (std::vector<int>{0, 1, 12}));
  EXPECT_EQ(channels("[[3, 1]]"), (std::vector<int>{3, 1}));
  EXPECT_NE(error_of("meta:\n  selected_channel_combination_per_run: [\"00\"]\n").find("selected twice"),
            std::string::npos);
}

TEST(Config, OverridesApplyAndAreNamedInErrors) {
  const PipelineConfig c =
      parse_config(kWorkshopYaml, "p.yaml",
                   {parse_override("train_scDINO.epochs=3"),
                    {"meta.dataset_dir", "/data/a: b", "--dataset-dir /data/a: b", true}});
  EXPECT_EQ(c.train.epochs, 3);
  EXPECT_EQ(c.meta.dataset_dir, "/data/a: b");
  const std::string e = error_of(kWorkshopYaml, {parse_override("train_scDINO.epochs=-1")});
  EXPECT_NE(e.find("--set train_scDINO.epochs=-1: train_scDINO.epochs: expected an integer >= 1"),
            std::string::npos)
      << e;
  EXPECT_THROW(parse_override("no-equals-sign"), ConfigError);
  const std::string unknown = error_of("", {parse_override("meta.sed=3")});
  EXPECT_NE(unknown.find("unknown key"), std::string::npos) << unknown;
}

TEST(Config, DumpReadsBackEqual) {
  const PipelineConfig a = parse_config(
      kWorkshopYaml, "p.yaml", {parse_override("train_scDINO.hyperparameters.lr=0.00012345678901234")});
  const std::string dumped = dump_config(a);
  const PipelineConfig b = parse_config(dumped, "dump.yaml");
  EXPECT_EQ(dump_config(b), dumped);
  EXPECT_DOUBLE_EQ(b.train.hyperparameters.lr, 0.00012345678901234);
  EXPECT_EQ(b.meta.selected_channel_combination_per_run, a.meta.selected_channel_combination_per_run);
  EXPECT_EQ(b.meta.channel_dict, a.meta.channel_dict);
}

// The schema drives the dump: every key set to a value other than its default survives dump -> read, and
// every other key keeps its value. A key left out of the dump would come back at its default and fail.
TEST(Config, EveryKeyRoundTripsThroughTheDump) {
  std::size_t tried = 0;
  for (const auto& key : config_schema()) {
    const auto assignment = test::non_default_assignment(key);
    if (!assignment) {
      // Only the keys pcdino refuses accept nothing but their default.
      EXPECT_EQ(key.allowed.rfind("only ", 0), 0u) << key.path << " accepts no other value";
      continue;
    }
    ++tried;
    const PipelineConfig set = parse_config("", "p.yaml", {parse_override(*assignment)});
    const PipelineConfig back = parse_config(dump_config(set), "dump.yaml");
    EXPECT_NE(config_value(back, key.path), key.default_value) << *assignment;
    for (const auto& other : config_schema()) {
      EXPECT_EQ(config_value(back, other.path), config_value(set, other.path))
          << *assignment << ": " << other.path;
    }
  }
  EXPECT_GT(tried, 70u);
}

// Every key the schema says pcdino does not implement refuses any value but its default, naming the key.
TEST(Config, KeysThatAreNotImplementedRefuseOtherValues) {
  std::size_t refused = 0;
  for (const auto& key : config_schema()) {
    if (key.allowed.rfind("only ", 0) != 0) continue;
    ++refused;
    EXPECT_NO_THROW(parse_config("", "p.yaml", {parse_override(key.path + "=" + key.default_value)}))
        << key.path;
    for (const auto& value : test::candidate_values().at(key.type)) {
      if (value == key.default_value) continue;
      try {
        parse_config("", "p.yaml", {parse_override(key.path + "=" + value)});
        ADD_FAILURE() << key.path << " accepted " << value;
      } catch (const ConfigError& e) {
        EXPECT_NE(std::string(e.what()).find(key.path + ": not implemented"), std::string::npos) << e.what();
      }
    }
  }
  EXPECT_EQ(refused,
            8u);  // optimizer, use_bn_in_head, dist_url, use_weighted_sampler, attention x3, topometry
}

// A key pcdino reads but does not implement is refused with its path, never silently ignored.
TEST(Config, UnimplementedOptionsAreRefused) {
  for (const char* optimizer : {"sgd", "lars"}) {
    const std::string e =
        error_of(std::string("train_scDINO:\n  hyperparameters:\n    optimizer: ") + optimizer + "\n");
    EXPECT_NE(e.find("pipeline.yaml:3:16: train_scDINO.hyperparameters.optimizer: not implemented"),
              std::string::npos)
        << e;
  }
  const std::string e = error_of("train_scDINO:\n  hyperparameters:\n    use_bn_in_head: true\n");
  EXPECT_NE(e.find("train_scDINO.hyperparameters.use_bn_in_head: not implemented"), std::string::npos) << e;
  EXPECT_NO_THROW(parse_config(
      "train_scDINO:\n  hyperparameters:\n    optimizer: adamw\n    use_bn_in_head: false\n", "p.yaml"));
}

// pcdino's own keys: defaults that keep the reference's behaviour, and the dump keeps an unset vflip unset.
TEST(Config, PcdinoTrainingKeys) {
  const DinoHyperparameters d = parse_config("", "p.yaml").train.hyperparameters;
  EXPECT_TRUE(d.scale_augmentation_to_crop);
  EXPECT_FALSE(d.vflip.has_value());
  EXPECT_EQ(d.depth, 0);
  EXPECT_EQ(d.online_knn_every, 0);
  const PipelineConfig set = parse_config(
      "train_scDINO:\n  hyperparameters:\n    vflip: false\n    depth: 4\n    online_knn_every: 2\n"
      "    scale_augmentation_to_crop: false\n",
      "p.yaml");
  EXPECT_EQ(set.train.hyperparameters.vflip, std::optional<bool>(false));
  EXPECT_EQ(set.train.hyperparameters.depth, 4);
  EXPECT_EQ(set.train.hyperparameters.online_knn_every, 2);
  EXPECT_FALSE(set.train.hyperparameters.scale_augmentation_to_crop);
  for (const PipelineConfig& c : {parse_config("", "p.yaml"), set}) {
    const PipelineConfig back = parse_config(dump_config(c), "dump.yaml");
    EXPECT_EQ(back.train.hyperparameters.vflip, c.train.hyperparameters.vflip);
    EXPECT_EQ(back.train.hyperparameters.depth, c.train.hyperparameters.depth);
    EXPECT_EQ(back.train.hyperparameters.scale_augmentation_to_crop,
              c.train.hyperparameters.scale_augmentation_to_crop);
  }
  EXPECT_EQ(parse_config("", "p.yaml", {parse_override("train_scDINO.hyperparameters.vflip=true")})
                .train.hyperparameters.vflip,
            std::optional<bool>(true));
  const std::string e = error_of("train_scDINO:\n  hyperparameters:\n    depth: -1\n");
  EXPECT_NE(e.find("train_scDINO.hyperparameters.depth"), std::string::npos) << e;
}

// meta.name_of_run goes into #SBATCH --job-name, --output and --chdir (issue #70): sbatch ends an #SBATCH
// word at whitespace, takes quotes and backslashes out and ignores the rest of the line from a '#', and Slurm
// expands '%' in --output; the jobs would write elsewhere. Refused, naming the key and the character.
TEST(Config, ARunNameThatSbatchWouldReadOtherwiseIsRefused) {
  const std::vector<std::pair<std::string, std::string>> refused = {{"run#2", "'#'"},
                                                                    {"run%j", "'%'"},
                                                                    {"my run", "a space"},
                                                                    {"tab\there", "a tab"},
                                                                    {"two\nlines", "a line break"},
                                                                    {"it's", "\"'\""},
                                                                    {"say\"hi\"", "'\"'"},
                                                                    {"back\\slash", "'\\'"},
                                                                    {"$HOME", "'$'"},
                                                                    {"a/b", "'/'"}};
  for (const auto& [name, shown] : refused) {
    const std::string e = error_of("", {{"meta.name_of_run", name, "--name-of-run " + name, true}});
    EXPECT_NE(e.find("--name-of-run " + name + ": meta.name_of_run: holds " + shown), std::string::npos)
        << name << ": " << e;
  }
  const std::string e = error_of("meta:\n  name_of_run: run#2-meanstd\n");
  EXPECT_NE(e.find("pipeline.yaml:2:16: meta.name_of_run: holds '#', which"), std::string::npos) << e;
  EXPECT_NE(e.find("comment"), std::string::npos) << e;
  EXPECT_NE(error_of("meta:\n  name_of_run: \"\"\n").find("meta.name_of_run: expected a non-empty name"),
            std::string::npos);
  for (const char* name :
       {"scDINO_run", "fashion-mnist-gpu", "u16x5-np2", "cells.v2", "run:2", "run,2", "r@x"}) {
    EXPECT_EQ(
        parse_config("", "p.yaml", {{"meta.name_of_run", name, "--name-of-run", true}}).meta.name_of_run,
        name);
  }
  for (const char* example : {"demo", "fashion-mnist-gpu", "workshop"}) {
    const std::string file = std::string(PCDINO_SOURCE_DIR "/sbatch/examples/") + example + ".yaml";
    EXPECT_EQ(load_config(file).meta.name_of_run, example);
  }
}

// slurm.mpi goes into the srun line of the batch scripts: only a plugin srun --mpi=list can name.
TEST(Config, MpiIsOneOfSlurmsPlugins) {
  const std::string e = error_of("", {parse_override("slurm.mpi=pmix;date>/tmp/x")});
  EXPECT_NE(
      e.find("--set slurm.mpi=pmix;date>/tmp/x: slurm.mpi: expected one of Slurm's MPI plugins (none, pmi2, "
             "pmix, pmix_v2, pmix_v3, pmix_v4, pmix_v5, pmix_v6, cray_shasta)"),
      std::string::npos)
      << e;
  EXPECT_NE(error_of("slurm:\n  mpi: openmpi\n").find("pipeline.yaml:2:8: slurm.mpi: expected one of"),
            std::string::npos);
  for (const char* mpi : {"none", "pmi2", "pmix", "pmix_v3", "pmix_v4", "pmix_v5", "cray_shasta"}) {
    EXPECT_EQ(parse_config(std::string("slurm:\n  mpi: ") + mpi + "\n", "p.yaml").slurm.mpi, mpi);
  }
}

TEST(Config, MissingFileIsNoInput) {
  EXPECT_THROW(load_config("/nonexistent/pipeline.yaml"), NoInputError);
  test::TempDir dir;
  test::write_text(dir / "p.yaml", "meta:\n  seed: 7\n");
  EXPECT_EQ(load_config(dir / "p.yaml").meta.seed, 7u);
}

}  // namespace
}  // namespace pcdino

namespace pcdino {
namespace {

// Training on Gaudi or Trainium is refused before anything starts: exit 78 with the reason and what to
// use instead.
TEST(Config, AGaudiOrTrainiumPipelineIsRefusedWithTheReason) {
  for (const char* accelerator : {"habana", "neuron"}) {
    try {
      parse_config(std::string("slurm:\n  accelerator: ") + accelerator + "\n", "pipeline.yaml");
      ADD_FAILURE() << accelerator << " must be refused";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.code(), ExitCode::kConfig);
      const std::string m = e.what();
      EXPECT_NE(m.find("pipeline.yaml:2:16: slurm.accelerator: pcdino does not train or extract on"),
                std::string::npos)
          << m;
      EXPECT_NE(m.find(std::string(accelerator) == "habana" ? "habana_frameworks" : "torch-neuronx"),
                std::string::npos)
          << m;
    }
  }
  EXPECT_EQ(parse_config("slurm:\n  accelerator: nvidia\n", "p.yaml").slurm.accelerator, "nvidia");
  EXPECT_NE(error_of("slurm:\n  accelerator: tpu\n").find("expected one of auto, nvidia, cpu"),
            std::string::npos);
}

}  // namespace
}  // namespace pcdino
