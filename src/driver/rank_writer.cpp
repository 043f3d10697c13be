#include "driver/rank_writer.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <latch>
#include <mutex>
#include <ostream>
#include <thread>

#include "backend/backend.hpp"
#include "driver/out_dir.hpp"
#include "driver/session.hpp"
#include "frontend/frontend.hpp"

namespace shardc::driver {
namespace {

// State shared by the workers of one job.
struct Shared {
  std::atomic<std::size_t> next{0};
  std::atomic<std::size_t> done{0};
  std::atomic<bool> failed{false};
  std::mutex error_mutex;
  std::string first_error;

  void fail(const std::string& message) {
    const std::lock_guard lock(error_mutex);
    if (!failed.exchange(true)) first_error = message;
  }
};

void worker(const RankWriteJob& job, const RankRenderer& renderer, FileSystem& fs, Shared& shared) {
  const Plan& plan = *job.plan;
  std::string bytes;  // one buffer per worker, reused for every file
  for (;;) {
    const std::size_t i = shared.next.fetch_add(1);
    if (i >= job.ranks.size() || shared.failed.load()) return;
    const std::int64_t rank = job.ranks[i];
    const std::string name = rank_file_name(rank, plan.world_size);
    const std::string path = path_join(job.ranks_dir, name);
    std::string error;
    try {
      renderer.render(rank, job.memory->ranks[static_cast<std::size_t>(rank)], bytes);
      if (job.digests != nullptr)
        (*job.digests)[i] = FileDigest{"ranks/" + name, rank,
                                       static_cast<std::int64_t>(bytes.size()), sha256_hex(bytes)};
      if (!fs.write_atomic(path, bytes, error)) {
        shared.fail("cannot write '" + path + "': " + error);
        return;
      }
    } catch (const std::exception& e) {
      shared.fail("internal error writing '" + path + "': " + e.what());
      return;
    }
    shared.done.fetch_add(1);
  }
}

std::size_t worker_count(int jobs, std::size_t files) {
  std::size_t workers =
      jobs > 0 ? static_cast<std::size_t>(jobs) : std::thread::hardware_concurrency();
  return std::clamp<std::size_t>(workers, 1, std::max<std::size_t>(files, 1));
}

void show_progress(std::ostream& err, std::size_t done, std::size_t total) {
  err << "\r[ranks " << done << "/" << total << "]" << std::flush;
}

}  // namespace

bool write_rank_files(const RankWriteJob& job, FileSystem& fs, std::ostream& err) {
  const std::size_t total = job.ranks.size();
  const std::size_t workers = worker_count(job.jobs, total);
  spdlog::debug("writing {} rank files with {} workers", total, workers);
  if (job.digests != nullptr) job.digests->assign(total, FileDigest{});
  Shared shared;
  const RankRenderer renderer(*job.plan, *job.buffers);
  std::latch finished(static_cast<std::ptrdiff_t>(workers));
  std::vector<std::jthread> threads;
  threads.reserve(workers);
  for (std::size_t t = 0; t < workers; ++t) {
    threads.emplace_back([&] {
      worker(job, renderer, fs, shared);
      finished.count_down();
    });
  }
  // Only this thread touches `err` while the workers run.
  if (!job.progress) finished.wait();
  while (!finished.try_wait()) {
    if (job.progress) show_progress(err, shared.done.load(), total);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  threads.clear();
  if (job.progress) {
    show_progress(err, shared.done.load(), total);
    err << "\n";
  }
  if (shared.failed.load()) {
    print_error(err, DiagCode::EOutput, shared.first_error);
    return false;
  }
  return true;
}

}  // namespace shardc::driver
