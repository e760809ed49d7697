// A sequence classification head on the final-normed hidden state of one
// token (llama.cpp's rank pooling, Qwen3 rerankers): scores =
// cls.output.weight · h, then a softmax over the labels where the family
// says so. Generation never uses it; `cortiq embed --pooling rank` does.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/cpu/weight_view.hpp"
#include "model/hparams.hpp"

namespace cortiq {

class TensorVisitor;
class ThreadPool;

struct ClassifierHead {
  kernels::WeightView weight;  // cls.output.weight: [n_labels][n_embd]; empty when absent
  bool softmax = false;        // Qwen3: probabilities over the labels

  // cls.output.weight (optional), one row per classifier label (1 without labels).
  void visit(TensorVisitor& v, const ModelHParams& hp);
  bool present() const { return weight.data != nullptr; }
  // The label scores of one hidden row (n_embd values).
  std::vector<float> scores(std::span<const float> hidden, ThreadPool& pool) const;
};

}  // namespace cortiq
