#include "pcdino/spank/plugin_file.hpp"

#include <elf.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <regex>
#include <stdexcept>
#include <vector>

namespace pcdino::spank {

namespace {

template <class T>
T at(const std::vector<char>& bytes, std::size_t offset, const std::string& path) {
  if (offset > bytes.size() || bytes.size() - offset < sizeof(T))
    throw std::runtime_error(path + ": truncated ELF file (offset " + std::to_string(offset) + ")");
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

}  // namespace

SlurmVersion SlurmVersion::from_number(std::uint32_t number) {
  return {static_cast<int>((number >> 16) & 0xff), static_cast<int>((number >> 8) & 0xff),
          static_cast<int>(number & 0xff)};
}

SlurmVersion SlurmVersion::parse(const std::string& text) {
  static const std::regex form(R"((\d+)\.(\d+)(?:\.(\d+))?)");
  std::smatch m;
  if (!std::regex_match(text, m, form)) throw std::invalid_argument("not a Slurm version: '" + text + "'");
  return {std::stoi(m[1]), std::stoi(m[2]), m[3].matched ? std::stoi(m[3]) : 0};
}

std::string SlurmVersion::major_minor() const {
  return std::to_string(major) + (minor < 10 ? ".0" : ".") + std::to_string(minor);
}

std::string SlurmVersion::str() const {
  return major_minor() + "." + std::to_string(micro);
}

SlurmVersion plugin_slurm_version(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open the plugin: " + std::strerror(errno));
  const std::vector<char> bytes{std::istreambuf_iterator<char>(in), {}};
  const auto header = at<Elf64_Ehdr>(bytes, 0, path);
  if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 || header.e_ident[EI_CLASS] != ELFCLASS64 ||
      header.e_ident[EI_DATA] != ELFDATA2LSB) {
    throw std::runtime_error(path + ": not a 64-bit little-endian ELF shared object");
  }
  std::vector<Elf64_Shdr> sections;
  for (std::size_t i = 0; i < header.e_shnum; ++i)
    sections.push_back(at<Elf64_Shdr>(bytes, header.e_shoff + i * sizeof(Elf64_Shdr), path));
  for (const Elf64_Shdr& table : sections) {
    if (table.sh_type != SHT_DYNSYM || table.sh_link >= sections.size()) continue;
    const Elf64_Shdr& names = sections[table.sh_link];
    for (std::size_t k = 0; k < table.sh_size / sizeof(Elf64_Sym); ++k) {
      const auto sym = at<Elf64_Sym>(bytes, table.sh_offset + k * sizeof(Elf64_Sym), path);
      const std::size_t name = names.sh_offset + sym.st_name;
      if (sym.st_shndx == SHN_UNDEF || name >= bytes.size() ||
          std::strncmp(bytes.data() + name, "plugin_version", bytes.size() - name) != 0) {
        continue;
      }
      if (sym.st_shndx >= sections.size()) break;
      const Elf64_Shdr& holder = sections[sym.st_shndx];
      if (holder.sh_type == SHT_NOBITS) break;
      return SlurmVersion::from_number(
          at<std::uint32_t>(bytes, holder.sh_offset + (sym.st_value - holder.sh_addr), path));
    }
  }
  throw std::runtime_error(path + ": defines no plugin_version (not a Slurm plugin built with SPANK_PLUGIN)");
}

SlurmVersion parse_slurm_version_line(const std::string& line) {
  static const std::regex version(R"((\d+)\.(\d+)\.(\d+))");
  std::smatch m;
  if (!std::regex_search(line, m, version)) throw std::invalid_argument("no Slurm version in '" + line + "'");
  return {std::stoi(m[1]), std::stoi(m[2]), std::stoi(m[3])};
}

}  // namespace pcdino::spank
