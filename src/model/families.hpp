// The architecture families, one file each; load_decoder_model picks one by
// general.architecture (decoder_model.cpp holds the table).
#pragma once

#include <memory>

#include "model/decoder_model.hpp"

namespace cortiq {

// llama, qwen2, qwen3 (llama.cpp)
std::unique_ptr<DecoderModel> make_llama_model(const gguf::GgufFile& file, ModelHParams hp);

}  // namespace cortiq
