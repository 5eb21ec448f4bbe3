// Throws and catches std::runtime_error five times (libstdc++ USDT probes throw and catch).
#include <stdexcept>
int main() { int n = 0; for (int i = 0; i < 5; i++) { try { throw std::runtime_error("x"); } catch (const std::exception &) { n++; } } return n == 5 ? 0 : 1; }
