// bench/meson.build compiles this with clang++ -fopenmp to learn whether LLVM's libomp links.
#include <omp.h>

int main() { return omp_get_max_threads() > 0 ? 0 : 1; }
