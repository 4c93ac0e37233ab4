// The replay driver: runs files, and every file in given folders, through a fuzz target's
// LLVMFuzzerTestOneInput, without libFuzzer. It is how the seed corpora and every crash
// input kept as a regression run as ordinary tests in builds of any compiler (suite
// fuzz_replay). A folder that does not exist holds no inputs; no input at all is a failure,
// so a test that lost its corpus cannot pass by running nothing.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

std::vector<std::filesystem::path> inputs_in(const std::filesystem::path& argument) {
  std::vector<std::filesystem::path> found;
  std::error_code error;
  if (std::filesystem::is_directory(argument, error)) {
    for (const auto& entry : std::filesystem::directory_iterator(argument)) {
      if (entry.is_regular_file()) found.push_back(entry.path());
    }
    std::sort(found.begin(), found.end());  // the same order on every run
  } else if (std::filesystem::is_regular_file(argument, error)) {
    found.push_back(argument);
  }
  return found;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t replayed = 0;
  for (int i = 1; i < argc; ++i) {
    for (const auto& path : inputs_in(argv[i])) {
      std::ifstream file(path, std::ios::binary);
      std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
      std::fprintf(stderr, "replay %s (%zu bytes)\n", path.string().c_str(), bytes.size());
      LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
      ++replayed;
    }
  }
  std::printf("%zu inputs replayed\n", replayed);
  return replayed == 0 ? 1 : 0;
}
