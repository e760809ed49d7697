// Which of a model's layers one forward pass runs: a stage of a pipeline
// split across processes or machines, or the layers after rows that come as
// hidden states rather than token ids (image embeddings).
//
// A stage runs layers [first, last). It starts from the token embeddings
// when it has no input, else from `input`: each row's residual stream
// entering layer `first` (the embedding's scale and norm already applied).
// A stage that ends before the last layer gives, in place of logits, every
// row's residual stream leaving layer last - 1: the next stage's input.
// Running [0, k) then [k, n) gives the bits of running [0, n).
//
// Between stages a row is `width` floats: the residual stream (n_embd),
// followed by whatever else the family carries from layer to layer
// (DecoderModel::stage_width; RWKV-7 carries its first layer's values).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

namespace cortiq {

// The indices first, first + 1, ..., last - 1, for a range-for over layers.
struct LayerRange {
  int64_t first = 0;
  int64_t last = 0;

  struct Iterator {
    int64_t il;
    int64_t operator*() const { return il; }
    Iterator& operator++() {
      ++il;
      return *this;
    }
    bool operator!=(const Iterator& other) const { return il != other.il; }
  };
  Iterator begin() const { return {first}; }
  Iterator end() const { return {last}; }
};

struct LayerStage {
  int64_t first = 0;
  int64_t last = -1;                  // -1: through the last layer, then the head
  std::span<const float> input = {};  // [rows][width], or empty: the token embeddings
  // Set by DecoderModel::forward from the model: its layer count and the
  // floats a row carries between stages.
  int64_t n_layer = 0;
  int64_t width = 0;

  bool from_tokens() const { return input.empty(); }
  // Whether the stage ends in the output head (else it hands its rows on).
  bool ends_in_head() const { return last < 0 || last == n_layer; }
  LayerRange layers() const { return {first, last}; }

  // Columns [column, column + out's width) of each input row, into out
  // ([rows][out width]).
  void read_input(std::span<float> out, size_t out_width, size_t column = 0) const {
    copy_columns(input, static_cast<size_t>(width), column, out, out_width, 0);
  }
  // Each row of `in` ([rows][in width]) into columns [column, ...) of the
  // stage's output rows.
  void write_output(std::span<const float> in, size_t in_width, std::span<float> output,
                    size_t column = 0) const {
    copy_columns(in, in_width, 0, output, static_cast<size_t>(width), column);
  }

 private:
  static void copy_columns(std::span<const float> from, size_t from_width, size_t from_column,
                           std::span<float> to, size_t to_width, size_t to_column) {
    const size_t n = std::min(from_width - from_column, to_width - to_column);
    const size_t rows = std::min(from.size() / from_width, to.size() / to_width);
    for (size_t r = 0; r < rows; ++r) {
      std::copy_n(from.begin() + static_cast<std::ptrdiff_t>(r * from_width + from_column), n,
                  to.begin() + static_cast<std::ptrdiff_t>(r * to_width + to_column));
    }
  }
};

}  // namespace cortiq
