// glibc's heap statistics (mallinfo2), for the benchmarks' "memory held" figures.
#if defined(__linux__)
#include <malloc.h>
#endif
