#include "model/arch/recurrent_layers.hpp"

#include "formats/gguf/gguf_file.hpp"
#include "model/hparams.hpp"

namespace cortiq {

std::vector<bool> recurrent_layers(const HParamReader& keys, int64_t n_trunk, int64_t n_all,
                                   int64_t default_interval) {
  std::vector<bool> recurrent(static_cast<size_t>(n_all), false);
  const gguf::Value* value = keys.file().find(keys.key("attention.recurrent_layers"));
  if (value == nullptr) {
    const int64_t interval = keys.uint_or("full_attention_interval", default_interval);
    if (interval <= 0) keys.invalid("full_attention_interval must be positive");
    for (int64_t il = 0; il < n_trunk; ++il) {
      recurrent[static_cast<size_t>(il)] = (il + 1) % interval != 0;
    }
    return recurrent;
  }
  const gguf::Array* array = value->as_array();
  if (array == nullptr || std::ssize(*array) != n_all) {
    keys.invalid(keys.key("attention.recurrent_layers") + " must have one value per layer");
  }
  if (const auto* flags = array->as<bool>()) {
    for (size_t i = 0; i < recurrent.size(); ++i) recurrent[i] = (*flags)[i];
  } else {
    const auto values = keys.per_layer_uint("attention.recurrent_layers", n_all, 0);
    for (size_t i = 0; i < recurrent.size(); ++i) recurrent[i] = values[i] != 0;
  }
  return recurrent;
}

}  // namespace cortiq
