/* Included by tests/probe/cpp.case through -I {workloads}. */
#define FROM_HEADER 42
