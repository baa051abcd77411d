// The shape of a paged prefill attention launch (paged_prefill_attention.cuh, and its tensor-core
// kernel paged_prefill_attention_tc.cuh).
#pragma once

namespace tessera::cuda {

struct PagedPrefillParams {
  int num_seqs = 0;
  int num_heads = 0;  // a multiple of num_kv_heads
  int num_kv_heads = 0;
  int block_size = 0;
  int max_blocks_per_seq = 0;
  int max_query_len = 0;  // >= every chunk length; host-side knowledge of the step
  float scale = 0;
};

}  // namespace tessera::cuda
