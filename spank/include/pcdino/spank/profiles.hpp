// Accelerator profiles: the admin's named sets of environment variables that spank_pcdino.so gives every
// task of a job step, each variable optionally conditioned on detected component versions, because AWS's
// EFA guidance changed with libfabric, aws-ofi-nccl, NCCL and kernel versions.
//
// File format (YAML; see spank/examples/accel-profiles.yaml):
//   versions:                      # optional: versions the admin pins (else detected on the node)
//     aws-ofi-nccl: "1.7.4"
//   profiles:
//     nvidia-efa:
//       description: "NVIDIA GPUs with EFA"
//       devices: cuda              # an accelerator kind's (core/accelerator.hpp) or none: the visibility
//                                  # variable --accel-device-bind sets
//       env:
//         - name: FI_PROVIDER
//           value: efa
//           when: ["aws-ofi-nccl <= 1.5"]     # all must hold (optional)
//           when_any: [...]                   # at least one must hold (optional)
//           source: "aws-ofi-nccl 1.6 release notes"
//
// Everything is bounded and checked where it enters: names are [A-Za-z_][A-Za-z0-9_]* of at most 128
// characters, values at most 4096 bytes, at most 64 profiles of 256 variables; variables that change how
// programs are loaded (LD_*, anything with PRELOAD) or that AWS says never to set (RDMAV_*) are refused.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "pcdino/core/accelerator.hpp"

namespace pcdino::spank {

/// A dotted version, compared numerically component by component ("1.18" > "1.7", "5.15.0-1051-aws"
/// reads as 5.15.0).
struct Version {
  std::vector<long> parts;
  /// Parses the leading digits-and-dots of `text`. Throws std::invalid_argument if it starts with no digit.
  static Version parse(const std::string& text);
  /// -1, 0 or 1; missing trailing components count as 0.
  int compare(const Version& other) const;
  std::string str() const;
};

/// "component op version", op one of < <= == != >= >; e.g. "libfabric >= 1.18".
struct Condition {
  std::string component;  ///< libfabric, aws-ofi-nccl, nccl, kernel, or any name the admin pins
  std::string op;
  Version version;
  std::string text;  ///< as written, for logs

  /// Throws std::invalid_argument naming the problem.
  static Condition parse(const std::string& text);
  /// False when the component's version is unknown: a variable conditioned on a version is only set
  /// when the version is known to match.
  bool holds(const std::map<std::string, Version>& versions) const;
};

/// One variable of a profile.
struct EnvEntry {
  std::string name;
  std::string value;
  std::vector<Condition> when;      ///< all must hold
  std::vector<Condition> when_any;  ///< if not empty, at least one must hold
  std::string source;               ///< where the advice comes from

  bool applies(const std::map<std::string, Version>& versions) const;
};

/// The variable that lists a step's devices of `kind` (AcceleratorKind::visible_devices_variable:
/// "CUDA_VISIBLE_DEVICES" for NVIDIA's), or "" for nullptr (a profile without devices).
const char* device_variable(const AcceleratorKind* kind);

/// The variable through which the collectives library of `kind` finds rank 0, as "IP:port"
/// (AcceleratorKind::root_comm_variable); "" for NVIDIA's (NCCL and PyTorch take MASTER_ADDR/MASTER_PORT)
/// and nullptr.
const char* root_comm_variable(const AcceleratorKind* kind);

struct Profile {
  std::string name;
  std::string description;
  /// The kind whose devices --accel-device-bind=per-task narrows to one per task (`devices:`, matched
  /// against AcceleratorKind::spank_devices); nullptr for `none`.
  const AcceleratorKind* devices = nullptr;
  std::vector<EnvEntry> env;
};

struct ProfileConfig {
  std::map<std::string, Profile> profiles;
  std::map<std::string, Version> pinned_versions;  ///< `versions:` of the file
};

/// Limits enforced by parse_profiles() and the option parsers.
inline constexpr std::size_t kMaxNameLength = 128;
inline constexpr std::size_t kMaxValueLength = 4096;
inline constexpr std::size_t kMaxProfiles = 64;
inline constexpr std::size_t kMaxEntries = 256;
inline constexpr std::size_t kMaxConfigBytes = 1 << 20;

/// True for a profile name users may type: [a-z0-9][a-z0-9._-]{0,63}.
bool valid_profile_name(const std::string& name);

/// Why `name` may not be set by a profile ("" if it may).
std::string forbidden_variable(const std::string& name);

/// Parses the profile file. `source` names it in messages. Throws std::invalid_argument with
/// "source:line:col: what" for any unknown key, bad name, forbidden variable, bad condition or exceeded
/// limit; never anything else (yaml-cpp's exceptions are translated).
ProfileConfig parse_profiles(const std::string& text, const std::string& source);

/// Reads `path` for the plugin: refuses (std::runtime_error naming the path and why) a file that is not
/// a regular file, not owned by root, or writable by group or others, or larger than kMaxConfigBytes;
/// then parse_profiles(). `require_root_owner` is false only in tests run by other users.
ProfileConfig load_profiles(const std::string& path, bool require_root_owner = true);

}  // namespace pcdino::spank
