#include "core/plugin_host/elf_exports.hpp"

#include <elf.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include "core/plugin_host/error.hpp"

namespace areal {
namespace {

template <class T>
T read_at(const std::string& bytes, size_t offset, const std::string& path) {
  if (offset + sizeof(T) > bytes.size()) throw Error(AREAL_CODE_INVALID_ARGUMENT, path + ": truncated ELF file");
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

}  // namespace

std::vector<std::string> exported_symbols(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(AREAL_CODE_NOT_FOUND, path + ": cannot read");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto eh = read_at<Elf64_Ehdr>(bytes, 0, path);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_ident[EI_DATA] != ELFDATA2LSB)
    throw Error(AREAL_CODE_INVALID_ARGUMENT, path + ": not a 64-bit little-endian ELF file");
  std::vector<std::string> names;
  for (size_t i = 0; i < eh.e_shnum; ++i) {
    const auto sh = read_at<Elf64_Shdr>(bytes, eh.e_shoff + i * eh.e_shentsize, path);
    if (sh.sh_type != SHT_DYNSYM || sh.sh_entsize == 0) continue;
    const auto strtab = read_at<Elf64_Shdr>(bytes, eh.e_shoff + sh.sh_link * eh.e_shentsize, path);
    for (size_t off = sh.sh_offset; off + sh.sh_entsize <= sh.sh_offset + sh.sh_size; off += sh.sh_entsize) {
      const auto sym = read_at<Elf64_Sym>(bytes, off, path);
      const unsigned bind = ELF64_ST_BIND(sym.st_info), type = ELF64_ST_TYPE(sym.st_info);
      if (sym.st_shndx == SHN_UNDEF || sym.st_name == 0) continue;  // imports and the null symbol
      if (bind != STB_GLOBAL && bind != STB_WEAK && bind != STB_GNU_UNIQUE) continue;
      if (ELF64_ST_VISIBILITY(sym.st_other) != STV_DEFAULT && ELF64_ST_VISIBILITY(sym.st_other) != STV_PROTECTED) continue;
      if (type == STT_SECTION || type == STT_FILE) continue;
      const size_t name_at = strtab.sh_offset + sym.st_name;
      if (name_at >= bytes.size()) throw Error(AREAL_CODE_INVALID_ARGUMENT, path + ": bad symbol name offset");
      std::string name(bytes.c_str() + name_at);
      if (type == STT_OBJECT && sym.st_size == 0 && sym.st_value == 0) continue;  // version definition (AREAL_1)
      names.push_back(name);
    }
  }
  return names;
}

}  // namespace areal
