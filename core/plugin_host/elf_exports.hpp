// Reads the dynamic symbols a shared library defines and exports, straight
// from its ELF file (no dlopen, no external tools), for the conformance
// suite's export-hygiene check.
#pragma once

#include <string>
#include <vector>

namespace areal {

// Names of defined, globally visible symbols in the .dynsym of an ELF64
// little-endian file. Throws areal::Error(INVALID_ARGUMENT) for anything
// else.
std::vector<std::string> exported_symbols(const std::string& path);

}  // namespace areal
