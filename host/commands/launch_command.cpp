// `areal-host launch --config x.yaml [dotted.key=value ...]`: submits the
// run to Slurm (launcher.type slurm) and follows it until it ends:
//   sbatch    <run dir>/slurm/job.sbatch (launcher/slurm_job), whose batch
//             step runs the controller; it starts ranks and servers with srun
//   follow    the job's output is copied to our stdout as it grows; once the
//             gateway listens its URL is printed (and is in the URL file)
//   Ctrl-C    scancel, then follow the job to its end
// Exit status: 0 when the job COMPLETED, 1 for any other end, 2 when it
// could not be submitted.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <set>
#include <thread>
#include <string>
#include <exception>

#include "../config_loading.hpp"
#include "../launcher/shell.hpp"
#include "../launcher/slurm_job.hpp"
#include "commands.hpp"
#include "core/plugin_host/error.hpp"

namespace areal::host {

namespace {

namespace fs = std::filesystem;

std::atomic<int> g_interrupts{0};
void on_interrupt(int) { g_interrupts.fetch_add(1); }

std::pair<int, std::string> capture(const std::string& command) {
  launcher::CommandOutput r = launcher::run_shell(command);
  return {r.status, std::move(r.output)};
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

// "JobState=COMPLETED ... ExitCode=0:0" fields of `scontrol show job -o`.
std::string field(const std::string& text, const std::string& key) {
  const size_t at = text.find(key + "=");
  if (at == std::string::npos) return "";
  const size_t start = at + key.size() + 1, end = text.find_first_of(" \n", start);
  return text.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

}  // namespace

int launch(const CommandLine& cl) {
  if (!cl.flags.count("config")) throw Error(AREAL_CODE_INVALID_ARGUMENT, "launch needs --config FILE.yaml");
  const std::string path = fs::absolute(cl.flags.at("config")).string();
  ResolvedConfig rc = load_config(path, cl.overrides);
  if (report_config_errors(path, rc)) return 2;
  if (const auto problems = run_job_problems(rc); !problems.empty()) {
    for (const auto& p : problems) std::cerr << path << ": " << p << " (see docs/configuration.md)\n";
    return 2;
  }
  for (const char* tool : {"sbatch", "squeue", "scontrol", "scancel"})
    if (capture(std::string("command -v ") + tool).first != 0) {
      std::cerr << "areal-host launch: '" << tool << "' is not on PATH (is this a Slurm login node?)\n";
      return 2;
    }
  const std::string run_dir = rc.path(rc.host.run_dir_relative());
  const std::string url_file = rc.host.launcher.slurm.url_file.empty() ? run_dir + "/gateway_url" : rc.path(rc.host.launcher.slurm.url_file);
  const std::string exe = launcher::self_executable();
  launcher::SlurmJob job;
  try {
    job = launcher::make_slurm_job(rc, path, cl.overrides, exe, run_dir);
  } catch (const std::exception& e) {
    std::cerr << path << ": " << e.what() << "\n";
    return 2;
  }
  fs::create_directories(run_dir + "/slurm");
  fs::remove(url_file);  // a previous run's URL must not be taken for this one's
  const std::string script = run_dir + "/slurm/job.sbatch";
  std::ofstream(script) << job.script;
  const auto [rc_submit, submitted] = capture("sbatch --parsable " + launcher::shell_quote(script));
  std::string sbatch_messages;
  const std::string job_id = launcher::parse_sbatch_job_id(submitted, &sbatch_messages);
  if (rc_submit != 0 || job_id.empty()) {
    std::cerr << "areal-host launch: sbatch failed: " << trim(submitted) << "\n  script: " << script << "\n";
    return 2;
  }
  // A submitted job is followed whatever else sbatch said (a submit filter's note, a warning).
  if (!sbatch_messages.empty()) std::cerr << "areal-host launch: sbatch says: " << trim(sbatch_messages) << "\n";
  std::string output = job.output_path;
  output.replace(output.find("%j"), 2, job_id);
  std::cout << "areal-host launch: submitted job " << job_id << " (" << job.tasks << " tasks; script " << script << ", output " << output
            << ")" << std::endl;

  struct sigaction sa{};
  sa.sa_handler = on_interrupt;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  const auto poll = std::chrono::duration<double>(rc.host.launcher.slurm.poll_seconds);
  std::ifstream out_stream;
  bool url_shown = false, cancelled = false;
  int failed_queries = 0;
  static const std::set<std::string> kEndStates = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
                                                   "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "REVOKED", "SPECIAL_EXIT"};
  std::string last_state;
  auto follow_output = [&] {
    if (!out_stream.is_open()) out_stream.open(output);
    if (!out_stream.is_open()) return;
    std::string line;
    while (std::getline(out_stream, line)) {
      if (out_stream.eof()) {  // a partial line: read it again once it is whole
        out_stream.clear();
        out_stream.seekg(-static_cast<std::streamoff>(line.size()), std::ios::cur);
        break;
      }
      std::cout << line << "\n";
    }
    out_stream.clear();
    std::cout.flush();
  };
  while (true) {
    if (g_interrupts.load() > 0 && !cancelled) {
      std::cout << "areal-host launch: interrupted; cancelling job " << job_id << std::endl;
      capture("scancel " + job_id);
      cancelled = true;
    }
    follow_output();
    if (!url_shown && fs::exists(url_file)) {
      std::ifstream f(url_file);
      std::string url;
      std::getline(f, url);
      std::cout << "areal-host launch: gateway " << url << " (written to " << url_file << ")" << std::endl;
      url_shown = true;
    }
    // The job's state from slurmctld. A failed query (Ctrl-C reaches the
    // query too: it runs in our process group) is asked again, never taken
    // for the job's end.
    const auto [q_rc, info] = capture("scontrol show job -o " + job_id);
    const std::string s = q_rc == 0 ? field(info, "JobState") : "";
    if (q_rc != 0 || s.empty()) {
      const auto [sq_rc, queued] = capture("squeue -h -j " + job_id + " -o %T");
      if (sq_rc == 0 && trim(queued).empty() && !(g_interrupts.load() > 0 && !cancelled)) break;  // its record is gone: it ended
      if (++failed_queries > 30) {
        std::cout << "areal-host launch: cannot query job " << job_id << " (" << trim(info) << "); stopped following it" << std::endl;
        return 1;
      }
    } else {
      failed_queries = 0;
      if (s != last_state) std::cout << "areal-host launch: job " << job_id << " is " << s << std::endl;
      last_state = s;
      if (kEndStates.count(s) && !(g_interrupts.load() > 0 && !cancelled)) break;
    }
    std::this_thread::sleep_for(poll);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the last lines of the output file
  follow_output();
  if (out_stream.is_open()) {  // a last line without its newline
    std::string rest((std::istreambuf_iterator<char>(out_stream)), std::istreambuf_iterator<char>());
    if (!rest.empty()) std::cout << rest << "\n";
  }
  const std::string info = capture("scontrol show job -o " + job_id).second;
  std::string final_state = field(info, "JobState"), exit_code = field(info, "ExitCode");
  if (final_state.empty()) final_state = "ENDED (its record is gone from slurmctld)";
  std::cout << "areal-host launch: job " << job_id << " " << final_state << (exit_code.empty() ? "" : " (exit code " + exit_code + ")")
            << "; output " << output << std::endl;
  return final_state == "COMPLETED" ? 0 : 1;
}

}  // namespace areal::host
