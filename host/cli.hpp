// Command-line parsing for areal-host: a subcommand, flags, and the
// trailing `dotted.key=value` config overrides.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace areal::host {

struct CommandLine {
  std::string command;                       // "run" when only --config is given
  std::map<std::string, std::string> flags;  // --name value (or "" for switches)
  std::vector<std::string> positional;       // non-flag, non-override words
  std::vector<std::string> overrides;        // words containing '=' after the command
};

// Flags that take no value.
bool is_switch(const std::string& flag);

// Throws areal::Error(INVALID_ARGUMENT) for a flag missing its value.
CommandLine parse_command_line(int argc, char** argv);

std::string usage();
// The lines of usage() that describe one command (`areal-host init-model --help`); all of usage() for an unknown one.
std::string command_usage(const std::string& command);

}  // namespace areal::host
