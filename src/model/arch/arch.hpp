// The families defined in src/model/arch/*.cpp, for the table in
// families.cpp (the only place that lists them).
#pragma once

#include "model/family.hpp"

namespace cortiq {

// llama.cpp (this folder's)
extern const Family kLlamaFamily;
extern const Family kQwen2Family;
extern const Family kQwen3Family;

// moe_decoders.cpp
extern const Family kQwen2MoeFamily;
extern const Family kQwen3MoeFamily;
extern const Family kOlmoeFamily;
extern const Family kErnie45MoeFamily;
extern const Family kHunyuanMoeFamily;
extern const Family kMinimaxM2Family;
extern const Family kSmallThinkerFamily;
extern const Family kGlm4MoeFamily;
extern const Family kBailingMoe2Family;
extern const Family kHyV3Family;
extern const Family kArcticFamily;
extern const Family kDbrxFamily;
extern const Family kGrokFamily;
extern const Family kLlama4Family;

// mimo2.cpp
extern const Family kMimo2Family;

// laguna.cpp
extern const Family kLagunaFamily;

// lfm2.cpp
extern const Family kLfm2Family;
extern const Family kLfm2MoeFamily;

// qwen3next.cpp
extern const Family kQwen3NextFamily;
extern const Family kQwen35Family;
extern const Family kQwen35MoeFamily;

// minimax01.cpp
extern const Family kMinimax01Family;

// kimi_linear.cpp
extern const Family kKimiLinearFamily;

// rwkv.cpp
extern const Family kRwkv6Family;
extern const Family kRwkv7Family;

// mamba.cpp
extern const Family kMambaFamily;
extern const Family kMamba2Family;

// jamba.cpp
extern const Family kJambaFamily;

// plamo2.cpp
extern const Family kPlamo2Family;

// falcon_h1.cpp
extern const Family kFalconH1Family;

// nemotron_h.cpp
extern const Family kNemotronHFamily;
extern const Family kNemotronHMoeFamily;

// deepseek.cpp
extern const Family kDeepseekFamily;
extern const Family kDeepseek2Family;
extern const Family kMistral4Family;
extern const Family kDots1Family;

// gpt_oss.cpp
extern const Family kGptOssFamily;

// gemma.cpp
extern const Family kGemmaFamily;
extern const Family kGemma2Family;
extern const Family kGemma3Family;

// llama_variants.cpp
extern const Family kMistral3Family;
extern const Family kSeedOssFamily;
extern const Family kExaoneFamily;
extern const Family kSmolLm3Family;

// granite.cpp
extern const Family kGraniteFamily;
extern const Family kGraniteMoeFamily;
extern const Family kGraniteHybridFamily;
extern const Family kMinicpmFamily;

// olmo2.cpp
extern const Family kOlmo2Family;
extern const Family kExaone4Family;

// starcoder2.cpp
extern const Family kStarCoder2Family;
extern const Family kCodeShellFamily;

// llama_copies.cpp
extern const Family kOrionFamily;
extern const Family kInternLm2Family;
extern const Family kXverseFamily;
extern const Family kBaichuanFamily;
extern const Family kPanguEmbeddedFamily;
extern const Family kPlamoFamily;

// nanbeige.cpp
extern const Family kNanbeigeFamily;

// phi3.cpp
extern const Family kPhi3Family;
extern const Family kPhiMoeFamily;

// phi2.cpp
extern const Family kPhi2Family;

// stablelm.cpp
extern const Family kStableLmFamily;

// command_r.cpp
extern const Family kCommandRFamily;
extern const Family kCohere2Family;

// glm4.cpp
extern const Family kGlm4Family;
extern const Family kChatGlmFamily;

// arcee.cpp
extern const Family kArceeFamily;

// nemotron.cpp
extern const Family kNemotronFamily;
extern const Family kJais2Family;

// gpt2.cpp
extern const Family kGpt2Family;
extern const Family kStarCoderFamily;
extern const Family kBloomFamily;
extern const Family kMptFamily;
extern const Family kJaisFamily;

// refact.cpp
extern const Family kRefactFamily;

// falcon.cpp
extern const Family kFalconFamily;

// gptneox.cpp
extern const Family kGptNeoXFamily;

// olmo.cpp
extern const Family kOlmoFamily;

// qwen.cpp
extern const Family kQwenFamily;

// hunyuan_dense.cpp
extern const Family kHunyuanDenseFamily;
extern const Family kMaincoderFamily;

// openelm.cpp
extern const Family kOpenElmFamily;

// qwen_vl.cpp
extern const Family kQwen2VlFamily;
extern const Family kQwen3VlFamily;
extern const Family kQwen3VlMoeFamily;

// deci.cpp
extern const Family kDeciFamily;

// minicpm3.cpp
extern const Family kMiniCpm3Family;

// ernie4_5.cpp
extern const Family kErnie45Family;

// apertus.cpp
extern const Family kApertusFamily;

// plamo3.cpp
extern const Family kPlamo3Family;

// bitnet.cpp
extern const Family kBitnetFamily;

// gemma4.cpp
extern const Family kGemma4Family;

// bert.cpp
extern const Family kBertFamily;
extern const Family kNomicBertFamily;

}  // namespace cortiq
