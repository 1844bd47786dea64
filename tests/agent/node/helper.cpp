// Test workloads for the node suite (run as jobs by the launcher).
//   hog MB              allocate and touch MB of memory, then sleep
//   forks N FILE        fork N sleeping children, write their pids to FILE, sleep
//   tick FILE           count forever, writing the counter to FILE every 10 ms
//   ckpt N              count to N (10 ms steps, each written to $CORRAL_CKPT_DIR/at); on SIGUSR1 save
//                       the count to $CORRAL_CKPT_DIR/state and exit; on CORRAL_RESTART=1 start from
//                       the saved count
//   fill MB             write MB into $CORRAL_JOBFS/fill, then sleep
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace {
volatile sig_atomic_t g_ckpt = 0;
void on_usr1(int) { g_ckpt = 1; }
void nap(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }
void write_atomic(const std::string& path, const std::string& text) {
  {
    std::ofstream o(path + ".tmp");
    o << text;
  }
  std::rename((path + ".tmp").c_str(), path.c_str());
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  std::string mode = argv[1];
  if (mode == "hog" && argc >= 3) {
    std::size_t mb = std::strtoul(argv[2], nullptr, 10);
    std::vector<char*> blocks;
    for (std::size_t i = 0; i < mb; ++i) {
      char* p = static_cast<char*>(std::malloc(1 << 20));
      if (!p) return 3;
      std::memset(p, 1, 1 << 20);
      blocks.push_back(p);
    }
    std::printf("allocated %zu MB\n", mb);
    std::fflush(stdout);
    nap(5000);
    return 0;
  }
  if (mode == "forks" && argc >= 4) {
    int n = std::atoi(argv[2]);
    std::string pids;
    for (int i = 0; i < n; ++i) {
      pid_t p = fork();
      if (p == 0) {
        for (;;) pause();
      }
      if (p < 0) return 4;
      pids += std::to_string(p) + "\n";
    }
    write_atomic(argv[3], pids);
    for (;;) pause();
  }
  if (mode == "tick" && argc >= 3) {
    for (long i = 0;; ++i) {
      write_atomic(argv[2], std::to_string(i));
      nap(10);
    }
  }
  if (mode == "ckpt" && argc >= 3) {
    long n = std::atol(argv[2]);
    const char* dir = std::getenv("CORRAL_CKPT_DIR");
    if (!dir) return 5;
    std::string state = std::string(dir) + "/state";
    long i = 0;
    const char* restart = std::getenv("CORRAL_RESTART");
    if (restart && std::string(restart) == "1") {
      std::ifstream in(state);
      in >> i;
      std::printf("restored %ld\n", i);
    } else {
      std::printf("fresh\n");
    }
    std::fflush(stdout);
    signal(SIGUSR1, on_usr1);
    write_atomic(std::string(dir) + "/ready", "1");
    for (; i < n; ++i) {
      if (g_ckpt) {
        write_atomic(state, std::to_string(i));
        std::printf("checkpointed at %ld\n", i);
        return 0;
      }
      write_atomic(std::string(dir) + "/at", std::to_string(i));
      nap(10);
    }
    std::printf("finished %ld\n", i);
    return 0;
  }
  if (mode == "fill" && argc >= 3) {
    const char* dir = std::getenv("CORRAL_JOBFS");
    if (!dir) return 6;
    std::ofstream o(std::string(dir) + "/fill");
    std::string mb(1 << 20, 'x');
    for (long i = 0; i < std::atol(argv[2]); ++i) o << mb;
    o.flush();
    nap(30000);
    return 0;
  }
  return 2;
}
