// kbisect-worker: measures one block of the fresh-load design in a process of its own (harness/block_worker.h).
// kbisect starts it for every block; it is not meant to be run by hand.
#include <iostream>

#include "harness/block_worker.h"

int main() {
  std::ios::sync_with_stdio(false);
  return kb::block_worker_main(std::cin, std::cout, std::cerr, 0);
}
