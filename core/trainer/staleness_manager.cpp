#include "core/trainer/staleness_manager.hpp"

#include <algorithm>

#include "core/plugin_host/error.hpp"

namespace areal::trainer {

StalenessManager::StalenessManager(int64_t batch_size, int64_t max_head_offpolicyness, int64_t max_concurrent)
    : batch_size_(std::max<int64_t>(1, batch_size)),
      max_offpolicy_(max_head_offpolicyness),
      max_concurrent_(std::max<int64_t>(1, max_concurrent)) {
  if (max_head_offpolicyness < 0) throw Error(AREAL_CODE_INVALID_ARGUMENT, "max_head_offpolicyness must be >= 0");
}

int64_t StalenessManager::capacity_locked() const {
  const int64_t concurrency = max_concurrent_ - c_.running;
  const int64_t staleness = (max_offpolicy_ + c_.version + 1) * batch_size_ - (c_.accepted + c_.running);
  return std::min(concurrency, staleness);
}

int64_t StalenessManager::capacity() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return capacity_locked();
}

bool StalenessManager::acquire() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return stopped_ || capacity_locked() > 0; });
  if (stopped_) return false;
  ++c_.running;
  return true;
}

void StalenessManager::release() {
  std::lock_guard<std::mutex> lock(mutex_);
  --c_.running;
  changed_.notify_all();
}

void StalenessManager::on_accepted() {
  std::lock_guard<std::mutex> lock(mutex_);
  --c_.running, ++c_.accepted;
  changed_.notify_all();
}

void StalenessManager::on_rejected() {
  std::lock_guard<std::mutex> lock(mutex_);
  --c_.running, ++c_.rejected;
  changed_.notify_all();
}

void StalenessManager::on_dropped() {
  std::lock_guard<std::mutex> lock(mutex_);
  --c_.accepted, ++c_.rejected;
  changed_.notify_all();
}

void StalenessManager::set_version(int64_t version) {
  std::lock_guard<std::mutex> lock(mutex_);
  c_.version = version;
  changed_.notify_all();
}

void StalenessManager::on_version_recovered(int64_t version) {
  std::lock_guard<std::mutex> lock(mutex_);
  c_.version = version;
  c_.accepted = version * batch_size_;
  changed_.notify_all();
}

void StalenessManager::stop() {
  std::lock_guard<std::mutex> lock(mutex_);
  stopped_ = true;
  changed_.notify_all();
}

StalenessCounters StalenessManager::counters() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return c_;
}

}  // namespace areal::trainer
