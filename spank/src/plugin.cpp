// spank_pcdino.so: the SPANK callbacks. Everything they decide lives in profiles/environment/args/versions;
// this file only moves values between Slurm and those functions, logs, and makes sure no exception ever
// crosses into Slurm (every callback catches everything and returns a code instead; see Returns below).
//
// Contexts (pyxis_dispatch.c has the same shape):
//   allocator (sbatch/salloc), local (srun): register options; validate --accel-profile against the
//     profile file at submission, so a bad value fails there and not on a compute node.
//   remote (slurmstepd): read the profile file as root in init, then set each task's environment in
//     task_init. Problems here are logged and the task runs with the rank variables only: failing in a
//     remote callback can drain the node.
//   slurmd: nothing (and never an error, or slurmd would not start).
//
// Returns: only an option callback fails, with -1 and pcdino's message, when the user's --accel-* value is
// wrong; every other path returns 0 (ESPANK_SUCCESS) and at most logs. Before 25.05 Slurm's callers stopped
// for a negative return only (22.05: slurmstepd's task.c and srun/sbatch/salloc test "< 0"), though the
// plugin stack already logged any non-zero one of a required plugin ("spank: required plugin ...: ...()
// failed with rc=N", 22.05 src/common/plugstack.c); 25.05 fails on any non-zero return
// (CHANGELOG/slurm-25.05.md; 25.11 src/common/spank.c and its callers), and a failed slurm_spank_init in a
// batch job's slurmstepd drains the node unless slurm_spank_init_failure_mode says otherwise (spank(8),
// 25.11). tests/spank/test_return_codes.sh runs every context on a real cluster and fails on any such line.
extern "C" {
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pwd.h>
#include <slurm/slurm.h>
#include <slurm/spank.h>
}

#include <cstdlib>
#include <exception>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "pcdino/spank/args.hpp"
#include "pcdino/spank/environment.hpp"
#include "pcdino/spank/profiles.hpp"
#include "pcdino/spank/versions.hpp"

// The loader finds these by name; C++ would otherwise give const globals internal linkage, and the
// build hides every symbol that is not explicitly made visible (the version script then lists them).
#pragma GCC visibility push(default)
extern "C" {
extern const char plugin_name[];
extern const char plugin_type[];
extern const unsigned int plugin_version;
extern const unsigned int spank_plugin_version;
SPANK_PLUGIN(pcdino, 1)
}
#pragma GCC visibility pop

namespace {

using namespace pcdino::spank;

struct State {
  PluginArgs args;
  bool args_ok = false;
  std::string profile_option;  // --accel-profile as given ("" if not)
  BindMode bind = BindMode::kNone;
  std::unique_ptr<ProfileConfig> config;
  std::string config_error;
};

State& state() {
  static State s;
  return s;
}

// An option's bad value: -1, as pyxis returns (22.05's sbatch/srun stop only on a negative return, 25.11's on
// any non-zero one: spank.c's _do_option_cb callers); ESPANK_* error codes are positive.
constexpr int kOptionError = -1;

// Loads the profile file once per process; remembers why it could not.
const ProfileConfig* profiles() {
  State& s = state();
  if (!s.config && s.config_error.empty()) {
    try {
      s.config = std::make_unique<ProfileConfig>(load_profiles(s.args.config));
    } catch (const std::exception& e) {
      s.config_error = e.what();
    }
  }
  return s.config.get();
}

std::string profile_list(const ProfileConfig& config) {
  std::string names;
  for (const auto& [name, p] : config.profiles) names += name + ", ";
  return names + "none";
}

int on_profile_option(int, const char* optarg, int remote) {
  try {
    State& s = state();
    s.profile_option = parse_profile_option(optarg);
    if (remote || s.profile_option == "none") return ESPANK_SUCCESS;
    // Submission: check the name against the admin's file now.
    const ProfileConfig* config = profiles();
    if (config == nullptr) {
      slurm_error("pcdino: --accel-profile=%s cannot be checked: %s", s.profile_option.c_str(),
                  s.config_error.c_str());
      return kOptionError;
    }
    if (config->profiles.count(s.profile_option) == 0) {
      slurm_error("pcdino: --accel-profile=%s: no such profile; choose one of: %s", s.profile_option.c_str(),
                  profile_list(*config).c_str());
      return kOptionError;
    }
    return ESPANK_SUCCESS;
  } catch (const std::exception& e) {
    slurm_error("pcdino: %s", e.what());
    return kOptionError;
  } catch (...) {
    return kOptionError;
  }
}

int on_bind_option(int, const char* optarg, int) {
  try {
    state().bind = parse_bind_option(optarg);
    return ESPANK_SUCCESS;
  } catch (const std::exception& e) {
    slurm_error("pcdino: %s", e.what());
    return kOptionError;
  } catch (...) {
    return kOptionError;
  }
}

char kProfileName[] = "accel-profile";
char kProfileArg[] = "NAME";
char kProfileUsage[] =
    "Accelerator environment profile for every task (NCCL/libfabric/EFA variables), or 'none'; the default "
    "is the site's";
char kBindName[] = "accel-device-bind";
char kBindArg[] = "MODE";
char kBindUsage[] = "per-task: each task sees only device [local rank mod devices]; none: all of the step's";

struct spank_option options[] = {
    {kProfileName, kProfileArg, kProfileUsage, 1, 0, on_profile_option},
    {kBindName, kBindArg, kBindUsage, 2, 0, on_bind_option},
};

std::string getenv_of(spank_t sp, const char* name) {
  // Host lists of large jobs are long: grow the buffer on ESPANK_NOSPACE (up to 1 MiB).
  for (std::size_t size = 4096; size <= (1u << 20); size *= 4) {
    std::vector<char> buf(size);
    const spank_err_t rc = spank_getenv(sp, name, buf.data(), static_cast<int>(size));
    if (rc == ESPANK_SUCCESS) {
      buf.back() = '\0';
      return buf.data();
    }
    if (rc != ESPANK_NOSPACE) return "";
  }
  return "";
}

// The IPv4 address of the first host of `nodelist` as this node's resolver gives it, or "" (then the
// library's rank-0 variable is left unset and the job's own setting, if any, stays).
std::string ipv4_of_first_host(const std::string& nodelist) {
  std::string host;
  try {
    host = first_host(nodelist);
  } catch (const std::invalid_argument&) {
    return "";
  }
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || found == nullptr) {
    slurm_info("pcdino: cannot resolve %s: rank-0 address not set", host.c_str());
    return "";
  }
  // The first address outside 127.0.0.0/8: Debian and Ubuntu map a host's own name to 127.0.1.1 in
  // /etc/hosts, which the first node would otherwise hand its own tasks.
  std::string address;
  for (const addrinfo* a = found; a != nullptr && address.empty(); a = a->ai_next) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(a->ai_addr);
    char text[INET_ADDRSTRLEN] = {};
    if ((ntohl(in->sin_addr.s_addr) >> 24) != 127 &&
        inet_ntop(AF_INET, &in->sin_addr, text, sizeof text) != nullptr)
      address = text;
  }
  freeaddrinfo(found);
  if (address.empty())
    slurm_info("pcdino: %s resolves to loopback only: rank-0 address not set", host.c_str());
  return address;
}

// A task without HOME gets its user's home directory from the passwd database, as a login gives it. Open
// MPI 5's opal_init stops without HOME ("Unable to get the user home directory"), and a job submitted with
// --export=NONE has none where Slurm could not load the user's login environment (--get-user-env).
void ensure_home(spank_t sp) {
  if (!getenv_of(sp, "HOME").empty()) return;
  uid_t uid = 0;
  if (spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS) return;
  passwd entry{};
  passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (getpwuid_r(uid, &entry, buf.data(), buf.size(), &found) != 0 || found == nullptr ||
      found->pw_dir == nullptr)
    return;
  if (spank_setenv(sp, "HOME", found->pw_dir, 0) == ESPANK_SUCCESS)
    slurm_verbose("pcdino: HOME=%s for the task (the job exported none)", found->pw_dir);
}

int task_init(spank_t sp) {
  State& s = state();
  ensure_home(sp);
  if (!s.args_ok) return ESPANK_SUCCESS;
  TaskInfo task;
  int local_id = 0;
  spank_get_item(sp, S_JOB_ID, &task.job_id);
  std::uint32_t step_id = 0;
  spank_get_item(sp, S_JOB_STEPID, &step_id);
  task.batch_step =
      step_id == SLURM_BATCH_SCRIPT || step_id == SLURM_EXTERN_CONT || step_id == SLURM_INTERACTIVE_STEP;
  spank_get_item(sp, S_TASK_GLOBAL_ID, &task.global_rank);
  spank_get_item(sp, S_TASK_ID, &local_id);
  task.local_rank = static_cast<std::uint32_t>(local_id);
  spank_get_item(sp, S_JOB_TOTAL_TASK_COUNT, &task.world_size);
  spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &task.local_world_size);
  task.step_nodelist = getenv_of(sp, "SLURM_STEP_NODELIST");
  if (task.step_nodelist.empty()) task.step_nodelist = getenv_of(sp, "SLURM_JOB_NODELIST");
  const std::string cpus = getenv_of(sp, "SLURM_CPUS_PER_TASK");
  task.cpus_per_task = cpus.empty() ? 0 : std::atoi(cpus.c_str());
  task.omp_num_threads_set = !getenv_of(sp, "OMP_NUM_THREADS").empty();

  const std::string chosen = s.profile_option.empty() ? s.args.default_profile : s.profile_option;
  const Profile* profile = nullptr;
  std::map<std::string, Version> versions;
  if (chosen != "none") {
    const ProfileConfig* config = profiles();
    if (config == nullptr) {
      slurm_error("pcdino: task %u: no profile variables set: %s", task.global_rank, s.config_error.c_str());
    } else if (config->profiles.count(chosen) == 0) {
      slurm_error("pcdino: task %u: profile '%s' is not in %s on this node", task.global_rank, chosen.c_str(),
                  s.args.config.c_str());
    } else {
      profile = &config->profiles.at(chosen);
      std::vector<std::string> notes;
      versions = detect_versions(s.args.manifest, config->pinned_versions, &notes);
      for (const auto& note : notes) slurm_info("pcdino: %s", note.c_str());
      task.visible_devices = getenv_of(sp, device_variable(profile->devices));
      if (!task.batch_step && *root_comm_variable(profile->devices) != '\0')
        task.master_ip = ipv4_of_first_host(task.step_nodelist);
    }
  }
  task.step_id = step_id;
  const auto env = task_environment(task, profile, versions, s.bind == BindMode::kPerTask, s.args.ports);
  // A rank-0 address the job exported itself stays; everything else is the plugin's or the admin's.
  const std::string own_root_comm = profile != nullptr ? root_comm_variable(profile->devices) : "";
  for (const auto& [name, value] : env) {
    const int overwrite = name == own_root_comm ? 0 : 1;
    const spank_err_t rc = spank_setenv(sp, name.c_str(), value.c_str(), overwrite);
    if (rc != ESPANK_SUCCESS && !(overwrite == 0 && rc == ESPANK_ENV_EXISTS)) {
      slurm_error("pcdino: task %u: cannot set %s", task.global_rank, name.c_str());
    }
  }
  slurm_verbose("pcdino: task %u: profile %s, %zu variables set", task.global_rank, chosen.c_str(),
                env.size());
  return ESPANK_SUCCESS;
}

}  // namespace

#pragma GCC visibility push(default)
extern "C" {

int slurm_spank_init(spank_t sp, int ac, char** av) {
  const spank_context_t context = spank_context();
  if (context == S_CTX_SLURMD || context == S_CTX_JOB_SCRIPT || context == S_CTX_ERROR) return ESPANK_SUCCESS;
  try {
    State& s = state();
    try {
      s.args = parse_plugin_args(std::vector<std::string>(av, av + ac));
      s.args_ok = true;
    } catch (const std::exception& e) {
      slurm_error("pcdino: %s", e.what());
      // A broken plugstack.conf line is the admin's to fix; users' jobs still run, without profiles.
      return ESPANK_SUCCESS;
    }
    for (auto& opt : options) {
      if (spank_option_register(sp, &opt) != ESPANK_SUCCESS) {
        slurm_error("pcdino: cannot register --%s", opt.name);
      }
    }
    if (context == S_CTX_REMOTE && profiles() == nullptr) {
      // Read as root here, before privileges are dropped; the log line says why it was refused.
      slurm_error("pcdino: %s", s.config_error.c_str());
    }
    return ESPANK_SUCCESS;
  } catch (...) {
    // Nothing the user did: srun, sbatch and salloc go on (before 25.05 they ignored a positive return
    // here; from 25.05 on any non-zero one stops them).
    slurm_error("pcdino: slurm_spank_init: unexpected error; the job goes on");
    return ESPANK_SUCCESS;
  }
}

int slurm_spank_task_init(spank_t sp, int, char**) {
  try {
    return task_init(sp);
  } catch (const std::exception& e) {
    slurm_error("pcdino: task_init: %s", e.what());
    return ESPANK_SUCCESS;
  } catch (...) {
    return ESPANK_SUCCESS;
  }
}

}  // extern "C"
#pragma GCC visibility pop
