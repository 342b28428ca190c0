// The Slurm release a built SPANK plugin is for, read from the file without loading it: loading needs the
// daemon's symbols, and the question is asked exactly when the plugin does not fit the daemon.
#pragma once

#include <cstdint>
#include <string>

namespace pcdino::spank {

/// A Slurm version as SLURM_VERSION_NUMBER encodes it: SLURM_VERSION_NUM(a, b, c) = a << 16 | b << 8 | c
/// (slurm/slurm_version.h).
struct SlurmVersion {
  int major = 0;
  int minor = 0;
  int micro = 0;

  static SlurmVersion from_number(std::uint32_t number);
  /// "23.11.10" or "23.11" (a micro part is optional); throws std::invalid_argument otherwise.
  static SlurmVersion parse(const std::string& text);
  /// "23.11.10": the minor with two digits, as Slurm names its releases.
  std::string str() const;
  /// "23.11"
  std::string major_minor() const;
  /// Slurm loads a SPANK plugin only when its plugin_version's major and minor equal the daemon's
  /// (src/common/plugin.c: the "spank" type is compared under the mask 0xffff00).
  bool loads_in(const SlurmVersion& daemon) const { return major == daemon.major && minor == daemon.minor; }
};

/// The `plugin_version` symbol that SPANK_PLUGIN() defines (= SLURM_VERSION_NUMBER of the headers the
/// plugin was compiled with), read from the ELF64 little-endian shared object `path` (.dynsym, then the
/// section that holds the symbol's address). Throws std::runtime_error naming the file when it cannot be
/// read, is not such an ELF file, or defines no plugin_version.
SlurmVersion plugin_slurm_version(const std::string& path);

/// The running Slurm's version from the first line of `scontrol --version` / `scontrol --version`
/// ("slurm 23.11.10", "slurm-wlm 22.05.8"); throws std::invalid_argument when the line has no version.
SlurmVersion parse_slurm_version_line(const std::string& line);

}  // namespace pcdino::spank
