// CudaModelRunner: laying a batch out in the persistent step buffers (device_step_inputs.h).
#include <algorithm>

#include "common/util/check.h"
#include "worker/cuda/cuda_model_runner.h"

namespace tessera::worker {

bool CudaModelRunner::Graphable(std::span<const SequenceWork> batch) {
  return std::all_of(batch.begin(), batch.end(), [](const SequenceWork& s) {
    return s.tokens.size() == 1 && s.needs_logits;
  });
}

void CudaModelRunner::LayOut(std::span<const SequenceWork> batch, int rows_to_run,
                             bool sampling, bool in_graph, int padded_tokens) {
  const int n = static_cast<int>(batch.size());
  const int padding = rows_to_run - n;
  TESSERA_CHECK(padding >= 0 && (padding == 0 || Graphable(batch)),
                "CudaModelRunner: padding rows in a step that is not decode-only");
  TESSERA_CHECK(padded_tokens >= 0 && (padded_tokens == 0 || padding == 0),
                "CudaModelRunner: padding tokens and padding rows in one step");
  // Decode sequences (one token) first, unless every sequence takes the prefill kernel.
  order_.clear();
  int num_decode = 0;
  if (!options_.batch_invariant) {
    for (int i = 0; i < n; ++i) {
      if (batch[i].tokens.size() == 1) order_.push_back(i);
    }
    num_decode = static_cast<int>(order_.size());
  }
  for (int i = 0; i < n; ++i) {
    if (options_.batch_invariant || batch[i].tokens.size() != 1) order_.push_back(i);
  }
  StepShape shape{.num_tokens = padding + padded_tokens, .num_rows = padding};
  for (const SequenceWork& s : batch) {
    shape.num_tokens += static_cast<int>(s.tokens.size());
    shape.num_rows += s.needs_logits ? 1 : 0;
  }
  const bool padding_decodes = !options_.batch_invariant;
  shape.num_decode = num_decode + (padding_decodes ? padding : 0);
  shape.num_prefill = n - num_decode + (padding_decodes ? 0 : padding);
  inputs_->Begin(shape);

  attention_ = {.decode_max_context = in_graph ? config_.context_length : 0,
                .prefill_max_query = 1,
                .table_stride = tables_->stride(),
                .decode_tables = tables_->decode_tables(),
                .prefill_tables = tables_->prefill_tables()};
  row_sequence_.clear();
  int token = 0;
  for (int j = 0; j < n; ++j) LaySequence(batch[order_[j]], j, num_decode, &token, sampling);
  LayOutPaddedTokens(token, padded_tokens);
  LayOutPadding(token + padded_tokens, rows_to_run - n, sampling);
}

// Tokens after every sequence's (a token bucket's padding): token 0 at position 0, no KV write.
// They belong to no sequence, so attention and the recurrent mixer never read them; their rows
// of the token-shaped activations are computed and ignored.
void CudaModelRunner::LayOutPaddedTokens(int first_token, int count) {
  for (int t = first_token; t < first_token + count; ++t) {
    inputs_->token_ids()[t] = 0;
    inputs_->positions()[t] = 0;
    inputs_->slot_mapping()[t] = -1;
  }
}

// Sequence `s`, the j-th laid out: its tokens from *token on, its block table (deltas), its
// attention and recurrent-state entries and, when it samples, its row.
void CudaModelRunner::LaySequence(const SequenceWork& s, int j, int num_decode, int* token,
                                  bool sampling) {
  const int bs = options_.block_size;
  const int len = static_cast<int>(s.tokens.size());
  for (int t = 0; t < len; ++t, ++*token) {
    const int pos = s.start_pos + t;
    inputs_->token_ids()[*token] = s.tokens[t];
    inputs_->positions()[*token] = pos;
    inputs_->slot_mapping()[*token] = s.block_table[pos / bs] * bs + pos % bs;
  }
  inputs_->recurrent()[j] = {.token_begin = *token - len, .num_tokens = len,
                             .state_slot = s.slot};
  const int context = s.start_pos + len;
  const int needed = (context + bs - 1) / bs;
  if (sampling) {
    tables_->Sync(s.slot, s.block_table, needed, *inputs_);
  } else {
    tables_->SyncFull(s.slot, s.block_table, needed, *inputs_);
  }
  if (j < num_decode) {
    inputs_->decode_slots()[j] = s.slot;
    inputs_->decode_lens()[j] = context;
    attention_.decode_max_context = std::max(attention_.decode_max_context, context);
  } else {
    const int p = j - num_decode;
    inputs_->prefill_slots()[p] = s.slot;
    inputs_->prefill_query_start()[p] = *token - len - num_decode;
    inputs_->prefill_query_start()[p + 1] = *token - num_decode;
    inputs_->prefill_lens()[p] = context;
    attention_.prefill_max_query = std::max(attention_.prefill_max_query, len);
  }
  if (!s.needs_logits) return;
  const int row = static_cast<int>(row_sequence_.size());
  inputs_->last_rows()[row] = *token - 1;
  row_sequence_.push_back(order_[j]);
  if (!sampling) return;
  SetSamplingRow(row, s.slot, context);
  if (!s.allowed_tokens.empty()) {
    inputs_->SetRowMask(row, s.allowed_tokens);
  } else if (s.mask_pending) {
    inputs_->MarkRowMaskPending(row);
  }
}

void CudaModelRunner::SetSamplingRow(int row, int slot, int position) {
  inputs_->params()[row] = sampling_.RowParams(slot, position);
  if (sampling_.has_penalties(slot)) {
    sampling_.PenaltyEntries(slot, &penalty_tokens_, &penalty_counts_, &penalty_in_prompt_);
    inputs_->AddPenaltyRow(penalty_tokens_, penalty_counts_, penalty_in_prompt_);
  } else {
    inputs_->AddPenaltyRow({}, {}, {});
  }
  const sampling::SamplingParams& params = sampling_.params(slot);
  inputs_->AddBiasRow(params.logit_bias_tokens, params.logit_bias_values);
}

// Inert rows after the real ones (a decode graph's bucket is larger than the batch): token 0 at
// position 0, no KV write (slot -1), no recurrent state (state slot -1), no sampling; as decode rows their context is 0 (the kernel
// writes zeros), as prefill rows (batch-invariant mode) they attend to position 0 of the null
// block 0, which is zeroed and never written.
void CudaModelRunner::LayOutPadding(int first_token, int count, bool sampling) {
  const StepShape& shape = inputs_->shape();
  const int first_sequence = shape.num_decode + shape.num_prefill - count;
  int row = shape.num_rows - count;
  for (int i = 0; i < count; ++i, ++row) {
    const int token = first_token + i;
    inputs_->recurrent()[first_sequence + i] = {.token_begin = token, .num_tokens = 1,
                                                .state_slot = -1};
    inputs_->token_ids()[token] = 0;
    inputs_->positions()[token] = 0;
    inputs_->slot_mapping()[token] = -1;
    if (options_.batch_invariant) {
      const int p = shape.num_prefill - count + i;
      inputs_->prefill_slots()[p] = tables_->padding_slot();
      inputs_->prefill_query_start()[p] = token;
      inputs_->prefill_query_start()[p + 1] = token + 1;
      inputs_->prefill_lens()[p] = 1;
    } else {
      const int d = shape.num_decode - count + i;
      inputs_->decode_slots()[d] = tables_->padding_slot();
      inputs_->decode_lens()[d] = 0;
    }
    inputs_->last_rows()[row] = token;
    if (!sampling) continue;
    inputs_->params()[row] = cuda::SamplingRowParams{.active = 0};
    inputs_->AddPenaltyRow({}, {}, {});
  }
}

}  // namespace tessera::worker
