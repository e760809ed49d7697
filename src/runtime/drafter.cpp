// The Drafter interface's defaults (cortiq.hpp).
#include "base/error.hpp"
#include "cortiq/cortiq.hpp"

namespace cortiq {

SampledDraft Drafter::draft_sampled(std::span<const TokenId> /*context*/, size_t /*max_tokens*/,
                                    const SamplingParams& /*params*/) {
  throw Error("this drafter proposes tokens but does not sample them (samples() is false)");
}

void Drafter::observe(std::span<const TokenId> /*ids*/, int64_t /*first_pos*/,
                      std::span<const float> /*hidden*/) {}

std::shared_ptr<Drafter> Drafter::for_another_sequence() const {
  throw Error("this drafter follows one sequence only");
}

}  // namespace cortiq
