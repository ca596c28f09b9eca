// The calls of nccl_like_lib.cpp: each annotates itself as the NCCL call of the same name does.
#pragma once

#include <cstddef>
#include <cstdint>

enum like_red_op { like_sum = 0, like_prod = 1, like_max = 2, like_min = 3, like_avg = 4 };

extern "C" {
__attribute__((visibility("default"))) void like_comm_init_rank(uint64_t comm, int nranks, int rank, int cuda_device);
__attribute__((visibility("default"))) void like_all_reduce(uint64_t comm, size_t bytes, like_red_op op);
__attribute__((visibility("default"))) void like_broadcast(uint64_t comm, size_t bytes, int root);
__attribute__((visibility("default"))) void like_bad_payloads();
}
