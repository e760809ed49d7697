// The table of architecture families: the only list of the names
// general.architecture may take. Adding a family is one line here, its file
// in src/model/arch/ and its golden test.
#include "base/error.hpp"
#include "formats/gguf/gguf_file.hpp"
#include "model/arch/arch.hpp"
#include "model/family.hpp"

namespace cortiq {

namespace {

// In the order the docs list them; one line per architecture name.
constexpr const Family* kFamilies[] = {
    &kLlamaFamily,          // llama.cpp
    &kQwen2Family,          // llama.cpp
    &kQwen3Family,          // llama.cpp
    &kGemmaFamily,          // gemma.cpp
    &kGemma2Family,         // gemma.cpp
    &kGemma3Family,         // gemma.cpp
    &kMistral3Family,       // llama_variants.cpp
    &kSeedOssFamily,        // llama_variants.cpp
    &kExaoneFamily,         // llama_variants.cpp
    &kSmolLm3Family,        // llama_variants.cpp
    &kGraniteFamily,        // granite.cpp
    &kGraniteMoeFamily,     // granite.cpp
    &kGraniteHybridFamily,  // granite.cpp
    &kMinicpmFamily,        // granite.cpp
    &kOlmo2Family,          // olmo2.cpp
    &kExaone4Family,        // olmo2.cpp
    &kStarCoder2Family,     // starcoder2.cpp
    &kOrionFamily,          // llama_copies.cpp
    &kInternLm2Family,      // llama_copies.cpp
    &kXverseFamily,         // llama_copies.cpp
    &kBaichuanFamily,       // llama_copies.cpp
    &kPanguEmbeddedFamily,  // llama_copies.cpp
    &kPlamoFamily,          // llama_copies.cpp
    &kNanbeigeFamily,       // nanbeige.cpp
    &kCodeShellFamily,      // starcoder2.cpp
    &kPhi3Family,           // phi3.cpp
    &kPhiMoeFamily,         // phi3.cpp
    &kPhi2Family,           // phi2.cpp
    &kStableLmFamily,       // stablelm.cpp
    &kCommandRFamily,       // command_r.cpp
    &kCohere2Family,        // command_r.cpp
    &kGlm4Family,           // glm4.cpp
    &kChatGlmFamily,        // glm4.cpp
    &kArceeFamily,          // arcee.cpp
    &kNemotronFamily,       // nemotron.cpp
    &kJais2Family,          // nemotron.cpp
    &kGpt2Family,           // gpt2.cpp
    &kStarCoderFamily,      // gpt2.cpp
    &kBloomFamily,          // gpt2.cpp
    &kMptFamily,            // gpt2.cpp
    &kJaisFamily,           // gpt2.cpp
    &kRefactFamily,         // refact.cpp
    &kFalconFamily,         // falcon.cpp
    &kGptNeoXFamily,        // gptneox.cpp
    &kOlmoFamily,           // olmo.cpp
    &kQwenFamily,           // qwen.cpp
    &kHunyuanDenseFamily,   // hunyuan_dense.cpp
    &kMaincoderFamily,      // hunyuan_dense.cpp
    &kOpenElmFamily,        // openelm.cpp
    &kQwen2VlFamily,        // qwen_vl.cpp
    &kQwen3VlFamily,        // qwen_vl.cpp
    &kQwen3VlMoeFamily,     // qwen_vl.cpp
    &kDeciFamily,           // deci.cpp
    &kMiniCpm3Family,       // minicpm3.cpp
    &kErnie45Family,        // ernie4_5.cpp
    &kApertusFamily,        // apertus.cpp
    &kPlamo3Family,         // plamo3.cpp
    &kBitnetFamily,         // bitnet.cpp
    &kGemma4Family,         // gemma4.cpp
    &kBertFamily,           // bert.cpp
    &kNomicBertFamily,      // bert.cpp
    &kQwen2MoeFamily,       // moe_decoders.cpp
    &kQwen3MoeFamily,       // moe_decoders.cpp
    &kOlmoeFamily,          // moe_decoders.cpp
    &kErnie45MoeFamily,     // moe_decoders.cpp
    &kHunyuanMoeFamily,     // moe_decoders.cpp
    &kMinimaxM2Family,      // moe_decoders.cpp
    &kSmallThinkerFamily,   // moe_decoders.cpp
    &kDeepseekFamily,       // deepseek.cpp
    &kDeepseek2Family,      // deepseek.cpp
    &kMistral4Family,       // deepseek.cpp
    &kDots1Family,          // deepseek.cpp
    &kGptOssFamily,         // gpt_oss.cpp
    &kGlm4MoeFamily,        // glm4_moe.cpp
    &kBailingMoe2Family,    // glm4_moe.cpp
    &kHyV3Family,           // glm4_moe.cpp
    &kArcticFamily,         // arctic.cpp
    &kDbrxFamily,           // dbrx.cpp
    &kGrokFamily,           // grok.cpp
    &kLlama4Family,         // llama4.cpp
    &kMimo2Family,          // mimo2.cpp
    &kLagunaFamily,         // laguna.cpp
    &kLfm2Family,           // lfm2.cpp
    &kLfm2MoeFamily,        // lfm2.cpp
    &kMamba2Family,         // mamba.cpp
    &kMambaFamily,          // mamba.cpp
    &kJambaFamily,          // jamba.cpp
    &kFalconH1Family,       // falcon_h1.cpp
    &kPlamo2Family,         // plamo2.cpp
    &kNemotronHFamily,      // nemotron_h.cpp
    &kNemotronHMoeFamily,   // nemotron_h.cpp
    &kQwen3NextFamily,      // qwen3next.cpp
    &kQwen35Family,         // qwen3next.cpp
    &kQwen35MoeFamily,      // qwen3next.cpp
    &kMinimax01Family,      // minimax01.cpp
    &kKimiLinearFamily,     // kimi_linear.cpp
    &kRwkv6Family,          // rwkv.cpp
    &kRwkv7Family,
};

}  // namespace

std::span<const Family* const> families() {
  return kFamilies;
}

const Family* find_family(std::string_view arch) {
  for (const Family* family : kFamilies) {
    if (family->arch == arch) return family;
  }
  return nullptr;
}

std::string supported_architecture_list() {
  std::string list;
  for (const Family* family : kFamilies) {
    list += (list.empty() ? "" : ", ") + std::string(family->arch);
  }
  return list;
}

const Family& family_of(const gguf::GgufFile& file) {
  const std::string arch = file.architecture();
  if (arch.empty()) throw Error(file.path() + ": missing key general.architecture");
  if (const Family* family = find_family(arch)) return *family;
  throw Error(file.path() + ": unsupported architecture \"" + arch +
              "\" (supported: " + supported_architecture_list() + ")");
}

}  // namespace cortiq
