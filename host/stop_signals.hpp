// The long-running commands (serve, dashboard, service) stop on SIGINT or
// SIGTERM: the signals are blocked before any thread starts (every thread
// inherits the mask) and the main thread waits for them with sigwait.
#pragma once

#include <pthread.h>
#include <signal.h>

namespace areal::host {

inline sigset_t block_stop_signals() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  return stop_signals;
}

// For a child between fork and exec (async-signal-safe): it starts with the
// signals a fresh process has. A blocked mask survives exec, so a child of
// serve or service would never see SIGTERM and every stop would end in
// SIGKILL; an ignored SIGPIPE (the subproc workflow's) survives it too.
inline void restore_child_signals() {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  signal(SIGPIPE, SIG_DFL);
}

}  // namespace areal::host
